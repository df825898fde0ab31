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
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from config import Config
from retrieval.types import RetrievedChunk
from retrieval.query import QueryLike, query_tokens, query_vector
from utils.tokenizer import tokenize


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


_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")


def _script(term: str) -> str | None:
    """cjk | latin | None (digits, symbols: script-neutral)."""
    if _CJK.search(term):
        return "cjk"
    return "latin" if _LATIN.search(term) else None


def index_scripts(index: Any) -> frozenset[str]:
    """Scripts that occur in the index's vocabulary (memoised per index)."""
    derived = getattr(index, "derived", None)
    if derived is not None and "vocab_scripts" in derived:
        return derived["vocab_scripts"]
    bm = getattr(index, "bm25", None)
    found: set[str] = set()
    for t in (bm.terms if bm is not None else ()):
        sc = _script(t)
        if sc:
            found.add(sc)
            if len(found) == 2:
                break
    out = frozenset(found)
    if derived is not None:
        derived["vocab_scripts"] = out
    return out


def idf_coverage(query: QueryLike, chunks: Sequence[RetrievedChunk], index: Any) -> float:
    """Share of the question's IDF weight present in ``chunks``.

    A term in a script the index has no word of (a Chinese term over English
    papers) could never match lexically, whatever the documents say; it counts
    neither way, so a Chinese question about an English paper is judged on its
    shared names and numbers. If no word of the index's scripts is left
    (nothing, or only numbers), there is no lexical evidence: 0.
    """
    bm = getattr(index, "bm25", None)
    scripts = index_scripts(index)
    q = {t for t in query_tokens(query) if _script(t) is None or _script(t) in scripts}
    if not any(_script(t) for t in q):  # numbers alone ("24" is in any document) are no evidence
        return 0.0
    n = int(bm.n_rows) if bm is not None else 0
    ids = bm.term_ids if bm is not None else {}
    found: set[str] = set()
    for rc in chunks:
        found.update(t for t in tokenize(rc.chunk.text) if t in q)
    total = got = 0.0
    for t in q:
        tid = ids.get(t)
        df = int(bm.indptr[tid + 1] - bm.indptr[tid]) if tid is not None else 0
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
    rows = [rc.row for rc in chunks if 0 <= rc.row < len(index.embeddings)]
    if not rows:
        return NO_EVIDENCE
    qvec = np.asarray(query_vector(query, embedder), dtype=np.float32)
    best = float(np.clip(np.max(np.asarray(index.embeddings[rows]) @ qvec), 0.0, 1.0))
    cov = idf_coverage(query, chunks, index)
    wd, wb = max(config.dense_weight, 0.0), max(config.bm25_weight, 0.0)
    total = wd + wb or 1.0
    return EvidenceStrength(score=(wd * best + wb * cov) / total, best_dense=best, coverage=cov)


def is_answerable(strength: EvidenceStrength, floor: float) -> bool:
    return strength.score >= floor
