"""Fit the linear chunk ranker on evaluation sets, with cross-validation grouped by document.

Two models are fitted on the same questions, with the same learner: one over
the flat features only (what any chunk retriever can know) and one over the
tree features (flat + section evidence). Out-of-fold distinct-evidence nDCG@10 of both, and of
the fixed 0.5/0.5 fusion, say whether the structure adds anything a flat
learner cannot; a model fitted on one set and scored on the other says
whether it transfers. Only the weights are written (a few numbers, never any
data content).

    python -m evaluation.learn_ranker --data ../shared/bench/qasper-dev:onnx \\
        --data ../shared/bench/lecoqa-train:use --out retrieval/ranker_weights.json

The shipped one-document models were refitted over paragraph units and the joint model added (always
fitted with LambdaRank-style pair weights), the others kept (docs/evaluation.md, "The section ranker
refitted with paragraph evidence", "The top of the list fitted for the figure"):

    python -m evaluation.learn_ranker --data ../shared/bench/qasper-dev:onnx --base retrieval/ranker_weights.json \\
        --fit pairwise-paragraph --models tree,para,joint --out retrieval/ranker_weights.json --folds-out folds
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import numpy as np

from config import Config
from evaluation.dataset import EvalSet, Question, load_eval_set, sample_questions
from evaluation.metrics import Relevance, SpanTable, distinct_ndcg, question_relevance, paired_bootstrap
from evaluation.eval_index import obtain_index
from evaluation.runner import EvalOptions, document_reader
from indexing.index_store import Index
from retrieval.learned_ranker import MULTI_SUFFIX
from retrieval.node_locator import hybrid_locate
from retrieval.breadth import paragraph_ids
from retrieval.scoring import flat_scores
from retrieval.query import Query
from retrieval.section_features import (ALL_FEATURES, COVERAGE_FEATURES, ENTRY_FEATURES, FLAT_FEATURES,
                                       PARAGRAPH_FEATURES, TREE_FEATURES, chunk_features)
from utils.atomic import atomic_write_text
from utils.errors import InputError
from evaluation.cli import parse_overrides
from pipeline import make_backends

POOL = 400
"""Chunks kept per question for fitting and scoring: the best by fused score and by a section
prior. The learned top 10 lies far inside it; the eval harness ranks the whole scope."""


@dataclass
class QData:
    qid: str
    group: str
    rows: np.ndarray
    X: np.ndarray
    """ALL_FEATURES columns."""
    y: np.ndarray
    rel: Relevance
    multi: bool = False
    """Asked of several documents (a collection) rather than of one: the ranker's two regimes."""
    para: np.ndarray | None = None
    """Paragraph number of each pool row (equal within a paragraph of a leaf): every ranked list
    lists each paragraph's best window first (retrieval.breadth), so a fit and its figures can too."""


def open_set(data: Path, embedder: str, config: Config) -> tuple[EvalSet, Index]:
    """An evaluation set and its index, built (or found in eval's cache) as ``eval`` builds it, saying
    on stderr where the reading and the build are (an index of long filings embeds for an hour)."""
    opts = EvalOptions(data=data, embedder=embedder, config=config)
    eval_set = load_eval_set(data, read=document_reader(opts))  # each document read once, as eval reads it
    index, _ = obtain_index(eval_set, opts)
    return eval_set, index


def scorable_questions(data: Path, eval_set: EvalSet, index: Index,
                       limit: int | None) -> Iterator[tuple[Question, Relevance]]:
    """The sampled questions whose evidence the index can score, with their relevance; progress on stderr
    every 200 questions (collecting runs every question's retrieval: minutes)."""
    table = SpanTable.from_index(index)
    questions = sample_questions(eval_set.questions, limit, 0)
    t0 = time.perf_counter()
    for i, q in enumerate(questions):
        rel = question_relevance(table, [(e.doc, e.spans) for e in q.evidence], q.scope)
        if rel.scorable:
            yield q, rel
        if (i + 1) % 200 == 0:
            print(f"  {data.name}: {i + 1}/{len(questions)} questions ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)


def document_group(q: Question) -> str:
    """A question's cross-validation group: its document (the first of its scope, else the top folder of
    its first evidence item's document), so a held-out fold's documents were never fitted on."""
    return q.scope[0] if q.scope else q.evidence[0].doc.split("/")[0]


def collect(data: Path, embedder: str, config: Config, limit: int | None = None) -> list[QData]:
    eval_set, index = open_set(data, embedder, config)
    backends = make_backends(index, config.replace(embedder=index.embedder_identity["name"]), None)
    out: list[QData] = []
    for q, rel in scorable_questions(data, eval_set, index, limit):
        doc_paths = set(q.scope) if q.scope else None
        question = Query.build(q.query, backends.embedder)
        scores = flat_scores(index, question, config, doc_paths)
        located = {n.node_id for n in hybrid_locate(index, question, config, doc_paths).nodes}
        X = chunk_features(index, question, scores, config, located, ALL_FEATURES)
        col = {name: X[:, i] for i, name in enumerate(ALL_FEATURES)}
        fused = col["dense_mm"] * config.tuning.ranking.dense_weight + col["bm25_mm"] * config.tuning.ranking.bm25_weight
        prior = 0.5 * fused + 0.5 * col["leaf_top3"]
        keep = np.union1d(np.argsort(-fused, kind="stable")[:POOL], np.argsort(-prior, kind="stable")[:POOL])
        rows = scores.rows[keep]
        y = np.isin(rows, list(rel.relevant)).astype(np.float64)
        multi = q.scope is None or len(q.scope) > 1
        para = paragraph_ids(index, rows)
        out.append(QData(q.id, document_group(q), rows, X[keep].astype(np.float64), y, rel, multi, para))
    return out


def fit_pairwise(qs: list[QData], cols: list[int], l2: float = 1.0, negatives: int = 200,
                 iters: int = 50) -> np.ndarray:
    """Linear RankNet (pairwise logistic): each relevant chunk against non-relevant ones of the same
    question's pool, sampled uniformly (hard negatives alone teach the model to distrust the very
    score that made them hard); every question weighs the same. Newton steps, a small dense problem."""
    pairs = sample_pairs(qs, negatives)
    D = np.vstack([(q.X[pos][:, None, cols] - q.X[neg][None, :, cols]).reshape(-1, len(cols))
                   for q, pos, neg in pairs]) if pairs else np.zeros((0, len(cols)))
    return _newton(D, np.concatenate([uniform_pair_weights(q, pos, neg) for q, pos, neg in pairs]),
                   l2, len(qs), iters)


def sample_pairs(qs: list[QData], negatives: int = 200) -> list[tuple[QData, np.ndarray, np.ndarray]]:
    """Each question's relevant rows and up to ``negatives`` non-relevant ones drawn uniformly (seed 0);
    the pairs are every (relevant, non-relevant) combination, relevant-major."""
    rng = np.random.default_rng(0)
    out = []
    for q in qs:
        pos = np.flatnonzero(q.y > 0)
        neg = np.flatnonzero(q.y == 0)
        if len(pos) == 0 or len(neg) == 0:
            continue
        if len(neg) > negatives:
            neg = rng.choice(neg, negatives, replace=False)
        out.append((q, pos, neg))
    return out


def uniform_pair_weights(q: QData, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """A question's pairs summing to 1, each relevant row weighed by its share of the evidence."""
    share = evidence_shares(q)[pos]
    return np.repeat(share / share.sum(), len(neg)) / len(neg)


def _newton(D: np.ndarray, W: np.ndarray, l2: float, n_questions: int, iters: int = 50,
            w0: np.ndarray | None = None) -> np.ndarray:
    """Weighted pairwise logistic loss over score differences ``D``, L2 ``l2`` per question; convex."""
    w = np.zeros(D.shape[1]) if w0 is None else w0.copy()
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(D @ w)))
        grad = D.T @ (W * (p - 1.0)) + l2 * w / n_questions
        H = (D * (W * p * (1 - p))[:, None]).T @ D + l2 * np.eye(D.shape[1]) / n_questions
        step = np.linalg.solve(H, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w


def lambda_pair_weights(q: QData, pos: np.ndarray, neg: np.ndarray, s: np.ndarray, cutoff: int = 10
                        ) -> np.ndarray:
    """|change of the question's nDCG@cutoff| if each (relevant, non-relevant) pair swapped places in the
    ranking by ``s`` (LambdaRank's weights): a pair matters by how much the figure moves when its order
    is wrong, so pairs inside or across the top of the list count, two rows both far below it not at
    all. Gains are 1 per relevant unit (dnDCG's gain of a paragraph unit finding its item)."""
    order = np.lexsort((q.rows, -s))
    rank = np.empty(len(s), dtype=np.int64)
    rank[order] = np.arange(1, len(s) + 1)
    disc = np.where(rank <= cutoff, 1.0 / np.log2(rank + 1.0), 0.0)
    findable = max(1, min(cutoff, sum(1 for item in q.rel.per_evidence if item)))
    ideal = float(np.sum(1.0 / np.log2(np.arange(2, findable + 2))))
    return (np.abs(disc[pos][:, None] - disc[neg][None, :]) / ideal).reshape(-1)


def fit_lambda(qs: list[QData], cols: list[int], l2: float = 1.0, mix: float = 0.5, rounds: int = 4,
               negatives: int = 200) -> np.ndarray:
    """Pairwise logistic with LambdaRank-style pair weights in the same linear model, over paragraph units.

    The plain fit weighs every (relevant, non-relevant) pair of a question alike, while dnDCG@10 is
    decided by the pairs that cross the top ten. Starting from the plain fit, each round ranks every
    question's pool with the current weights and refits with each pair weighed by ``mix`` x its
    |change of nDCG@10| when swapped (``lambda_pair_weights``; the lambda part scaled to the plain
    part's total) plus ``1 - mix`` x its plain weight: the plain part keeps ordering the list below
    the top ten, which the 8,000-character context reads. Convex in each round; a few rounds settle."""
    units = paragraph_units(qs)
    pairs = sample_pairs(units, negatives)
    if not pairs:
        return np.zeros(len(cols))
    D = np.vstack([(q.X[pos][:, None, cols] - q.X[neg][None, :, cols]).reshape(-1, len(cols))
                   for q, pos, neg in pairs])
    plain = np.concatenate([uniform_pair_weights(q, pos, neg) for q, pos, neg in pairs])
    w = _newton(D, plain, l2, len(units))
    for _ in range(rounds):
        lam = np.concatenate([lambda_pair_weights(q, pos, neg, q.X[:, cols] @ w) for q, pos, neg in pairs])
        lam *= plain.sum() / max(lam.sum(), 1e-12)
        w = _newton(D, (1.0 - mix) * plain + mix * lam, l2, len(units), w0=w)
    return w


def evidence_shares(q: QData) -> np.ndarray:
    """Each pool chunk's share of the question's evidence items: an item relevant to five
    overlapping chunks gives each a fifth, so the fit is not rewarded for ranking several windows
    of one paragraph (what distinct-evidence nDCG counts once) over a second paragraph."""
    share = np.zeros(len(q.rows))
    pos = {int(r): i for i, r in enumerate(q.rows)}
    for item in q.rel.per_evidence:
        if item:
            for r in item:
                if r in pos:
                    share[pos[r]] += 1.0 / len(item)
    return share


def fit_listwise(qs: list[QData], cols: list[int], l2: float = 1.0) -> np.ndarray:
    """Listwise softmax (ListNet-style): for each question, the log share of probability mass its
    relevant chunks get among the whole pool. The loss is dominated by the top of each list,
    which is where nDCG@10 is decided; every question weighs the same. L-BFGS on a convex loss."""
    from scipy.optimize import minimize  # scipy loads only for the L-BFGS fit

    qs = [q for q in qs if q.y.any()]
    X = np.vstack([q.X[:, cols] for q in qs])
    seg = np.cumsum([0] + [len(q.y) for q in qs])
    pos = np.concatenate([q.y > 0 for q in qs])
    qid = np.repeat(np.arange(len(qs)), np.diff(seg))
    n_q = len(qs)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = X @ w
        zmax = np.maximum.reduceat(z, seg[:-1])[qid]
        e = np.exp(z - zmax)
        all_sum = np.add.reduceat(e, seg[:-1])
        pos_sum = np.bincount(qid[pos], weights=e[pos], minlength=n_q)
        val = float(np.sum(np.log(all_sum) - np.log(pos_sum))) / n_q + 0.5 * l2 * float(w @ w) / n_q
        g_coef = e / all_sum[qid] - np.where(pos, e / pos_sum[qid], 0.0)
        grad = X.T @ g_coef / n_q + l2 * w / n_q
        return val, grad

    res = minimize(loss, np.zeros(len(cols)), jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return res.x


def ndcg_of(qs: list[QData], scores: list[np.ndarray]) -> np.ndarray:
    """Distinct-evidence nDCG@10 of each question's pool ranking (an evidence item counts once), each
    paragraph's best window first as every ranked list is (when the paragraphs are known)."""
    out = []
    for q, s in zip(qs, scores):
        order = np.lexsort((q.rows, -s))
        if q.para is not None:
            _, first = np.unique(q.para[order], return_index=True)
            is_first = np.zeros(len(order), dtype=bool)
            is_first[first] = True
            order = np.concatenate((order[is_first], order[~is_first]))
        out.append(distinct_ndcg(q.rows[order[:10]].tolist(), q.rel))
    return np.asarray(out)


def paragraph_units(qs: list[QData]) -> list[QData]:
    """Each question's pool cut to one row per paragraph (its best by fused score), for a fit whose
    pairs are what a paragraph-first list orders: an evidence paragraph's five windows are five
    positives to a window-level fit, and beating them against each other teaches nothing the list
    uses."""
    out = []
    fused_cols = [ALL_FEATURES.index("dense_mm"), ALL_FEATURES.index("bm25_mm")]
    for q in qs:
        if q.para is None:
            out.append(q)
            continue
        fused = q.X[:, fused_cols].sum(axis=1)
        order = np.lexsort((q.rows, -fused))
        _, first = np.unique(q.para[order], return_index=True)
        keep = np.sort(order[first])
        y = np.zeros(len(keep))
        for j, p in enumerate(q.para[keep]):
            y[j] = q.y[q.para == p].max()
        out.append(QData(q.qid, q.group, q.rows[keep], q.X[keep], y, q.rel, q.multi, q.para[keep]))
    return out


def score_with(qs: list[QData], cols: list[int], w: np.ndarray) -> list[np.ndarray]:
    return [q.X[:, cols] @ w for q in qs]


def fit_pairwise_paragraphs(qs: list[QData], cols: list[int], l2: float = 1.0) -> np.ndarray:
    """The pairwise fit over paragraph units (``paragraph_units``): the pairs a paragraph-first list decides."""
    return fit_pairwise(paragraph_units(qs), cols, l2)


FIT = {"pairwise": fit_pairwise, "listwise": fit_listwise, "pairwise-paragraph": fit_pairwise_paragraphs,
       "lambda-paragraph": fit_lambda}
JOINT_FIT = "lambda-paragraph"
"""The joint model is always fitted with pairs weighed by their effect on nDCG@10: it orders the top of
the list (``joint_top_k``), and that objective is part of what it is; ``--fit`` chooses the others'."""


def fit_for(label: str, fit: str) -> str:
    return JOINT_FIT if label == "joint" else fit


def cross_validate(qs: list[QData], cols: list[int], folds: int = 5, l2: float = 1.0,
                   fit: str = "listwise") -> np.ndarray:
    groups = sorted({q.group for q in qs})
    rng = np.random.default_rng(0)
    fold_of = {g: int(f) for g, f in zip(groups, rng.permutation(len(groups)) % folds)}
    result = np.zeros(len(qs))
    for f in range(folds):
        train = [q for q in qs if fold_of[q.group] != f]
        test_idx = [i for i, q in enumerate(qs) if fold_of[q.group] == f]
        if not test_idx or not train:
            continue
        w = FIT[fit](train, cols, l2)
        test = [qs[i] for i in test_idx]
        result[test_idx] = ndcg_of(test, score_with(test, cols, w))
    return result


T = TypeVar("T")


def cached(cache: Path | None, load: Callable[[Path], T | None], collect: Callable[[], T],
           save: Callable[[T, Path], None]) -> T:
    """``collect()``'s features, read from ``cache`` when it holds them and written there when not:
    collecting runs every question's retrieval (minutes), fitting takes seconds, so a fit is tried many
    times over one collection."""
    got = load(cache) if cache else None
    if got is None:
        got = collect()
        if cache:
            cache.parent.mkdir(parents=True, exist_ok=True)
            save(got, cache)
    return got


def save_features(qs: list[QData], path: Path) -> None:
    """Features as plain arrays (npz, no pickle) and relevance as JSON, so fitting reruns in seconds."""
    seg = np.cumsum([0] + [len(q.y) for q in qs])
    para = [q.para if q.para is not None else -1 - np.arange(len(q.rows)) for q in qs]
    np.savez(path.with_suffix(".npz"), X=np.vstack([q.X for q in qs]), rows=np.concatenate([q.rows for q in qs]),
             y=np.concatenate([q.y for q in qs]), seg=seg, para=np.concatenate(para))
    meta = [{"qid": q.qid, "group": q.group, "multi": q.multi, "relevant": sorted(q.rel.relevant),
             "per_evidence": [sorted(e) for e in q.rel.per_evidence]} for q in qs]
    path.with_suffix(".json").write_text(json.dumps({"features": list(ALL_FEATURES), "questions": meta}),
                                         encoding="utf-8")


def load_features(path: Path) -> list[QData] | None:
    npz, js = path.with_suffix(".npz"), path.with_suffix(".json")
    if not (npz.is_file() and js.is_file()):
        return None
    meta = json.loads(js.read_text(encoding="utf-8"))
    if meta["features"] != list(ALL_FEATURES):
        return None
    with np.load(npz, allow_pickle=False) as arr:  # each arr[key] reads the whole array: read once
        if "para" not in arr.files:
            return None  # collected before paragraphs were kept
        X, rows, y, seg, para = arr["X"], arr["rows"], arr["y"], arr["seg"], arr["para"]
    out = []
    for i, m in enumerate(meta["questions"]):
        a, b = int(seg[i]), int(seg[i + 1])
        rel = Relevance(per_evidence=tuple(frozenset(e) for e in m["per_evidence"]),
                        relevant=frozenset(m["relevant"]), gold_leaves=frozenset())
        out.append(QData(m["qid"], m["group"], rows[a:b], X[a:b], y[a:b], rel, bool(m["multi"]), para[a:b]))
    return out


def fold_assignment(sets: dict[str, list[QData]], folds: int = 5) -> dict[tuple[str, str], int]:
    """(set, document group) -> fold, drawn per set in the order given: a document's questions never
    straddle folds, so a fold's figures come from documents its weights never saw."""
    rng = np.random.default_rng(0)
    fold_of: dict[tuple[str, str], int] = {}
    for name, qs in sets.items():
        groups = sorted({q.group for q in qs})
        fold_of.update({(name, g): int(f) for g, f in zip(groups, rng.permutation(len(groups)) % folds)})
    return fold_of


def pooled_cross_validate(sets: dict[str, list[QData]], cols: list[int], l2: float, fit: str,
                          folds: int = 5) -> dict[str, np.ndarray]:
    """One model fitted on the training folds of every set, scored on each set's held-out folds:
    what the shipped (pooled) model does on documents it was not fitted on."""
    fold_of = fold_assignment(sets, folds)
    out = {name: np.zeros(len(qs)) for name, qs in sets.items()}
    for f in range(folds):
        train = [q for name, qs in sets.items() for q in qs if fold_of[(name, q.group)] != f]
        w = FIT[fit](train, cols, l2)
        for name, qs in sets.items():
            idx = [i for i, q in enumerate(qs) if fold_of[(name, q.group)] == f]
            test = [qs[i] for i in idx]
            if test:
                out[name][idx] = ndcg_of(test, score_with(test, cols, w))
    return out


def cols_of(names: tuple[str, ...]) -> list[int]:
    return [ALL_FEATURES.index(n) for n in names]


def model_features(paragraph: bool) -> dict[str, tuple[str, ...]]:
    """The models a weights file holds and their features. ``para`` (chunk + paragraph) orders a
    section's chunks past its entry (``SectionRanker.chunk_model``); ``joint`` (everything, section
    evidence also counted on the entry alone) orders the top of the list (``section-joint``);
    ``paragraph`` also gives the tree model the paragraph features."""
    return {"flat": FLAT_FEATURES, "tree": TREE_FEATURES + (PARAGRAPH_FEATURES if paragraph else ()),
            "para": FLAT_FEATURES + PARAGRAPH_FEATURES,
            "joint": TREE_FEATURES + PARAGRAPH_FEATURES + COVERAGE_FEATURES + ENTRY_FEATURES}


def fit_models(sets: dict[str, list[QData]], features: dict[str, tuple[str, ...]], l2: float, fit: str,
               keep: dict[str, object] | None = None, only: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Every model of every regime (one document / a collection) fitted on ``sets``' questions of that
    regime; a regime without questions, or a model not in ``only``, keeps ``keep``'s (a refit on one set
    leaves the other's; a new model for one role leaves the others as they were)."""
    out: dict[str, dict[str, float]] = {}
    for suffix, multi in (("", False), (MULTI_SUFFIX, True)):
        regime = [q for qs in sets.values() for q in qs if q.multi == multi]
        for label, names in features.items():
            if regime and (only is None or label in only or not keep or label + suffix not in keep):
                w = FIT[fit_for(label, fit)](regime, cols_of(names), l2)
                out[label + suffix] = {n: round(float(v), 6) for n, v in zip(names, w)}
            elif keep and isinstance(keep.get(label + suffix), dict):
                out[label + suffix] = keep[label + suffix]  # type: ignore[assignment]
    for key, weights in (keep or {}).items():  # models fitted elsewhere (the union model: learn_union)
        if key not in out and _is_model(weights):
            out[key] = weights  # type: ignore[assignment]
    return out


def _is_model(value: object) -> bool:
    """A weights file's model entry (feature name -> weight), not its header or cross-validation report."""
    return (isinstance(value, dict) and bool(value)
            and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in value.values()))


def write_json_atomic(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def write_folds(sets: dict[str, list[QData]], features: dict[str, tuple[str, ...]], l2: float, fit: str,
                header: dict[str, object], keep: dict[str, object] | None, out_dir: Path, folds: int = 5,
                only: set[str] | None = None) -> None:
    """``fold-<f>.json``: the weights fitted without fold f's documents; ``folds.json``: each question's
    fold per set. ``eval --ranker-folds DIR`` then runs every question with weights that never saw its
    document: out-of-fold figures of the whole pipeline, context step included."""
    fold_of = fold_assignment(sets, folds)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in range(folds):
        train = {name: [q for q in qs if fold_of[(name, q.group)] != f] for name, qs in sets.items()}
        write_json_atomic(out_dir / f"fold-{f}.json",
                          {**header, "fold": f, **fit_models(train, features, l2, fit, keep, only)})
    write_json_atomic(out_dir / "folds.json", {
        "folds": folds,
        "sets": {name: {q.qid: fold_of[(name, q.group)] for q in qs} for name, qs in sets.items()}})


ABLATION_GROUPS: dict[str, tuple[str, ...]] = {
    "leaf evidence (leaf_max, leaf_top3)": ("leaf_max", "leaf_top3"),
    "leaf heading+summary": ("leaf_heading",),
    "neighbours": ("neighbour",),
    "parent section": ("section_max",),
    "document (doc_max, doc_top3)": ("doc_max", "doc_top3"),
    "located prior": ("located",),
    "paragraph (para_mean)": ("para_mean",),
    "adjacent paragraphs (para_adjacent, para_near_top)": ("para_adjacent", "para_near_top"),
}


def print_ablation(sets: dict[str, list[QData]], l2: float, fit: str, tree: tuple[str, ...]) -> None:
    """Out-of-fold nDCG@10 with each structural feature group removed, against the flat model,
    with paired-bootstrap intervals (same folds, same questions)."""
    for name, qs in sets.items():
        flat = cross_validate(qs, cols_of(FLAT_FEATURES), l2=l2, fit=fit)
        rows = [("flat model (chunk features only)", flat)]
        rows.append(("tree model (all features)", cross_validate(qs, cols_of(tree), l2=l2, fit=fit)))
        for label, group in ABLATION_GROUPS.items():
            if any(n in tree for n in group):
                cols = cols_of(tuple(n for n in tree if n not in group))
                rows.append((f"  without {label}", cross_validate(qs, cols, l2=l2, fit=fit)))
        print(f"\nablation, {name} ({len(qs)} questions; out-of-fold nDCG@10 on the candidate pool):")
        for label, vals in rows:
            ci = paired_bootstrap(vals, flat, resamples=2000)
            print(f"  {label:<45} {vals.mean():.4f}  vs flat {ci.diff:+.4f} [{ci.low:+.4f}, {ci.high:+.4f}]"
                  f" {'' if ci.rel is None else f'{ci.rel * 100:+.1f}%'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", required=True, help="SET_DIR:EMBEDDER (repeatable)")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--l2", type=float, default=30.0)
    ap.add_argument("--fit", choices=sorted(FIT), default="pairwise")
    ap.add_argument("--features-cache", type=Path, help="folder to keep collected features in")
    ap.add_argument("--out", type=Path, help="write the weights fitted on every set here")
    ap.add_argument("--paragraph", action="store_true",
                    help="give the tree model the paragraph features too (the para model always has them)")
    ap.add_argument("--base", type=Path,
                    help="a weights file whose models of a regime no --data set covers are kept as they are")
    ap.add_argument("--folds-out", type=Path, metavar="DIR",
                    help="also write each fold's weights (fitted without its documents) and the folds, "
                         "for `eval --ranker-folds DIR`")
    ap.add_argument("--models", default=None, metavar="NAMES",
                    help="comma list of the models to fit (flat, tree, para, joint); the others are kept from --base")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--ablation", action="store_true",
                    help="also print out-of-fold nDCG@10 of the tree model with each feature group left out")
    args = ap.parse_args(argv)
    config = Config().replace(**parse_overrides(args.set))
    only = set(args.models.split(",")) if args.models else None
    if only and (only - set(model_features(False)) or not args.base):
        raise SystemExit("error: --models takes flat, tree, para, joint and needs --base for the models it keeps")
    keep = None
    if args.base:
        try:
            keep = json.loads(args.base.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"error: --base {args.base}: {exc}") from None
    sets: dict[str, list[QData]] = {}
    for spec in args.data:
        path, _, emb = spec.rpartition(":")
        if not path or not emb:
            raise InputError(f"--data {spec!r}: expected SET_DIR:EMBEDDER")
        name = Path(path).name
        cache = (args.features_cache / f"{name}-{config.tuning.chunking.chunk_context}-{emb}-{args.limit or 'all'}"
                 if args.features_cache else None)
        sets[name] = cached(cache, load_features, lambda: collect(Path(path), emb, config, args.limit),
                            save_features)
    features = model_features(args.paragraph)
    flat_cols, tree_cols = cols_of(FLAT_FEATURES), cols_of(features["tree"])
    fused_w = np.zeros(len(ALL_FEATURES))
    fused_w[1], fused_w[2] = config.tuning.ranking.dense_weight, config.tuning.ranking.bm25_weight
    report: dict[str, dict[str, float]] = {}
    pooled = {label: pooled_cross_validate(sets, cols, args.l2, args.fit)
              for label, cols in (("flat", flat_cols), ("tree", tree_cols))}
    for name, qs in sets.items():
        base = ndcg_of(qs, score_with(qs, cols_of(ALL_FEATURES), fused_w))
        flat = cross_validate(qs, flat_cols, l2=args.l2, fit=args.fit)
        tree = cross_validate(qs, tree_cols, l2=args.l2, fit=args.fit)
        para = cross_validate(qs, cols_of(features["para"]), l2=args.l2, fit=args.fit)
        joint = cross_validate(qs, cols_of(features["joint"]), l2=args.l2, fit=JOINT_FIT)
        report[name] = {"n": len(qs), "fused": float(base.mean()), "flat_learned": float(flat.mean()),
                        "tree_learned": float(tree.mean()), "para_learned": float(para.mean()),
                        "joint_learned": float(joint.mean()),
                        "flat_pooled": float(pooled["flat"][name].mean()),
                        "tree_pooled": float(pooled["tree"][name].mean())}
        print(f"{name}: n={len(qs)} dnDCG@10 (pool of {POOL}+{POOL}, out of fold): fused={base.mean():.4f} "
              f"flat-learned={flat.mean():.4f} para-learned={para.mean():.4f} tree-learned={tree.mean():.4f} "
              f"joint-learned={joint.mean():.4f} | "
              f"pooled model: flat={pooled['flat'][name].mean():.4f} tree={pooled['tree'][name].mean():.4f}")
    if args.ablation:
        print_ablation(sets, args.l2, args.fit, features["tree"])
    names = list(sets)
    for a in names:
        for b in names:
            if a == b:
                continue
            for label, cols in (("flat", flat_cols), ("tree", tree_cols)):
                w = FIT[args.fit](sets[a], cols, args.l2)
                nd = ndcg_of(sets[b], score_with(sets[b], cols, w)).mean()
                report.setdefault("transfer", {})[f"{label}: {a} -> {b}"] = float(nd)
                print(f"transfer {label}: fit {a} -> score {b}: {nd:.4f}")
    header = {"format_version": 1, "fitted_on": names, "fit": args.fit, "l2": args.l2,
              "chunk_context": config.tuning.chunking.chunk_context}
    if args.folds_out:
        write_folds(sets, features, args.l2, args.fit, header, keep, args.folds_out, only=only)
        print(f"wrote {args.folds_out}/fold-*.json and folds.json")
    if args.out:
        models = fit_models(sets, features, args.l2, args.fit, keep, only)
        kept = sorted(m for m, w in models.items() if keep and w is keep.get(m))
        write_json_atomic(args.out, {**header, "kept_from_base": kept, "cv": report, **models})
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    from utils.errors import exit_with

    exit_with(main)
