"""Whole-collection BM25 (corpus statistics) without scoring every row: the best rows, and given rows.

Why: a whole-collection question needs BM25 for two things only: its ``k`` best rows (candidates
beside the ANN's) and the scores of the few thousand candidate rows. Scoring every row for that
touched every posting of the question's terms; with a generated vocabulary a question often holds a
word found in most chunks (7.8M postings of 9.8M rows at 100,000 documents), whose weights, scatter
and the partition of the ~8M positive rows cost ~300 ms of a question.

How (MaxScore, exact): each term's contribution to a row is at most ``idf * count * (k1 + 1)`` (the
saturated tf weight ``tf (k1+1) / (tf + k1 (1 - b + b dl/avgdl))`` stays below ``k1 + 1``), or
``idf * count`` times the word's largest stored weight when the index stores its weights
(indexing/bm25_impacts.py). Terms are read whole from the rarest into a partial score; after any set
of terms is read, a row not met scores at most the summed bounds of the terms left. The k-th best
score is bounded from below by the rows met: their k-th best partial score, or exact scores (by binary
search) of the best of them, or of all of them when that costs less than reading the next term. Once
that floor exceeds the bounds of the terms left (the frequent words), only rows already met can enter
the top ``k``, and of those only rows whose partial score plus that sum reaches the floor; they are
scored exactly, term by term in the order ``BM25Index.score_range`` adds them (float32, same
operations), so their scores are bit-identical to it, and the top ``k`` is taken by score, ties by
row. Between scoring candidates and reading the next term whole, the cheaper goes first
(``SEARCH_COST``, ``DENSE_COST``). Whenever a bound cannot be trusted (a negative term weight, a check
that fails by rounding) the answer comes from scoring every row.

Segmented indexes (indexing/segment_bm25.py) take the same path over their logical rows: the
statistics (N, df, avgdl) are the live collection's, each word's live postings come segment by
segment with that segment's float32 weights, and a candidate's weight is looked up in the segment
that holds it; so the bounds, the top ``k`` and the scores are those of scoring every live row.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Protocol, Sequence

import numpy as np

from indexing.bm25_builder import term_idf

SEARCH_COST = 15
"""What scoring one candidate row for one word by binary search costs, in postings added by reading
a word whole (measured at 100,000 documents: ~150 ns against ~10 ns)."""
DENSE_COST = 1 / 3
"""What finding the rows met costs per row of the collection, in postings, once they are too many to
merge (``_union`` then scans a mask of every row: the cost model of the partial scores' scan it replaced,
kept so that the words are read in the same order as before)."""
SLACK = 1e-4
"""Relative room left for float32 rounding between a bound and the scores it bounds."""


class CorpusPostings(Protocol):
    """What the collection scope's top rows read: ``BM25Index`` (one postings array) and
    ``SegmentBM25`` (base and delta segments, rows in logical order) both provide it."""

    indptr: Any
    """Where each word's postings start: consecutive differences are the collection's (live) df."""

    @property
    def n_rows(self) -> int: ...

    @property
    def term_ids(self) -> dict[str, int]: ...

    def _scope_stats(self, a: int, b: int, epsilon: float) -> tuple[int, float, float] | None: ...

    def score_range(self, query_tokens: Sequence[str], start: int, end: int, idf_start: int | None = None,
                    idf_end: int | None = None, k1: float = 1.5, b: float = 0.75,
                    epsilon: float = 0.25) -> np.ndarray: ...

    def corpus_postings(self, tid: int, k1: float, b: float, avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """(rows ascending, float32 weights) of word ``tid`` under the collection's avgdl."""
        ...

    def term_bound(self, tid: int, k1: float, b: float, avgdl: float) -> float:
        """An upper bound of word ``tid``'s weight in any row (``k1 + 1`` holds for every word)."""
        ...

    def corpus_scores_at(self, terms: Sequence[tuple[int, float]], keys: np.ndarray, k1: float, b: float,
                         avgdl: float) -> np.ndarray:
        """BM25 (float32) of the ascending rows ``keys``: (term, idf * count) added in the given order."""
        ...


def _query_terms(index: CorpusPostings, tokens: Sequence[str], epsilon: float) -> tuple[list[tuple[int, float]], float]:
    """(term id, idf * count) per distinct query term in ``score_range``'s order (first occurrence),
    terms that add nothing left out; and the corpus avgdl (0 when BM25 is undefined)."""
    stats = index._scope_stats(0, index.n_rows, epsilon)
    if stats is None:
        return [], 0.0
    n, avgdl, eps_idf = stats
    ids = index.term_ids
    out: list[tuple[int, float]] = []
    for term, count in Counter(tokens).items():
        tid = ids.get(term)
        if tid is None:
            continue
        df = int(index.indptr[tid + 1] - index.indptr[tid])
        if df == 0:
            continue
        idf = term_idf(n, df, eps_idf)
        if idf == 0.0:
            continue
        out.append((tid, idf * count))
    will_need = getattr(index, "will_need", None)  # the postings requested together (BM25Index.will_need)
    if will_need is not None:
        will_need([tid for tid, _ in out])
    return out, avgdl


def score_rows(index: CorpusPostings, tokens: Sequence[str], rows: np.ndarray, k1: float = 1.5, b: float = 0.75,
               epsilon: float = 0.25) -> np.ndarray:
    """BM25 with corpus statistics of the given rows (float32, in the given order): bit-identical to
    ``index.score_range(tokens, 0, n_rows)[rows]``, found by binary search in each term's postings."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.zeros(len(rows), dtype=np.float32)
    if not len(rows) or not tokens:
        return out
    if int(rows.min()) < 0 or int(rows.max()) >= index.n_rows:
        raise ValueError(f"rows outside the index's rows [0, {index.n_rows})")
    terms, avgdl = _query_terms(index, tokens, epsilon)
    if not terms:
        return out
    order = np.argsort(rows, kind="stable")
    keys = rows[order]
    out[order] = index.corpus_scores_at(terms, keys, k1, b, avgdl)
    bad = ~np.isfinite(out)
    if bad.any():
        out[bad] = 0.0
    return out


SAMPLE_FROM = 1 << 16
"""From this many values ``kth_largest`` first narrows them by a threshold taken from a sample."""
SAMPLE_SIZE = 1 << 14


def kth_largest(values: np.ndarray, k: int) -> Any:
    """The ``k``-th largest of ``values`` (1 <= k <= len), as ``np.partition(values, n - k)[n - k]``.

    Why not that alone: a frequent word's partial scores are millions of floats with a few thousand
    distinct values (2.7M with 1,115 at 100,000 documents), where the partition costs ~14 ms; a threshold
    from an evenly strided sample, kept only if at least ``k`` values reach it, leaves a few thousand values
    to partition (~1 ms). The k-th largest of the values at or above such a threshold is the k-th largest
    of all of them, so the value is the same; without such a threshold (or with NaNs) the whole partition."""
    n = len(values)
    if n >= SAMPLE_FROM and k * 8 <= n:
        sample = values[::max(1, n // SAMPLE_SIZE)]
        want = min(len(sample), int(np.ceil(k * len(sample) / n * 4)) + 16)  # ~4x the share of k: rarely short
        threshold = np.partition(sample, len(sample) - want)[len(sample) - want]
        if not np.isnan(threshold):
            top = values[values >= threshold]
            if len(top) >= k and not np.isnan(values).any():
                return np.partition(top, len(top) - k)[len(top) - k]
    return np.partition(values, n - k)[n - k]


def top_positive(rows: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The (at most) ``k`` rows with the highest positive scores, ties by the lower row (``rows``
    ascending); in row order. One partition, not a sort: the rows can be millions."""
    keep = scores > 0
    rows, scores = rows[keep], scores[keep]
    if len(rows) <= k:
        return rows
    kth = kth_largest(scores, k)
    above = scores > kth
    tied = np.flatnonzero(scores == kth)[:k - int(above.sum())]
    pick = above
    pick[tied] = True
    return rows[pick]


def top_rows(index: CorpusPostings, tokens: Sequence[str], k: int, k1: float = 1.5, b: float = 0.75,
             epsilon: float = 0.25) -> np.ndarray:
    """The ``k`` rows with the highest positive corpus BM25 (ties by the lower row), ascending: the
    same rows as ``top_positive`` over ``score_range(tokens, 0, n_rows)`` (see the module docstring)."""
    terms, avgdl = _query_terms(index, tokens, epsilon)
    if not terms or k <= 0 or avgdl <= 0.0:
        return np.zeros(0, dtype=np.int64)
    if any(mult < 0 for _, mult in terms) or k1 < 0 or not 0 <= b <= 1:
        return _every_row(index, tokens, k, k1, b, epsilon)
    df = [int(index.indptr[tid + 1] - index.indptr[tid]) for tid, _ in terms]
    bound = [mult * index.term_bound(tid, k1, b, avgdl) for tid, mult in terms]
    # Rare words first: a word is read whole only while the words left can still lift an unmet row
    # into the top k, and the rare words' rows, scored exactly, usually settle that before a frequent
    # word's millions of postings are read. (Any order is exact; this one reads the fewest postings.)
    order = sorted(range(len(terms)), key=lambda i: (df[i], -bound[i], i))
    rest = [0.0] * (len(terms) + 1)  # rest[e]: summed bounds of the words after the first e of order
    for e in range(len(terms) - 1, -1, -1):
        rest[e] = rest[e + 1] + bound[order[e]]
    partial = np.zeros(index.n_rows, dtype=np.float32)  # pages are touched only where a scored posting falls
    met = _Met(index.n_rows)
    n_met = 0
    theta = 0.0  # a lower bound of the k-th best exact score (k rows are known to reach it)
    for e, i in enumerate(order, start=1):
        tid, mult = terms[i]
        r, weights = index.corpus_postings(tid, k1, b, avgdl)
        partial[r] += mult * weights
        met.add(r)
        n_met += len(r)
        left = rest[e] * (1 + SLACK)  # the most the words not read yet add to any row
        if n_met < k:
            continue
        seen = _union(met, partial, n_met)
        if len(seen) < k:
            continue
        vals = partial[seen]
        kth = float(kth_largest(vals, k))
        theta = max(theta, kth * (1 - SLACK))  # a row's exact score is at least its partial one
        exact = None
        # raise theta with exact scores (the words left add to the rows met too), to decide whether the
        # next word must be read: none is left after the last (a k-th score of 0, from weights too small
        # for float32, must not ask for one), and the candidates are scored below
        if e < len(terms) and left >= theta * (1 - SLACK):
            nxt = _read_cost(df[order[e]], n_met, len(partial))
            if len(seen) * len(terms) * SEARCH_COST <= nxt:  # every row met, exactly: the k-th best of them
                exact = score_rows(index, tokens, seen, k1, b, epsilon)
                theta = max(theta, float(kth_largest(exact, k)))
            else:  # the k best partial scores, exactly: k rows at or above the least of them
                above = np.flatnonzero(vals > kth)  # fewer than k; with the first rows at kth: k rows
                best = np.sort(seen[np.concatenate([above, np.flatnonzero(vals == kth)[:k - len(above)]])])
                theta = max(theta, float(score_rows(index, tokens, best, k1, b, epsilon).min()))
            if left >= theta * (1 - SLACK):
                continue  # the words left may still lift a row not met into the top k
        if exact is not None:
            cand, scores = seen, exact
        else:
            cand = seen[vals.astype(np.float64) + left >= theta * (1 - SLACK)]
            if e < len(terms) and len(cand) * len(terms) * SEARCH_COST > _read_cost(df[order[e]], n_met, len(partial)):
                continue  # reading the next word whole narrows the candidates for less than scoring them
            scores = score_rows(index, tokens, cand, k1, b, epsilon)
        top = top_positive(cand, scores, k)
        if len(top) == k and left < float(scores[np.searchsorted(cand, top)].min()) * (1 - SLACK):
            return top.astype(np.int64, copy=False)
        break  # fewer than k positive rows, or rounding beat the slack: be exact
    return _every_row(index, tokens, k, k1, b, epsilon)


def _read_cost(df: int, n_met: int, n_rows: int) -> float:
    """What reading a word of ``df`` postings whole costs, in postings: its postings, and a scan of every
    row's partial score when the rows met become too many to merge (``_union``)."""
    return df + (n_rows * DENSE_COST if (n_met + df) * 64 >= n_rows else 0.0)


class _Met:
    """The rows met so far, as the word arrays read, and once they are many a mask of every row.

    Why the mask: past ``n_rows / 64`` rows met, finding them merged sorted arrays no longer pays and
    they were found as the rows with a partial score (``np.flatnonzero`` over the 9.8M float32 partial
    scores at 100,000 documents: 40-60 ms a step); a boolean mask of the same rows is a quarter of the
    bytes and ~10x faster to scan (measured), kept up to date as each word is read."""

    def __init__(self, n_rows: int) -> None:
        self.words: list[np.ndarray] = []
        self._n_rows = n_rows
        self._mask: np.ndarray | None = None

    def add(self, rows: np.ndarray) -> None:
        self.words.append(rows)
        if self._mask is not None:
            self._mask[rows] = True

    def mask(self) -> np.ndarray:
        if self._mask is None:
            self._mask = np.zeros(self._n_rows, dtype=bool)
            for rows in self.words:
                self._mask[rows] = True
        return self._mask


def _union(met: _Met, partial: np.ndarray, n_met: int) -> np.ndarray:
    """The rows met so far (ascending): merged while they are few, else every row with a partial
    score (each scored posting adds a positive weight), found through the mask of the rows met."""
    words = met.words
    if len(words) == 1:
        return words[0]
    if n_met * 64 < len(partial):
        rows = np.sort(np.concatenate(words), kind="stable")  # a merge of ascending runs
        return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
    rows = np.flatnonzero(met.mask())
    return rows[partial[rows] != 0]  # exactly np.flatnonzero(partial): only a row met has a partial score


def _every_row(index: CorpusPostings, tokens: Sequence[str], k: int, k1: float, b: float, epsilon: float) -> np.ndarray:
    """The reference: every row scored (``score_range``), then the best ``k``."""
    scores = index.score_range(tokens, 0, index.n_rows, k1=k1, b=b, epsilon=epsilon)
    hits = np.flatnonzero(scores > 0)
    return top_positive(hits, scores[hits], k)
