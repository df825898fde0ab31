"""``FileSearch``: the ``Search`` contract answered from an index directory's arrays.

Every chunk of a leaf or a document is scored exactly, in numpy, with TreeRAG's BM25 under the
statistics scope asked for; a whole-collection scope is answered from the ANN index's candidates
when the index has one (indexing/ann_index.py), re-scored exactly.
"""
from __future__ import annotations

import functools
import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from config import IdfScope
from indexing.bm25_builder import BM25Index, rows_between
from indexing.bm25_corpus import score_rows, top_positive, top_rows
from indexing.index_files import touch_rows, will_need_range, will_need_rows
from indexing.page_release import PageRelease
from indexing.segment_bm25 import SegmentBM25
from indexing.search import (EVERYTHING, LEAVES_WANTED, ChunkRows, Probe, Scope, ScoreParams, Scores, bm25_kind, check_finite,
                             concat_scores, empty_scores, leaves_of_rows)
from utils.beside import SharedCalls
from utils.similarity import matvec
from utils.tokenizer import vocabulary_scripts
from indexing.ann_index import AnnIndex

if TYPE_CHECKING:
    from indexing.ann_index import CentroidScores

FAR_CANDIDATES = 16
"""Rows the ANN proposes as the question's least similar: see ``FileSearch._ann_scores``."""
FAR_MAX_LISTS = 1024
"""At most this many lists are scanned for the least similar rows (``ann_probe`` / 4 of the lists below
~13,650 lists, unchanged there). Why a cap: the least similar row lies in the lists least similar to the
question, and how far down it is found depends on the rows scanned, not on the share; past the cap
more lists find no other row (docs/scale.md, "The lists kept mapped, the least similar rows from fewer
lists")."""
NEAR_PARTS = 2
"""Shares of the lists the chunks' nearest-row scan is split into: the question's two threads take them
in turn (``SharedCalls``)."""
ANN_ROWS = "files.ann_rows"
"""Memo key (with the settings): the chunk rows the ANN path scored for this question."""
LEAF_NEAR = "files.leaf_near"
"""Memo key (with the settings): the leaves' ANN nearest rows, found beside the chunks' scans."""


class FileSearch:
    """``indexing.search.Search`` over the index directory's arrays (see the module docstring)."""

    store = "files"

    def __init__(self, embeddings: np.ndarray, leaf_embeddings: np.ndarray, bm25: BM25Index,
                 leaf_terms: BM25Index, rows: ChunkRows, ann: dict[str, AnnIndex] | None = None,
                 directory: Path | None = None) -> None:
        self.embeddings = embeddings
        self.leaf_embeddings = leaf_embeddings
        self.bm25 = bm25
        """The chunks' postings (also what a seekdb publish copies into the engine's tables)."""
        self.leaf_terms = leaf_terms
        self.rows = rows
        self.ann: dict[str, AnnIndex] = dict(ann or {})
        """kind ("chunks", "leaves") -> AnnIndex: loaded from the index, or built in memory for ann=on."""
        self.directory = directory
        """The index directory whose mapped pages a whole-collection question releases past ``query_mapped_mb``
        (None: only the arrays' own)."""
        self.pages = PageRelease((embeddings, leaf_embeddings, bm25.rows, bm25.tf), directory)
        """The release of the pages a whole-collection question mapped, run once its answer is built."""
        self._ann_lock = threading.Lock()
        self._scripts: frozenset[str] | None = None

    # ---------------------------------------------------------- chunk side

    def _ann_for(self, kind: str, params: ScoreParams) -> AnnIndex | None:
        """The ANN to answer a whole-collection ``kind`` search with, or None for an exact scan."""
        if params.ann == "off":
            return None
        if kind not in self.ann and params.ann == "on":
            with self._ann_lock:  # the server shares one index between threads: build it once
                if kind not in self.ann:
                    vecs = self.embeddings if kind == "chunks" else self.leaf_embeddings
                    self.ann[kind] = AnnIndex.build(vecs, len(vecs), int(vecs.shape[1]), f"{kind} (in memory)")
        return self.ann.get(kind)

    def _bm25(self, tokens: Sequence[str], start: int, end: int, idf: tuple[int, int],
              params: ScoreParams) -> np.ndarray:
        return np.asarray(self.bm25.score_range(tokens, start, end, idf_start=idf[0], idf_end=idf[1], k1=params.k1,
                                                b=params.b, epsilon=params.epsilon), dtype=np.float32)

    def _ann_scores(self, ann: AnnIndex, query: Probe, qvec: np.ndarray, idf: IdfScope,
                    params: ScoreParams) -> Scores:
        """Candidates of the whole collection: the ANN's best rows, the BM25 best rows, and the ANN's
        least similar rows, each re-scored exactly (dense on its float vector, BM25 from the postings).

        Why the least similar: callers min-max normalise dense scores over the rows they are given;
        without a row near the collection's minimum the dense scale would shrink to the candidates'
        and outweigh BM25 differently than an exact scan does.

        Why two threads: the IVF scans (with the page faults of their rows) and the BM25 scores of
        the whole collection (with those of its best rows) do not depend on each other; on two cores
        they overlap. When the caller says it will rank every leaf next (``LEAVES_WANTED``), the
        leaves' ANN scan and their rows' page faults are done here too. The scans are taken in turn
        (``SharedCalls``): the second thread starts on the longest, this one on BM25, and each then
        takes the next scan left, so neither waits long for the other. The values computed are the
        same as one after the other.
        """
        n = len(self.embeddings)
        self.pages.settle()  # the last question's pages released before this one maps its own
        leaf_ann = self._ann_for("leaves", params) if query.memo.get(LEAVES_WANTED) else None
        # the longest scan first, in halves: the second thread starts on one while this one scores BM25
        k = ann.proposals(params.ann_candidates, params.ann_candidates_growth)
        product = ann.centroid_scores(qvec)  # one product with the centroids: the nearest and the least similar lists
        near_scan = _NearScan(ann, ann.search_parts(qvec, k, params.ann_probe, NEAR_PARTS, scores=product), k,
                              lambda rows: self._touch_near(rows, leaf_ann is not None))
        calls: list[tuple[str, Callable[[], object]]] = [
            (f"near{i}", functools.partial(near_scan.part, i)) for i in range(near_scan.parts)]
        if leaf_ann is not None:
            calls.append(("leaves", lambda: self._near_leaves(leaf_ann, qvec, params)))
        calls.append(("far", lambda: self._far_rows(ann, qvec, params, product)))
        shared = SharedCalls(calls)
        try:
            bm25: np.ndarray | None = None
            if idf == "corpus" and isinstance(self.bm25, (BM25Index, SegmentBM25)):
                # the best rows without scoring every row, over one index or its live segments
                hits = top_rows(self.bm25, query.tokens, params.ann_candidates, params.k1, params.b, params.epsilon)
            else:  # each chunk with its own leaf's or document's statistics, every row scored
                bm25 = (self._bm25(query.tokens, 0, n, (0, n), params) if idf == "corpus" else
                        self._grouped_bm25(query.tokens, np.arange(n, dtype=np.int64), idf, params))
                positive = np.flatnonzero(bm25 > 0)
                hits = top_positive(positive, bm25[positive], params.ann_candidates)
            touch_rows(self.embeddings, hits)
            if leaf_ann is not None:
                touch_rows(self.leaf_embeddings, self._leaf_of(hits))
        except BaseException:
            shared.stop()  # no scan outlives the question
            raise
        found = shared.finish()  # the scans left are taken on this thread too
        near = near_scan.rows
        far = found["far"]
        assert isinstance(far, np.ndarray)
        if leaf_ann is not None:
            query.memo.put((LEAF_NEAR, params), found["leaves"])
        far_dense = self.dense(qvec, far)
        rows = np.union1d(np.union1d(near, hits), far[np.argmin(far_dense)] if len(far) else near[:0])
        query.memo.put((ANN_ROWS, params), rows)  # leaf_dense of the same question reads them
        dense = self.dense(qvec, rows)
        self._release_due(params)  # after the answer (after_question), and only once the process is large
        lexical = bm25[rows] if bm25 is not None else score_rows(self.bm25, query.tokens, rows, params.k1, params.b,
                                                                  params.epsilon)
        return Scores(rows, dense, lexical, bm25_kind(idf), complete=False)

    def _touch_near(self, rows: np.ndarray, leaves: bool) -> None:
        """The vector pages of the chunks' nearest rows read in; with ``leaves``, their leaves' too."""
        touch_rows(self.embeddings, rows)
        if leaves:
            touch_rows(self.leaf_embeddings, self._leaf_of(rows))

    def _far_rows(self, ann: AnnIndex, qvec: np.ndarray, params: ScoreParams,
                  product: CentroidScores | None = None) -> np.ndarray:
        """The chunks' least similar rows (sorted), their vector pages read in."""
        # the far end need only be near: a quarter of the probe share, at most FAR_MAX_LISTS lists
        far = np.sort(ann.search(qvec, FAR_CANDIDATES, params.ann_probe / 4, max_lists=FAR_MAX_LISTS, scores=product,
                                 far=True))
        touch_rows(self.embeddings, far)
        return far

    def _near_leaves(self, leaf_ann: AnnIndex, qvec: np.ndarray, params: ScoreParams) -> np.ndarray:
        """The leaves' nearest rows, their vector pages read in."""
        near = _proposed(leaf_ann, qvec, params)
        touch_rows(self.leaf_embeddings, near)
        return near

    def _leaf_of(self, rows: np.ndarray) -> np.ndarray:
        """The leaf that owns each chunk row (a leaf without rows starts where the next one does)."""
        return leaves_of_rows(self.rows.leaf_ptr, rows)

    def _range(self, query: Probe, start: int, end: int, idf: IdfScope, params: ScoreParams) -> Scores:
        """Every row of one leaf or document, exactly."""
        kind = bm25_kind(idf)
        if end <= start:
            return empty_scores(kind)
        qvec = query.vector
        rows = np.arange(start, end, dtype=np.int64)
        if qvec is not None:
            will_need_range(self.embeddings, start, end)  # no read-ahead when an ANN picks rows: asked for here
        dense = (np.zeros(end - start, dtype=np.float32) if qvec is None else
                 check_finite(matvec(self.embeddings[start:end], qvec), "embeddings.npy"))
        lexical = self._bm25(query.tokens, start, end, self.rows.idf_rows(start, end, idf), params)
        return Scores(rows, dense, lexical, kind)

    def score(self, query: Probe, scope: Scope, idf: IdfScope, params: ScoreParams) -> Scores:
        kind = scope.kind
        if kind == "leaf":
            assert scope.leaf is not None
            return self._range(query, *self.rows.leaf(scope.leaf), idf, params)
        if kind == "documents":
            assert scope.documents is not None
            return concat_scores([self._range(query, s, e, idf, params)
                                  for _, s, e in self.rows.documents(scope.documents)], bm25_kind(idf))
        n = len(self.embeddings)
        if query.vector is not None and n:
            ann = self._ann_for("chunks", params)
            if ann is not None:
                return self._ann_scores(ann, query, query.vector, idf, params)
        if idf == "corpus":
            return self._range(query, 0, n, idf, params)
        rows = np.arange(n, dtype=np.int64)  # every chunk, each with its own leaf's or document's statistics
        dense = (np.zeros(n, dtype=np.float32) if query.vector is None else
                 check_finite(matvec(self.embeddings, query.vector), "embeddings.npy"))
        return Scores(rows, dense, self._grouped_bm25(query.tokens, rows, idf, params), bm25_kind(idf))

    def _grouped_bm25(self, tokens: Sequence[str], rows: np.ndarray, idf: IdfScope,
                      params: ScoreParams) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.float32)
        for members, span in self.rows.stats_groups(rows, idf):
            part = rows[members]
            lo, hi = int(part.min()), int(part.max()) + 1
            out[members] = self._bm25(tokens, lo, hi, span, params)[part - lo]
        return out

    def rescore(self, query: Probe, rows: np.ndarray, idf: IdfScope, params: ScoreParams) -> Scores:
        rows = np.asarray(rows, dtype=np.int64)
        kind = bm25_kind(idf)
        if not len(rows):
            return empty_scores(kind)
        dense = (np.zeros(len(rows), dtype=np.float32) if query.vector is None
                 else self.dense(query.vector, rows))
        return Scores(rows, dense, self._grouped_bm25(query.tokens, rows, idf, params), kind)

    def dense(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        will_need_rows(self.embeddings, rows[(rows >= 0) & (rows < len(self.embeddings))])
        return check_finite(matvec(self.embeddings[rows], vector), "embeddings.npy")

    # ---------------------------------------------------------- leaf side

    def leaf_dense(self, query: Probe, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        qvec = query.vector
        if qvec is None:
            return np.zeros(len(self.leaf_embeddings) if leaves is None else len(leaves), dtype=np.float32)
        ann = self._ann_for("leaves", params) if leaves is None else None
        if ann is not None:
            return self._ann_leaf_dense(ann, query, qvec, params)
        if leaves is not None:
            leaves = np.asarray(leaves, dtype=np.int64)
            will_need_rows(self.leaf_embeddings, leaves[(leaves >= 0) & (leaves < len(self.leaf_embeddings))])
        vecs = self.leaf_embeddings if leaves is None else self.leaf_embeddings[leaves]
        return check_finite(matvec(vecs, qvec), "leaf_embeddings.npy")

    def _ann_leaf_dense(self, ann: AnnIndex, query: Probe, qvec: np.ndarray, params: ScoreParams) -> np.ndarray:
        """Every leaf's dot product: exact for the ANN's nearest leaves and for the leaves of the
        chunk candidates this question's whole-collection scoring found (a leaf can rank high on its
        heading or on its chunks); 0 for the rest, as an engine leaves them."""
        near = query.memo.get((LEAF_NEAR, params))  # found beside the chunks' scans (LEAVES_WANTED)
        picked = [near if isinstance(near, np.ndarray) else _proposed(ann, qvec, params)]
        seen = query.memo.get((ANN_ROWS, params))
        if isinstance(seen, np.ndarray):
            picked.append(self._leaf_of(seen))
        leaves = np.unique(np.concatenate(picked))
        leaves = leaves[(leaves >= 0) & (leaves < len(self.leaf_embeddings))]
        out = np.zeros(len(self.leaf_embeddings), dtype=np.float32)
        will_need_rows(self.leaf_embeddings, leaves)
        out[leaves] = check_finite(matvec(self.leaf_embeddings[leaves], qvec), "leaf_embeddings.npy")
        self._release_due(params)
        return out

    def _release_due(self, params: ScoreParams) -> None:
        """Mark this question's pages for release once it is answered: past ``mapped_mb`` of resident size
        beside the ANN files kept mapped (``_ann_kept``), whose size is added to the budget; 0: always."""
        keep, kept_bytes = self._ann_kept(params)
        limit = params.mapped_mb + math.ceil(kept_bytes / (1 << 20)) if params.mapped_mb > 0 else 0
        self.pages.due(limit, keep)

    def _ann_kept(self, params: ScoreParams) -> tuple[frozenset[str], int]:
        """The ANN files (real paths) whose pages a release leaves mapped, and their bytes: all of the
        index's mapped ANN files while together they are at most ``ann_kept_mb`` (config
        ``query_ann_kept_mb``), else none.

        Why all or none: a question scans 30% of every list file's lists, different ones each question,
        so a kept file ends up resident whole; its size is the bound on what keeping it costs."""
        if self.directory is None or params.ann_kept_mb <= 0:
            return frozenset(), 0
        mapped = [(ann.name, ann.mapped_bytes) for ann in self.ann.values()]
        mapped = [(name, size) for name, size in mapped if size > 0]
        total = sum(size for _, size in mapped)
        if not mapped or total > params.ann_kept_mb * (1 << 20):
            return frozenset(), 0
        return frozenset(os.path.realpath(self.directory / name) for name, _ in mapped), total

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

    # ---------------------------------------------------------- vocabulary

    def term_stats(self, tokens: Sequence[str], scope: Scope = EVERYTHING) -> tuple[int, dict[str, int]]:
        """Counted from the postings: each term's rows are ascending, so a scope's count is a
        ``searchsorted`` per row range of the scope."""
        bm = self.bm25
        if scope.kind == "everything":
            spans = [(0, int(bm.n_rows))]
        elif scope.kind == "leaf":
            assert scope.leaf is not None
            spans = [self.rows.leaf(scope.leaf)]
        else:
            assert scope.documents is not None
            spans = [(s, e) for _, s, e in self.rows.documents(scope.documents)]
        n = sum(e - s for s, e in spans)
        ids = bm.term_ids
        out: dict[str, int] = {}
        for t in set(tokens):
            tid = ids.get(t)
            if tid is None or not n:
                continue
            lo_p, hi_p = int(bm.indptr[tid]), int(bm.indptr[tid + 1])
            if scope.kind == "everything":
                df = hi_p - lo_p
            else:
                postings = bm.postings(tid)[2]  # checked on its first read, like every query read
                df = sum(hi - lo for lo, hi in (rows_between(postings, *span) for span in spans))
            if df:
                out[t] = df
        return n, out

    def document_counts(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """Counted from the postings: a term's rows are ascending, and so are their documents."""
        ids = self.bm25.term_ids
        out: dict[str, int] = {}
        for t in set(tokens):
            tid = ids.get(t)
            if tid is None:
                continue
            docs = self.rows.documents_of_rows(self.bm25.postings(tid)[2])
            if len(docs):
                out[t] = int(np.count_nonzero(np.diff(docs))) + 1
        return self.rows.n_documents, out

    def after_question(self) -> None:
        """The question's answer is built: release the pages it mapped past ``query_mapped_mb`` in the
        background (``PageRelease``)."""
        self.pages.start()

    def warm(self, level: str, long_running: bool = False) -> None:
        """Nothing: mapped files are read on demand by the page cache, and a read-ahead of every vector
        would cost a one-shot query the memory the ANN index exists to save."""

    def scripts(self) -> frozenset[str]:
        if self._scripts is None:
            self._scripts = vocabulary_scripts(self.bm25.terms)
        return self._scripts


class _NearScan:
    """The chunks' nearest-row scan in parts (``AnnIndex.search_parts``): whichever thread finishes the
    last part merges them and reads in the merged rows' pages.

    Why the last part: the merged rows are known only then; read in there, their page faults overlap
    the other thread's work, and only the rows proposed are read (a part's own best rows are up to
    twice as many: more disk reads on a cold start)."""

    def __init__(self, ann: AnnIndex, calls: list[Callable[[], tuple[np.ndarray, np.ndarray]]], k: int,
                 touch: Callable[[np.ndarray], None]) -> None:
        self._ann, self._calls, self._k, self._touch = ann, calls, k, touch
        self._found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()
        self.rows: np.ndarray = np.zeros(0, dtype=np.int64)
        """The merged nearest rows, once every part has run."""

    @property
    def parts(self) -> int:
        return len(self._calls)

    def part(self, i: int) -> None:
        found = self._calls[i]()
        with self._lock:
            self._found[i] = found
            last = len(self._found) == len(self._calls)
        if last:
            self.rows = self._ann.merge_parts([self._found[j] for j in range(len(self._calls))], self._k)
            self._touch(self.rows)


def _proposed(ann: AnnIndex, qvec: np.ndarray, params: ScoreParams) -> np.ndarray:
    """The rows the ANN proposes for exact re-scoring: ``ann_candidates``, more as its lists multiply
    (``AnnIndex.proposals``), from ``ann_probe`` of its lists."""
    return ann.search(qvec, ann.proposals(params.ann_candidates, params.ann_candidates_growth), params.ann_probe)
