"""How well each tree arm's step 1 found the gold sections, from an `eval --json` file.

`eval` reports leaf recall over everything a locator returned; the hybrid locator
always returns five leaves and an LLM one to five, so that column alone favours the
longer list. This adds what compares them fairly: whether the *first* located leaf
is gold, recall of the first k located leaves, how many leaves were returned, how
often the LLM's answer was used as is, repaired, or replaced by the fallback (and
why), and the LLM's tokens and latency per question.

    python -m evaluation.tools.locator_report /tmp/eval.json [--arms tree-hybrid,tree-llm]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def _classify(fallbacks: list[dict[str, str]]) -> str:
    if not fallbacks:
        return "used as is"
    used = fallbacks[0].get("used", "")
    if used == "repaired LLM output":
        return "repaired"
    if used == "hybrid locator" or used == "keyword locator":
        return "fallback"
    return "other"


def _reason(fallbacks: list[dict[str, str]]) -> str:
    reason = fallbacks[0].get("reason", "") if fallbacks else ""
    if "'<" in reason and ">'" in reason and "dropped" in reason:
        return "copied a placeholder / bracketed id"
    if "unknown node id" in reason:
        return "unknown node id"
    if "no JSON" in reason:
        return "no JSON"
    if "timed out" in reason or "budget" in reason:
        return "timeout / budget"
    return reason[:60] or "-"


def arm_stats(questions: list[dict[str, Any]], arm: str) -> dict[str, Any]:
    top1 = r1 = r3 = r_all = 0.0
    n_loc: list[int] = []
    outcome: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    tokens_in: list[int] = []
    latency: list[float] = []
    n = 0
    for q in questions:
        out = q["arms"].get(arm)
        gold = set(q.get("gold_leaves") or [])
        if out is None or not gold:
            continue
        n += 1
        ids = [loc["node_id"] for loc in out.get("located", [])]
        n_loc.append(len(ids))
        top1 += bool(ids) and ids[0] in gold
        r1 += len(gold & set(ids[:1])) / len(gold)
        r3 += len(gold & set(ids[:3])) / len(gold)
        r_all += len(gold & set(ids)) / len(gold)
        fb = [f for f in out.get("fallbacks", []) if f.get("step") == "locate"]
        usage = out.get("usage", {})
        if usage.get("calls") or usage.get("cached_calls"):  # a cached reply was still the LLM's
            kind = _classify(fb)
            outcome[kind] += 1
            if kind == "fallback":
                reasons[_reason(fb)] += 1
        if not usage.get("cached_calls"):  # a reply served from the cache took no model time or tokens
            latency.append(float(out.get("latency_ms") or 0.0))
            if usage.get("calls"):
                tokens_in.append(int(usage.get("input_tokens") or 0))
    if not n:
        return {"arm": arm, "questions": 0}
    return {
        "arm": arm, "questions": n, "first_leaf_gold": top1 / n, "leaf_recall@1": r1 / n,
        "leaf_recall@3": r3 / n, "leaf_recall_all": r_all / n, "mean_located": statistics.mean(n_loc),
        "llm_outcomes": dict(outcome), "fallback_reasons": dict(reasons),
        "mean_prompt_tokens": statistics.mean(tokens_in) if tokens_in else None,
        "median_latency_s": statistics.median(latency) / 1000 if latency else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json_file", type=Path, help="written by `main.py eval --json`")
    p.add_argument("--arms", default=None, help="comma list (default: every tree arm in the file)")
    args = p.parse_args(argv)
    try:
        data = json.loads(args.json_file.read_text(encoding="utf-8"))
        questions = data["questions"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {args.json_file} is not an eval --json file ({exc})", file=sys.stderr)
        return 2
    present = sorted({a for q in questions for a in q.get("arms", {}) if a.startswith("tree")})
    arms = [a.strip() for a in args.arms.split(",")] if args.arms else present
    print(f"{'arm':<18} {'n':>3} {'1st gold':>8} {'R@1':>5} {'R@3':>5} {'R(all)':>6} {'#loc':>5} "
          f"{'prompt tok':>10} {'med s':>6}  LLM outcome")
    for arm in arms:
        s = arm_stats(questions, arm)
        if not s["questions"]:
            print(f"{arm:<18} (no questions with gold leaves)")
            continue
        tok = f"{s['mean_prompt_tokens']:.0f}" if s["mean_prompt_tokens"] is not None else "-"
        lat = f"{s['median_latency_s']:.1f}" if s["median_latency_s"] is not None else "cached"
        extra = ", ".join(f"{k} {v}" for k, v in s["llm_outcomes"].items())
        if s["fallback_reasons"]:
            extra += " (" + "; ".join(f"{k}: {v}" for k, v in s["fallback_reasons"].items()) + ")"
        print(f"{arm:<18} {s['questions']:>3} {s['first_leaf_gold']:>8.3f} {s['leaf_recall@1']:>5.3f} "
              f"{s['leaf_recall@3']:>5.3f} {s['leaf_recall_all']:>6.3f} {s['mean_located']:>5.1f} "
              f"{tok:>10} {lat:>6}  {extra or '-'}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # piped into head: not an error
        sys.exit(0)
