"""Evaluation figures on hand-made cases with answers worked out on paper, and set loading."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluation.dataset import load_eval_set, locate_evidence, sample_questions
from evaluation.metrics import (BUDGETS, CONTEXT_KEYS, Relevance, SpanTable, budget_name, context_figures,
                                coverage_at_budget, dcg, distinct_ndcg, is_relevant, latency_percentiles,
                                leaf_scores, mean_metrics, paired_bootstrap, paired_bootstrap_columns,
                                question_relevance, question_slices, read_context, resampled_means,
                                score_ranking)
from utils.errors import InputError

L2 = math.log2


# --------------------------------------------------------------------------- relevance

@pytest.mark.parametrize("chunk,ev,expected", [
    ((0, 100), (40, 100), True),     # overlap 60 = all of the shorter (evidence)
    ((0, 100), (50, 300), True),     # overlap 50 = exactly half of the shorter (chunk, 100)
    ((0, 100), (51, 300), False),    # overlap 49 < 50
    ((0, 100), (60, 200), False),    # overlap 40 of a shorter 100
    ((0, 200), (10, 20), True),      # short evidence wholly inside a long chunk
    ((0, 10), (10, 20), False),      # touching spans do not overlap
    ((100, 300), (0, 1000), True),   # chunk inside a long evidence paragraph
    ((0, 3), (1, 6), True),          # odd lengths: overlap 2, shorter 3 -> 4 >= 3
    ((0, 5), (4, 7), False),         # overlap 1, shorter 3 -> 2 < 3
])
def test_is_relevant(chunk, ev, expected) -> None:
    assert is_relevant(chunk, ev) is expected


def _table() -> SpanTable:
    # a.md: rows 0-3 (leaf A1 = rows 0,1 over [0,200), leaf A2 = rows 2,3 over [210,400))
    # b.md: rows 4-5 (leaf B1 over [0,200))
    chunks = [("a.md", 0, 100), ("a.md", 100, 200), ("a.md", 210, 300), ("a.md", 300, 400),
              ("b.md", 0, 100), ("b.md", 100, 200)]
    leaves = [("A1", "a.md", 0, 200), ("A2", "a.md", 210, 400), ("B1", "b.md", 0, 200),
              ("E", "b.md", 200, 200)]  # empty leaf: never gold
    return SpanTable.build(chunks, leaves)


def test_relevance_rows_per_item_and_scope() -> None:
    t = _table()
    ev = [("a.md", [(120, 180)]),           # inside row 1
          ("a.md", [(150, 350)]),           # crosses leaves: rows 1 (50/100), 2 (90/90), 3 (50/100)
          ("b.md", [(0, 30), (150, 160)])]  # text occurring twice: rows 4 and 5
    rel = question_relevance(t, ev)
    assert rel.per_evidence == (frozenset({1}), frozenset({1, 2, 3}), frozenset({4, 5}))
    assert rel.relevant == {1, 2, 3, 4, 5}
    # evidence spanning A1 and A2 is contained in no leaf -> both overlapped leaves are gold
    assert rel.gold_leaves == {"A1", "A2", "B1"}
    scoped = question_relevance(t, ev, scope=["a.md"])
    assert scoped.per_evidence[2] == frozenset()  # b.md is outside the scope
    assert scoped.relevant == {1, 2, 3}


def test_gold_leaf_is_the_containing_leaf_only() -> None:
    t = _table()
    rel = question_relevance(t, [("a.md", [(220, 260)])])
    assert rel.gold_leaves == {"A2"}


def test_unscorable_when_no_chunk_covers_the_evidence() -> None:
    t = _table()
    rel = question_relevance(t, [("a.md", [(200, 210)])])  # the gap between the leaves (a heading)
    assert not rel.scorable
    assert rel.relevant == frozenset()


# --------------------------------------------------------------------------- ranking figures

def test_score_ranking_hand_case() -> None:
    t = _table()
    rel = question_relevance(t, [("a.md", [(120, 180)]), ("b.md", [(0, 30)])])  # rows {1} and {4}
    ranked = [0, 1, 2, 3, 5, 4]  # row 1 at rank 2, row 4 at rank 6
    s = score_ranking(ranked, rel)
    assert s["hit@1"] == 0.0
    assert s["hit@5"] == 1.0
    assert s["recall@5"] == 0.5
    assert s["recall@10"] == 1.0
    assert s["mrr@10"] == 0.5
    expected = (1 / L2(3) + 1 / L2(7)) / (1 + 1 / L2(3))
    assert s["ndcg@10"] == pytest.approx(expected)


def test_ndcg_ideal_counts_relevant_chunks_of_the_index_not_of_the_list() -> None:
    t = _table()
    rel = question_relevance(t, [("a.md", [(150, 350)])])  # rows 1, 2, 3 relevant
    s = score_ranking([2], rel)  # one relevant chunk, at rank 1, and nothing else
    assert s["hit@1"] == 1.0 and s["mrr@10"] == 1.0
    assert s["ndcg@10"] == pytest.approx(1 / (1 + 1 / L2(3) + 1 / L2(4)))
    assert score_ranking([2, 1, 3], rel)["ndcg@10"] == pytest.approx(1.0)


def test_ndcg_ideal_capped_at_ten() -> None:
    chunks = [("d.md", i * 10, i * 10 + 10) for i in range(12)]
    t = SpanTable.build(chunks, [])
    rel = question_relevance(t, [("d.md", [(0, 120)])])
    assert len(rel.relevant) == 12
    s = score_ranking(list(range(10)), rel)
    assert s["ndcg@10"] == pytest.approx(1.0)
    assert dcg([1] * 10) == pytest.approx(sum(1 / L2(i + 2) for i in range(10)))


def test_nothing_relevant_retrieved_scores_zero_and_duplicates_count_once() -> None:
    t = _table()
    rel = question_relevance(t, [("a.md", [(120, 180)])])
    assert score_ranking([0, 2, 3], rel) == {"hit@1": 0.0, "hit@5": 0.0, "recall@5": 0.0,
                                            "recall@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}
    assert score_ranking([], rel)["ndcg@10"] == 0.0
    # a row listed twice is one retrieved chunk: row 1 moves up to rank 2, not 3
    assert score_ranking([0, 0, 1], rel)["mrr@10"] == 0.5


def test_mrr_only_within_ten() -> None:
    t = SpanTable.build([("d.md", i * 10, i * 10 + 10) for i in range(12)], [])
    rel = question_relevance(t, [("d.md", [(110, 120)])])  # row 11
    assert score_ranking(list(range(12)), rel)["mrr@10"] == 0.0


def test_leaf_scores() -> None:
    assert leaf_scores(["A", "B"], frozenset({"A"})) == (1.0, 0.5)
    assert leaf_scores(["B"], frozenset({"A", "C"})) == (0.0, 0.0)
    assert leaf_scores([], frozenset({"A"})) == (0.0, 0.0)
    assert leaf_scores(["A", "C", "D", "E"], frozenset({"A", "C", "X"})) == (2 / 3, 0.5)
    assert leaf_scores(["A"], frozenset()) == (None, None)


def test_mean_metrics_skips_undefined_values() -> None:
    m = mean_metrics([{"a": 1.0, "b": None}, {"a": 0.0, "b": 0.5}, {"a": 0.5, "b": None}], keys=("a", "b", "c"))
    assert m == {"a": 0.5, "b": 0.5, "c": None}


def test_latency_percentiles() -> None:
    p50, p95 = latency_percentiles(list(range(1, 101)))
    assert p50 == pytest.approx(50.5) and p95 == pytest.approx(95.05)
    assert latency_percentiles([]) == (None, None)


# --------------------------------------------------------------------------- each evidence item once

def test_distinct_ndcg_gives_a_second_chunk_of_one_item_no_gain() -> None:
    t = _table()
    # item 0 -> rows {1, 2, 3} (crosses leaves), item 1 -> row {4}
    rel = question_relevance(t, [("a.md", [(150, 350)]), ("b.md", [(0, 30)])])
    ideal = 1 + 1 / L2(3)  # two findable items
    # rows 1 and 2 find the same item: ranks 1 and 3 gain, rank 2 does not
    assert distinct_ndcg([1, 2, 4], rel) == pytest.approx((1 + 1 / L2(4)) / ideal)
    assert score_ranking([1, 2, 4], rel)["ndcg@10"] == pytest.approx(
        (1 + 1 / L2(3) + 1 / L2(4)) / (1 + 1 / L2(3) + 1 / L2(4) + 1 / L2(5)))
    # three chunks of one paragraph: full nDCG credit for three, distinct credit for one
    assert distinct_ndcg([1, 2, 3], rel) == pytest.approx(1 / ideal)
    assert distinct_ndcg([4, 1, 2, 3], rel) == pytest.approx(1.0)
    assert distinct_ndcg([4, 4, 1], rel) == pytest.approx(1.0)  # a repeated row is one chunk
    assert distinct_ndcg([0, 5], rel) == 0.0
    long = question_relevance(SpanTable.build([("d.md", i * 10, i * 10 + 10) for i in range(12)], []),
                              [("d.md", [(0, 10)]), ("d.md", [(110, 120)])])  # rows 0 and 11
    assert distinct_ndcg([5, 6, 7, 8, 9, 10, 1, 2, 3, 0, 11], long) == pytest.approx(
        (1 / L2(11)) / ideal)  # row 0 at rank 10 gains; row 11 at rank 11 is past the cutoff


def test_distinct_ndcg_ideal_counts_findable_in_scope_items() -> None:
    t = _table()
    ev = [("a.md", [(120, 180)]), ("a.md", [(200, 210)]), ("b.md", [(0, 30)])]  # the middle one: a heading gap
    rel = question_relevance(t, ev)
    assert distinct_ndcg([1, 4], rel) == pytest.approx(1.0)  # two findable items, both found
    scoped = question_relevance(t, ev, scope=["a.md"])  # b.md out of scope: one findable item
    assert distinct_ndcg([1], scoped) == pytest.approx(1.0)
    # one chunk relevant to two items gains once; the ideal still holds two gains
    two = question_relevance(SpanTable.build([("d.md", 0, 100), ("d.md", 100, 200)], []),
                             [("d.md", [(0, 40)]), ("d.md", [(50, 90)])])
    assert two.per_evidence == (frozenset({0}), frozenset({0}))
    assert distinct_ndcg([0], two) == pytest.approx(1 / (1 + 1 / L2(3)))


def _items(*items: tuple[str, tuple[tuple[int, int], ...]]) -> Relevance:
    return Relevance(per_evidence=(), relevant=frozenset(), gold_leaves=frozenset(), evidence_spans=items)


def test_budget_names_and_keys() -> None:
    assert [budget_name(b) for b in BUDGETS] == ["2k", "4k", "8k"]
    assert budget_name(2500) == "2500"
    assert CONTEXT_KEYS == ("R@2k", "all@2k", "any@2k", "cov@2k", "R@4k", "all@4k", "any@4k", "cov@4k",
                            "R@8k", "all@8k", "any@8k", "cov@8k")


def test_context_figures_hand_case_and_the_budget_cut() -> None:
    rel = _items(("a.md", ((100, 300),)), ("a.md", ((1000, 1100),)), ("b.md", ((0, 50),)))
    ctx = [("a.md", (0, 200)), ("a.md", (150, 400)), ("a.md", (950, 1300)), ("b.md", (0, 50))]
    # 200 + 200 new (200..400) + 350 + 50 = 800 characters: everything is read
    assert context_figures(ctx, rel, 2000) == {"R@2k": 1.0, "all@2k": 1.0, "any@2k": 1.0, "cov@2k": 1.0}
    # 250: the first passage (200), then 50 new characters of the second, cut at 250
    got = context_figures(ctx, rel, 250)
    assert read_context(ctx, 250).passages == [("a.md", (0, 200)), ("a.md", (150, 250))]
    assert got == {"R@250": pytest.approx(1 / 3), "all@250": 0.0, "any@250": 1.0,
                   "cov@250": pytest.approx(150 / 350)}  # item 1: 100..250 read, 150 of 200
    # 150: the first passage cut to (0, 150) overlaps item 1 by 50 of a shorter 150: not found;
    # 50 of its 200 characters read: not half
    assert context_figures(ctx, rel, 150) == {"R@150": 0.0, "all@150": 0.0, "any@150": 0.0,
                                              "cov@150": pytest.approx(50 / 350)}


def test_context_overlap_is_read_once() -> None:
    rel = _items(("a.md", ((100, 300),)))
    # the repeat of (100, 200) costs nothing, so the third passage still fits in 200 characters
    ctx = [("a.md", (100, 200)), ("a.md", (100, 200)), ("a.md", (200, 300))]
    assert context_figures(ctx, rel, 200) == {"R@200": 1.0, "all@200": 1.0, "any@200": 1.0, "cov@200": 1.0}
    assert read_context(ctx, 200).passages == ctx
    assert read_context(ctx, 200).read == {"a.md": [(100, 200), (200, 300)]}
    # once the budget is spent nothing more is reached, not even a free repeat
    assert read_context(ctx + [("a.md", (100, 150))], 200).passages == ctx
    # a passage whose new part is cut keeps its already-read head
    assert read_context([("a.md", (0, 100)), ("a.md", (50, 300))], 150).passages == [
        ("a.md", (0, 100)), ("a.md", (50, 150))]


def test_any_without_a_relevant_passage_and_best_occurrence() -> None:
    # two long passages each hold 45 characters of a 100-character item: neither is relevant
    # (45 < half of 100), yet 90 of its characters are read
    rel = _items(("a.md", ((100, 200),)))
    ctx = [("a.md", (0, 145)), ("a.md", (155, 400))]
    assert context_figures(ctx, rel, 8000) == {"R@8k": 0.0, "all@8k": 0.0, "any@8k": 1.0, "cov@8k": 0.9}
    # an item found verbatim twice counts by its best occurrence, once
    twice = _items(("a.md", ((0, 100), (500, 600))), ("b.md", ((0, 100),)))
    got = context_figures([("a.md", (500, 600)), ("a.md", (0, 100))], twice, 4000)
    assert got == {"R@4k": 0.5, "all@4k": 0.0, "any@4k": 1.0, "cov@4k": 0.5}
    assert context_figures([], twice, 2000) == {"R@2k": 0.0, "all@2k": 0.0, "any@2k": 0.0, "cov@2k": 0.0}


def test_context_recall_counts_in_scope_items_only() -> None:
    t = _table()
    rel = question_relevance(t, [("a.md", [(120, 180)]), ("b.md", [(0, 30)])], scope=["a.md"])
    assert rel.evidence_spans == (("a.md", ((120, 180),)),)
    assert context_figures([("a.md", (100, 200))], rel, 2000)["R@2k"] == 1.0


@pytest.mark.parametrize("budget", [50, 120, 250, 2000])
def test_cov_of_the_context_walk_equals_coverage_at_budget(budget: int) -> None:
    rel = _items(("a.md", ((100, 300),)), ("b.md", ((40, 90), (300, 350))))
    ranked = [("a.md", (0, 200)), ("b.md", (280, 330)), ("a.md", (150, 400)), ("b.md", (0, 100))]
    key = f"cov@{budget_name(budget)}"
    assert context_figures(ranked, rel, budget)[key] == pytest.approx(coverage_at_budget(ranked, rel, budget))


# --------------------------------------------------------------------------- slices

def _slice_table() -> SpanTable:
    chunks = [("a.md", 0, 200), ("a.md", 210, 400), ("b.md", 0, 200), ("c.md", 0, 3001), ("c.md", 3010, 6010)]
    leaves = [("A1", "a.md", 0, 200), ("A2", "a.md", 210, 400), ("B1", "b.md", 0, 200),
              ("C1", "c.md", 0, 3001), ("C2", "c.md", 3010, 6010)]  # C1: 3,001 characters; C2: 3,000
    return SpanTable.build(chunks, leaves)


@pytest.mark.parametrize("evidence,expected", [
    ([("a.md", [(10, 50)])], {"all", "one-leaf"}),
    ([("a.md", [(10, 50)]), ("a.md", [(60, 90)])], {"all", "one-leaf"}),          # two items, one leaf
    ([("a.md", [(150, 300)])], {"all", "multi-leaf"}),                            # one item across two leaves
    ([("a.md", [(10, 50)]), ("a.md", [(220, 260)])], {"all", "multi-leaf"}),
    ([("a.md", [(10, 50)]), ("b.md", [(10, 50)])], {"all", "multi-leaf", "multi-doc"}),
    ([("a.md", [(10, 50), (220, 260)])], {"all", "multi-leaf"}),                  # one text, two occurrences
    ([("c.md", [(10, 50)])], {"all", "one-leaf", "long-leaf"}),                   # 3,001 > 3,000
    ([("c.md", [(3020, 3050)])], {"all", "one-leaf"}),                            # exactly 3,000: not long
    ([("a.md", [(200, 210)])], {"all"}),                                          # a heading: in no leaf
])
def test_question_slices(evidence, expected) -> None:
    t = _slice_table()
    assert question_slices(question_relevance(t, evidence), t) == expected


def test_relevance_keeps_gold_leaves_per_item() -> None:
    t = _slice_table()
    rel = question_relevance(t, [("a.md", [(150, 300)]), ("b.md", [(10, 50)])], scope=["a.md"])
    assert rel.item_leaves == (("a.md", frozenset({"A1", "A2"})), ("b.md", frozenset({"B1"})))
    old = Relevance(per_evidence=(), relevant=frozenset(), gold_leaves=frozenset())  # defaults still work
    assert old.item_leaves == () and question_slices(old, t) == {"all"}


# --------------------------------------------------------------------------- bootstrap

def test_column_bootstrap_equals_paired_bootstrap_on_the_same_seed() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random(60), rng.random(60)
    one = paired_bootstrap(a, b, resamples=2500, seed=9)
    (col,) = paired_bootstrap_columns(a[:, None], b[:, None], resamples=2500, seed=9)
    for f in ("n", "resamples", "mean_a", "mean_b", "diff", "low", "high", "rel", "rel_low", "rel_high"):
        assert getattr(col, f) == pytest.approx(getattr(one, f), abs=1e-12), f
    c = rng.random(60)
    cols = paired_bootstrap_columns(np.stack([a, c], 1), np.stack([b, b], 1), resamples=2500, seed=9)
    assert cols[0] == col  # adding a column changes nothing for the others: the draws are shared
    assert cols[1].low == pytest.approx(paired_bootstrap(c, b, resamples=2500, seed=9).low, abs=1e-12)
    assert paired_bootstrap_columns(np.stack([a, c], 1), np.stack([b, b], 1), resamples=2500, seed=9) == cols


def test_resampled_means_match_a_naive_loop_and_ignore_the_block_size() -> None:
    x = np.array([[1.0, 0.0], [0.0, 0.5], [0.5, 0.5], [0.2, 1.0]])
    rng = np.random.default_rng(3)
    naive = np.array([x[rng.integers(0, 4, size=4)].mean(axis=0) for _ in range(50)])
    np.testing.assert_allclose(resampled_means(x, 50, seed=3, block=1), naive)
    np.testing.assert_allclose(resampled_means(x, 50, seed=3, block=7), naive)
    with pytest.raises(ValueError):
        resampled_means(np.array([[np.nan]]), 10)
    with pytest.raises(ValueError):
        resampled_means(np.zeros((0, 2)), 10)


def test_bootstrap_constant_shift_has_a_degenerate_interval() -> None:
    b = np.linspace(0.1, 0.9, 40)
    ci = paired_bootstrap(b + 0.1, b, resamples=2000, seed=1)
    assert ci.diff == pytest.approx(0.1)
    assert ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)
    assert ci.excludes_zero
    assert ci.rel == pytest.approx(0.1 / 0.5)


def test_bootstrap_identical_arms() -> None:
    x = np.random.default_rng(0).random(30)
    ci = paired_bootstrap(x, x, resamples=500, seed=0)
    assert (ci.diff, ci.low, ci.high, ci.rel) == (0.0, 0.0, 0.0, 0.0)
    assert not ci.excludes_zero


def test_bootstrap_is_paired_and_seeded() -> None:
    rng = np.random.default_rng(7)
    base = rng.random(200)
    noisy = base + rng.normal(0, 0.05, 200) + 0.02  # small real gain, large between-question spread
    ci = paired_bootstrap(noisy, base, resamples=4000, seed=3)
    # paired: the spread of `base` cancels, so a 0.02 gain is resolved
    assert ci.low > 0 and ci.high < 0.05
    assert ci.low < ci.diff < ci.high
    assert paired_bootstrap(noisy, base, resamples=4000, seed=3) == ci
    assert paired_bootstrap(noisy, base, resamples=4000, seed=3, block=17) == ci  # block size is invisible
    assert paired_bootstrap(noisy, base, resamples=4000, seed=4) != ci


def test_bootstrap_matches_a_naive_loop() -> None:
    a = np.array([1.0, 0.0, 0.5, 0.2, 0.9])
    b = np.array([0.5, 0.5, 0.5, 0.1, 0.3])
    rng = np.random.default_rng(11)
    diffs = []
    for _ in range(300):
        idx = rng.integers(0, 5, size=5)
        diffs.append(a[idx].mean() - b[idx].mean())
    ci = paired_bootstrap(a, b, resamples=300, seed=11, block=1)
    assert ci.low == pytest.approx(np.percentile(diffs, 2.5))
    assert ci.high == pytest.approx(np.percentile(diffs, 97.5))


def test_bootstrap_baseline_zero_has_no_relative_figure() -> None:
    ci = paired_bootstrap([1.0, 0.0], [0.0, 0.0], resamples=100, seed=0)
    assert ci.rel is None and ci.rel_low is None
    with pytest.raises(ValueError):
        paired_bootstrap([], [], resamples=10)


# --------------------------------------------------------------------------- dataset

def _write_set(root: Path, docs: dict[str, bytes], lines: list[object]) -> Path:
    for rel, data in docs.items():
        p = root / "docs" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "qa.jsonl").write_text(
        "\n".join(l if isinstance(l, str) else json.dumps(l, ensure_ascii=False) for l in lines) + "\n",
        encoding="utf-8")
    return root


def test_evidence_spans_are_in_the_normalised_text(tmp_path: Path) -> None:
    raw = "\ufeff# T\r\n\r\nFirst para.\r\nsecond line.\r\n\r\nOther para.\r\n".encode("utf-8")
    root = _write_set(tmp_path, {"d.md": raw}, [
        {"id": "q1", "query": "x?", "evidence": [{"doc": "d.md", "text": "First para.\r\nsecond line."}]},
        {"id": "q2", "query": "y?", "evidence": [{"doc": "d.md", "text": "not in the doc"},
                                                 {"doc": "d.md", "text": "Other para."}]},
        {"id": "q3", "query": "z?", "evidence": [{"doc": "missing.md", "text": "First"}]},
    ])
    s = load_eval_set(root)
    text = s.documents[0].text
    (span,) = s.questions[0].evidence[0].spans
    assert text[span[0]:span[1]] == "First para.\nsecond line."
    assert span[0] == text.index("First")  # offsets after BOM and CRLF normalisation
    assert [q.id for q in s.questions] == ["q1", "q2"]
    assert len(s.questions[1].evidence) == 1
    assert s.evidence_items == 4 and s.missing_evidence == 2
    assert s.no_evidence_questions == ["q3"]
    assert "2 not found verbatim" in s.summary_line()


def test_locate_evidence_finds_every_occurrence() -> None:
    assert locate_evidence("ab ab ab", "ab") == ((0, 2), (3, 5), (6, 8))
    assert locate_evidence("x\nfoo\n", " foo \r\n") == ((2, 5),)  # trailing whitespace dropped on retry
    assert locate_evidence("abc", "zzz") == ()


@pytest.mark.parametrize("line,needle", [
    ("{not json", "line 2: not valid JSON"),
    ('["a"]', "line 2: not a JSON object"),
    ({"query": "q", "evidence": []}, "line 2: field 'id' is missing"),
    ({"id": "b", "query": "  ", "evidence": []}, "field 'query' must be a non-empty string"),
    ({"id": "b", "query": "q", "evidence": "x"}, "field 'evidence' must be a list"),
    ({"id": "b", "query": "q", "evidence": [{"doc": "d.md"}]}, "evidence item 1"),
    ({"id": "b", "query": "q", "scope": "d.md", "evidence": []}, "field 'scope'"),
    ({"id": "b", "query": "q", "scope": ["nope.md"], "evidence": []}, "scope document 'nope.md'"),
    ({"id": "a", "query": "q", "evidence": []}, "duplicate id 'a' (first on line 1)"),
    ({"id": "b", "query": "q", "evidence": [], "answers": "x"}, "field 'answers'"),
])
def test_bad_qa_lines_are_one_line_errors(tmp_path: Path, line, needle: str) -> None:
    root = _write_set(tmp_path, {"d.md": b"# T\n\nSome text here.\n"},
                      [{"id": "a", "query": "q", "evidence": [{"doc": "d.md", "text": "Some text"}]}, line])
    with pytest.raises(InputError) as exc:
        load_eval_set(root)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg and msg.startswith("qa.jsonl line ")


def test_bad_set_directories(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        load_eval_set(tmp_path / "nope")
    (tmp_path / "s").mkdir()
    with pytest.raises(InputError, match="no docs/"):
        load_eval_set(tmp_path / "s")
    root = _write_set(tmp_path / "t", {"d.md": b"# T\n\ntext\n"}, [])
    (root / "qa.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="has no questions"):
        load_eval_set(root)


def test_sample_is_reproducible_nested_and_in_file_order(tmp_path: Path) -> None:
    lines = [{"id": f"q{i}", "query": f"question {i}", "evidence": [{"doc": "d.md", "text": "text"}]}
             for i in range(50)]
    s = load_eval_set(_write_set(tmp_path, {"d.md": b"# T\n\nsome text\n"}, lines))
    a = sample_questions(s.questions, 10, seed=5)
    assert [q.id for q in a] == [q.id for q in sample_questions(s.questions, 10, seed=5)]
    assert [q.line for q in a] == sorted(q.line for q in a)
    assert {q.id for q in a} <= {q.id for q in sample_questions(s.questions, 20, seed=5)}
    assert {q.id for q in a} != {q.id for q in sample_questions(s.questions, 10, seed=6)}
    assert len(sample_questions(s.questions, 500, seed=5)) == 50
    with pytest.raises(InputError):
        sample_questions(s.questions, 0, seed=5)
