"""Does the retrieved evidence answer the question at all? (the relevance floor)

Retrieval always returns its top chunks, however unrelated the question; the
answer step must be told when the best of them is no better than chance.

The statistic is a z-score: how many standard deviations the best retrieved
chunk's dense similarity to the question stands above the question's mean
similarity to *every* chunk of the index. Raw cosines are not comparable
across embedders (MiniLM puts unrelated text near 0.05, the multilingual USE
near 0.2) nor across questions (a generic question is moderately similar to
everything); the z-score removes both offsets and scales, so one threshold
(``Config.evidence_floor``) serves every index. A question the documents
answer has a chunk that is an outlier for it; a question about something else
does not. Costs one matrix-vector product over the index's embeddings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from retrieval.types import RetrievedChunk
from utils.tokenizer import tokenize


@dataclass
class EvidenceStrength:
    z: float
    """Best retrieved chunk's dense similarity, in standard deviations above the index mean."""
    best_dense: float
    """Raw cosine of the best retrieved chunk with the question."""
    index_mean: float
    index_std: float
    coverage: float
    """Share of the question's IDF mass (index-wide IDF) found in the retrieved chunks' words."""

    def to_dict(self) -> dict[str, float]:
        return {"z": round(self.z, 3), "best_dense": round(self.best_dense, 4),
                "index_mean": round(self.index_mean, 4), "index_std": round(self.index_std, 4),
                "coverage": round(self.coverage, 3)}


NO_EVIDENCE = EvidenceStrength(z=float("-inf"), best_dense=0.0, index_mean=0.0, index_std=0.0, coverage=0.0)


def _coverage(query: str, chunks: Sequence[RetrievedChunk], index: Any) -> float:
    q = set(tokenize(query))
    if not q:
        return 0.0
    bm = getattr(index, "bm25", None)
    n = bm.n_rows if bm is not None else 0
    ids = bm.term_ids if bm is not None else {}
    found: set[str] = set()
    for rc in chunks:
        found.update(t for t in tokenize(rc.chunk.text) if t in q)
    total = got = 0.0
    for t in q:
        tid = ids.get(t)
        df = int(bm.indptr[tid + 1] - bm.indptr[tid]) if tid is not None else 0
        w = max(math.log((n - df + 0.5) / (df + 0.5)), 0.01) if n else 1.0
        total += w
        got += w if t in found else 0.0
    return got / total if total else 0.0


def evidence_strength(query: str, chunks: Sequence[RetrievedChunk], index: Any, embedder: Any) -> EvidenceStrength:
    if not chunks:
        return NO_EVIDENCE
    qvec = np.asarray(embedder.embed_query(query), dtype=np.float32)
    emb = index.embeddings
    sims = np.asarray(emb @ qvec, dtype=np.float64)
    rows = [rc.row for rc in chunks if 0 <= rc.row < len(sims)]
    if not rows:
        return NO_EVIDENCE
    best = float(sims[rows].max())
    mean, std = float(sims.mean()), float(sims.std())
    z = (best - mean) / std if std > 1e-9 else 0.0
    return EvidenceStrength(z=z, best_dense=best, index_mean=mean, index_std=std,
                            coverage=_coverage(query, chunks, index))


def is_answerable(strength: EvidenceStrength, floor: float) -> bool:
    return strength.z >= floor
