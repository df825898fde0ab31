"""The learned union ordering (``union-learned``): its features, its use, its learner."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from retrieval.ordering import ordered_union
from retrieval.rankers import UNION_MODEL, UnionRanker, union_signals
from retrieval.types import RetrievedChunk
from retrieval.learned_ranker import load_ranker
from retrieval.query import Query
from retrieval.types import LocatedNode
from retrieval.union_features import UNION_FEATURES, UnionSignals, union_feature_matrix
from utils.errors import InputError
from utils.tokenizer import tokenize

SHIPPED = Path(__file__).parents[1] / "retrieval" / "ranker_weights.json"


def order_union(index, q, cands, located, cfg):
    """The union ordering of given candidates (``UnionOrdering`` gathers its own)."""
    sig = union_signals(index, q, cands, located, cfg)
    return ordered_union(cands, UnionRanker().score(index, q, sig, cfg), sig.prior)


def retrieved_chunk(index, row, dense, bm25, fused, sub_query, source):
    return RetrievedChunk.at(index, row, dense, bm25, fused, sub_query, source)


def _leaf_with_rows(index, n: int):
    """A leaf of at least ``n`` chunks."""
    return next(leaf for leaf in index.leaves if len(_rows(index, leaf)) >= n)


def _rows(index, leaf) -> list[int]:
    span = index.leaf_rows.get(leaf.node_id)
    return [] if span is None else list(range(*span))


def _col(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, UNION_FEATURES.index(name)]


def test_features_say_how_a_candidate_stands_beside_the_others(paper_index) -> None:
    leaf = _leaf_with_rows(paper_index, 3)
    r0, r1, r2 = _rows(paper_index, leaf)[:3]
    other = next(n for n in paper_index.leaves if n.node_id != leaf.node_id and _rows(paper_index, n))
    r3 = _rows(paper_index, other)[0]
    rows = np.array([r0, r1, r3], dtype=np.int64)  # r2 is not a candidate
    words = tuple(dict.fromkeys(tokenize(paper_index.chunks[r1].text)))[:4]
    sig = UnionSignals(rows, fused=np.array([0.2, 0.9, 0.5]), prior=np.array([1.0, 1.0, 0.3]),
                       dense=np.array([0.1, 0.3, 0.2]), lexical=np.array([0.0, 2.0, 1.0]),
                       flat=np.array([0.4, 0.0, 0.7]), card=np.array([0.0, 0.0, 1.0]),
                       named=np.array([0.0, 1.0, 0.0]))
    X = union_feature_matrix(paper_index, words + ("zzzqqq",), sig)
    assert X.shape == (3, len(UNION_FEATURES))
    assert list(_col(X, "u_leaf_best")) == [0.9, 0.9, 0.5]
    assert list(_col(X, "u_leaf_first")) == [0.0, 1.0, 1.0]
    assert list(_col(X, "u_neighbour")) == [0.9, 0.2, 0.0]  # r0 and r1 adjacent in one leaf; r3 alone
    assert list(_col(X, "u_bm25_hit")) == [0.0, 1.0, 1.0]
    assert list(_col(X, "u_dense_mm")) == pytest.approx([0.0, 1.0, 0.5])
    assert _col(X, "u_cover")[1] == pytest.approx(4 / 5)  # its own words, not the unknown one
    assert list(_col(X, "u_prior")) == [1.0, 1.0, 0.3] and list(_col(X, "u_flat")) == [0.4, 0.0, 0.7]
    assert list(_col(X, "u_card")) == [0.0, 0.0, 1.0] and list(_col(X, "u_named")) == [0.0, 1.0, 0.0]
    same_doc = paper_index.layout.row_doc[r0] == paper_index.layout.row_doc[r3]
    assert list(_col(X, "u_doc_share")) == ([1.0] * 3 if same_doc else [2 / 3, 2 / 3, 1 / 3])
    assert union_feature_matrix(paper_index, ("a",), UnionSignals(*(np.zeros(0) for _ in range(8)))).shape == (
        0, len(UNION_FEATURES))
    some = union_feature_matrix(paper_index, words, sig, ("u_neighbour", "u_fused"))
    assert some.tolist() == X[:, [UNION_FEATURES.index("u_neighbour"), UNION_FEATURES.index("u_fused")]].tolist()
    assert r2 not in rows


def _weights(tmp_path: Path, model: dict[str, float]) -> str:
    shipped = json.loads(SHIPPED.read_text(encoding="utf-8"))
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**shipped, UNION_MODEL: model}), encoding="utf-8")
    return str(path)


def _cands(index):
    leaf = _leaf_with_rows(index, 4)
    rows = _rows(index, leaf)[:4]
    return leaf, [retrieved_chunk(index, r, 0.5, 0.5, 0.5, "q", "tree") for r in rows]


def test_the_learned_model_orders_the_union(paper_index, tmp_path: Path) -> None:
    """A model that weighs only the question's words puts the chunk holding them first, whatever the
    blend would do; the model's own score is the union score."""
    emb = make_embedder("hash", Config())
    leaf, cands = _cands(paper_index)
    target = cands[-1].chunk
    q = Query.build(" ".join(target.text.split()[:10]), emb)
    located = [LocatedNode(leaf.node_id, "q", score=1.0)]
    cfg = Config(ranker_weights=_weights(tmp_path, {"u_cover": 1.0}))  # learned: the default
    out = order_union(paper_index, q, cands, located, cfg)
    assert out[0].chunk.chunk_id == target.chunk_id
    sig = union_signals(paper_index, q, cands, located, cfg)
    X = union_feature_matrix(paper_index, q.tokens, sig)
    want = {int(r): float(v) for r, v in zip(sig.rows, _col(X, "u_cover"))}
    assert [h.score for h in out] == sorted(want.values(), reverse=True)
    assert out[0].retrieval_detail["union_score"] == round(want[out[0].row], 4)
    # the opposite weight puts it last: the weights, not the blend, decide
    flipped = order_union(paper_index, q, cands, located,
                          cfg.replace(ranker_weights=_weights(tmp_path, {"u_cover": -1.0})))
    assert flipped[-1].chunk.chunk_id == target.chunk_id
    # a weights file without the union model: one line that names the fix
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"tree": {"dense": 1.0}}), encoding="utf-8")
    with pytest.raises(InputError, match=r"no 'union_multi' model \(fit it with .*learn_union"):
        order_union(paper_index, q, cands, located, cfg.replace(ranker_weights=str(plain)))


def test_the_flat_standing_comes_from_the_scopes_flat_ranking(paper_index) -> None:
    from retrieval.scoring import flat_scores, fuse, unit_scale

    emb = make_embedder("hash", Config())
    _, cands = _cands(paper_index)
    q = Query.build("How many epochs was the model trained for?", emb)
    cfg = Config()
    sig = union_signals(paper_index, q, cands, [], cfg)
    scores = flat_scores(paper_index, q, cfg, None)
    rrf = cfg.tuning.ranking.collection
    fused = dict(zip(scores.rows.tolist(), unit_scale(fuse(scores.dense, scores.lexical, rrf), rrf)))
    assert list(sig.flat) == pytest.approx([fused[c.row] for c in cands])
    assert not union_signals(paper_index, q, cands, [], cfg, flat_standing=False).flat.any()


def test_weights_may_name_union_features_but_no_unknown_one(tmp_path: Path) -> None:
    path = _weights(tmp_path, {"u_prior": 0.5, "u_flat": 1.0})
    model = load_ranker(UNION_MODEL, path)
    assert model.names == ("u_prior", "u_flat")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({UNION_MODEL: {"u_nonsense": 1.0}}), encoding="utf-8")
    with pytest.raises(InputError, match="unknown feature"):
        load_ranker(UNION_MODEL, bad)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"tree": {"dense": 1.0}}), encoding="utf-8")
    with pytest.raises(InputError, match="no 'union_multi' model"):
        load_ranker(UNION_MODEL, plain)


def test_the_shipped_file_holds_the_default_union_model(paper_index) -> None:
    model = load_ranker(UNION_MODEL)
    assert set(model.names) <= set(UNION_FEATURES) and len(model.names) >= 2
    assert Config().tuning.ranking.collection_order == "union-learned"
    emb = make_embedder("hash", Config())
    _, cands = _cands(paper_index)
    q = Query.build("How many epochs was the model trained for?", emb)
    out = order_union(paper_index, q, cands, [], Config())
    sig = union_signals(paper_index, q, cands, [], Config())
    want = model.score(union_feature_matrix(paper_index, q.tokens, sig, model.names))
    assert [h.score for h in out] == pytest.approx(sorted(want.tolist(), reverse=True))


def test_the_learner_fits_folds_eval_can_use(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on a tiny set: features of each collection question's union, an out-of-fold figure,
    fold files `eval --ranker-folds` reads, and the weights written beside the kept models."""
    from evaluation.learn_union import main as learn
    from evaluation.runner import EvalOptions, run_eval
    from tests.test_eval_runner import DOCS, QUESTIONS

    root = tmp_path / "set"
    (root / "docs").mkdir(parents=True)
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    (root / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    opts = dict(cache_root=tmp_path / "cache", progress=False, notice=lambda m: None, resamples=100)
    # the index the learner uses is eval's cached one
    run_eval(EvalOptions(data=root, embedder="hash", arms=["flat-hybrid"], **opts))
    out, folds = tmp_path / "w.json", tmp_path / "folds"
    monkeypatch.setenv("TREERAG_CACHE_DIR", str(tmp_path / "cache"))
    code = learn(["--data", f"{root}:hash", "--base", str(SHIPPED), "--out", str(out), "--folds-out",
                  str(folds), "--folds", "2", "--features", "u_fused,u_prior,u_cover"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "out of fold" in printed.out
    assert "reading documents" in printed.err  # a learner that reads (or builds) the set says where it is
    written = json.loads(out.read_text(encoding="utf-8"))
    shipped = json.loads(SHIPPED.read_text(encoding="utf-8"))
    assert written["tree"] == shipped["tree"] and written["para"] == shipped["para"]
    assert set(written[UNION_MODEL]) == {"u_fused", "u_prior", "u_cover"}
    # every scorable question has a fold (a question of one document too: eval runs them all)
    assigned = json.loads((folds / "folds.json").read_text(encoding="utf-8"))["sets"][root.name]
    assert set(assigned) == {"q1", "q2", "q3", "q4", "q5"} and set(assigned.values()) <= {0, 1}
    for f in (0, 1):
        fold = json.loads((folds / f"fold-{f}.json").read_text(encoding="utf-8"))
        assert set(fold[UNION_MODEL]) == {"u_fused", "u_prior", "u_cover"} and fold["tree"] == shipped["tree"]
    run = run_eval(EvalOptions(data=root, embedder="hash", arms=["tree-hybrid"], ranker_folds=folds, **opts))
    assert run.n_scored == 5


def test_the_learner_rejects_unknown_features_in_one_line(tmp_path: Path, capsys) -> None:
    from evaluation.learn_union import main as learn

    code = learn(["--data", f"{tmp_path}:hash", "--base", str(SHIPPED), "--features", "u_fused,bogus"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "bogus" in err and "\n" not in err


def test_text_features_weigh_rare_words_and_see_the_paragraphs(paper_index) -> None:
    """A chunk of two paragraphs: the question's words spread over both cover the chunk, not its best
    paragraph; the IDF weighs a word every chunk holds at almost nothing."""
    from types import SimpleNamespace

    from retrieval.union_features import _text_features

    texts = ["alpha beta\n\ngamma", "alpha beta gamma", "delta"]
    chunks = [SimpleNamespace(text=t) for t in texts]

    class Search:
        def term_stats(self, tokens, scope=None):
            return 100, {"alpha": 99, "beta": 1, "gamma": 1}

    index = SimpleNamespace(chunks=chunks, search=Search())
    out = _text_features(index, np.arange(3), ("alpha", "beta", "gamma"), 200)
    assert list(out["u_cover"]) == [1.0, 1.0, 0.0]
    assert out["u_cover_idf"][0] == pytest.approx(1.0) and out["u_cover_idf"][2] == 0.0
    assert 0.45 < out["u_para_idf"][0] < 0.55  # "alpha beta": beta's weight, alpha's almost none
    assert out["u_para_idf"][1] == pytest.approx(1.0)
    assert list(out["u_paragraphs"]) == pytest.approx([np.log(2), 0.0, 0.0])
    assert list(out["u_length"]) == pytest.approx([len(t) / 200 for t in texts])
    empty = _text_features(index, np.arange(3), (), 200)
    assert not empty["u_cover_idf"].any() and list(empty["u_paragraphs"]) == pytest.approx([np.log(2), 0, 0])


def test_an_added_feature_gets_a_weight_and_the_fitted_ones_stay() -> None:
    """``learn_union --added``: the base model's weights are kept; the new feature's weight is the
    grid value that ranks best, 0 when it never helps (a feature constant within every question)."""
    from evaluation.learn_ranker import QData
    from evaluation.learn_union import added_out_of_fold, fit_added, model_scores
    from evaluation.metrics import Relevance

    def question(qid: str, group: str, card: list[float], fused: list[float], relevant: int) -> QData:
        X = np.zeros((len(card), len(UNION_FEATURES)))
        X[:, UNION_FEATURES.index("u_fused")] = fused
        X[:, UNION_FEATURES.index("u_card")] = card
        rows = np.arange(len(card)) + 100 * int(qid[1:])
        rel = Relevance(per_evidence=(frozenset({int(rows[relevant])}),), relevant=frozenset({int(rows[relevant])}),
                        gold_leaves=frozenset())
        y = np.zeros(len(card))
        y[relevant] = 1.0
        return QData(qid, group, rows, X, y, rel, True, None)

    # the evidence is in the named document but scores a little lower than a look-alike's chunk
    qs = [question(f"q{i}", f"g{i % 2}", [1.0, 0.0, 0.0], [0.8, 0.9, 0.1], 0) for i in range(4)]
    base = {"u_fused": 2.0}
    w = fit_added(qs, model_scores(qs, base), "u_card")
    assert 0.2 < w <= 1.0  # the smallest weight that lifts 0.8 x 2 over 0.9 x 2
    result, weights = added_out_of_fold(qs, base, model_scores(qs, base), "u_card", {("s", "g0"): 0, ("s", "g1"): 1},
                                        "s", 2)
    assert result.tolist() == [1.0] * 4 and all(v["u_fused"] == 2.0 and v["u_card"] == w for v in weights.values())
    flat = [question(f"q{i}", "g0", [0.0, 0.0, 0.0], [0.8, 0.9, 0.1], 0) for i in range(2)]
    assert fit_added(flat, model_scores(flat, base), "u_card") == 0.0
