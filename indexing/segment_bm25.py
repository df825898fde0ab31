"""BM25 over the live rows of a segmented index, with the statistics a full build would have.

Why not each segment's own statistics: the collection's N, average length and each word's
document frequency decide every whole-collection score; a delta of one document scored with its
own statistics (N = its few chunks) would rank nothing like a full build. So the collection scope
counts the live rows of every segment: N and the total length over the live rows, and each word's
frequency as its postings in every segment minus those of deleted rows. A leaf's or a document's
scope lies inside one segment, where that segment's own postings give the same numbers.

Exactness: the same formula, the same integers (N, df, lengths; lengths are integers, so their sum
does not depend on the order it is taken in) and the same float32 weights as
``BM25Index.score_range``. One difference remains: the epsilon floor's average IDF (for words in
more than half of the rows) sums the words' IDFs in this vocabulary's order rather than a full
build's; the two sums can differ in the last bits of a float64.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Sequence

import numpy as np

from indexing.bm25_builder import BM25Index, rows_between, term_idf
from indexing.segments import Runs, true_spans

POSTINGS_CACHE = 1 << 23
"""Live postings (rows, tf, length) kept per index, mapped to logical rows: the words asked recently."""


class SegmentBM25:
    """The ``BM25Index`` surface FileSearch reads (scores, postings, vocabulary), over segments."""

    def __init__(self, parts: Sequence[BM25Index], runs: Runs) -> None:
        self.parts = list(parts)
        self.runs = runs
        self.tokenizer = self.parts[0].tokenizer
        self._lock = threading.Lock()
        self._vocab: tuple[list[str], dict[str, int], list[np.ndarray]] | None = None
        self._corpus_stats: tuple[np.ndarray, float, float] | None = None
        self._indptr: np.ndarray | None = None
        self._postings: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._held = 0
        self._rows: dict[int, np.ndarray] = {}
        self._rows_held = 0
        self.names = self.parts[0].names

    # ------------------------------------------------------------ vocabulary

    @property
    def n_rows(self) -> int:
        return self.runs.n

    @property
    def rows(self) -> tuple[Any, ...]:
        return tuple(p.rows for p in self.parts)

    @property
    def tf(self) -> tuple[Any, ...]:
        return tuple(p.tf for p in self.parts)

    def _vocabulary(self) -> tuple[list[str], dict[str, int], list[np.ndarray]]:
        """(merged words, word -> merged id, per segment: local id -> merged id), built on first use."""
        if self._vocab is None:
            base = self.parts[0]
            terms = list(base.terms)
            ids = dict(base.term_ids)
            maps = [np.arange(len(base.terms), dtype=np.int64)]
            for part in self.parts[1:]:
                m = np.empty(len(part.terms), dtype=np.int64)
                for i, t in enumerate(part.terms):
                    j = ids.get(t)
                    if j is None:
                        j = ids[t] = len(terms)
                        terms.append(t)
                    m[i] = j
                maps.append(m)
            with self._lock:
                if self._vocab is None:
                    self._vocab = (terms, ids, maps)
        return self._vocab

    @property
    def terms(self) -> list[str]:
        return self._vocabulary()[0]

    @property
    def term_ids(self) -> dict[str, int]:
        return self._vocabulary()[1]

    @property
    def vocab_size(self) -> int:
        return len(self.terms)

    def _local_ids(self, tid: int) -> list[int | None]:
        terms, _, maps = self._vocabulary()
        word = terms[tid]
        out: list[int | None] = [tid if tid < len(self.parts[0].terms) else None]
        for part in self.parts[1:]:
            out.append(part.term_ids.get(word))
        return out

    # ------------------------------------------------------------ postings

    def _pieces(self, tid: int, a: int, b: int) -> list[tuple[int, int, int, int, int, int]]:
        """Word ``tid``'s postings among logical rows [a, b), run by run in logical order: (segment, the
        segment's id of the word, its first posting, the slice [i, j) of its postings inside the run,
        the logical row of the run's local row 0). A run is contiguous in both numberings, so a
        posting's logical row is its local row plus that offset, and the pieces come out ascending."""
        local_ids = self._local_ids(tid)
        out = []
        log = a
        for s, lo, hi in self.runs.spans(a, b):
            local = local_ids[s]
            if local is not None:
                p0, _, r = self.parts[s].postings(local)
                i, j = rows_between(r, lo, hi)  # keys in the postings' dtype: no int64 copy of them
                if j > i:
                    out.append((s, local, p0, i, j, log - lo))
            log += hi - lo
        return out

    def _live(self, tid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Logical rows (ascending), term frequencies and row lengths of word ``tid``'s live postings."""
        hit = self._postings.get(tid)
        if hit is not None:
            return hit
        rows, tfs, lens = [], [], []
        for s, _, p0, i, j, off in self._pieces(tid, 0, self.n_rows):
            part = self.parts[s]
            r = np.asarray(part.rows[p0 + i:p0 + j], dtype=np.int64)
            rows.append(r + off)
            tfs.append(np.asarray(part.tf[p0 + i:p0 + j]))
            lens.append(np.asarray(part.doc_len[r]))
        out = ((np.concatenate(rows), np.concatenate(tfs), np.concatenate(lens)) if rows else
               (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)))
        with self._lock:
            if self._held + len(out[0]) > POSTINGS_CACHE:
                self._postings, self._held = {}, 0
            self._postings[tid] = out
            self._held += len(out[0])
        return out

    def postings(self, tid: int) -> tuple[int, int, np.ndarray]:
        """(first, end, logical rows) of word ``tid``: as ``BM25Index.postings``, over the live rows (the
        rows alone: what the leaf-word scores and the counts of a scope read)."""
        hit = self._postings.get(tid)
        rows = hit[0] if hit is not None else self._rows.get(tid)
        if rows is None:
            parts = [np.asarray(self.parts[s].rows[p0 + i:p0 + j], dtype=np.int64) + off
                     for s, _, p0, i, j, off in self._pieces(tid, 0, self.n_rows)]
            rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            with self._lock:
                if self._rows_held + len(rows) > POSTINGS_CACHE:
                    self._rows, self._rows_held = {}, 0
                self._rows[tid] = rows
                self._rows_held += len(rows)
        p0 = int(self.indptr[tid])
        return p0, p0 + len(rows), rows

    @property
    def indptr(self) -> np.ndarray:
        """Where each word's live postings would start in one postings array (the live frequencies summed)."""
        if self._indptr is None:
            df = self._corpus()[0]
            self._indptr = np.r_[0, np.cumsum(df)].astype(np.int64)
        return self._indptr

    def check_postings(self) -> None:
        for p in self.parts:
            p.check_postings()

    # ------------------------------------------------------------ statistics

    def _corpus(self) -> tuple[np.ndarray, float, float]:
        """(live document frequency of every merged word, total live length, sum of IDF over words
        present): what the collection scope's statistics need, computed once per loaded index."""
        if self._corpus_stats is not None:
            return self._corpus_stats
        terms, _, maps = self._vocabulary()
        df = np.zeros(len(terms), dtype=np.int64)
        total = 0.0
        starts = self.runs.seg_start
        for s, part in enumerate(self.parts):
            df[maps[s]] += np.diff(np.asarray(part.indptr))
            a, z = int(starts[s]), int(starts[s + 1])
            live = np.zeros(z - a, dtype=bool)
            for ps, ln in zip(self.runs.phys_start.tolist(), self.runs.length.tolist()):
                if a <= ps < z:
                    live[ps - a:ps - a + ln] = True
            for lo, hi in _true_spans(~live):  # deleted rows' words
                x, y = part.row_span(lo, hi)
                tids = np.asarray(part.row_terms[x:y], dtype=np.int64)
                np.subtract.at(df, maps[s][tids], 1)
            for lo, hi in _true_spans(live):
                total += float(np.sum(part.doc_len[lo:hi], dtype=np.float64))
        n = self.n_rows
        present = df[df > 0].astype(np.float64)
        idf_sum = float(np.sum(np.log(n - present + 0.5) - np.log(present + 0.5))) if present.size else 0.0
        avg_idf = idf_sum / present.size if present.size else 0.0
        with self._lock:
            self._corpus_stats = (df, total, avg_idf)
        return self._corpus_stats

    def _scope_stats(self, a: int, z: int, epsilon: float) -> tuple[int, float, float] | None:
        """(N, avgdl, epsilon * average IDF) of logical rows [a, z), as ``BM25Index._scope_stats``."""
        n = z - a
        if n <= 0:
            return None
        if a == 0 and z == self.n_rows:
            _, total, avg_idf = self._corpus()
        else:
            total, tids = 0.0, []
            _, _, maps = self._vocabulary()
            for s, lo, hi in self.runs.spans(a, z):
                part = self.parts[s]
                total += float(np.sum(part.doc_len[lo:hi], dtype=np.float64))
                tids.append(maps[s][part._row_term_ids(lo, hi)])
            all_tids = np.concatenate(tids) if tids else np.zeros(0, dtype=np.int64)
            _, df = np.unique(all_tids, return_counts=True)
            df = df.astype(np.float64)
            avg_idf = float(np.sum(np.log(n - df + 0.5) - np.log(df + 0.5))) / df.size if df.size else 0.0
        avgdl = total / n
        if avgdl <= 0.0:
            return None
        return n, avgdl, epsilon * avg_idf

    # ------------------------------------------------------------ scoring

    def score_range(self, query_tokens: Sequence[str], start: int, end: int,
                    idf_start: int | None = None, idf_end: int | None = None,
                    k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> np.ndarray:
        """``BM25Index.score_range`` over logical rows: the same scores a full build's index gives."""
        a = start if idf_start is None else idf_start
        z = end if idf_end is None else idf_end
        n_rows = self.n_rows
        if not (0 <= start <= end <= n_rows) or not (0 <= a <= z <= n_rows):
            raise ValueError(f"rows [{start}, {end}) or IDF scope [{a}, {z}) outside the index's rows [0, {n_rows})")
        out = np.zeros(end - start, dtype=np.float32)
        if end <= start or not query_tokens:
            return out
        whole = a == 0 and z == n_rows
        if not whole:
            own = self._inside_one_part(start, end, a, z)
            if own is not None:
                s, ls, le, la, lz = own
                return self.parts[s].score_range(query_tokens, ls, le, la, lz, k1=k1, b=b, epsilon=epsilon)
        stats = self._scope_stats(a, z, epsilon)
        if stats is None:
            return out
        n, avgdl, eps_idf = stats
        ids = self.term_ids
        live_df = self._corpus()[0] if whole else None
        for term, count in Counter(query_tokens).items():
            tid = ids.get(term)
            if tid is None:
                continue
            if live_df is not None:
                df = int(live_df[tid])
            else:
                rows, tf, dl = self._live(tid)
                lo, hi = np.searchsorted(rows, (a, z))
                df = int(hi - lo)
            if df == 0:
                continue
            idf = term_idf(n, df, eps_idf)
            if idf == 0.0:
                continue
            if whole:  # each segment's postings with its float32 weights, as BM25Index's collection scope
                for s, local, p0, i, j, off in self._pieces(tid, start, end):
                    part = self.parts[s]
                    r = part.rows[p0 + i:p0 + j]
                    at = r if off == start else np.asarray(r, dtype=np.int64) + (off - start)
                    out[at] += (idf * count) * part._corpus_term_weights(local, k1, b, avgdl)[i:j]
            else:
                lo, hi = (int(x) for x in np.searchsorted(rows, (start, end)))
                if hi <= lo:
                    continue
                r = rows[lo:hi]
                f = np.asarray(tf[lo:hi], dtype=np.float64)
                d = np.asarray(dl[lo:hi], dtype=np.float64)
                out[r - start] += (idf * count) * (f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * d / avgdl)))
        bad = ~np.isfinite(out)
        if bad.any():
            out[bad] = 0.0
        return out.astype(np.float32, copy=False)

    def term_bound(self, tid: int, k1: float, b: float, avgdl: float) -> float:
        """``k1 + 1``, the weight's limit: the stored maxima are a segment's (deleted rows included) and
        apply only under its own average length, which an update moves (bm25_impacts.py)."""
        return k1 + 1.0

    def corpus_postings(self, tid: int, k1: float, b: float, avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """(logical rows, float32 weights) of word ``tid``'s live postings under the collection's avgdl:
        each segment's own cached weights, sliced run by run as ``score_range``'s collection scope adds
        them, so a row's weight is the same float32 (bm25_corpus.CorpusPostings)."""
        rows, weights = [], []
        for s, local, p0, i, j, off in self._pieces(tid, 0, self.n_rows):
            part = self.parts[s]
            rows.append(np.asarray(part.rows[p0 + i:p0 + j], dtype=np.int64) + off)
            weights.append(part._corpus_term_weights(local, k1, b, avgdl)[i:j])
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate(rows), np.concatenate(weights)

    def corpus_scores_at(self, terms: Sequence[tuple[int, float]], keys: np.ndarray, k1: float, b: float,
                         avgdl: float) -> np.ndarray:
        """The collection-scope BM25 (float32) of the logical rows ``keys``, given (word, idf * count) in
        the order ``score_range`` adds them: each row looked up in its own segment's postings (a live
        row's local row; deleted rows are never asked for). The rows are sorted into segments once, not
        once per word; a row's words are still added in the given order, so its sum is bit-identical."""
        keys = np.asarray(keys, dtype=np.int64)
        out = np.zeros(len(keys), dtype=np.float32)
        if not len(keys) or not terms:
            return out
        local_ids = [self._local_ids(tid) for tid, _ in terms]
        seg, loc = self.runs.locate(keys)
        by = np.lexsort((loc, seg))  # by segment, then local row: each segment's keys ascending
        cut = np.searchsorted(seg[by], np.arange(len(self.parts) + 1))
        for s, part in enumerate(self.parts):
            at = by[int(cut[s]):int(cut[s + 1])]
            if not len(at):
                continue
            local_keys = loc[at]
            sub = np.zeros(len(at), dtype=np.float32)
            for (_, mult), ids in zip(terms, local_ids):
                local = ids[s]
                if local is None:
                    continue
                hit, w = part.corpus_weights_at(local, local_keys, k1, b, avgdl)
                if hit.any():
                    sub[hit] += mult * w
            out[at] = sub
        return out

    def _inside_one_part(self, start: int, end: int, a: int, z: int) -> tuple[int, int, int, int, int] | None:
        """The segment and its local rows when the scored rows and the statistics' rows lie in one run
        (a leaf or a document) and are not that whole segment (whose own statistics would take
        ``BM25Index``'s collection path, computed in another float precision)."""
        lo, hi = min(start, a), max(end, z)
        spans = self.runs.spans(lo, hi)
        if len(spans) != 1:
            return None
        s, l0, _ = spans[0]
        la, lz = l0 + (a - lo), l0 + (z - lo)
        if la == 0 and lz == self.parts[s].n_rows:
            return None
        return s, l0 + (start - lo), l0 + (end - lo), la, lz


def _true_spans(mask: np.ndarray) -> list[tuple[int, int]]:
    starts, ends = true_spans(mask)
    return list(zip(starts.tolist(), ends.tolist()))
