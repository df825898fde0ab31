"""The union ordering (collections' default) and the leaf priors it blends in."""
from __future__ import annotations

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from retrieval.hybrid_retriever import leaf_priors, order_union, retrieved_chunk
from retrieval.query import Query
from retrieval.types import LocatedNode


def test_scored_locators_are_scaled_by_their_best() -> None:
    nodes = [LocatedNode("a", "q", score=0.8), LocatedNode("b", "q", score=0.4), LocatedNode("c", "q", score=-1.0)]
    assert leaf_priors(nodes) == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_an_llms_unscored_list_is_ranked_by_position() -> None:
    nodes = [LocatedNode("x", "q"), LocatedNode("y", "q"), LocatedNode("z", "q"), LocatedNode("w", "q")]
    assert leaf_priors(nodes) == {"x": 1.0, "y": 0.75, "z": 0.5, "w": 0.25}
    assert leaf_priors([]) == {}


def _two_leaf_candidates(index):
    """One chunk from each of two leaves, with the same stored fused score."""
    leaves = [n for n in index.leaves if index.leaf_rows.get(n.node_id)][:2]
    rows = [index.leaf_rows[n.node_id][0] for n in leaves]
    return leaves, [retrieved_chunk(index, r, 0.5, 0.5, 0.5, "q", "tree") for r in rows]


@pytest.mark.parametrize("first", [0, 1])
def test_the_located_leaf_with_the_stronger_belief_wins_a_tie(paper_index, first: int) -> None:
    emb = make_embedder("hash", Config())
    leaves, cands = _two_leaf_candidates(paper_index)
    located = [LocatedNode(leaves[first].node_id, "q", score=1.0),
               LocatedNode(leaves[1 - first].node_id, "q", score=0.1)]
    query = "zzzz unrelated words"  # neither chunk matches: the prior decides
    out = order_union(paper_index, Query.build(query, emb), cands, located, Config(leaf_prior_weight=0.9))
    assert out[0].chunk.source_node_id == leaves[first].node_id
    assert out[0].retrieval_detail["leaf_prior"] == 1.0 and out[1].retrieval_detail["leaf_prior"] == 0.1
    assert out[0].score > out[1].score and "union_score" in out[0].retrieval_detail


def test_without_prior_weight_the_question_decides(paper_index) -> None:
    """Candidates are re-scored against the original question on one scale, not by their stored
    per-leaf fused score (which min-max makes ~1.0 for every leaf's best chunk)."""
    emb = make_embedder("hash", Config())
    leaves, cands = _two_leaf_candidates(paper_index)
    target = cands[1].chunk
    query = " ".join(target.text.split()[:12])  # the second leaf's own words
    located = [LocatedNode(leaves[0].node_id, "q", score=1.0), LocatedNode(leaves[1].node_id, "q", score=0.1)]
    out = order_union(paper_index, Query.build(query, emb), cands, located, Config(leaf_prior_weight=0.0))
    assert out[0].chunk.chunk_id == target.chunk_id
    assert order_union(paper_index, Query.build(query, emb), [], located, Config()) == []
