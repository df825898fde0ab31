"""The joint section ranker: the coverage and entry features, the LambdaRank-weighted fit, and the list
whose top the joint model orders and whose rest keeps the once order (``section-joint``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from config import Config
from evaluation.metrics import Relevance
from indexing.search import Scores, bm25_kind
from retrieval.learned_ranker import load_ranker
from retrieval.ordering import Ask, SectionOrdering
from retrieval.query import Query
from retrieval.rankers import SectionRanker
from retrieval.section_features import ALL_FEATURES, ENTRY_FEATURES, chunk_features
from utils.errors import InputError


def _scores(index, seed: int = 0) -> Scores:
    n = len(index.chunks)
    rng = np.random.default_rng(seed)
    return Scores(np.arange(n, dtype=np.int64), rng.random(n).astype(np.float32),
                  (rng.random(n) * 5).astype(np.float32), bm25_kind("corpus"))


def _col(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, ALL_FEATURES.index(name)]


def test_entry_features_are_the_section_evidence_of_each_leafs_best_chunk_only(paper_index) -> None:
    idx = paper_index
    sc = _scores(idx)
    cfg = Config()
    X = chunk_features(idx, Query("q", ("q",), None), sc, cfg, {idx.chunks[0].source_node_id}, ALL_FEATURES)
    # with equal fusion weights a chunk's fused score orders as its two scaled signals' sum
    assert cfg.tuning.ranking.dense_weight == cfg.tuning.ranking.bm25_weight
    fused = _col(X, "dense_mm") + _col(X, "bm25_mm")
    leaf = [idx.chunks[int(r)].source_node_id for r in sc.rows]
    best: dict[str, int] = {}
    for i, lf in enumerate(leaf):
        if lf not in best or (-fused[i], i) < (-fused[best[lf]], best[lf]):
            best[lf] = i
    entry = _col(X, "entry")
    assert set(np.flatnonzero(entry).tolist()) == set(best.values())
    assert len(best) > 1 and entry.sum() == len(best)
    for name in ENTRY_FEATURES[1:]:
        plain = _col(X, name[len("entry_"):])
        assert np.array_equal(_col(X, name), plain * entry)
    assert _col(X, "entry_located").sum() == 1.0  # one located leaf, one entry of it


def test_para_cover_weighs_the_questions_rare_terms_a_paragraph_holds(paper_index) -> None:
    from retrieval.breadth import paragraph_ids
    from retrieval.term_coverage import coverage_features
    from utils.tokenizer import tokenize

    idx = paper_index
    rows = np.arange(len(idx.chunks), dtype=np.int64)
    text = idx.chunks[3].text
    words = [t for t in tokenize(text)][:3]
    assert words
    q = tuple(words) + ("zzyzxunseen",)  # a word in no paragraph: coverage below 1 everywhere
    cover = coverage_features(idx, rows, q)["para_cover"]
    pid = paragraph_ids(idx, rows)
    assert 0.0 < cover[3] < 1.0
    for p in set(pid.tolist()):  # one value per paragraph
        assert len(set(cover[pid == p].tolist())) == 1
    assert cover.min() >= 0.0 and cover.max() < 1.0
    assert np.array_equal(coverage_features(idx, rows, ())["para_cover"], np.zeros(len(rows)))
    # every word of the question in the paragraph, none elsewhere -> 1 there
    full = coverage_features(idx, rows, tuple(words))["para_cover"]
    assert full[3] == pytest.approx(1.0)
    # a rarer word weighs more than a common one
    counts: dict[str, int] = {}
    for c in idx.chunks:
        for t in set(tokenize(c.text)):
            counts[t] = counts.get(t, 0) + 1
    common = max(counts, key=counts.get)
    rare = min((t for t in counts if counts[t] == 1), default=None)
    assert rare is not None and rare != common  # the paper has words that occur once
    r_cover = coverage_features(idx, rows, (common, rare))["para_cover"]
    holder = next(i for i, c in enumerate(idx.chunks) if rare in set(tokenize(c.text)))
    common_only = [i for i, c in enumerate(idx.chunks)
                   if common in set(tokenize(c.text)) and pid[i] != pid[holder]]
    assert common_only and r_cover[holder] > max(r_cover[i] for i in common_only)


def _question(n: int = 40, relevant: tuple[int, ...] = (0, 1), seed: int = 0):
    from evaluation.learn_ranker import QData

    rng = np.random.default_rng(seed)
    X = rng.random((n, len(ALL_FEATURES)))
    y = np.zeros(n)
    y[list(relevant)] = 1.0
    rel = Relevance(per_evidence=tuple(frozenset({r}) for r in relevant), relevant=frozenset(relevant),
                    gold_leaves=frozenset())
    return QData("q", "doc", np.arange(n), X, y, rel, False)


def test_lambda_weights_count_pairs_by_their_effect_on_ndcg_at_10() -> None:
    from evaluation.learn_ranker import lambda_pair_weights

    q = _question()
    s = -np.arange(40, dtype=np.float64)  # row i at rank i + 1
    pos, neg = np.array([0, 1]), np.array([2, 20, 30])
    w = lambda_pair_weights(q, pos, neg, s).reshape(2, 3)
    ideal = 1.0 + 1.0 / np.log2(3)
    assert w[0, 0] == pytest.approx((1.0 - 1.0 / np.log2(4)) / ideal)
    assert w[0, 1] == pytest.approx(1.0 / ideal)  # rank 1 against rank 21, past the cut: its whole gain
    # both past the cut: no effect on the figure, no weight
    s2 = np.empty(40)
    s2[2:22] = -np.arange(1, 21)  # rows 2..21 take ranks 1..20
    s2[0], s2[1] = -20.5, -20.7  # the relevant rows at 21 and 22
    s2[22:] = -np.arange(23, 41)
    assert np.all(lambda_pair_weights(q, np.array([0, 1]), np.array([30, 35]), s2) == 0)


def test_lambda_fit_puts_what_decides_relevance_first() -> None:
    from evaluation.learn_ranker import fit_lambda, ndcg_of, score_with

    qs = []
    for i in range(30):
        q = _question(seed=i, relevant=(0, 1, 2))
        q.X[:3, ALL_FEATURES.index("para_cover")] += 1.2  # what marks the evidence
        q.X[3:8, ALL_FEATURES.index("dense")] += 1.2  # a decoy some non-evidence rows share
        qs.append(q)
    cols = [ALL_FEATURES.index(n) for n in ("dense", "para_cover")]
    w = fit_lambda(qs, cols, l2=1.0)
    assert w[1] > w[0] and w[1] > 0
    assert ndcg_of(qs, score_with(qs, cols, w)).mean() > 0.95


def test_the_weights_file_ships_a_joint_model_over_known_features() -> None:
    from evaluation.learn_ranker import model_features

    joint = load_ranker("joint")
    assert joint.names == model_features(False)["joint"]
    assert set(ENTRY_FEATURES) <= set(joint.names) and "para_cover" in joint.names
    assert load_ranker("joint_multi").names == joint.names  # no collection model: the one-document one


def _weights(tmp_path: Path, **models: dict[str, float]) -> Path:
    p = tmp_path / "w.json"
    base = json.loads((Path(__file__).parents[1] / "retrieval" / "ranker_weights.json").read_text(encoding="utf-8"))
    base.update(models)
    p.write_text(json.dumps({k: v for k, v in base.items() if v is not None}), encoding="utf-8")
    return p


def _ranked(index, q, cfg, ranker=SectionRanker()):
    from indexing.embedders.factory import make_embedder

    return SectionOrdering(ranker).order(index, make_embedder("hash", Config()), cfg, Ask(q, []))


def test_joint_orders_the_head_and_the_once_order_the_rest(paper_index, tmp_path: Path) -> None:
    """The list's first k are the joint model's own first k, in its order; the rest follow the once
    order with those k taken out; k = 0 is the joint model alone."""
    from indexing.embedders.factory import make_embedder

    emb = make_embedder("hash", Config())
    weights = _weights(tmp_path, joint={"para_cover": 1.0, "bm25_mm": 0.5, "entry_leaf_heading": 0.3})
    q = Query.build("How many epochs was the model trained for?", emb)
    k = 4
    cfg = Config(final_top_k=10, ranker_weights=str(weights)).replace(**
        {"context_pool": 40, "joint_top_k": k})
    ranked = _ranked(paper_index, q, cfg)
    alone = _ranked(paper_index, q, cfg.replace(**{"joint_top_k": 0}))
    once = _ranked(paper_index, q, cfg, SectionRanker(joint=None))
    head = [c.row for c in alone[:k]]
    assert [c.row for c in ranked[:k]] == head
    rest = [c.row for c in once if c.row not in set(head)]
    assert [c.row for c in ranked[k:]] == rest[:len(ranked) - k]
    assert [c.score for c in ranked] == sorted((c.score for c in ranked), reverse=True)
    assert [c.row for c in alone] != [c.row for c in once]
    with pytest.raises(InputError, match=r"no 'joint' model \(fit it with .*learn_ranker --models joint"):
        _ranked(paper_index, q, cfg.replace(ranker_weights=str(_weights(tmp_path, joint=None))))


def test_fold_files_hold_a_joint_model_fitted_with_the_lambda_objective(tmp_path: Path, monkeypatch) -> None:
    import evaluation.learn_ranker as lr

    qs = []
    for i in range(10):
        q = _question(seed=i)
        qs[len(qs):] = [lr.QData(f"q{i}", f"doc{i % 5}", q.rows, q.X, q.y, q.rel, False)]
    used: list[str] = []
    real = dict(lr.FIT)
    monkeypatch.setattr(lr, "FIT", {k: (lambda f, k=k: (lambda *a, **kw: (used.append(k), f(*a, **kw))[1]))(f)
                                    for k, f in real.items()})
    base = json.loads((Path(__file__).parents[1] / "retrieval" / "ranker_weights.json").read_text(encoding="utf-8"))
    lr.write_folds({"s": qs}, lr.model_features(False), 30.0, "pairwise-paragraph", {"format_version": 1}, base,
                   tmp_path, only={"tree", "joint"})
    fold = json.loads((tmp_path / "fold-0.json").read_text(encoding="utf-8"))
    assert set(fold["joint"]) == set(lr.model_features(False)["joint"])
    assert fold["para"] == base["para"] and fold["tree"] != base["tree"]
    assert "lambda-paragraph" in used and "pairwise-paragraph" in used
    assert load_ranker("joint", tmp_path / "fold-0.json").names == lr.model_features(False)["joint"]


def test_joint_top_k_is_checked() -> None:
    with pytest.raises(InputError, match=r"joint_top_k must be in \[0, 100000\], got -1"):
        Config().replace(**{"joint_top_k": -1})
    assert Config().replace(**{"joint_top_k": 0}).tuning.ranking.joint_top_k == 0


def test_a_section_refit_keeps_the_models_fitted_elsewhere(tmp_path: Path) -> None:
    """learn_ranker owns the section models; the union model (learn_union's) and every other model of
    the base file must come through a refit, and the header and report must not pass for models."""
    import evaluation.learn_ranker as lr

    qs = [lr.QData(f"q{i}", f"doc{i % 5}", *(lambda q: (q.rows, q.X, q.y, q.rel))(_question(seed=i)), False)
          for i in range(10)]
    base = json.loads((Path(__file__).parents[1] / "retrieval" / "ranker_weights.json").read_text(encoding="utf-8"))
    assert "union_multi" in base
    models = lr.fit_models({"s": qs}, lr.model_features(False), 30.0, "pairwise-paragraph", base, only={"tree"})
    assert models["union_multi"] == base["union_multi"]
    assert models["tree"] != base["tree"] and models["para"] == base["para"]
    assert not {"cv", "fitted_on", "format_version", "kept_from_base", "l2"} & set(models)
