"""Paragraph pooling: a paragraph ranked by all of its windows (evaluation/paragraph_pooling.py, the
``+soft`` variant of a section ordering)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from config import Config
from evaluation.paragraph_pooling import pool_paragraphs, pooled_scores
from evaluation.variants import VARIANTS
from retrieval.breadth import paragraph_ids
from retrieval.ordering import Ask
from retrieval.query import Query


def test_a_paragraph_matching_throughout_beats_one_matching_window() -> None:
    # paragraph 0: two windows scoring 2.0; paragraph 1: one window at 2.1 among two that do not match
    scores = np.array([2.0, 2.0, 2.1, -1.0, -1.0])
    paras = np.array([0, 0, 1, 1, 1])
    out = pool_paragraphs(scores, paras, 0.5)
    assert out[0] == pytest.approx(2.0)  # windows alike: the best window's score is kept
    assert out[2] == pytest.approx(2.1 + 0.5 * math.log((1 + 2 * math.exp(-3.1 / 0.5)) / 3))
    assert out[0] > out[2]
    assert out[1] == 2.0 and list(out[3:]) == [-1.0, -1.0]  # only each paragraph's best window moves
    assert np.argmax(scores) == 2 and np.argmax(out) in (0, 1)


def test_one_window_paragraphs_and_a_cold_temperature_keep_the_best_window() -> None:
    scores = np.array([0.3, 1.5, -0.2])
    assert np.array_equal(pool_paragraphs(scores, np.array([0, 1, 2]), 0.5), scores)
    cold = pool_paragraphs(np.array([1.0, 0.0, 0.0]), np.array([0, 0, 0]), 0.01)
    assert cold[0] == pytest.approx(1.0 - 0.01 * math.log(3), abs=1e-6)
    assert np.array_equal(pool_paragraphs(scores, np.array([0, 0, 0]), 0.0), scores)
    assert len(pool_paragraphs(np.array([]), np.array([], dtype=np.int64), 0.5)) == 0


def test_paragraph_ids_follow_the_leaf_paragraphs(paper_index) -> None:
    rows = np.arange(len(paper_index.chunks))
    ids = paragraph_ids(paper_index, rows)
    overlapping = 0
    for a, b in zip(rows[:-1], rows[1:]):
        ca, cb = paper_index.chunks[int(a)], paper_index.chunks[int(b)]
        if ca.source_node_id != cb.source_node_id:
            assert ids[a] != ids[b]  # paragraphs never span leaves
        elif ca.end_char > cb.start_char:
            assert ids[a] == ids[b]  # overlapping windows: one long paragraph
            overlapping += 1
    assert overlapping > 0  # the test paper has long paragraphs


def test_reading_only_the_best_leaves_gives_the_same_best_rows(paper_index) -> None:
    rows = np.arange(len(paper_index.chunks))
    rng = np.random.default_rng(0)
    for n in (1, 3, 10):
        scores = rng.normal(size=len(rows))
        full = pool_paragraphs(scores, paragraph_ids(paper_index, rows), 0.5)
        lazy = pooled_scores(paper_index, rows, scores, n, 0.5)
        best_full = np.lexsort((rows, -full))[:n]
        best_lazy = np.lexsort((rows, -lazy))[:n]
        assert list(best_full) == list(best_lazy)
        assert np.allclose(full[best_full], lazy[best_lazy])


def test_section_ranking_with_pooling_keeps_one_best_window_per_paragraph_first(paper_index) -> None:
    from indexing.embedders.factory import make_embedder

    cfg = Config(final_top_k=10)
    emb = make_embedder("hash", cfg)
    q = Query.build("what datasets are used for evaluation", emb)
    pooled = VARIANTS["section-once+soft"].order(paper_index, emb, cfg, Ask(q, []))
    plain = VARIANTS["section-once"].order(paper_index, emb, cfg, Ask(q, []))
    assert sorted(h.row for h in pooled) != [] and len(pooled) == len(plain)
    # pooling only lowers a paragraph's best window: no score rises
    by_row = {h.row: h.score for h in plain}
    assert all(h.score <= by_row.get(h.row, math.inf) + 1e-9 for h in pooled)
