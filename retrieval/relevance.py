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

Both lie in [0, 1]; they are combined with fixed weights (``DENSE_SHARE``, ``LEXICAL_SHARE``)
into ``score``.

The raw cosine means different things per embedder (unrelated texts: ~0.1 with
MiniLM, ~0.8 with multilingual-e5), so ``lift_score`` replaces it by its lift
above the question's background similarity: its mean cosine with a fixed,
evenly spread sample of the index's own chunks. The floor is a threshold on
one of the two, per embedding model (indexing/embedders/floors.py, recorded in
the index); ``Config.evidence_floor`` overrides its value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from config import Config
from indexing.embedders.floors import RelevanceFloor, recorded_floor
from indexing.index_store import Index
from retrieval.named_sections import named_kinds, titled_as
from retrieval.types import RetrievedChunk
from retrieval.query import Query
from utils.idf import okapi
from utils.tokenizer import script_of, tokenize


@dataclass
class EvidenceStrength:
    score: float
    """DENSE_SHARE * best_dense + LEXICAL_SHARE * coverage (weights normalised to sum 1)."""
    best_dense: float
    """Raw cosine of the best retrieved chunk with the question (clipped to [0, 1])."""
    coverage: float
    """Share of the question's IDF weight found in the retrieved chunks' words."""
    background: float = 0.0
    """Mean cosine of the question with a fixed sample of the index's chunks: what this embedder
    gives any text of this collection, related or not."""
    background_std: float = 0.0

    lift_score: float = 0.0
    """DENSE_SHARE * lift(best_dense, background) + LEXICAL_SHARE * coverage."""

    def value(self, statistic: str) -> float:
        return self.lift_score if statistic == "lift_score" else self.score

    def to_dict(self) -> dict[str, float]:
        return {"score": round(self.score, 4), "lift_score": round(self.lift_score, 4),
                "best_dense": round(self.best_dense, 4), "coverage": round(self.coverage, 4),
                "background": round(self.background, 4)}


NO_EVIDENCE = EvidenceStrength(score=0.0, best_dense=0.0, coverage=0.0)

#: Chunks the background similarity is measured on: spread evenly over the index, so the same
#: rows every query (no randomness) and one small matrix-vector product.
BACKGROUND_SAMPLE = 256


def background_rows(n_chunks: int, k: int = BACKGROUND_SAMPLE) -> np.ndarray:
    if n_chunks <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, n_chunks - 1, num=min(k, n_chunks)).round().astype(np.int64))


def lift(best: float, background: float) -> float:
    """How far the best cosine rises from the background toward 1, in [0, 1].

    An embedder whose unrelated texts already score 0.8 (e5) and one whose score 0.1 (MiniLM) land
    on one scale: 0 = no closer than an average chunk of the collection, 1 = identical.
    """
    if background >= 1.0:
        return 0.0
    return float(np.clip((best - background) / (1.0 - background), 0.0, 1.0))


def index_scripts(index: Index) -> frozenset[str]:
    """Scripts that occur in the index's vocabulary (the store memoises them)."""
    return index.search.scripts()


def idf_coverage(query: Query, chunks: Sequence[RetrievedChunk], index: Index) -> float:
    """Share of the question's IDF weight present in ``chunks``.

    A term in a script the index has no word of (a Chinese term over English
    papers) could never match lexically, whatever the documents say; it counts
    neither way, so a Chinese question about an English paper is judged on its
    shared names and numbers. If no word of the index's scripts is left
    (nothing, or only numbers), there is no lexical evidence: 0.
    """
    scripts = index_scripts(index)
    q = {t for t in query.asked_tokens if script_of(t) is None or script_of(t) in scripts}
    if not any(script_of(t) for t in q):  # numbers alone ("24" is in any document) are no evidence
        return 0.0
    n, dfs = index.search.term_stats(sorted(q))
    found: set[str] = set()
    for rc in chunks:
        found.update(t for t in tokenize(rc.chunk.text) if t in q)
    total = got = 0.0
    for t in q:
        df = dfs.get(t, 0)
        # BM25's IDF, floored at a small positive weight (a term in most chunks still counts a little)
        w = max(okapi(n, df), 0.05) if n else 1.0
        total += w
        if t in found:
            got += w
    return got / total if total else 0.0


DENSE_SHARE = 0.5
LEXICAL_SHARE = 0.5
"""The statistics' weights of the best cosine and of lexical coverage. Fixed, not retrieval's fusion
weights: every model's floor (indexing/embedders/floors.py) was calibrated at these, so tuning how
step 2 fuses its signals must not move the refusal rate."""


def evidence_strength(query: Query, chunks: Sequence[RetrievedChunk], index: Index) -> EvidenceStrength:
    if not chunks:
        return NO_EVIDENCE
    rows = [rc.row for rc in chunks if 0 <= rc.row < len(index.chunks)]
    if not rows:
        return NO_EVIDENCE
    qvec = query.dense_vector
    best = float(np.clip(np.max(index.search.dense(qvec, np.asarray(rows, dtype=np.int64))), 0.0, 1.0))
    bg = index.search.dense(qvec, background_rows(len(index.chunks)))
    bg_mean = float(np.mean(bg)) if bg.size else 0.0
    bg_std = float(np.std(bg)) if bg.size else 0.0
    cov = idf_coverage(query, chunks, index)
    wd, wb = DENSE_SHARE, LEXICAL_SHARE
    total = wd + wb
    return EvidenceStrength(score=(wd * best + wb * cov) / total, best_dense=best, coverage=cov,
                            background=bg_mean, background_std=bg_std,
                            lift_score=(wd * lift(best, bg_mean) + wb * cov) / total)


def index_floor(index: object, config: Config | None = None) -> RelevanceFloor:
    """The floor this index is judged by: its recorded one, else its model's default; a set
    ``Config.evidence_floor`` replaces the value (on the same statistic)."""
    return metadata_floor(getattr(index, "metadata", None) or {}, config)


def metadata_floor(meta: dict[str, Any], config: Config | None = None) -> RelevanceFloor:
    """``index_floor`` from an index's metadata.json alone (``info`` reads no arrays)."""
    floor = recorded_floor(meta)
    if config is not None and config.evidence_floor is not None:
        floor = RelevanceFloor(floor.statistic, float(config.evidence_floor), "config")
    return floor


def is_answerable(strength: EvidenceStrength, floor: RelevanceFloor | float) -> bool:
    """A bare number is a threshold on ``score`` (the statistic every floor used before per-model ones)."""
    if isinstance(floor, RelevanceFloor):
        return strength.value(floor.statistic) >= floor.value
    return strength.score >= floor


def named_section_found(query: Query, chunks: Sequence[RetrievedChunk]) -> str:
    """The title of the section step 2's best hit lies in when the question names that section (a
    financial statement, by name or by a measure read from its lines: ``named_sections``), else "".

    A statement's chunks are rows of figures: their words cover little of "Does Corning have positive
    working capital based on FY2022 data?", and the floor, judging words and vectors, would refuse the
    very statement the question needs. The floor is there for questions the documents do not cover;
    one whose named section the index holds and ranked first is covered."""
    kinds = named_kinds(query.text) if chunks else []
    title = chunks[0].chunk.section_title if chunks else ""
    return title if kinds and titled_as(kinds, title) else ""


def evidence_found(query: Query, chunks: Sequence[RetrievedChunk], strength: EvidenceStrength,
                   floor: RelevanceFloor | float) -> tuple[bool, str]:
    """Whether step 2's list is evidence to answer from, and the named section that made it so ("" when
    the floor alone decided): the one verdict the query pipeline and the evaluation's answers share."""
    named = named_section_found(query, chunks)
    return bool(chunks) and (is_answerable(strength, floor) or bool(named)), named
