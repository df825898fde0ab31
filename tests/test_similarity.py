"""Min-max and RRF: values and every degenerate case."""
from __future__ import annotations

import numpy as np
import pytest

from retrieval.ranking_params import Fusion
from utils.similarity import (PARALLEL_ROWS, SparseScores, best_first, matvec, min_max_normalize, rrf_scores,
                              top_order)


def test_min_max_regular() -> None:
    np.testing.assert_allclose(min_max_normalize([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(min_max_normalize(np.array([-1.0, 1.0], dtype=np.float32)), [0.0, 1.0])


def test_min_max_degenerate_cases() -> None:
    assert min_max_normalize([]).shape == (0,)
    assert min_max_normalize([3.7]).tolist() == [1.0], "a lone matching chunk is a full match"
    assert min_max_normalize([0.0]).tolist() == [0.0]
    assert min_max_normalize([0.0, 0.0, 0.0]).tolist() == [0.0, 0.0, 0.0], "all-zero BM25 is no evidence"
    assert min_max_normalize([0.5, 0.5]).tolist() == [1.0, 1.0]
    assert min_max_normalize([-0.2, -0.2]).tolist() == [0.0, 0.0]
    got = min_max_normalize([1.0, np.nan, 3.0, np.inf])
    assert got.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_rrf_scores() -> None:
    got = rrf_scores([np.array([2, 0, 1]), np.array([0, 2])], n=4, k=60)
    want = [1 / 62 + 1 / 61, 1 / 63, 1 / 61 + 1 / 62, 0.0]
    np.testing.assert_allclose(got, want)
    assert got[0] == pytest.approx(got[2]) and got[3] == 0.0
    assert rrf_scores([[1, 0]], k=1).tolist() == pytest.approx([1 / 3, 1 / 2])
    assert rrf_scores([], n=2).tolist() == [0.0, 0.0]
    assert rrf_scores([[], []]).shape == (0,)
    with pytest.raises(ValueError):
        rrf_scores([[5]], n=3)


def test_matvec_split_across_threads_equals_one_product() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((PARALLEL_ROWS + 1001, 16)).astype(np.float32)
    q = rng.standard_normal(16).astype(np.float32)
    want = vecs @ q
    for threads in (1, 2, 3, 8):
        got = matvec(vecs, q, threads=threads)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # block edges may use other SIMD lanes
    assert matvec(vecs[:10], q, threads=4).tolist() == (vecs[:10] @ q).tolist()


def test_matvec_error_in_a_worker_thread_reaches_the_caller() -> None:
    class Broken(np.ndarray):
        def __getitem__(self, item):  # type: ignore[no-untyped-def]
            if isinstance(item, slice) and item.start:
                raise RuntimeError("bad block")
            return super().__getitem__(item)

    vecs = np.zeros((PARALLEL_ROWS + 10, 4), dtype=np.float32).view(Broken)
    with pytest.raises(RuntimeError, match="bad block"):
        matvec(vecs, np.ones(4, dtype=np.float32), threads=2)


@pytest.mark.parametrize("seed", range(5))
def test_top_order_and_best_first_equal_a_full_sort_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 7, size=2000).astype(np.float32)  # many ties
    full = np.lexsort((np.arange(len(scores)), -scores))
    for k in (0, 1, 5, 20, 1999, 2000, 5000):
        assert top_order(scores, k).tolist() == full[:k].tolist()
    assert list(best_first(scores, first=3)) == full.tolist()
    assert list(best_first(np.zeros(0, dtype=np.float32))) == []


def test_top_scaled_spans_a_signals_own_top_candidates() -> None:
    """fusion=relative: the best score is 1, the depth-th best 0, everything below it 0."""
    from retrieval.scoring import top_scaled

    got = top_scaled(np.array([0.90, 0.80, 0.85, 0.10, 0.70]), depth=3)
    np.testing.assert_allclose(got, [1.0, 0.0, 0.5, 0.0, 0.0])
    # a scope no larger than the depth is scaled over all of it, as min-max is
    np.testing.assert_allclose(top_scaled(np.array([2.0, 4.0, 3.0]), depth=3), [0.0, 1.0, 0.5])
    assert top_scaled(np.zeros(5), depth=2).tolist() == [0.0] * 5, "all-zero BM25 is no evidence"
    assert top_scaled(np.array([0.0, 0.0, 3.0, 0.0]), depth=2).tolist() == [0.0, 0.0, 1.0, 0.0]
    got = top_scaled(np.array([1.0, np.nan, 3.0, 2.0, -np.inf]), depth=2)
    assert got.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    # tied top candidates all match fully; a score below them still gets nothing
    assert top_scaled(np.array([3.0, 3.0, 3.0, 1.0, 0.0]), depth=2).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_relative_fusion_gives_a_compressed_dense_signal_its_spread() -> None:
    """Whole-scope min-max squeezes e5-like cosines (the floor far below the candidates) so that BM25
    decides among them; scaled over each signal's top candidates, a clearly better dense match wins."""
    from retrieval.scoring import fuse

    rng = np.random.default_rng(0)
    dense = np.concatenate(([0.90, 0.86], rng.uniform(0.70, 0.84, 200), [0.0])).astype(np.float32)
    lexical = np.concatenate(([10.0, 12.0], rng.uniform(0.0, 3.0, 200), [0.0])).astype(np.float32)
    weighted = fuse(dense, lexical, Fusion("weighted"))
    relative = fuse(dense, lexical, Fusion("relative", depth=40))
    assert weighted[1] > weighted[0], "whole-scope scaling: the BM25 spread decides"
    assert relative[0] > relative[1], "top-candidate scaling: the dense lead counts as much"
    assert relative.min() >= 0.0 and relative.max() <= 1.0


@pytest.mark.parametrize("seed", range(6))
def test_sparse_scores_rank_exactly_as_their_dense_array(seed: int) -> None:
    """Positive, zero (scored or not) and negative scores, with ties: the same order as the dense array."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    at = np.sort(rng.choice(n, size=int(rng.integers(0, min(n, 200) + 1)), replace=False))
    values = rng.integers(-3, 5, size=len(at)).astype(np.float32)  # ties, exact zeros, negatives
    sparse = SparseScores(n, at, values)
    dense = sparse.dense()
    full = np.lexsort((np.arange(n), -dense))
    for k in (0, 1, 3, len(at), len(at) + 5, n, n + 10):
        assert top_order(sparse, k).tolist() == full[:k].tolist()
    assert list(best_first(sparse, first=2)) == full.tolist()
    assert len(sparse) == n
    for i in rng.integers(0, n, 20).tolist():
        assert sparse[i] == dense[i]
    with pytest.raises(IndexError):
        sparse[n]
