"""The section ranker's paragraph features, the model that orders a section past its entry, and
out-of-fold weights (learn_ranker --folds-out, eval --ranker-folds)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from config import Config
from evaluation.metrics import Relevance
from indexing.search import Scores, bm25_kind
from retrieval.learned_ranker import load_ranker
from retrieval.breadth import paragraph_ids
from retrieval.query import Query
from retrieval.section_features import ALL_FEATURES, PARAGRAPH_FEATURES, TREE_FEATURES, chunk_features
from utils.errors import InputError


def _scores(index, seed: int = 0) -> Scores:
    n = len(index.chunks)
    rng = np.random.default_rng(seed)
    return Scores(np.arange(n, dtype=np.int64), rng.random(n).astype(np.float32),
                  (rng.random(n) * 5).astype(np.float32), bm25_kind("corpus"))


def test_paragraph_features_match_a_plain_reference(paper_index) -> None:
    idx = paper_index
    sc = _scores(idx)
    cfg = Config()
    X = chunk_features(idx, Query("q", ("q",), None), sc, cfg, None, ALL_FEATURES)
    col = {n: X[:, i] for i, n in enumerate(ALL_FEATURES)}
    d, b = sc.dense.astype(np.float64), sc.lexical.astype(np.float64)
    r = cfg.tuning.ranking
    fused = r.dense_weight * (d - d.min()) / (d.max() - d.min()) + r.bm25_weight * (b - b.min()) / (b.max() - b.min())
    pid = paragraph_ids(idx, sc.rows)
    leaf = [idx.chunks[int(r)].source_node_id for r in sc.rows]
    assert len(set(pid.tolist())) < len(pid)  # the paper has paragraphs of several windows
    checked_adjacent = 0
    for i in range(len(pid)):
        same = pid == pid[i]
        assert col["para_mean"][i] == pytest.approx(fused[same].mean())
        near = [j for j in range(len(pid)) if abs(int(pid[j]) - int(pid[i])) == 1 and leaf[j] == leaf[i]]
        assert col["para_adjacent"][i] == pytest.approx(max((fused[j] for j in near), default=0.0))
        checked_adjacent += bool(near)
        in_leaf = [j for j in range(len(pid)) if leaf[j] == leaf[i]]
        top = sorted(in_leaf, key=lambda j: (-fused[j], j))[:3]
        around = sum(1 for j in top if abs(int(pid[j]) - int(pid[i])) <= 1)
        assert col["para_near_top"][i] == pytest.approx(around / min(3, len(in_leaf)))
    assert checked_adjacent > 0
    # the older features are computed as before, whatever else is asked for
    X_tree = chunk_features(idx, Query("q", ("q",), None), sc, cfg, None, TREE_FEATURES)
    assert np.array_equal(X_tree, X[:, :len(TREE_FEATURES)])


def _weights(tmp_path: Path, **models: dict[str, float]) -> Path:
    p = tmp_path / "w.json"
    base = json.loads((Path(__file__).parents[1] / "retrieval" / "ranker_weights.json").read_text(encoding="utf-8"))
    base.pop("para", None)
    base.update(models)
    p.write_text(json.dumps(base), encoding="utf-8")
    return p


def test_a_section_past_its_entry_is_ordered_by_the_paragraph_model(paper_index, tmp_path: Path) -> None:
    from indexing.embedders.factory import make_embedder
    from retrieval.ordering import Ask, SectionOrdering
    from retrieval.rankers import SectionRanker
    from retrieval.scoring import flat_scores

    emb = make_embedder("hash", Config())

    def rank_in_sections(index, q, located, config, chunk_model="para"):
        return SectionOrdering(SectionRanker(chunk_model=chunk_model, joint=None)).order(index, emb, config,
                                                                                           Ask(q, located))

    weights = _weights(tmp_path, para={"para_mean": 1.0})
    q = Query.build("How many epochs was the model trained for?", emb)
    cfg = Config(final_top_k=10, ranker_weights=str(weights))
    ranked = rank_in_sections(paper_index, q, [], cfg)
    sc = flat_scores(paper_index, q, cfg)
    X = chunk_features(paper_index, q, sc, cfg, set(), ALL_FEATURES)
    para_mean = dict(zip(sc.rows.tolist(), X[:, ALL_FEATURES.index("para_mean")]))
    # each leaf's entry: its first chunk in the order of the section model alone (every chunk listed)
    alone = rank_in_sections(paper_index, q, [], cfg, chunk_model=None)
    assert len(alone) == len(sc.rows)
    first: dict[str, int] = {}
    for c in alone:
        first.setdefault(c.chunk.source_node_id, c.row)
    entries = set(first.values())
    rest = [c for c in ranked if c.row not in entries]
    assert len(rest) >= 5
    keys = [para_mean[c.row] for c in rest]
    assert keys == sorted(keys, reverse=True)  # the non-entry chunks follow the paragraph model alone
    flat = rank_in_sections(paper_index, q, [], cfg, chunk_model="flat")
    assert [c.row for c in flat] != [c.row for c in ranked]
    with pytest.raises(InputError, match="no 'para' model"):
        rank_in_sections(paper_index, q, [], cfg.replace(ranker_weights=str(_weights(tmp_path))))


def test_weights_may_name_paragraph_features_but_nothing_unknown(tmp_path: Path) -> None:
    p = _weights(tmp_path, tree={**{n: 0.5 for n in TREE_FEATURES + PARAGRAPH_FEATURES}})
    assert load_ranker("tree", p).names == TREE_FEATURES + PARAGRAPH_FEATURES
    p.write_text(json.dumps({"tree": {"para_median": 1.0}}), encoding="utf-8")
    with pytest.raises(InputError, match="unknown feature"):
        load_ranker("tree", p)


def _questions(n: int, groups: int, multi: bool = False, seed: int = 0):
    from evaluation.learn_ranker import QData

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        X = rng.random((30, len(ALL_FEATURES)))
        y = np.zeros(30)
        y[:2] = 1.0
        X[:2, ALL_FEATURES.index("para_mean")] += 1.0
        rel = Relevance(per_evidence=(frozenset({0}), frozenset({1})), relevant=frozenset({0, 1}),
                        gold_leaves=frozenset())
        out.append(QData(f"q{i}", f"doc{i % groups}", np.arange(30), X, y, rel, multi))
    return out


def test_fold_weights_never_see_their_folds_documents(tmp_path: Path) -> None:
    from evaluation.learn_ranker import fit_models, model_features, write_folds

    sets = {"papers": _questions(40, groups=10)}
    features = model_features(paragraph=True)
    keep = {"tree_multi": {"dense": 2.0}, "flat_multi": {"dense": 1.0}}
    write_folds(sets, features, 1.0, "pairwise", {"format_version": 1}, keep, tmp_path, folds=5)
    folds = json.loads((tmp_path / "folds.json").read_text(encoding="utf-8"))
    assigned = folds["sets"]["papers"]
    assert folds["folds"] == 5 and set(assigned) == {q.qid for q in sets["papers"]}
    by_group: dict[str, set[int]] = {}
    for q in sets["papers"]:
        by_group.setdefault(q.group, set()).add(assigned[q.qid])
    assert all(len(f) == 1 for f in by_group.values())  # a document's questions share one fold
    for f in range(5):
        w = json.loads((tmp_path / f"fold-{f}.json").read_text(encoding="utf-8"))
        train = {"papers": [q for q in sets["papers"] if assigned[q.qid] != f]}
        assert w["tree"] == fit_models(train, features, 1.0, "pairwise")["tree"]
        assert w["tree_multi"] == keep["tree_multi"]  # no collection questions: the base's model stays
        assert max(w["para"], key=lambda n: w["para"][n]) == "para_mean"
        assert load_ranker("para", tmp_path / f"fold-{f}.json").names == features["para"]


def test_cli_writes_weights_and_folds_from_cached_features(tmp_path: Path) -> None:
    from evaluation.learn_ranker import main, save_features

    cache = tmp_path / "feat"
    cache.mkdir()
    save_features(_questions(25, groups=6), cache / "papers-headings-onnx-all")
    out, folds = tmp_path / "w.json", tmp_path / "folds"
    assert main(["--data", "/nowhere/papers:onnx", "--features-cache", str(cache), "--out", str(out),
                 "--folds-out", str(folds), "--paragraph", "--l2", "1"]) == 0
    w = json.loads(out.read_text(encoding="utf-8"))
    assert set(w["tree"]) == set(TREE_FEATURES + PARAGRAPH_FEATURES) and "para" in w
    assert sorted(p.name for p in folds.iterdir()) == ["fold-0.json", "fold-1.json", "fold-2.json",
                                                       "fold-3.json", "fold-4.json", "folds.json"]


def test_the_best_reordering_of_a_pool_counts_each_item_found_once() -> None:
    from evaluation.tools import top10_limits as mod
    rel = Relevance(per_evidence=(frozenset({5, 6}), frozenset({30}), frozenset({99})),
                    relevant=frozenset({5, 6, 30, 99}), gold_leaves=frozenset())
    rows = list(range(40))
    from evaluation.metrics import distinct_ndcg

    assert mod.oracle_dndcg(rows, rel, 10) == pytest.approx(1 / (1 + 1 / np.log2(3) + 0.5))  # one of three
    assert mod.oracle_dndcg(rows, rel, 40) == pytest.approx((1 + 1 / np.log2(3)) / (1 + 1 / np.log2(3) + 0.5))
    assert mod.oracle_dndcg(rows, rel, 40) >= distinct_ndcg(rows, rel)  # never below the order as it is


def test_models_not_named_are_kept_from_the_base() -> None:
    from evaluation.learn_ranker import fit_models, model_features

    sets = {"papers": _questions(20, groups=5)}
    keep = {"flat": {"dense": 9.0}, "tree": {"dense": 8.0}, "tree_multi": {"dense": 7.0}}
    out = fit_models(sets, model_features(paragraph=False), 1.0, "pairwise", keep, only={"tree", "para"})
    assert out["flat"] == keep["flat"] and out["tree_multi"] == keep["tree_multi"]
    assert out["tree"] != keep["tree"] and set(out["tree"]) == set(TREE_FEATURES) and "para" in out


def test_paragraph_units_keep_one_row_per_paragraph_and_its_relevance() -> None:
    from evaluation.learn_ranker import QData, ndcg_of, paragraph_units

    X = np.zeros((6, len(ALL_FEATURES)))
    X[:, ALL_FEATURES.index("dense_mm")] = [0.1, 0.9, 0.5, 0.2, 0.3, 0.8]
    y = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    para = np.array([0, 0, 1, 1, 2, 2])
    rel = Relevance(per_evidence=(frozenset({10, 15}),), relevant=frozenset({10, 15}), gold_leaves=frozenset())
    q = QData("q", "d", np.arange(10, 16), X, y, rel, False, para)
    (u,) = paragraph_units([q])
    assert u.rows.tolist() == [11, 12, 15]  # each paragraph's best window by fused score
    assert u.y.tolist() == [1.0, 0.0, 1.0]  # relevant if any window of the paragraph is
    # a list's figures count each paragraph's best window first, as every ranked list does
    scores = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    q2 = QData("q", "d", np.arange(10, 16), X, np.zeros(6), Relevance(
        per_evidence=(frozenset({10}), frozenset({12})), relevant=frozenset({10, 12}), gold_leaves=frozenset()),
        False, np.array([0, 0, 0, 0, 1, 2]))
    windows = QData(q2.qid, q2.group, q2.rows, q2.X, q2.y, q2.rel, False, None)
    # row 12 is a third window of paragraph 0: listed after paragraphs 1 and 2 (rank 5, not 3)
    assert ndcg_of([q2], [scores])[0] < ndcg_of([windows], [scores])[0] < 1.0


def test_the_shipped_file_holds_the_paragraph_model_the_default_uses() -> None:
    from retrieval.rankers import SectionRanker

    assert SectionRanker().chunk_model == "para"
    para = load_ranker("para")
    assert set(PARAGRAPH_FEATURES) <= set(para.names) <= set(ALL_FEATURES)
    assert load_ranker("para_multi").names == para.names  # no collection model of it: the one-document one
