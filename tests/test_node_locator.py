"""Step 1: LLM output repair, fallbacks, the no-LLM locators and the TOC budget."""
from __future__ import annotations

import json

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from retrieval.locate_prompts import NODE_LOCATE_PROMPT
from retrieval.node_locator import (hybrid_locate,
                                    keyword_locate, llm_locate, parse_locator_response,
                                    toc_for_prompt)
from retrieval.query import Query
from tree_builder.visualizer import serialize_tree
from utils.errors import BackendError, InputError
from utils.llm.replies import extract_json_object
from utils.llm.mock import MockLLM
from utils.tokenizer import estimate_tokens


def ids_by_heading(index) -> dict[str, str]:
    return {n.heading: n.node_id for n in index.root.iter_preorder() if n.kind != "root"}


def test_prompt_is_the_spec_prompt() -> None:
    assert NODE_LOCATE_PROMPT.startswith("你是一个文档检索专家。给定用户问题和文档的树状结构，请找出最可能包含答案的叶子节点。")
    assert '"results": [' in NODE_LOCATE_PROMPT and "{serialized_tree}" in NODE_LOCATE_PROMPT


def _case(index, text: str) -> tuple[list[str], list[str]]:
    nodes, _, problems = parse_locator_response(text, index, "q")
    return [n.node_id for n in nodes], problems


MALFORMED = [
    # (label, response, expected leaf headings (in order))
    ("plain", '{"thinking":"t","results":[{"node_id":"0010","sub_query":"router"}]}', ["3.2.2 Router Design"]),
    ("code fence", 'Sure!\n```json\n{"results":[{"node_id":"0010","sub_query":"x"}]}\n```', ["3.2.2 Router Design"]),
    ("prose around", 'I think {"results":[{"node_id":"0014"}]} is right.', ["4.2 Performance"]),
    ("integer id", '{"results":[{"node_id":10,"sub_query":"x"}]}', ["3.2.2 Router Design"]),
    ("unpadded id", '{"results":[{"node_id":"9","sub_query":"x"}]}', ["3.2.1 Encoder Design"]),
    ("bracketed id", '{"results":[{"node_id":"[0011]"}]}', ["3.3 Training Procedure"]),
    ("angle-bracketed id", '{"results":[{"node_id":"<0011>"}]}', ["3.3 Training Procedure"]),
    ("placeholder copied", '{"results":[{"node_id":"<叶子节点ID>"}]}', []),
    ("heading title", '{"results":[{"node_id":"4.3 Ablation Study"}]}', ["4.3 Ablation Study"]),
    ("heading path", '{"results":[{"node_id":"4 Experiments > 4.1 Dataset"}]}', ["4.1 Dataset"]),
    ("duplicates", '{"results":[{"node_id":"0010"},{"node_id":"10"},{"node_id":"0010"}]}', ["3.2.2 Router Design"]),
    ("unknown id dropped", '{"results":[{"node_id":"9999"},{"node_id":"0014"}]}', ["4.2 Performance"]),
    ("small parent expanded", '{"results":[{"node_id":"0008"}]}', ["3.2.1 Encoder Design", "3.2.2 Router Design"]),
    ("too many", json.dumps({"results": [{"node_id": f"{i:04d}"} for i in (1, 3, 4, 5, 7, 9, 10)]}),
     ["Abstract", "1.1 Background", "1.2 Motivation", "2 Related Work", "3.1 Problem Formulation"]),
    ("no json", "I cannot help with that.", []),
    ("results not a list", '{"results":"0010"}', []),
    ("trailing garbage", '{"results":[{"node_id":"0016"}]} }}}', ["5 Conclusion"]),
]


@pytest.mark.parametrize("label, response, expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_llm_output_table(paper_index, label: str, response: str, expected: list[str]) -> None:
    by_id = {n.node_id: n.heading for n in paper_index.root.iter_preorder()}
    got, problems = _case(paper_index, response)
    assert [by_id[i] for i in got] == expected
    if not expected:
        assert problems


def test_large_parent_is_dropped(paper_index) -> None:
    # "3 Methods" has four leaves: more than three, so it is dropped rather than expanded
    got, problems = _case(paper_index, '{"results":[{"node_id":"0006"}]}')
    assert got == [] and any("dropped" in p for p in problems)


def test_missing_sub_query_uses_the_query(paper_index) -> None:
    nodes, _, _ = parse_locator_response('{"results":[{"node_id":"0010"}]}', paper_index, "the query")
    assert nodes[0].sub_query == "the query"


def test_extract_json_object_first_valid() -> None:
    assert extract_json_object('x {bad} y {"a": 1}') == {"a": 1}
    assert extract_json_object("nothing") is None


def test_llm_locate_uses_spec_prompt_and_json_mode(paper_index) -> None:
    llm = MockLLM(['{"thinking":"router question","results":[{"node_id":"0010","sub_query":"bandit"}]}'])
    res = llm_locate(paper_index, llm, Query.build("What algorithm?", make_embedder("hash", Config())), Config())
    assert res.locator == "llm" and [n.node_id for n in res.nodes] == ["0010"]
    assert res.nodes[0].sub_query == "bandit" and res.thinking == "router question"
    req = llm.requests[0]
    assert req.json_mode
    assert "用户问题: What algorithm?" in req.prompt
    assert serialize_tree(paper_index.root) in req.prompt
    assert "Encoder Design" in req.prompt and "We adopt" not in req.prompt  # summaries, not content
    assert res.fallbacks == []


@pytest.mark.parametrize("reply", ["no json at all", '{"results": []}', BackendError("openai: server error 500 after 5 attempts")])
def test_llm_failure_falls_back_to_the_no_llm_default_and_records_it(paper_index, reply) -> None:
    """The fallback is what running without an LLM gives (hybrid), never the weaker keyword match."""
    llm = MockLLM([reply])
    q = "How many epochs was the model trained for?"
    emb = make_embedder("hash", Config())
    res = llm_locate(paper_index, llm, Query.build(q, emb), Config())
    assert res.locator == "hybrid"
    assert [n.node_id for n in res.nodes] == [n.node_id for n in hybrid_locate(paper_index, Query.build(q, emb),
                                                                               Config()).nodes]
    assert res.fallbacks and res.fallbacks[0].step == "locate"
    assert "LLM locating failed" in res.fallbacks[0].reason and res.fallbacks[0].used == "hybrid locator"


def test_llm_failure_without_an_embedder_falls_back_to_keyword(paper_index) -> None:
    res = llm_locate(paper_index, MockLLM(["no json"]), Query.build("epochs", None), Config())
    assert res.locator == "keyword" and res.fallbacks[0].used == "keyword locator"


def test_repaired_output_is_recorded(paper_index) -> None:
    llm = MockLLM(['```json\n{"results":[{"node_id":10},{"node_id":"777"}]}\n```'])
    res = llm_locate(paper_index, llm, Query.build("q", make_embedder("hash", Config())), Config())
    assert [n.node_id for n in res.nodes] == ["0010"]
    assert res.fallbacks and res.fallbacks[0].used == "repaired LLM output"


def test_keyword_locator_matches_headings_and_summaries(paper_index) -> None:
    res = keyword_locate(paper_index, Query.build("training procedure epochs", None), Config())
    assert res.nodes[0].heading_path.endswith("3.3 Training Procedure")
    assert len(res.nodes) <= 3 and all(n.sub_query == "training procedure epochs" for n in res.nodes)


def test_keyword_locator_with_no_overlap_returns_nothing(paper_index) -> None:
    res = keyword_locate(paper_index, Query.build("zebra giraffe", None), Config())
    assert res.nodes == [] and "no heading" in res.thinking


def test_hybrid_locator_scores_all_leaves(paper_index) -> None:
    res = hybrid_locate(paper_index, Query.build("How many epochs was the model trained for?", make_embedder("hash", Config())),
                        Config())
    assert res.nodes[0].heading_path.endswith("3.3 Training Procedure")
    assert len(res.nodes) == Config().tuning.locator.hybrid_top_leaves


def test_toc_budget_keeps_best_branches_with_ancestors(paper_index) -> None:
    emb = make_embedder("hash", Config())
    q = Query.build("router design bandit", emb)
    full, shown_all = toc_for_prompt(paper_index, q, Config())
    assert full == serialize_tree(paper_index.root)
    budget = estimate_tokens(full) // 3
    cut, shown = toc_for_prompt(paper_index, q, Config().replace(toc_budget_tokens=budget))
    assert estimate_tokens(cut) <= budget and 0 < shown < shown_all
    assert "3.2.2 Router Design (叶子节点)" in cut
    # the ancestors of a shown leaf are shown too
    assert "[0006] 3 Methods" in cut and "[0008] 3.2 Model Architecture" in cut


def test_prompt_example_cannot_be_copied_into_a_valid_answer(paper_index) -> None:
    """A small model that echoes the prompt's example must fall back, not pass validation."""
    example = NODE_LOCATE_PROMPT[NODE_LOCATE_PROMPT.index("{{\n  \"thinking\""):].replace("{{", "{").replace("}}", "}")
    res = llm_locate(paper_index, MockLLM([example]),
                     Query.build("What algorithm does AdaRouter use?", make_embedder("hash", Config())), Config())
    assert res.locator == "hybrid" and res.fallbacks[0].step == "locate"


# --------------------------------------------------------------------------- factory

def test_factory_resolves_auto_and_rejects_unknown_names(paper_index) -> None:
    from retrieval.locators import make_locator

    assert make_locator("auto", paper_index, Config(), None).name == "hybrid"
    assert make_locator("auto", paper_index, Config(), MockLLM(["{}"])).name == "llm"
    with pytest.raises(InputError, match="unknown locator 'banana'"):
        make_locator("banana", paper_index, Config(), None)


@pytest.mark.parametrize("name", ["llm", "llm-rerank"])
def test_llm_locators_without_an_llm_take_the_no_llm_path_and_say_so(paper_index, name: str) -> None:
    from retrieval.locators import make_locator

    emb = make_embedder("hash", Config())
    q = "How many epochs was the model trained for?"
    res = make_locator(name, paper_index, Config(), None).locate(Query.build(q, emb))
    assert res.locator == "hybrid" and res.fallbacks[-1].reason == "no LLM configured"
    assert [n.node_id for n in res.nodes] == [n.node_id for n in hybrid_locate(paper_index, Query.build(q, emb),
                                                                               Config()).nodes]
    # a question without a vector (no embedder loaded): the same single decision gives the keyword match
    res = make_locator(name, paper_index, Config(), None).locate(Query.build("training procedure epochs", None))
    assert res.locator == "keyword" and res.fallbacks[-1].used == "keyword locator"


def test_scope_limits_every_locator(paper_index) -> None:
    from retrieval.locators import LOCATORS, make_locator

    emb = make_embedder("hash", Config())
    doc = paper_index.leaves[0].doc_path
    for name in LOCATORS:
        q = Query.build("router design", emb)
        res = make_locator(name, paper_index, Config(), None).locate(q, {doc})
        assert all(paper_index.nodes[n.node_id].doc_path == doc for n in res.nodes)
        assert make_locator(name, paper_index, Config(), None).locate(q, {"other.md"}).nodes == []


def _keyword_reference(index, question: str, k: int, doc_paths=None) -> list[tuple[str, float]]:
    """The spec's mock written out plainly: tokenise every leaf's heading path + summary per query."""
    import math
    from collections import Counter

    from utils.tokenizer import tokenize

    leaves = [n for n in index.leaves if doc_paths is None or n.doc_path in doc_paths]
    q = set(tokenize(question))
    docs = [set(tokenize(f"{n.heading_path} {n.summary}")) for n in leaves]
    df = Counter(t for d in docs for t in d if t in q)
    n = max(len(docs), 1)
    scored = sorted(((sum(math.log(1 + n / df[t]) for t in q & d), i) for i, d in enumerate(docs)),
                    key=lambda x: (-x[0], x[1]))
    return [(leaves[i].node_id, round(s, 4)) for s, i in scored if s > 0][:k]


@pytest.mark.parametrize("question", ["What is the encoder design?", "ablation results of the model",
                                      "dataset ticks EUR/USD", "execution cost reward", "nothing matches zzz"])
def test_keyword_locator_postings_equal_the_plain_computation(paper_index, question: str) -> None:
    from retrieval.node_locator import keyword_locate

    config = Config().replace(keyword_top_leaves=5)
    got = keyword_locate(paper_index, Query.build(question, None), config)
    assert [(n.node_id, n.score) for n in got.nodes] == _keyword_reference(paper_index, question, 5)
    doc = paper_index.leaves[0].doc_path
    got = keyword_locate(paper_index, Query.build(question, None), config, doc_paths={doc})
    assert [(n.node_id, n.score) for n in got.nodes] == _keyword_reference(paper_index, question, 5, {doc})


@pytest.mark.parametrize("case", ["whole", "subset", "equal", "equal_zero", "empty_leaves"])
def test_leaf_max_of_raw_scores_equals_max_of_normalised_rows(case: str) -> None:
    """The locator takes each leaf's maximum of the raw scores and scales only the maxima; that must
    equal scaling every row first (the plain computation), for subsets and degenerate scores too."""
    import numpy as np

    from retrieval.node_locator import _leaf_max_scaled, _leaf_max_sparse
    from utils.similarity import min_max_normalize

    rng = np.random.default_rng(7)
    counts = rng.integers(0 if case == "empty_leaves" else 1, 6, size=300)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    n = int(ptr[-1])
    starts = ptr[:-1]
    rows = np.arange(n) if case in ("whole", "empty_leaves") else np.sort(rng.choice(n, n // 3, replace=False))
    values = {"equal": np.full(len(rows), 2.5), "equal_zero": np.zeros(len(rows))}.get(
        case, rng.normal(size=len(rows))).astype(np.float32)
    full = np.zeros(n + 1, dtype=np.float32)  # the plain computation: scale every row, then max
    full[rows] = min_max_normalize(values)
    has = np.diff(ptr) > 0
    want = np.where(has, np.maximum.reduceat(full, starts), 0.0)
    got = np.where(has, _leaf_max_scaled(values, rows, n, starts), 0.0)
    np.testing.assert_allclose(got, want, atol=1e-6)
    # per scored row (the ANN's candidates): the same maxima at the leaves that own a scored row, bit for bit
    owners, best = _leaf_max_sparse(values, rows, ptr)
    sparse = np.zeros(len(starts))
    sparse[owners] = best
    np.testing.assert_array_equal(sparse, got)
    assert set(owners.tolist()) == set((np.searchsorted(ptr, rows, side="right") - 1).tolist())


def test_leaf_max_counts_a_non_finite_score_as_not_scored() -> None:
    import numpy as np

    from retrieval.node_locator import _leaf_max_scaled

    values = np.array([0.2, np.nan, 0.8, np.inf, 0.5], dtype=np.float32)
    got = _leaf_max_scaled(values, np.arange(5), 5, np.array([0, 2, 3]))  # leaves: rows 0-1, 2, 3-4
    np.testing.assert_allclose(got, [0.0, 1.0, 0.5], atol=1e-6)
    assert _leaf_max_scaled(np.array([np.nan], dtype=np.float32), np.arange(1), 1, np.array([0])).tolist() == [0.0]
    from retrieval.node_locator import _leaf_max_sparse

    owners, best = _leaf_max_sparse(values, np.arange(5), np.array([0, 2, 3, 5]))
    assert owners.tolist() == [0, 1, 2]
    np.testing.assert_allclose(best, [0.0, 1.0, 0.5], atol=1e-6)


def test_the_whole_forest_toc_total_is_summed_once_and_follows_new_tokens(paper_index) -> None:
    """The LLM locator's budget test reads the forest's TOC total, kept per ``toc_tokens`` array."""
    import numpy as np

    tree = paper_index.tree
    assert tree.toc_total() == int(tree.toc_tokens[1:].sum())
    saved = tree.toc_tokens
    try:
        tree.toc_tokens = np.full(len(tree), 3, dtype=np.int32)  # a loader setting other tokens
        assert tree.toc_total() == 3 * (len(tree) - 1)
    finally:
        tree.toc_tokens = saved
    assert tree.toc_total() == int(saved[1:].sum())
