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
    out = order_union(paper_index, Query.build(query, emb), cands, located,
                      Config(union_model="blend", leaf_prior_weight=0.9))
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
    out = order_union(paper_index, Query.build(query, emb), cands, located,
                      Config(union_model="blend", leaf_prior_weight=0.0))
    assert out[0].chunk.chunk_id == target.chunk_id
    assert order_union(paper_index, Query.build(query, emb), [], located, Config()) == []


def _epochs_setup(index):
    """A question whose answer lies outside the one located leaf, and the leaf that holds it."""
    from retrieval.hybrid_retriever import flat_scores, rank_scored

    emb = make_embedder("hash", Config())
    q = Query.build("How many epochs was the model trained for?", emb)
    abstract = next(n.node_id for n in index.leaves if n.heading == "Abstract")
    best = rank_scored(index, flat_scores(index, q, Config()), 1, Config(), q.text, "flat")[0]
    assert best.chunk.source_node_id != abstract and "50 epochs" in best.chunk.text
    return emb, q, abstract, best.chunk.source_node_id


def test_the_flat_rankings_best_chunks_join_the_union_with_the_locators_belief(paper_index) -> None:
    """A leaf the locator ranked just below the located ones is not a zero prior: its chunks that the
    flat ranking finds compete with the located leaves' chunks on that belief."""
    from retrieval.hybrid_retriever import retrieve

    emb, q, abstract, holder = _epochs_setup(paper_index)
    located = [LocatedNode(abstract, q.text, score=0.8)]
    beliefs = [LocatedNode(abstract, q.text, score=0.8), LocatedNode(holder, q.text, score=0.6)]
    cfg = Config(candidate_order="union", union_flat_top_k=5, union_model="blend")
    off = retrieve(paper_index, emb, q, located, cfg.replace(union_flat_top_k=0), beliefs=beliefs)
    assert all(rc.source == "tree" for rc in off)
    on = retrieve(paper_index, emb, q, located, cfg, beliefs=beliefs)
    net = [rc for rc in on if rc.source == "net" and "50 epochs" in rc.chunk.text]
    assert net and net[0].retrieval_detail["leaf_prior"] == 0.75  # 0.6 / 0.8, the belief scaled by the best
    unbelieved = retrieve(paper_index, emb, q, located, cfg, beliefs=located)
    assert [rc.retrieval_detail["leaf_prior"] for rc in unbelieved if rc.chunk.source_node_id == holder] \
        and all(rc.retrieval_detail["leaf_prior"] == 0.0 for rc in unbelieved if rc.chunk.source_node_id == holder)
    # the belief lifts the answering chunk's score by the prior's share of it
    score0 = next(rc.score for rc in unbelieved if rc.chunk.chunk_id == net[0].chunk.chunk_id)
    assert net[0].score == pytest.approx(score0 + cfg.leaf_prior_weight * 0.75, abs=1e-6)


def test_an_unscored_located_list_keeps_rank_priors_and_ignores_the_beliefs(paper_index) -> None:
    """An LLM's located leaves have ranks, not scores: mixing in the hybrid candidates' scores
    would put two scales in one prior, so the candidates outside its list get none."""
    from retrieval.hybrid_retriever import retrieve

    emb, q, abstract, holder = _epochs_setup(paper_index)
    located = [LocatedNode(abstract, q.text)]
    beliefs = [LocatedNode(holder, q.text, score=0.6)]
    out = retrieve(paper_index, emb, q, located, Config(candidate_order="union", union_flat_top_k=5),
                   beliefs=beliefs)
    assert {rc.retrieval_detail["leaf_prior"] for rc in out if rc.chunk.source_node_id == abstract} == {1.0}
    assert all(rc.retrieval_detail["leaf_prior"] == 0.0 for rc in out if rc.chunk.source_node_id == holder)


def test_the_pools_flat_continuation_fuses_as_collection_fusion_says(paper_index) -> None:
    from retrieval.hybrid_retriever import flat_scores, rank_scored, with_flat_tail

    emb, q, _, _ = _epochs_setup(paper_index)
    for fusion in ("rrf", "weighted"):
        cfg = Config(collection_fusion=fusion)
        tail = with_flat_tail([], paper_index, q, cfg, None, 8)
        want = rank_scored(paper_index, flat_scores(paper_index, q, cfg), 8, Config(fusion=fusion), q.text, "net")
        assert [h.row for h in tail] == [h.row for h in want] and all(h.source == "net" for h in tail)
    same = with_flat_tail([], paper_index, q, Config(collection_fusion="same", fusion="rrf"), None, 8)
    assert [h.row for h in same] == [h.row for h in with_flat_tail([], paper_index, q, Config(collection_fusion="rrf"), None, 8)]


def test_the_pipeline_hands_the_locators_ranked_candidates_to_the_union(paper_index) -> None:
    from pipeline import Backends, run_retrieval

    emb = make_embedder("hash", Config())
    cfg = Config().replace(candidate_order="union", locator="hybrid", hybrid_top_leaves=1, union_flat_top_k=10,
                 embedder="hash")
    r = run_retrieval("How many epochs was the model trained for?", paper_index, cfg, Backends(emb, None, None))
    located = {n.node_id for n in r.located.nodes}
    ranked = {n.node_id: n.score for n in r.located.candidates}
    outside = [h for h in r.pool if h.source == "net" and h.chunk.source_node_id in ranked.keys() - located
               and "leaf_prior" in h.retrieval_detail]
    assert outside and all(h.retrieval_detail["leaf_prior"] > 0 for h in outside)


def test_the_union_fuses_by_rank_on_a_unit_scale_as_collection_fusion_says() -> None:
    """Candidates of several statutes carry BM25 scores of different documents' statistics: one huge
    score must not decide by scale alone. Rank fusion is scaled so a chunk first on both signals
    scores 1 (the leaf prior's weight keeps its meaning); ``same`` is the config's own fusion."""
    import numpy as np

    from retrieval.hybrid_retriever import union_fusion
    from retrieval.scoring import fuse

    dense = np.array([0.91, 0.90, 0.60, 0.50])
    lexical = np.array([9.0, 8.0, 400.0, 0.0])  # the third from a document whose BM25 runs high
    by_rank = union_fusion(dense, lexical, Config(collection_fusion="rrf"))
    assert np.all((by_rank > 0) & (by_rank < 1)) and list(np.argsort(-by_rank)) == [0, 2, 1, 3]
    top = union_fusion(dense, np.array([500.0, 8.0, 400.0, 0.0]), Config(collection_fusion="rrf"))
    assert top[0] == pytest.approx(1.0) and top[3] == pytest.approx(61 / 2 / 64)  # no BM25: dense rank only
    by_scale = union_fusion(dense, lexical, Config(collection_fusion="same"))
    assert np.argmax(by_scale) == 2  # min-max over the union: the outlier's BM25 decides
    assert np.allclose(by_scale, fuse(dense, lexical, Config()))
    assert np.allclose(union_fusion(dense, lexical, Config(collection_fusion="weighted", fusion="rrf")), by_scale)


def test_the_union_ordering_uses_the_collection_fusion(paper_index) -> None:
    """The same candidates ordered with rank fusion and with the config's min-max fusion get the
    scores each fusion gives (prior weight 0: the fused score alone)."""
    import numpy as np

    from retrieval.hybrid_retriever import union_fusion
    from retrieval.scoring import score_params

    emb = make_embedder("hash", Config())
    q = Query.build("How many epochs was the model trained for?", emb)
    rows = list(range(min(12, len(paper_index.chunks))))
    cands = [retrieved_chunk(paper_index, r, 0.5, 0.5, 0.5, "q", "tree") for r in rows]
    for fusion in ("rrf", "same"):
        cfg = Config(collection_fusion=fusion, leaf_prior_weight=0.0, union_model="blend")
        out = order_union(paper_index, q, cands, [], cfg)
        scored = paper_index.search.rescore(q, np.array(rows), "document", score_params(cfg))
        want = dict(zip(rows, union_fusion(scored.dense, scored.lexical, cfg)))
        assert [pytest.approx(want[h.row], abs=1e-6) for h in out] == [h.score for h in out]
