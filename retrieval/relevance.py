"""Does the retrieved evidence answer the question at all? (the relevance floor)

Retrieval always returns its top chunks, however unrelated the question; the
answer step must be told when even the best of them does not match.

The evidence score uses retrieval's two signals, on absolute scales (the
min-max normalised scores that order step 2 are relative by construction:
the best chunk of any list scores 1.0, related or not):

- dense: the raw cosine of the best retrieved chunk with the question;
- lexical: the share of the question's BM25 IDF weight whose terms occur in
  the retrieved chunks. IDF comes from the index; a question term the index
  has never seen gets the largest IDF, so a question about something the
  documents never mention scores near 0 ("capital of France" over statutes).

Both lie in [0, 1]; they are combined with retrieval's own fusion weights
(``dense_weight``, ``bm25_weight``). The floor (``Config.evidence_floor``) is
a threshold on that score, chosen on the shared sets by
``benchmarks/answer_quality.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from config import Config
from retrieval.types import RetrievedChunk
from retrieval.query import QueryLike, query_tokens, query_vector
from utils.tokenizer import script_of, tokenize


@dataclass
class EvidenceStrength:
    score: float
    """dense_weight * best_dense + bm25_weight * coverage (weights normalised to sum 1)."""
    best_dense: float
    """Raw cosine of the best retrieved chunk with the question (clipped to [0, 1])."""
    coverage: float
    """Share of the question's IDF weight found in the retrieved chunks' words."""

    def to_dict(self) -> dict[str, float]:
        return {"score": round(self.score, 4), "best_dense": round(self.best_dense, 4),
                "coverage": round(self.coverage, 4)}


NO_EVIDENCE = EvidenceStrength(score=0.0, best_dense=0.0, coverage=0.0)


def index_scripts(index: Any) -> frozenset[str]:
    """Scripts that occur in the index's vocabulary (the store memoises them)."""
    search = getattr(index, "search", None)
    return search.scripts() if search is not None else frozenset()


def idf_coverage(query: QueryLike, chunks: Sequence[RetrievedChunk], index: Any) -> float:
    """Share of the question's IDF weight present in ``chunks``.

    A term in a script the index has no word of (a Chinese term over English
    papers) could never match lexically, whatever the documents say; it counts
    neither way, so a Chinese question about an English paper is judged on its
    shared names and numbers. If no word of the index's scripts is left
    (nothing, or only numbers), there is no lexical evidence: 0.
    """
    scripts = index_scripts(index)
    q = {t for t in query_tokens(query) if script_of(t) is None or script_of(t) in scripts}
    if not any(script_of(t) for t in q):  # numbers alone ("24" is in any document) are no evidence
        return 0.0
    search = getattr(index, "search", None)
    n, dfs = search.term_stats(sorted(q)) if search is not None else (0, {})
    found: set[str] = set()
    for rc in chunks:
        found.update(t for t in tokenize(rc.chunk.text) if t in q)
    total = got = 0.0
    for t in q:
        df = dfs.get(t, 0)
        # BM25's IDF, floored at a small positive weight (a term in most chunks still counts a little)
        w = max(math.log((n - df + 0.5) / (df + 0.5)), 0.05) if n else 1.0
        total += w
        if t in found:
            got += w
    return got / total if total else 0.0


def evidence_strength(query: QueryLike, chunks: Sequence[RetrievedChunk], index: Any, embedder: Any,
                      config: Config | None = None) -> EvidenceStrength:
    if not chunks:
        return NO_EVIDENCE
    config = config or Config()
    rows = [rc.row for rc in chunks if 0 <= rc.row < len(index.chunks)]
    if not rows:
        return NO_EVIDENCE
    qvec = np.asarray(query_vector(query, embedder), dtype=np.float32)
    best = float(np.clip(np.max(index.search.dense_rows(qvec, np.asarray(rows, dtype=np.int64))), 0.0, 1.0))
    cov = idf_coverage(query, chunks, index)
    wd, wb = max(config.dense_weight, 0.0), max(config.bm25_weight, 0.0)
    total = wd + wb or 1.0
    return EvidenceStrength(score=(wd * best + wb * cov) / total, best_dense=best, coverage=cov)


def is_answerable(strength: EvidenceStrength, floor: float) -> bool:
    return strength.score >= floor
