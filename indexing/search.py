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
from typing import Any, Protocol, Sequence

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.index_files import release_pages
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
    ann: str = "auto"
    """The file store's whole-collection dense search: auto/on = from its ANN index, off = exact (config.ann)."""
    ann_candidates: int = 1000
    ann_probe: float = 0.3


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


FAR_CANDIDATES = 16
"""Rows the ANN proposes as the question's least similar: see ``FileSearch._ann_scores``."""


class FileSearch:
    """The index directory's arrays: every row of a range scored exactly, in numpy; a whole-collection
    range from the ANN index's candidates when the index has one (indexing/ann_index.py)."""

    store = "files"

    def __init__(self, embeddings: np.ndarray, leaf_embeddings: np.ndarray, bm25: BM25Index,
                 leaf_terms: BM25Index, leaf_ptr: np.ndarray | None = None, ann: dict[str, Any] | None = None) -> None:
        self.embeddings = embeddings
        self.leaf_embeddings = leaf_embeddings
        self.bm25 = bm25
        self.leaf_terms = leaf_terms
        self.leaf_ptr = leaf_ptr
        self.ann: dict[str, Any] = dict(ann or {})
        """kind ("chunks", "leaves") -> AnnIndex: loaded from the index, or built in memory for ann=on."""
        self._scripts: frozenset[str] | None = None
        self._last_candidates: tuple[bytes, np.ndarray] | None = None

    def _ann_for(self, kind: str, params: ScoreParams) -> Any:
        """The ANN to answer a whole-collection ``kind`` search with, or None for an exact scan."""
        if params.ann == "off":
            return None
        if kind not in self.ann and params.ann == "on":
            from indexing.ann_index import AnnIndex  # noqa: PLC0415 - faiss loads only when asked for

            vecs = self.embeddings if kind == "chunks" else self.leaf_embeddings
            self.ann[kind] = AnnIndex.build(vecs, len(vecs), int(vecs.shape[1]), f"{kind} (in memory)")
        return self.ann.get(kind)

    def _ann_scores(self, ann: Any, qvec: np.ndarray, tokens: Sequence[str], idf: tuple[int, int],
                    params: ScoreParams) -> RangeScores:
        """Candidates of the whole collection: the ANN's best rows, the BM25 best rows, and the ANN's
        least similar rows, each re-scored exactly (dense on its float vector, BM25 from the postings).

        Why the least similar: callers min-max normalise dense scores over the rows they are given;
        without a row near the collection's minimum the dense scale would shrink to the candidates'
        and outweigh BM25 differently than an exact scan does.
        """
        n = len(self.embeddings)
        bm25 = np.asarray(self.bm25.score_range(tokens, 0, n, idf_start=idf[0], idf_end=idf[1], k1=params.k1,
                                                b=params.b, epsilon=params.epsilon), dtype=np.float32)
        hits = np.flatnonzero(bm25 > 0)
        if len(hits) > params.ann_candidates:
            top = np.argpartition(-bm25[hits], params.ann_candidates - 1)[:params.ann_candidates]
            hits = hits[top]
        near = ann.search(qvec, params.ann_candidates, params.ann_probe)
        far = ann.search(-qvec, FAR_CANDIDATES, params.ann_probe / 4)  # the far end need only be near
        far_dense = self.dense_rows(qvec, np.sort(far))
        rows = np.union1d(np.union1d(near, hits), np.sort(far)[np.argmin(far_dense)] if len(far) else near[:0])
        self._last_candidates = (qvec.tobytes(), rows)
        dense = self.dense_rows(qvec, rows)
        release_pages(self.embeddings, self.bm25.rows, self.bm25.tf)  # read once per question: not kept mapped
        return RangeScores(rows, dense, bm25[rows])

    def score_range(self, qvec: np.ndarray | None, tokens: Sequence[str], start: int, end: int,
                    idf: tuple[int, int], params: ScoreParams) -> RangeScores:
        if end <= start:
            return empty_scores()
        if qvec is not None and start == 0 and end == len(self.embeddings):
            ann = self._ann_for("chunks", params)
            if ann is not None:
                return self._ann_scores(ann, qvec, tokens, idf, params)
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
        ann = self._ann_for("leaves", params) if leaves is None else None
        if ann is not None:
            return self._ann_leaf_dense(ann, qvec, params)
        vecs = self.leaf_embeddings if leaves is None else self.leaf_embeddings[np.asarray(leaves, dtype=np.int64)]
        return check_finite(matvec(vecs, qvec), "leaf_embeddings.npy")

    def _ann_leaf_dense(self, ann: Any, qvec: np.ndarray, params: ScoreParams) -> np.ndarray:
        """Every leaf's dot product: exact for the ANN's nearest leaves and for the leaves of the
        chunk candidates just scored for this question (a leaf can rank high on its heading or on
        its chunks); 0 for the rest, as an engine leaves them."""
        picked = [ann.search(qvec, params.ann_candidates, params.ann_probe)]
        last = self._last_candidates
        if last is not None and last[0] == qvec.tobytes() and self.leaf_ptr is not None:
            picked.append(np.searchsorted(self.leaf_ptr, last[1], side="right") - 1)
        leaves = np.unique(np.concatenate(picked))
        leaves = leaves[(leaves >= 0) & (leaves < len(self.leaf_embeddings))]
        out = np.zeros(len(self.leaf_embeddings), dtype=np.float32)
        out[leaves] = check_finite(matvec(self.leaf_embeddings[leaves], qvec), "leaf_embeddings.npy")
        release_pages(self.leaf_embeddings)
        return out

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
            rows = np.asarray(terms.postings(tid)[2])
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
