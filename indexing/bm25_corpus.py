"""Whole-collection BM25 (corpus statistics) without scoring every row: the best rows, and given rows.

Why: a whole-collection question needs BM25 for two things only: its ``k`` best rows (candidates
beside the ANN's) and the scores of the few thousand candidate rows. Scoring every row for that
touched every posting of the question's terms; with a generated vocabulary a question often holds a
word found in most chunks (7.8M postings of 9.8M rows at 100,000 documents), whose weights, scatter
and the partition of the ~8M positive rows cost ~300 ms of a question.

How (MaxScore, exact): each term's contribution to a row is at most ``idf * count * (k1 + 1)`` (the
saturated tf weight ``tf (k1+1) / (tf + k1 (1 - b + b dl/avgdl))`` stays below ``k1 + 1``). Terms are
scored from the largest bound down (the rare words) into a partial score; once the ``k``-th best
partial score exceeds the summed bounds of the terms not yet scored (the frequent words), no row
outside the rows already met can enter the top ``k``, and of those only rows whose partial score
plus that sum reaches the ``k``-th can. Those few are scored exactly, term by term in the order
``BM25Index.score_range`` adds them (float32, same operations), so their scores are bit-identical
to it, and the top ``k`` is taken by score, ties by row. Whenever a bound cannot be trusted (a
negative term weight, a check that fails by rounding) the answer comes from scoring every row.

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

REFINE = 4
"""Candidates per wanted row above which the floor of the k-th score is first raised (see ``top_rows``)."""
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


def top_positive(rows: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The (at most) ``k`` rows with the highest positive scores, ties by the lower row (``rows``
    ascending); in row order. One partition, not a sort: the rows can be millions."""
    keep = scores > 0
    rows, scores = rows[keep], scores[keep]
    if len(rows) <= k:
        return rows
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    above = scores > kth
    tied = np.flatnonzero(scores == kth)[:k - int(above.sum())]
    pick = above
    pick[tied] = True
    return rows[pick]


def top_rows(index: CorpusPostings, tokens: Sequence[str], k: int, k1: float = 1.5, b: float = 0.75,
             epsilon: float = 0.25) -> np.ndarray:
    """The ``k`` rows with the highest positive corpus BM25 (ties by the lower row), ascending: the
    same rows as ``top_positive`` over ``score_range(tokens, 0, n_rows)`` (see the module docstring)."""
    n = index.n_rows
    terms, avgdl = _query_terms(index, tokens, epsilon)
    if not terms or k <= 0 or avgdl <= 0.0:
        return np.zeros(0, dtype=np.int64)
    if any(mult < 0 for _, mult in terms) or k1 < 0 or not 0 <= b <= 1:
        return _every_row(index, tokens, k, k1, b, epsilon)
    bound = [mult * (k1 + 1.0) for _, mult in terms]
    by_bound = sorted(range(len(terms)), key=lambda i: (-bound[i], i))  # rare words (high idf) first
    rest = [0.0] * (len(terms) + 1)  # rest[e]: summed bounds of the terms after the first e of by_bound
    for e in range(len(terms) - 1, -1, -1):
        rest[e] = rest[e + 1] + bound[by_bound[e]]
    partial = np.zeros(n, dtype=np.float32)  # pages are touched only where a scored posting falls
    met: list[np.ndarray] = []
    n_met = 0
    for e, i in enumerate(by_bound, start=1):
        tid, mult = terms[i]
        df = int(index.indptr[tid + 1] - index.indptr[tid])
        if e == len(terms) and n_met + df > 8 * k:
            break  # no bound held before the last term: scoring every row is as cheap
        r, weights = index.corpus_postings(tid, k1, b, avgdl)
        partial[r] += mult * weights
        met.append(r)
        n_met += len(r)
        if e == len(terms):
            seen = _union(met, partial, n_met)
            return top_positive(seen, score_rows(index, tokens, seen, k1, b, epsilon), k)
        if n_met < k or rest[e] >= rest[0] - rest[e]:
            continue  # too few rows yet, or no partial score can pass what the unscored words may add
        seen = _union(met, partial, n_met)
        if len(seen) < k:
            continue
        vals = partial[seen]
        kth = float(np.partition(vals, len(vals) - k)[len(vals) - k])
        if rest[e] * (1 + SLACK) < kth * (1 - SLACK):
            reach = vals.astype(np.float64) + rest[e] * (1 + SLACK)
            cand = seen[reach >= kth * (1 - SLACK)]
            if len(cand) > REFINE * k:
                # The k best partial scores, scored exactly, are k rows at or above their least exact
                # score: a higher floor for the k-th (the frequent words add to most rows), fewer candidates.
                above = np.flatnonzero(vals > kth)  # fewer than k; with the first rows at kth: k rows
                best = np.sort(seen[np.concatenate([above, np.flatnonzero(vals == kth)[:k - len(above)]])])
                kth = max(kth, float(score_rows(index, tokens, best, k1, b, epsilon).min()))
                cand = seen[reach >= kth * (1 - SLACK)]
            scores = score_rows(index, tokens, cand, k1, b, epsilon)
            top = top_positive(cand, scores, k)
            if len(top) == k and rest[e] * (1 + SLACK) < float(scores[np.searchsorted(cand, top)].min()) * (1 - SLACK):
                return top
            break  # rounding beat the slack: be exact
    return _every_row(index, tokens, k, k1, b, epsilon)


def _union(met: list[np.ndarray], partial: np.ndarray, n_met: int) -> np.ndarray:
    """The rows met so far (ascending): merged while they are few, else every row with a partial
    score (each scored posting adds a positive weight)."""
    if len(met) == 1:
        return met[0]
    if n_met * 64 < len(partial):
        rows = np.sort(np.concatenate(met), kind="stable")  # a merge of ascending runs
        return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
    return np.flatnonzero(partial)


def _every_row(index: CorpusPostings, tokens: Sequence[str], k: int, k1: float, b: float, epsilon: float) -> np.ndarray:
    """The reference: every row scored (``score_range``), then the best ``k``."""
    scores = index.score_range(tokens, 0, index.n_rows, k1=k1, b=b, epsilon=epsilon)
    hits = np.flatnonzero(scores > 0)
    return top_positive(hits, scores[hits], k)
