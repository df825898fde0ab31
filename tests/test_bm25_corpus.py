"""Whole-collection BM25 without scoring every row: the same best rows and bit-identical scores as
``BM25Index.score_range`` over every row, ties included."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from indexing.bm25_builder import BM25Index
from indexing import bm25_corpus
from indexing.bm25_corpus import score_rows, top_positive, top_rows


def _reference_top(index: BM25Index, tokens: list[str], k: int, **kw: float) -> np.ndarray:
    """Every row scored, sorted by score (best first), ties by the lower row: the first k positives."""
    scores = index.score_range(tokens, 0, index.n_rows, **kw)
    rows = np.flatnonzero(scores > 0)
    order = np.lexsort((rows, -scores[rows]))
    return np.sort(rows[order[:k]])


def _zipf_rows(n_rows: int, seed: int) -> list[list[str]]:
    """Rows over a skewed vocabulary: a few words in most rows (low, floored IDF), many rare ones,
    and runs of identical rows so that scores tie at every cut."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(400)]
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    p /= p.sum()
    rows: list[list[str]] = []
    while len(rows) < n_rows:
        toks = list(rng.choice(vocab, size=int(rng.integers(0, 14)), p=p))
        if rng.random() < 0.3:
            toks += ["common"] * int(rng.integers(1, 3))  # a word in most rows
        rows.extend([toks] * int(rng.integers(1, 4)))  # identical rows: tied scores
    return rows[:n_rows]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BM25Index:
    """A built index, saved and read back memory-mapped as a query process reads it."""
    index = BM25Index.build(_zipf_rows(3000, 7))
    out = Path(tmp_path_factory.mktemp("bm25"))
    index.save(out)
    return BM25Index.load(out)


QUERIES = [["w0"], ["common", "w0", "w1"], ["w350", "w2", "common", "w0"], ["w120", "w120", "w3", "common"],
           ["w399", "unseen", "w5", "w7", "w11", "common"], ["unseen"], [], ["w1", "w1", "w1"],
           ["w40", "w41", "w42", "w0", "w1", "w2", "common"]]


@pytest.mark.parametrize("tokens", QUERIES)
@pytest.mark.parametrize("k", [1, 3, 10, 50, 400, 5000])
def test_top_rows_match_every_row_scored(built: BM25Index, tokens: list[str], k: int) -> None:
    got = top_rows(built, tokens, k)
    assert np.array_equal(got, _reference_top(built, tokens, k))


@pytest.mark.parametrize("tokens", QUERIES)
def test_score_rows_bit_identical(built: BM25Index, tokens: list[str]) -> None:
    every = built.score_range(tokens, 0, built.n_rows)
    rows = np.random.default_rng(1).permutation(built.n_rows)[:700]  # any order, as candidates come
    got = score_rows(built, tokens, rows)
    assert got.dtype == np.float32
    assert np.array_equal(got, every[rows])


def test_ties_at_the_cut_go_to_the_lower_rows(built: BM25Index) -> None:
    scores = built.score_range(["common"], 0, built.n_rows)
    rows = np.flatnonzero(scores > 0)
    kth = np.sort(scores[rows])[::-1][20]
    assert int(np.sum(scores == kth)) > 2  # the fixture ties at this cut
    got = top_rows(built, ["common"], 21)
    assert np.array_equal(got, _reference_top(built, ["common"], 21))


def test_top_positive_prefers_score_then_row() -> None:
    rows = np.array([2, 5, 9, 11, 14], dtype=np.int64)
    scores = np.array([1.0, 3.0, 1.0, 1.0, 0.0], dtype=np.float32)
    assert top_positive(rows, scores, 2).tolist() == [2, 5]
    assert top_positive(rows, scores, 3).tolist() == [2, 5, 9]
    assert top_positive(rows, scores, 9).tolist() == [2, 5, 9, 11]  # a zero score is no hit


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.sampled_from([f"w{i}" for i in range(60)] + ["common", "zz"]),
                                        min_size=1, max_size=7),
       st.integers(1, 300), st.floats(0.1, 3.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
# a word common enough that its floored IDF (epsilon x the average) rounds every float32 score to 0
@example(seed=0, tokens=["w0"], k=1, k1=1.0, b=0.0, eps=2.225073858507203e-309)
def test_any_corpus_and_settings(seed: int, tokens: list[str], k: int, k1: float, b: float, eps: float) -> None:
    index = BM25Index.build(_zipf_rows(600, seed))
    kw = {"k1": k1, "b": b, "epsilon": eps}
    assert np.array_equal(top_rows(index, tokens, k, **kw), _reference_top(index, tokens, k, **kw))
    rows = np.arange(0, index.n_rows, 3)
    assert np.array_equal(score_rows(index, tokens, rows, **kw), index.score_range(tokens, 0, index.n_rows, **kw)[rows])


@pytest.mark.parametrize("tokens,k", [(["w40", "w0"], 3), (["w120", "w120", "w3", "w0"], 10),
                                      (["w41", "w42", "w0"], 10)])
def test_frequent_words_are_not_scored_on_every_row(built: BM25Index, tokens: list[str], k: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: once the rare words' best rows are out of the frequent words' reach, neither
    every row is scored nor the frequent words' weights are computed. (With candidates as cheap to score
    as a posting is to read: on this small corpus reading the frequent word is otherwise the cheaper.)"""
    monkeypatch.setattr(bm25_corpus, "SEARCH_COST", 0)
    want = _reference_top(built, tokens, k)
    weighted: list[int] = []
    real = built._corpus_term_weights

    def weights(tid: int, *args: float) -> np.ndarray:
        weighted.append(tid)
        return real(tid, *args)

    monkeypatch.setattr(built, "score_range", lambda *a, **kw: pytest.fail("scored every row"))
    monkeypatch.setattr(built, "_corpus_term_weights", weights)
    assert np.array_equal(top_rows(built, tokens, k), want)
    assert built.term_ids["w0"] not in weighted  # in 2/3 of the rows


@pytest.mark.parametrize("distinct", [3, 1115, 1 << 30])
def test_kth_largest_is_the_partitions_value(distinct: int) -> None:
    """``kth_largest`` narrows millions of values by a sampled threshold: the value is the partition's,
    with many ties, with the largest values where the sample does not look, and with NaNs."""
    from indexing.bm25_corpus import SAMPLE_FROM, kth_largest

    rng = np.random.default_rng(distinct % 97)
    n = SAMPLE_FROM * 5 + 17
    values = (rng.integers(0, distinct, n) / 7).astype(np.float32)
    for k in (1, 2, 999, 1000, n // 9, n // 8, n // 2, n):
        assert kth_largest(values, k) == np.partition(values, n - k)[n - k], k
    for where in (slice(1, None, 2), slice(None, None, max(1, n // (1 << 14)))):
        skewed = values.copy()
        skewed[where] += 1e6  # the best values off the sample's stride, or only on it (too few kept: the whole partition)
        for k in (1000, n // 9):
            assert kth_largest(skewed, k) == np.partition(skewed, n - k)[n - k]
    with_nan = values.copy()
    with_nan[5] = np.nan
    assert np.isnan(kth_largest(with_nan, 1)) and np.isnan(np.partition(with_nan, n - 1)[n - 1])
    assert kth_largest(with_nan, 1000) == np.partition(with_nan, n - 1000)[n - 1000]
