"""What retrieval asks of an index's chunks and leaves, wherever they are stored.

Why an interface: the same three-step pipeline runs on two stores. The files of
an index directory (``FileSearch``: memory-mapped vectors and BM25 postings,
every row scored exactly) and a database engine (``indexing/seekdb/``:
kNN and full-text search inside seekdb/OceanBase, with metadata filters for a
leaf or a document). Retrieval scores chunks only through these calls, so it
never knows which store answers.

Rows: chunk ``i`` is row ``i`` (a leaf's and a document's chunks are contiguous
rows); leaf ``j`` is the ``j``-th leaf in pre-order. A store may answer a large
range with its best candidates only (``RangeScores.rows`` then lists fewer rows
than the range holds): every caller reads the rows it was given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from indexing.bm25_builder import BM25Index
from utils.errors import IndexFormatError
from utils.similarity import matvec
from utils.tokenizer import vocabulary_scripts


@dataclass
class RangeScores:
    rows: np.ndarray
    """Index rows scored (int64, ascending within each range)."""
    dense: np.ndarray
    bm25: np.ndarray


@dataclass(frozen=True)
class ScoreParams:
    """The query-time settings a store scores with (config.py: bm25_*, store_*)."""

    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25
    exact_rows: int = 4096
    """An engine scores a range of at most this many rows exactly; a larger one from candidates."""
    candidates: int = 1000
    """Rows each of an engine's kNN and full-text search contributes for a larger range."""


def empty_scores() -> RangeScores:
    z = np.zeros(0, dtype=np.float32)
    return RangeScores(np.zeros(0, dtype=np.int64), z, z)


class Search(Protocol):
    """Scores of chunks and leaves for one question."""

    store: str
    """"files" or the engine's name, for messages and the audit record."""

    def score_range(self, qvec: np.ndarray | None, tokens: Sequence[str], start: int, end: int,
                    idf: tuple[int, int], params: ScoreParams) -> RangeScores:
        """Dense (dot product with ``qvec``; zeros when None) and BM25 scores of rows [start, end).

        ``idf``: the rows whose statistics BM25 uses (a leaf, its document, or the corpus);
        an engine uses its own full-text statistics.
        """

    def dense_rows(self, qvec: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Dot products of the given chunk rows' vectors with ``qvec`` (float32)."""

    def bm25_rows(self, tokens: Sequence[str], rows: np.ndarray, idf: tuple[int, int],
                  params: ScoreParams) -> np.ndarray:
        """BM25 of the given rows, which all lie inside ``idf`` (float32)."""

    def leaf_dense(self, qvec: np.ndarray, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        """Dot products of the leaves' heading+summary vectors with ``qvec``; all leaves for None.

        An engine may leave leaves outside its nearest neighbours at 0."""

    def leaf_keyword(self, tokens: Sequence[str], leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        """Per leaf (all, or the given ones in that order): sum of log(1 + n/df) over the
        question's distinct words in its heading path + summary, n and df over those leaves."""

    def term_stats(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, chunk document frequency of each token that occurs)."""

    def scripts(self) -> frozenset[str]:
        """Writing systems ("latin", "cjk") that occur in the index's vocabulary."""


def check_finite(scores: np.ndarray, name: str) -> np.ndarray:
    """A non-finite score means a corrupt vector: NaN would silently reorder rankings."""
    if not np.isfinite(scores).all():
        raise IndexFormatError(f"{name} holds NaN or infinite values; rebuild the index")
    return scores


class FileSearch:
    """The index directory's arrays: every row of a range scored exactly, in numpy."""

    store = "files"

    def __init__(self, embeddings: np.ndarray, leaf_embeddings: np.ndarray, bm25: BM25Index,
                 leaf_terms: BM25Index) -> None:
        self.embeddings = embeddings
        self.leaf_embeddings = leaf_embeddings
        self.bm25 = bm25
        self.leaf_terms = leaf_terms
        self._scripts: frozenset[str] | None = None

    def score_range(self, qvec: np.ndarray | None, tokens: Sequence[str], start: int, end: int,
                    idf: tuple[int, int], params: ScoreParams) -> RangeScores:
        if end <= start:
            return empty_scores()
        rows = np.arange(start, end, dtype=np.int64)
        dense = (np.zeros(end - start, dtype=np.float32) if qvec is None else
                 check_finite(matvec(self.embeddings[start:end], qvec), "embeddings.npy"))
        bm25 = self.bm25.score_range(tokens, start, end, idf_start=idf[0], idf_end=idf[1],
                                     k1=params.k1, b=params.b, epsilon=params.epsilon)
        return RangeScores(rows, dense, np.asarray(bm25, dtype=np.float32))

    def dense_rows(self, qvec: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return check_finite(matvec(self.embeddings[np.asarray(rows, dtype=np.int64)], qvec), "embeddings.npy")

    def bm25_rows(self, tokens: Sequence[str], rows: np.ndarray, idf: tuple[int, int],
                  params: ScoreParams) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        lo, hi = int(rows.min()), int(rows.max()) + 1
        scores = self.bm25.score_range(tokens, lo, hi, idf_start=idf[0], idf_end=idf[1],
                                       k1=params.k1, b=params.b, epsilon=params.epsilon)
        return np.asarray(scores, dtype=np.float32)[rows - lo]

    def leaf_dense(self, qvec: np.ndarray, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        vecs = self.leaf_embeddings if leaves is None else self.leaf_embeddings[np.asarray(leaves, dtype=np.int64)]
        return check_finite(matvec(vecs, qvec), "leaf_embeddings.npy")

    def leaf_keyword(self, tokens: Sequence[str], leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        terms = self.leaf_terms
        n_all = terms.n_rows
        in_scope = None
        if leaves is not None:
            in_scope = np.zeros(n_all, dtype=bool)
            in_scope[np.asarray(leaves, dtype=np.int64)] = True
        n = max(n_all if in_scope is None else int(in_scope.sum()), 1)
        scores = np.zeros(n_all, dtype=np.float64)
        ids = terms.term_ids
        for t in sorted(set(tokens)):
            tid = ids.get(t)
            if tid is None:
                continue
            rows = np.asarray(terms.rows[terms.indptr[tid]:terms.indptr[tid + 1]])
            if in_scope is not None:
                rows = rows[in_scope[rows]]
            if rows.size:
                scores[rows] += np.log(1 + n / rows.size)
        return scores if leaves is None else scores[np.asarray(leaves, dtype=np.int64)]

    def term_stats(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        bm = self.bm25
        ids = bm.term_ids
        out = {}
        for t in set(tokens):
            tid = ids.get(t)
            if tid is not None:
                out[t] = int(bm.indptr[tid + 1] - bm.indptr[tid])
        return int(bm.n_rows), out

    def scripts(self) -> frozenset[str]:
        if self._scripts is None:
            self._scripts = vocabulary_scripts(self.bm25.terms)
        return self._scripts
