"""The union ordering (a collection's) and the leaf priors its candidates carry."""
from __future__ import annotations

import numpy as np
import pytest

from config import Config
from evaluation.variants import BlendRanker
from indexing.embedders.factory import make_embedder
from retrieval.candidates import rank_scored
from retrieval.ordering import Ask, UnionOrdering
from retrieval.query import Query
from retrieval.ranking_params import Fusion
from retrieval.rankers import leaf_priors
from retrieval.scoring import flat_scores, fuse, unit_scale
from retrieval.types import LocatedNode


def test_scored_locators_are_scaled_by_their_best() -> None:
    nodes = [LocatedNode("a", "q", score=0.8), LocatedNode("b", "q", score=0.4), LocatedNode("c", "q", score=-1.0)]
    assert leaf_priors(nodes) == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_an_llms_unscored_list_is_ranked_by_position() -> None:
    nodes = [LocatedNode("x", "q"), LocatedNode("y", "q"), LocatedNode("z", "q"), LocatedNode("w", "q")]
    assert leaf_priors(nodes) == {"x": 1.0, "y": 0.75, "z": 0.5, "w": 0.25}
    assert leaf_priors([]) == {}


def _two_leaves(index):
    return [n for n in index.leaves if index.leaf_rows.get(n.node_id)][:2]


LEAVES_ONLY = Config().replace(**{"union_flat_top_k": 0})


@pytest.mark.parametrize("first", [0, 1])
def test_the_located_leaf_with_the_stronger_belief_wins(paper_index, first: int) -> None:
    emb = make_embedder("hash", Config())
    leaves = _two_leaves(paper_index)
    located = [LocatedNode(leaves[first].node_id, "q", score=1.0),
               LocatedNode(leaves[1 - first].node_id, "q", score=0.1)]
    q = Query.build("zzzz unrelated words", emb)  # no chunk matches: the prior decides
    out = UnionOrdering(BlendRanker(0.9)).order(paper_index, emb, LEAVES_ONLY, Ask(q, located))
    assert out[0].chunk.source_node_id == leaves[first].node_id
    assert out[0].retrieval_detail["leaf_prior"] == 1.0
    assert {h.retrieval_detail["leaf_prior"] for h in out} == {1.0, 0.1}
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)
    assert all("union_score" in h.retrieval_detail for h in out)


def test_without_prior_weight_the_question_decides(paper_index) -> None:
    """Candidates are re-scored against the question on one scale, not by their per-leaf fused score
    (which min-max makes ~1.0 for every leaf's best chunk)."""
    emb = make_embedder("hash", Config())
    leaves = _two_leaves(paper_index)
    target = paper_index.chunks[paper_index.leaf_rows[leaves[1].node_id][0]]
    q = Query.build(" ".join(target.text.split()[:12]), emb)  # the second leaf's own words
    located = [LocatedNode(leaves[0].node_id, "q", score=1.0), LocatedNode(leaves[1].node_id, "q", score=0.1)]
    out = UnionOrdering(BlendRanker(0.0)).order(paper_index, emb, LEAVES_ONLY, Ask(q, located))
    assert out[0].chunk.source_node_id == leaves[1].node_id
    assert UnionOrdering().order(paper_index, emb, LEAVES_ONLY, Ask(q, [])) == []


def _epochs_setup(index):
    """A question whose answer lies outside the one located leaf, and the leaf that holds it."""
    emb = make_embedder("hash", Config())
    q = Query.build("How many epochs was the model trained for?", emb)
    abstract = next(n.node_id for n in index.leaves if n.heading == "Abstract")
    best = rank_scored(index, flat_scores(index, q, Config()), 1, Config().tuning.ranking.fused, q.text, "flat")[0]
    assert best.chunk.source_node_id != abstract and "50 epochs" in best.chunk.text
    return emb, q, abstract, best.chunk.source_node_id


def test_the_flat_rankings_best_chunks_join_the_union_with_the_locators_belief(paper_index) -> None:
    """A leaf the locator ranked just below the located ones is not a zero prior: its chunks that the
    flat ranking finds compete with the located leaves' chunks on that belief."""
    emb, q, abstract, holder = _epochs_setup(paper_index)
    located = [LocatedNode(abstract, q.text, score=0.8)]
    beliefs = [LocatedNode(abstract, q.text, score=0.8), LocatedNode(holder, q.text, score=0.6)]
    blend = UnionOrdering(BlendRanker())
    cfg = Config().replace(**{"union_flat_top_k": 5})
    off = blend.order(paper_index, emb, LEAVES_ONLY, Ask(q, located, beliefs=beliefs))
    assert off and all(rc.source == "tree" for rc in off)
    on = blend.order(paper_index, emb, cfg, Ask(q, located, beliefs=beliefs))
    net = [rc for rc in on if rc.source == "net" and "50 epochs" in rc.chunk.text]
    assert net and net[0].retrieval_detail["leaf_prior"] == 0.75  # 0.6 / 0.8, the belief scaled by the best
    unbelieved = blend.order(paper_index, emb, cfg, Ask(q, located, beliefs=located))
    held = [rc for rc in unbelieved if rc.chunk.source_node_id == holder]
    assert held and all(rc.retrieval_detail["leaf_prior"] == 0.0 for rc in held)
    # the belief lifts the answering chunk by the prior's weight times the belief, nothing else
    score0 = next(rc.score for rc in unbelieved if rc.chunk.chunk_id == net[0].chunk.chunk_id)
    assert net[0].score == pytest.approx(score0 + blend.ranker.weight * 0.75, abs=1e-6)


def test_an_unscored_located_list_keeps_rank_priors_and_ignores_the_beliefs(paper_index) -> None:
    """An LLM's located leaves have ranks, not scores: mixing in the hybrid candidates' scores
    would put two scales in one prior, so the candidates outside its list get none."""
    emb, q, abstract, holder = _epochs_setup(paper_index)
    cfg = Config().replace(**{"union_flat_top_k": 5})
    out = UnionOrdering().order(paper_index, emb, cfg,
                                Ask(q, [LocatedNode(abstract, q.text)], beliefs=[LocatedNode(holder, q.text, score=0.6)]))
    assert {rc.retrieval_detail["leaf_prior"] for rc in out if rc.chunk.source_node_id == abstract} == {1.0}
    assert all(rc.retrieval_detail["leaf_prior"] == 0.0 for rc in out if rc.chunk.source_node_id == holder)


def test_the_pipeline_hands_the_locators_ranked_candidates_to_the_union(paper_index) -> None:
    from pipeline import Backends, run_retrieval

    emb = make_embedder("hash", Config())
    cfg = Config(locator="hybrid", embedder="hash").replace(
        hybrid_top_leaves=1, document_order="union-learned", union_flat_top_k=10)
    r = run_retrieval("How many epochs was the model trained for?", paper_index, cfg, Backends(emb, None, None))
    located = {n.node_id for n in r.located.nodes}
    ranked = {n.node_id: n.score for n in r.located.candidates}
    outside = [h for h in r.pool if h.source == "net" and h.chunk.source_node_id in ranked.keys() - located
               and "leaf_prior" in h.retrieval_detail]
    assert outside and all(h.retrieval_detail["leaf_prior"] > 0 for h in outside)


def test_a_collection_fuses_by_rank_on_a_unit_scale() -> None:
    """Candidates of several statutes carry BM25 scores of different documents' statistics: one huge
    score must not decide by scale alone. Rank fusion is scaled so a chunk first on both signals
    scores 1, whatever k is."""
    dense = np.array([0.91, 0.90, 0.60, 0.50])
    lexical = np.array([9.0, 8.0, 400.0, 0.0])  # the third from a document whose BM25 runs high
    collection = Config().tuning.ranking.collection
    by_rank = unit_scale(fuse(dense, lexical, collection), collection)
    assert np.all((by_rank > 0) & (by_rank < 1)) and list(np.argsort(-by_rank)) == [0, 2, 1, 3]
    for k in (1, 60, 1000):
        rrf = Fusion("rrf", rrf_k=k)
        top = unit_scale(fuse(dense, np.array([500.0, 8.0, 400.0, 0.0]), rrf), rrf)
        assert top[0] == pytest.approx(1.0) and np.all(top[1:] < 1.0)
        assert top[3] < top[2] < top[0]  # no BM25 at all: its dense rank alone
    by_scale = fuse(dense, lexical, Fusion("weighted"))
    assert np.argmax(by_scale) == 2  # min-max over the union: the outlier's BM25 decides
