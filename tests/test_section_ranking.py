"""Section-aware ranking: chunk representation, cov@2k, section features, the linear ranker."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from config import Config
from evaluation.metrics import Relevance, coverage_at_budget
from indexing.chunker import Chunk
from indexing.representation import chunk_representation
from retrieval.learned_ranker import load_ranker
from retrieval.ordering import Ask, SectionOrdering
from retrieval.rankers import SectionRanker
from indexing.search import Scores, bm25_kind
from retrieval.query import Query
from retrieval.section_features import ALL_FEATURES, FLAT_FEATURES, TREE_FEATURES, chunk_features
from utils.errors import InputError


def _chunk(path: str, text: str = "body text") -> Chunk:
    return Chunk("0001_chunk_00", text, "0001", path, doc_path="a.md")


def test_chunk_representation_adds_title_and_path_once() -> None:
    c = _chunk("Methods > Training")
    assert chunk_representation(c, "My Paper", "none") == "body text"
    assert chunk_representation(c, "My Paper", "headings") == "My Paper > Methods > Training\nbody text"
    # folder mode: the path already starts with the title
    c2 = _chunk("My Paper > Methods")
    assert chunk_representation(c2, "My Paper", "headings") == "My Paper > Methods\nbody text"
    assert chunk_representation(_chunk(""), "", "headings") == "body text"


def test_headings_context_is_what_bm25_sees(tmp_path: Path) -> None:
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from utils.tokenizer import tokenize

    doc = tmp_path / "d.md"
    doc.write_text("# Zebrafish\n\nThe animals were counted twice a day.\n\n# Mice\n\nThey were fed once.\n\n"
                   "# Rats\n\nThey slept all day long.\n", encoding="utf-8")
    scores = {}
    for ctx in ("none", "headings"):
        cfg = Config().replace(chunk_context=ctx)
        build_index(doc, tmp_path / ctx, cfg, make_embedder("hash", cfg))
        idx = load_index(tmp_path / ctx)
        assert idx.metadata["chunk_context"] == ctx
        assert idx.chunks[0].text == "The animals were counted twice a day."  # stored text unchanged
        scores[ctx] = float(idx.search.bm25.score_range(tokenize("zebrafish"), 0, len(idx.chunks))[0])
        assert len(idx.chunks) == 3
    assert scores["none"] == 0.0 and scores["headings"] > 0.0


def _rel(evidence: list[tuple[str, tuple[int, int]]]) -> Relevance:
    return Relevance(per_evidence=(), relevant=frozenset(), gold_leaves=frozenset(),
                     evidence_spans=tuple((d, (s,)) for d, s in evidence))


def test_cov_counts_new_characters_only_and_cuts_at_the_budget() -> None:
    rel = _rel([("a.md", (100, 300))])
    # the first chunk covers half the evidence; the second overlaps it (its repeat is free)
    ranked = [("a.md", (0, 200)), ("a.md", (150, 400))]
    assert coverage_at_budget(ranked, rel, budget=2000) == pytest.approx(1.0)
    # budget 250: 200 from the first chunk, then 50 new characters (200..250) of the second
    assert coverage_at_budget(ranked, rel, budget=250) == pytest.approx(150 / 200)
    # the same characters of another document cover nothing
    assert coverage_at_budget([("b.md", (100, 300))], rel) == 0.0


def test_cov_uses_the_best_occurrence_and_sums_items() -> None:
    rel = Relevance(per_evidence=(), relevant=frozenset(), gold_leaves=frozenset(),
                    evidence_spans=(("a.md", ((0, 100), (500, 600))), ("a.md", ((1000, 1100),))))
    assert coverage_at_budget([("a.md", (500, 550))], rel) == pytest.approx(50 / 200)
    assert coverage_at_budget([("a.md", (0, 100)), ("a.md", (1000, 1100))], rel) == pytest.approx(1.0)


def test_section_features_pool_evidence_over_the_leaf(paper_index) -> None:
    idx = paper_index
    n = len(idx.chunks)
    rows = np.arange(n, dtype=np.int64)
    dense = np.zeros(n, dtype=np.float32)
    bm25 = np.zeros(n, dtype=np.float32)
    # a leaf of several chunks, so the strong chunk has a neighbour in its leaf
    leaf_id = next(leaf.node_id for leaf in idx.leaves
                   if idx.leaf_rows[leaf.node_id][1] - idx.leaf_rows[leaf.node_id][0] > 1)
    s, e = idx.leaf_rows[leaf_id]
    outside = np.r_[0:s, e:n]
    dense[s] = 1.0  # one strong chunk in that leaf
    cfg = Config()
    no_vector = Query("q", ("q",), None)  # leaf headings score 0
    X = chunk_features(idx, no_vector, Scores(rows, dense, bm25, bm25_kind("corpus")), cfg, {leaf_id}, TREE_FEATURES)
    col = {name: X[:, i] for i, name in enumerate(TREE_FEATURES)}
    fused_best = cfg.tuning.ranking.dense_weight * 1.0
    assert np.allclose(col["leaf_max"][s:e], fused_best)  # every chunk of the leaf shares its best
    assert np.all(col["leaf_max"][outside] == 0.0)
    assert np.allclose(col["doc_max"], fused_best)  # one document
    assert np.all(col["located"][s:e] == 1.0) and np.all(col["located"][outside] == 0.0)
    assert col["neighbour"][s + 1] == pytest.approx(fused_best)  # next to the strong chunk
    k = min(3, e - s)
    assert col["leaf_top3"][s] == pytest.approx(fused_best / k)
    lay = idx.layout
    assert lay.row_leaf.shape == (n,) and lay.n_docs == 1


def test_flat_features_need_no_structure(paper_index) -> None:
    idx = paper_index
    rows = np.arange(4, dtype=np.int64)
    sc = Scores(rows, np.array([0.1, 0.2, 0.3, 0.4], np.float32), np.array([0, 0, 1, 2], np.float32),
                bm25_kind("corpus"))
    X = chunk_features(idx, Query("q", ("q",), None), sc, Config(), None, FLAT_FEATURES)
    assert X.shape == (4, len(FLAT_FEATURES))
    assert X[:, FLAT_FEATURES.index("bm25_hit")].tolist() == [0, 0, 1, 1]


def test_packaged_weights_load_and_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    tree, flat = load_ranker("tree"), load_ranker("flat")
    assert set(flat.names) <= set(FLAT_FEATURES)  # the flat model never sees structure
    assert set(tree.names) <= set(TREE_FEATURES)
    bad = tmp_path / "w.json"
    for content, msg in (("{", "not readable JSON"), (json.dumps({"tree": {"x": 1}}), "unknown feature"),
                         (json.dumps({"tree": {"dense": "a"}}), "not a finite number"),
                         (json.dumps({"flat": {}}), "no 'tree' model")):
        bad.write_text(content, encoding="utf-8")
        with pytest.raises(InputError, match=msg):
            load_ranker("tree", bad)
    with pytest.raises(InputError, match="not found"):
        load_ranker("tree", tmp_path / "missing.json")


def test_section_ranking_scores_the_whole_scope_with_located_leaves_as_a_prior(paper_index) -> None:
    from indexing.embedders.factory import make_embedder
    from retrieval.types import LocatedNode

    cfg = Config()
    every = SectionRanker(chunk_model=None, joint=None)  # the fitted model as is: every chunk carries its section's evidence
    emb = make_embedder("hash", cfg)
    query = "How many epochs was the model trained for?"
    question = Query.build(query, emb)

    def rank_in_sections(index, q, located, config, ranker=every, tree=True):
        return SectionOrdering(ranker, tree).order(index, emb, config, Ask(q, located))

    plain = rank_in_sections(paper_index, question, [], cfg)
    assert plain and [c.score for c in plain] == sorted((c.score for c in plain), reverse=True)
    assert all(c.source == "net" for c in plain)  # nothing located: every chunk came from the scope
    # locating a leaf raises its chunks (the prior), without excluding any other chunk
    target = plain[-1].chunk.source_node_id
    located = rank_in_sections(paper_index, question, [LocatedNode(target, "sub q")], cfg)
    by_id = {c.chunk.chunk_id: c for c in located}
    moved = [c for c in plain if c.chunk.source_node_id == target and c.chunk.chunk_id in by_id]
    assert moved and all(by_id[c.chunk.chunk_id].score > c.score for c in moved)
    assert all(by_id[c.chunk.chunk_id].source == "tree" and by_id[c.chunk.chunk_id].sub_query == "sub q"
               for c in moved)
    # the flat model ranks by chunk features only: locating changes nothing
    flat = SectionRanker("flat", chunk_model=None, joint=None)
    f1 = rank_in_sections(paper_index, question, [], cfg, flat, tree=False)
    f2 = rank_in_sections(paper_index, question, [LocatedNode(target, "q")], cfg, flat, tree=False)
    assert [c.row for c in f1] == [c.row for c in f2]
    assert "leaf_max" not in f1[0].retrieval_detail and "learned_score" in f1[0].retrieval_detail


def test_regime_follows_the_number_of_documents_in_scope(tmp_path: Path) -> None:
    from retrieval.learned_ranker import MULTI_SUFFIX, model_name

    assert model_name("tree", 1) == "tree" and model_name("tree", 2) == "tree" + MULTI_SUFFIX
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"tree": {"dense": 1.0}}), encoding="utf-8")
    assert load_ranker("tree_multi", w).weights.tolist() == [1.0]  # one model serves both regimes
    for kind in ("flat", "tree", "flat_multi", "tree_multi"):  # the shipped file has all four
        assert load_ranker(kind).kind == kind


def test_the_retriever_orders_one_document_by_section_and_a_collection_by_union(tmp_path: Path,
                                                                               paper_index) -> None:
    from evaluation.variants import VARIANTS
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from retrieval.node_locator import hybrid_locate
    from retrieval.ordering import UnionOrdering
    from retrieval.retriever import make_retriever

    cfg = Config()
    emb = make_embedder("hash", cfg)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\n## Cats\n\nCats sleep a lot during the day.\n", encoding="utf-8")
    (folder / "b.md").write_text("# B\n\n## Dogs\n\nDogs bark at the mail carrier.\n", encoding="utf-8")
    build_index(folder, tmp_path / "idx", cfg, emb)
    two = load_index(tmp_path / "idx")
    r = make_retriever(two, cfg, emb, None)
    assert isinstance(r.ordering_for(None), UnionOrdering)
    assert isinstance(r.ordering_for({"a.md"}), SectionOrdering)  # scoped to one document
    assert isinstance(make_retriever(paper_index, cfg, emb, None).ordering_for(None), SectionOrdering)
    fused = cfg.replace(**{"collection_order": "fused"})
    assert make_retriever(two, fused, emb, None, VARIANTS).ordering_for(None) is VARIANTS["fused"]
    with pytest.raises(InputError, match="unknown ordering 'fused'.*evaluation variants"):
        make_retriever(two, fused, emb, None)  # the product ships its two orderings only
    q = Query.build("Why do dogs bark?", emb)
    got = r.retrieve(Ask(q, hybrid_locate(two, q, cfg).nodes), []).ranked
    assert got and all("union_score" in c.retrieval_detail for c in got)
    got = make_retriever(paper_index, cfg, emb, None).retrieve(Ask(q, []), []).ranked
    assert got and all("section_score" in c.retrieval_detail for c in got)


def _synthetic_questions(n: int, seed: int = 0):
    """Questions whose relevant chunks are told apart by feature 0 only (the others are noise)."""
    from evaluation.learn_ranker import QData

    rng = np.random.default_rng(seed)
    qs = []
    for i in range(n):
        X = rng.random((40, len(ALL_FEATURES)))
        y = np.zeros(40)
        y[:3] = 1.0
        X[:3, 0] += 1.0
        rel = Relevance(per_evidence=(frozenset(range(3)),), relevant=frozenset(range(3)),
                        gold_leaves=frozenset())
        qs.append(QData(f"q{i}", f"doc{i % 7}", np.arange(40), X, y, rel))
    return qs


def test_pairwise_learner_finds_the_informative_feature_and_cv_is_out_of_fold(tmp_path: Path) -> None:
    from evaluation.learn_ranker import (cross_validate, fit_pairwise, load_features, ndcg_of, save_features,
                                         score_with)

    qs = _synthetic_questions(30)
    cols = list(range(len(TREE_FEATURES)))
    w = fit_pairwise(qs, cols, l2=1.0)
    assert w[0] > 0 and w[0] > 5 * np.max(np.abs(w[1:]))
    assert ndcg_of(qs, score_with(qs, cols, w)).mean() > 0.95
    cv = cross_validate(qs, cols, folds=5, l2=1.0)
    assert cv.shape == (30,) and cv.mean() > 0.9
    # a model without the informative feature cannot rank
    assert cross_validate(qs, cols[1:], folds=5, l2=1.0).mean() < 0.8
    save_features(qs, tmp_path / "f")
    back = load_features(tmp_path / "f")
    assert back is not None and [q.qid for q in back] == [q.qid for q in qs]
    assert np.array_equal(back[3].X, qs[3].X) and back[3].rel.relevant == qs[3].rel.relevant


def test_section_evidence_counted_once_lets_other_sections_in(paper_index) -> None:
    """Once: each leaf's entry chunk ranks by the tree model, the rest by the flat model (with the
    paragraph model as the chunk model, never narrower than every: it adds the paragraph's
    neighbourhood, so on this small paper it may list as few sections as the tree model does)."""
    from indexing.embedders.factory import make_embedder

    emb = make_embedder("hash", Config())

    def rank_in_sections(index, q, located, config, ranker):
        return SectionOrdering(ranker).order(index, emb, config, Ask(q, located))

    queries = ("How many epochs was the model trained for?", "Why does AdaRouter beat the static baseline?",
               "What algorithm does the router use?", "Which currency pairs and years are in the dataset?")
    wider = 0
    for query in queries:
        cfg = Config(final_top_k=10)
        once = rank_in_sections(paper_index, Query.build(query, emb), [], cfg,
                                SectionRanker(chunk_model="flat", joint=None))
        every = rank_in_sections(paper_index, Query.build(query, emb), [], cfg,
                                 SectionRanker(chunk_model=None, joint=None))
        para = rank_in_sections(paper_index, Query.build(query, emb), [], cfg, SectionRanker(joint=None))
        assert len({c.chunk.source_node_id for c in para[:5]}) >= len({c.chunk.source_node_id for c in every[:5]})
        assert [c.score for c in once] == sorted((c.score for c in once), reverse=True)
        assert len({c.row for c in once}) == len(once)
        leaves = [len({c.chunk.source_node_id for c in ranked[:5]}) for ranked in (once, every)]
        assert leaves[0] >= leaves[1], query
        wider += leaves[0] > leaves[1]
    assert wider >= 1
