"""The IDF formulas (utils/idf.py): their shapes, and that each is the one its users compute."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from utils.idf import IDF, lucene, okapi, paragraph

counts = st.integers(min_value=1, max_value=10**6).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=1, max_value=n)))


@given(counts)
def test_rarer_words_weigh_more_under_every_formula(nd: tuple[int, int]) -> None:
    n, df = nd
    if df < n:
        assert okapi(n, df) > okapi(n, df + 1)
        assert lucene(n, df) > lucene(n, df + 1)
        assert paragraph(n, np.array([df]))[0] > paragraph(n, np.array([df + 1]))[0]


@given(counts)
def test_only_okapi_goes_negative_and_only_past_half_the_units(nd: tuple[int, int]) -> None:
    n, df = nd
    assert (okapi(n, df) < 0) == (df > n / 2)
    assert lucene(n, df) > 0 and paragraph(n, np.array([df]))[0] > 0
    assert lucene(n, df) == pytest.approx(math.log1p(math.exp(okapi(n, df))), rel=1e-9)


def test_the_table_names_each_formula_once() -> None:
    assert IDF == {"okapi": okapi, "lucene": lucene, "paragraph": paragraph}


def test_bm25_scores_with_the_okapi_formula() -> None:
    """BM25's term weight is Okapi's IDF, with a negative one floored to epsilon as rank_bm25 does."""
    from indexing.bm25_builder import term_idf

    assert term_idf(100, 3, 0.25) == okapi(100, 3)
    assert term_idf(100, 90, 0.25) == 0.25 and okapi(100, 90) < 0
