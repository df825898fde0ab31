"""What limits the top 10 (dnDCG@10): the ranker's pool, or its order?

dnDCG@10 scores step 2's ranked list (each paragraph's best window first); the context step does not
touch it. For every question this runs an arm with a longer list (``--pool``, the context pool's
size by default) and asks how much better the same list could score if only its order changed: the
best dnDCG@10 any reordering of its first N hits reaches (one relevant hit per evidence item the N
hits find, first). Beside a reference arm (another arm's or a peer's `eval --json` scores), each
question where the reference ranks better is put in one class:

- ``order``: the arm's own first N hits hold enough evidence to beat the reference's top 10 — the
  weights (the order) are what limits it;
- ``pool``: they do not — no reordering of the pool would catch up.

    python -m evaluation.tools.top10_limits --data ../shared/bench/qasper-dev --embedder onnx \\
        --index "$TREERAG_CACHE_DIR/eval/indexes/<the QASPER index>" --ref q.json:li-hybrid-256 [--set KEY=VALUE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from config import Config  # noqa: E402
from evaluation.arms import ArmContext, make_arm, run_arm  # noqa: E402
from evaluation.cli import parse_overrides  # noqa: E402
from evaluation.dataset import load_eval_set, sample_questions  # noqa: E402
from evaluation.metrics import Relevance, SpanTable, dcg, distinct_ndcg, question_relevance  # noqa: E402


def oracle_dndcg(rows: list[int], rel: Relevance, depth: int, cutoff: int = 10) -> float:
    """The best dnDCG@cutoff a reordering of ``rows[:depth]`` reaches: every evidence item the first
    ``depth`` rows find gains once, at the top."""
    findable = sum(1 for item in rel.per_evidence if item)
    ideal = dcg([1] * min(findable, cutoff))
    if ideal <= 0:
        return 0.0
    head = set(rows[:depth])
    found = sum(1 for item in rel.per_evidence if item & head)
    return dcg([1] * min(found, cutoff)) / ideal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--embedder", default="onnx")
    ap.add_argument("--index", required=True, type=Path, help="the set's evaluation index (eval's cached one)")
    ap.add_argument("--arm", default="tree-hybrid")
    ap.add_argument("--ref", required=True, metavar="EVAL_JSON:ARM",
                    help="an `eval --json` file and the arm in it to compare with (a peer arm too)")
    ap.add_argument("--pool", type=int, default=None, help="hits to list (default: the context pool)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, default=None, help="per-question figures as JSON")
    args = ap.parse_args(argv)
    from indexing.index_store import load_index
    from pipeline import make_backends

    ref_path, _, ref_arm = args.ref.rpartition(":")
    ref = {q["id"]: q["arms"][ref_arm]["scores"]["dndcg@10"]
           for q in json.loads(Path(ref_path).read_text(encoding="utf-8"))["questions"] if ref_arm in q["arms"]}
    config = Config(embedder=args.embedder).replace(**parse_overrides(args.set))
    pool = args.pool or config.tuning.ranking.context_pool
    index = load_index(args.index)
    backends = make_backends(index, config, None)
    ctx = ArmContext(index=index, backends=backends)
    arm = make_arm(args.arm, config, pool)
    table = SpanTable.from_index(index)
    eval_set = load_eval_set(args.data)
    depths = sorted({10, 20, pool})
    per_q = []
    for q in sample_questions(eval_set.questions, args.limit, 0):
        rel = question_relevance(table, [(e.doc, e.spans) for e in q.evidence], q.scope)
        if not rel.scorable or q.id not in ref:
            continue
        out = run_arm(arm, ctx, q.query, set(q.scope) if q.scope else None)
        per_q.append({"id": q.id, "ours": distinct_ndcg(out.rows, rel), "ref": float(ref[q.id] or 0.0),
                      **{f"oracle@{d}": oracle_dndcg(out.rows, rel, d) for d in depths}})
    n = len(per_q)
    mean = {k: float(np.mean([r[k] for r in per_q])) for k in per_q[0] if k != "id"} if n else {}
    print(f"{n} questions; dnDCG@10 means: {args.arm} {mean.get('ours', 0):.3f}, {ref_arm} {mean.get('ref', 0):.3f}, "
          + ", ".join(f"best reordering of the first {d} hits {mean.get(f'oracle@{d}', 0):.3f}" for d in depths))
    behind = [r for r in per_q if r["ref"] > r["ours"]]
    print(f"{len(behind)} questions where {ref_arm} ranks better ({len([r for r in per_q if r['ours'] > r['ref']])} "
          "the other way):")
    for d in depths[1:]:
        order = sum(1 for r in behind if r[f"oracle@{d}"] >= r["ref"])
        print(f"  first {d} hits: order limits {order}, pool limits {len(behind) - order}")
    if args.out:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"arm": args.arm, "ref": args.ref, "pool": pool, "questions": per_q}), encoding="utf-8")
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    from utils.errors import exit_with

    exit_with(main)
