"""Step 2's last stage: a cross-encoder re-orders the candidates of all located leaves.

"No reranker" is ``None`` (``make_reranker`` returns it for ``reranker = "none"``): callers ask
``reranker is None``, never compare names, and the fused order stands.
"""
from __future__ import annotations

import os
from typing import Protocol

import numpy as np

from config import Config
from retrieval.types import Fallback, RetrievedChunk
from utils.errors import BackendError


class Reranker(Protocol):
    name: str
    model: str | None

    def score(self, query: str, texts: list[str]) -> list[float]: ...


class CrossEncoderReranker:
    """sentence-transformers CrossEncoder from a local path or the local model cache.

    Never downloads: HF_HUB_OFFLINE is forced before the library is imported.
    """

    name = "cross-encoder"

    def __init__(self, model: str, batch_size: int = 32) -> None:
        self.model = model
        self.batch_size = batch_size
        self._model = None

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import CrossEncoder  # torch only when the cross-encoder is asked for

            self._model = CrossEncoder(self.model, device="cpu")
        return self._model

    def score(self, query: str, texts: list[str]) -> list[float]:
        model = self._load()
        scores = model.predict([(query, t) for t in texts], batch_size=self.batch_size,
                               show_progress_bar=False)
        return [float(s) for s in np.asarray(scores).reshape(len(texts), -1)[:, -1]]


def make_reranker(config: Config) -> Reranker | None:
    """None for ``reranker = "none"`` (validated by Config), else the cross-encoder."""
    if config.reranker == "none":
        return None
    if config.reranker == "cross-encoder":
        return CrossEncoderReranker(config.reranker_model)
    raise BackendError(f"unknown reranker {config.reranker!r} (use none or cross-encoder)")


def reranker_record(reranker: Reranker | None) -> dict[str, str | None]:
    return {"name": "none", "model": None} if reranker is None else {"name": reranker.name,
                                                                    "model": reranker.model}


def rerank(query: str, candidates: list[RetrievedChunk], reranker: Reranker | None, top_k: int,
           fallbacks: list[Fallback]) -> list[RetrievedChunk]:
    """Cross-encoder order across leaves; on any failure keep the fused order, and say so."""
    if reranker is None or not candidates:
        return candidates[:top_k]
    try:
        scores = reranker.score(query, [c.chunk.text for c in candidates])
    except Exception as exc:  # noqa: BLE001 - any model failure degrades, never aborts
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        fallbacks.append(Fallback("rerank", f"{reranker.model}: {msg[:200]}", "fused order"))
        return candidates[:top_k]
    out = [c.with_scores(s, rerank_score=round(s, 4)) for c, s in zip(candidates, scores)]
    return sorted(out, key=lambda r: (-r.score, r.row))[:top_k]
