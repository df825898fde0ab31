"""Min-max and RRF: values and every degenerate case."""
from __future__ import annotations

import numpy as np
import pytest

from utils.similarity import min_max_normalize, rrf_scores


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
