"""Score arithmetic shared by retrieval and the locators (numpy, vectorised).

    min_max_normalize(scores) -> (n,)       to [0, 1], with the degenerate cases defined
    rrf_scores(rank_lists, n=None, k=60)    reciprocal-rank fusion of ranked index lists
    matvec(vectors, q)                      vectors @ q, split across cores for large scans
    top_order(scores, k)                    the k best positions, best first, ties by position
    best_first(scores)                      every position in that order, sorted a batch at a time
    SparseScores                            n scores that are 0 but at a few positions (both above take it)
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Iterator, Sequence, Union

import numpy as np

_EQUAL_TOL = 1e-12
PARALLEL_ROWS = 1 << 17
"""Scans shorter than this run on one thread: starting threads would cost more than they save."""


def scan_threads() -> int:
    """Cores this process may use (its affinity mask, not the machine's count), at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(8, n))


def matvec(vectors: np.ndarray, q: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``vectors @ q`` as float32, in row blocks on several threads when the scan is large.

    A whole-collection dense scan is bound by memory bandwidth, and one BLAS thread
    cannot use it all (1M x 384 float32: 111 ms on one core, 58 ms on two). The CLI pins
    BLAS to one thread because idle BLAS threads spin on small products; numpy releases
    the GIL inside matmul, so plain threads over row blocks parallelise only the big scans.
    """
    n = len(vectors)
    q = np.asarray(q, dtype=np.float32)
    workers = scan_threads() if threads is None else max(1, threads)
    if n < PARALLEL_ROWS or workers == 1:
        return np.asarray(vectors @ q, dtype=np.float32)
    out = np.empty(n, dtype=np.float32)
    bounds = np.linspace(0, n, workers + 1).astype(np.int64)
    errors: list[BaseException] = []

    def part(a: int, b: int) -> None:
        try:
            out[a:b] = vectors[a:b] @ q
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    parts = [threading.Thread(target=part, args=(int(a), int(b)), daemon=True)
             for a, b in zip(bounds[:-1], bounds[1:])]
    for t in parts[1:]:
        t.start()
    part(int(bounds[0]), int(bounds[1]))
    for t in parts[1:]:
        t.join()
    if errors:
        raise errors[0]
    return out


@dataclass(frozen=True)
class SparseScores:
    """``n`` scores that are exactly 0 except at ``at`` (ascending, unique positions).

    Why: a whole-collection question answered from the ANN's candidates scores a few thousand of the
    410,000 leaves of a 10,000-document forest; the rest are 0. Ranking it as a dense array cost a
    partition over every leaf (~70 ms a question); ranked here, the work follows the scored positions
    and the order is the same (``top_order``'s: best first, ties by position).
    """

    n: int
    at: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> float:
        """The score at position ``i`` (0 where nothing was scored)."""
        if not -self.n <= i < self.n:
            raise IndexError(i)
        i = i % self.n if i < 0 else i
        j = int(np.searchsorted(self.at, i))
        return float(self.values[j]) if j < len(self.at) and int(self.at[j]) == i else 0.0

    def dense(self) -> np.ndarray:
        out = np.zeros(self.n, dtype=self.values.dtype if len(self.values) else np.float32)
        out[self.at] = self.values
        return out


ScoreArray = Union[np.ndarray, SparseScores]


def best_first(scores: ScoreArray, first: int = 256) -> Iterator[int]:
    """Positions best first (as ``top_order``) for a caller that usually stops early.

    The TOC budget is filled after a few dozen leaves; sorting all 400k leaves of a
    10,000-document forest for it cost more than the rest of the query.
    """
    n = len(scores)
    done, k = 0, first
    while done < n:
        order = top_order(scores, min(k, n))
        for i in order[done:]:
            yield int(i)
        done, k = len(order), k * 4


def top_order(scores: ScoreArray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, best first, ties broken by position.

    Equal to ``np.lexsort((np.arange(n), -scores))[:k]`` without sorting all n
    (400k leaves at 10,000 documents): partition first, then sort the few kept.
    """
    if isinstance(scores, SparseScores):
        return _sparse_top_order(scores, k)
    scores = np.asarray(scores)
    n = len(scores)
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if k >= n:
        return np.lexsort((np.arange(n), -scores))
    kth = np.partition(scores, n - k)[n - k]
    cand = np.flatnonzero(scores >= kth)
    return cand[np.lexsort((cand, -scores[cand]))][:k]


def _sparse_top_order(scores: SparseScores, k: int) -> np.ndarray:
    """``top_order`` of ``scores.dense()`` from the scored positions: the positive ones best first,
    then every 0 (scored or not) by position, then the negative ones."""
    n, at, values = scores.n, np.asarray(scores.at, dtype=np.int64), np.asarray(scores.values)
    k = min(int(k), n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    pos = at[values > 0]
    out = [pos[top_order(values[values > 0], k)]]  # a subset's ties by subset index: by position too
    want = k - len(out[0])
    if want > 0:
        nonzero = at[values != 0]
        head = np.arange(min(n, want + len(nonzero)), dtype=np.int64)
        out.append(head[~np.isin(head, nonzero)][:want])
        want -= len(out[-1])
    if want > 0:
        neg = values < 0
        out.append(at[neg][top_order(values[neg], want)])
    return np.concatenate(out)


def min_max_normalize(scores: np.ndarray | Sequence[float], lo: float | None = None,
                      hi: float | None = None) -> np.ndarray:
    """Scale to [0, 1] (float64); degenerate inputs have defined, meaningful results.

    ``lo``/``hi``: the range to scale by when it is not the input's own (the input is a
    selection of a larger set, e.g. per-leaf maxima scaled as their rows would be).

    - empty -> empty;
    - one value, or all values equal -> all 1.0 if the value is > 0, else all
      0.0. A lone chunk in a leaf that matched the query is a full match, not a
      0/0; an all-zero BM25 (no query term occurs) is no evidence at all and
      must not outweigh the dense side; equal negative cosines likewise carry
      no preference.
    - NaN or infinite entries get 0.0 and do not take part in min/max.
    """
    arr = np.asarray(scores, dtype=np.float64).reshape(-1)
    out = np.zeros(arr.shape, dtype=np.float64)
    if arr.size == 0:
        return out
    finite = np.isfinite(arr)
    if not finite.any():
        return out
    vals = arr[finite]
    lo = float(vals.min()) if lo is None else lo
    hi = float(vals.max()) if hi is None else hi
    if hi - lo <= _EQUAL_TOL * max(1.0, abs(hi)):
        out[finite] = 1.0 if hi > 0 else 0.0
        return out
    out[finite] = (vals - lo) / (hi - lo)
    return out


def rrf_scores(rank_lists: Sequence[np.ndarray | Sequence[int]], n: int | None = None, k: int = 60) -> np.ndarray:
    """Reciprocal-rank fusion (Cormack et al. 2009): score(i) = sum_l 1 / (k + rank_l(i)).

    Each list holds candidate indices in ``0..n-1``, best first; rank is
    1-based. A candidate absent from a list gets nothing from it (e.g. a chunk
    with zero BM25 has no keyword rank). A list must not repeat an index.
    ``n`` defaults to one more than the largest index seen. Returns float64 (n,).
    """
    lists = [np.asarray(r, dtype=np.int64).reshape(-1) for r in rank_lists]
    if n is None:
        n = max((int(r.max()) + 1 for r in lists if r.size), default=0)
    out = np.zeros(n, dtype=np.float64)
    for r in lists:
        if r.size == 0:
            continue
        if r.min() < 0 or r.max() >= n:
            raise ValueError(f"rank list holds an index outside 0..{n - 1}")
        out[r] += 1.0 / (k + np.arange(1, r.size + 1, dtype=np.float64))
    return out
