"""Score arithmetic shared by retrieval and the locators (numpy, vectorised).

    min_max_normalize(scores) -> (n,)       to [0, 1], with the degenerate cases defined
    rrf_scores(rank_lists, n=None, k=60)    reciprocal-rank fusion of ranked index lists
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

_EQUAL_TOL = 1e-12


def min_max_normalize(scores: np.ndarray | Sequence[float]) -> np.ndarray:
    """Scale to [0, 1] (float64); degenerate inputs have defined, meaningful results.

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
    lo, hi = float(vals.min()), float(vals.max())
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
