"""The llm-rerank locator: the LLM re-orders the hybrid locator's top leaves, validated and with a fallback."""
from __future__ import annotations

import json

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from retrieval.leaf_rerank_locator import RERANK_CANDIDATES, llm_rerank_locate, top_candidates
from retrieval.node_locator import hybrid_locate
from retrieval.query import Query
from utils.errors import BackendError
from utils.llm.mock import MockLLM

Q = "How many epochs was the model trained for?"


@pytest.fixture()
def q():
    return Query.build(Q, make_embedder("hash", Config()))


def test_prompt_shows_only_the_candidates_by_heading_and_summary(paper_index, q) -> None:
    cands = top_candidates(paper_index, q, Config(), None)
    assert 0 < len(cands) <= RERANK_CANDIDATES
    pick = cands[-1].node_id  # the hybrid locator's weakest candidate
    llm = MockLLM([json.dumps({"thinking": "t", "results": [{"node_id": pick, "sub_query": "epochs"}]})])
    res = llm_rerank_locate(paper_index, llm, q, Config())
    assert res.locator == "llm-rerank" and [n.node_id for n in res.nodes] == [pick]
    assert res.nodes[0].sub_query == "epochs" and res.nodes[0].score is None and res.fallbacks == []
    req = llm.requests[0]
    assert req.json_mode and f"用户问题: {Q}" in req.prompt
    shown = [c.node_id for c in cands]
    for c in cands:
        assert f"[{c.node_id}] {c.heading_path}" in req.prompt
    # no leaf outside the candidates is shown
    others = [n for n in paper_index.leaves if n.node_id not in shown]
    assert all(f"[{n.node_id}]" not in req.prompt for n in others)
    assert res.toc_nodes == len(cands)


def test_model_order_is_kept_and_ids_outside_candidates_are_dropped(paper_index, q) -> None:
    cands = top_candidates(paper_index, q, Config(), None)
    outside = next(n.node_id for n in paper_index.leaves if n.node_id not in {c.node_id for c in cands}) \
        if len(cands) < len(paper_index.leaves) else None
    ids = [cands[2].node_id, cands[0].node_id] + ([outside] if outside else [])
    llm = MockLLM([json.dumps({"results": [{"node_id": i} for i in ids]})])
    res = llm_rerank_locate(paper_index, llm, q, Config())
    assert [n.node_id for n in res.nodes] == ids[:2]
    if outside:
        assert res.fallbacks and "outside the candidates" in res.fallbacks[0].reason


@pytest.mark.parametrize("reply", ["no json", '{"results": []}', BackendError("openai: timed out")])
def test_failure_falls_back_to_the_hybrid_order_and_says_so(paper_index, q, reply) -> None:
    res = llm_rerank_locate(paper_index, MockLLM([reply]), q, Config())
    assert res.locator == "hybrid"
    assert [n.node_id for n in res.nodes] == [n.node_id for n in hybrid_locate(paper_index, q, Config()).nodes]
    assert res.fallbacks[0].used == "hybrid locator" and "re-ranking failed" in res.fallbacks[0].reason
