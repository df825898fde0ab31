"""Measurements of the relevance floor and the extractive answer's first sentence.

Relevance floor. Every sampled question is asked twice without an LLM (hybrid
locator, no rerank, the default path): of the documents it was written for,
and of documents it was not (a QASPER question scoped to a different paper of
the same index; a statute question against an index of unrelated English
papers built with the same multilingual embedder). The evidence-strength
statistic of ``retrieval.relevance`` is recorded for both, and a threshold is
chosen on a calibration half of the questions (split by a hash of the id) as
the value that minimises the balanced error (mean of the false-"no answer"
and false-answer rates) pooled over both sets. The other half reports both
rates at that threshold, and at the one configured in ``config.py``.

First sentence. On the questions asked of their own documents: how often the
extractive answer's first (best) sentence overlaps a human-labelled evidence
span, against the first sentence of the top-ranked chunk, and against the
first sentence of the first chunk in document order (what the concatenating
answer printed first). "Overlaps" is reported two ways: any shared character,
and at least half of the sentence inside an evidence span.

    python -m evaluation.tools.answer_quality \\
        --qasper-index ~/.cache/treerag/eval/indexes/<qasper onnx index> \\
        --lecoqa-index ~/.cache/treerag/eval/indexes/<lecoqa use index> \\
        --unrelated-index /tmp/q30_use     # e.g. 30 QASPER papers: main.py index --embedder use
        [--limit 100] [--floor-limit 200] [--json benchmarks/out/answer_quality.json]

Indexes are only read. Records are cached per run in the JSON output so
``--analyse-only`` re-derives the tables without re-running retrieval.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH = ROOT.parent / "shared" / "bench"


def _first_sentence_span(text: str, start: int) -> tuple[int, int]:
    from retrieval.extractive import SENTENCE_END

    m = SENTENCE_END.search(text)
    end = m.end() if m else len(text)
    return start, start + len(text[:end].rstrip())


def _overlaps(span: tuple[int, int], doc: str, evidence: Any) -> tuple[bool, bool]:
    """(any shared character, at least half of the span inside one evidence span)."""
    any_ov = half = False
    length = max(span[1] - span[0], 1)
    for ev in evidence:
        if ev.doc != doc:
            continue
        for a, b in ev.spans:
            ov = max(0, min(b, span[1]) - max(a, span[0]))
            any_ov |= ov > 0
            half |= 2 * ov >= length and ov > 0
    return any_ov, half


def _calibration(qid: str) -> bool:
    return int(hashlib.sha256(qid.encode()).hexdigest(), 16) % 2 == 0


def run_one(query: str, index: Any, config: Any, backends: Any, doc_paths: set[str] | None) -> dict[str, Any]:
    from pipeline import run_retrieval
    from retrieval.extractive import extract
    from retrieval.query import Query
    from retrieval.relevance import evidence_strength

    t = time.perf_counter()
    r = run_retrieval(query, index, config, backends, doc_paths)
    question = r.question or Query.build(query, backends.embedder)  # None only for stop-words alone
    strength = evidence_strength(question, r.final, index)
    ex = extract(question, r.final, index, backends.embedder, config)
    rec: dict[str, Any] = {"strength": strength.to_dict(), "ms": round((time.perf_counter() - t) * 1000, 1),
                           "n_final": len(r.final), "sentences": ex.sentences}
    rec["final_spans"] = [[rc.chunk.doc_path, rc.chunk.start_char, rc.chunk.end_char] for rc in r.final]
    if r.final:
        top = r.final[0].chunk
        first = min(r.final, key=lambda rc: rc.row).chunk
        rec["top_first"] = [top.doc_path, *_first_sentence_span(top.text, top.start_char)]
        rec["docorder_first"] = [first.doc_path, *_first_sentence_span(first.text, first.start_char)]
    if ex.quotes:
        q0 = ex.quotes[0]
        rec["extractive_first"] = [q0.chunk.doc_path, *q0.best_span]
    return rec


def collect(set_name: str, data: Path, right_index: Path, wrong_index: Path | None, limit: int,
            floor_limit: int, seed: int) -> list[dict[str, Any]]:
    """Run the ``floor_limit`` sample; records of the (nested) ``limit`` sample are marked ``first_n``."""
    from config import Config
    from evaluation.dataset import load_eval_set, sample_questions
    from indexing.index_store import load_index
    from pipeline import make_backends

    config = Config()
    es = load_eval_set(data)
    questions = sample_questions(es.questions, max(limit, floor_limit), seed)
    first_n = {q.id for q in sample_questions(es.questions, limit, seed)}
    right = load_index(right_index)
    rb = make_backends(right, config, None)
    wrong = load_index(wrong_index) if wrong_index else None
    wb = make_backends(wrong, config, None) if wrong is not None else None
    docs = sorted(right.doc_rows)
    out: list[dict[str, Any]] = []
    for i, q in enumerate(questions):
        scope = set(q.scope) if q.scope else None
        rec = {"set": set_name, "id": q.id, "calibration": _calibration(q.id), "first_n": q.id in first_n}
        right_run = run_one(q.query, right, config, rb, scope)
        for key in ("extractive_first", "top_first", "docorder_first"):
            if key in right_run:
                doc, a, b = right_run[key]
                right_run[key + "_overlap"] = _overlaps((a, b), doc, q.evidence)
        right_run["any_chunk_overlap"] = any(_overlaps((a, b), doc, q.evidence)[0]
                                             for doc, a, b in right_run["final_spans"])
        rec["right"] = right_run
        if scope is not None:  # asked of another paper of the same index
            others = [d for d in docs if d not in scope]
            other = others[int(hashlib.sha256(q.id.encode()).hexdigest(), 16) % len(others)]
            rec["wrong"] = run_one(q.query, right, config, rb, {other})
        elif wrong is not None:
            rec["wrong"] = run_one(q.query, wrong, config, wb, None)
        out.append(rec)
        print(f"\r{set_name}: {i + 1}/{len(questions)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


# --------------------------------------------------------------------------- analysis

def _rates(records: list[dict[str, Any]], key: str, thr: float) -> tuple[float, float, int, int]:
    rights = [r["right"]["strength"][key] for r in records if "right" in r]
    wrongs = [r["wrong"]["strength"][key] for r in records if "wrong" in r]
    fna = sum(v < thr for v in rights) / max(len(rights), 1)
    fa = sum(v >= thr for v in wrongs) / max(len(wrongs), 1)
    return fna, fa, len(rights), len(wrongs)


def choose_threshold(records: list[dict[str, Any]], key: str) -> float:
    """Balanced-error minimiser over the calibration records, pooled over sets (each set weighted equally)."""
    sets = sorted({r["set"] for r in records})
    values = sorted({r[side]["strength"][key] for r in records for side in ("right", "wrong") if side in r})
    if not values:
        return 0.0
    best, best_err = values[0] if values else 0.0, 2.0
    for lo, hi in zip(values, values[1:] + [values[-1] + 1.0]):
        thr = (lo + hi) / 2
        errs = [sum(_rates([r for r in records if r["set"] == s], key, thr)[:2]) / 2 for s in sets]
        err = sum(errs) / len(errs)
        if err < best_err - 1e-12:
            best, best_err = thr, err
    return round(best, 2)


def analyse(records: list[dict[str, Any]], configured: float, key: str = "score") -> dict[str, Any]:
    calib = [r for r in records if r["calibration"]]
    test = [r for r in records if not r["calibration"]]
    chosen = choose_threshold(calib, key)
    report: dict[str, Any] = {"statistic": key, "chosen_on_calibration": chosen, "configured": configured,
                              "sets": {}}
    for s in sorted({r["set"] for r in records}):
        rs = [r for r in test if r["set"] == s]
        row: dict[str, Any] = {}
        for name, thr in (("chosen", chosen), ("configured", configured)):
            fna, fa, nr, nw = _rates(rs, key, thr)
            row[name] = {"threshold": thr, "false_no_answer": round(fna, 3), "false_answer": round(fa, 3),
                         "n_right": nr, "n_wrong": nw}
        allr = [r for r in records if r["set"] == s and r.get("first_n", True)]
        first: dict[str, Any] = {}
        for kind in ("extractive_first", "top_first", "docorder_first"):
            vals = [r["right"].get(kind + "_overlap") for r in allr]
            vals = [v for v in vals if v is not None]
            first[kind] = {"any_overlap": round(sum(v[0] for v in vals) / max(len(vals), 1), 3),
                           "half_inside": round(sum(v[1] for v in vals) / max(len(vals), 1), 3),
                           "n": len(vals)}
        anyc = [r["right"].get("any_chunk_overlap") for r in allr if "any_chunk_overlap" in r["right"]]
        first["any_retrieved_chunk"] = {"any_overlap": round(sum(anyc) / max(len(anyc), 1), 3), "n": len(anyc)}
        row["first_sentence"] = first
        ms = [r["right"]["ms"] for r in allr]
        row["right_ms_median"] = sorted(ms)[len(ms) // 2] if ms else None
        report["sets"][s] = row
    return report


def print_report(rep: dict[str, Any]) -> None:
    print(f"relevance floor on '{rep['statistic']}': chosen on calibration half = {rep['chosen_on_calibration']}, "
          f"configured = {rep['configured']}")
    print(f"{'set':<10} {'threshold':>9} {'false no-answer':>16} {'false answer':>13} {'n right/wrong':>14}")
    for s, row in rep["sets"].items():
        for name in ("chosen", "configured"):
            r = row[name]
            print(f"{s:<10} {r['threshold']:>9} {r['false_no_answer']:>16.1%} {r['false_answer']:>13.1%} "
                  f"{r['n_right']:>7}/{r['n_wrong']:<6}")
    print()
    print("first sentence of the answer vs evidence spans (questions asked of their own documents)")
    print(f"{'set':<10} {'sentence':<34} {'any overlap':>12} {'half inside':>12} {'n':>5}")
    labels = {"extractive_first": "extractive answer, first sentence", "top_first": "top chunk, first sentence",
              "docorder_first": "first chunk in document order"}
    for s, row in rep["sets"].items():
        for kind, label in labels.items():
            f = row["first_sentence"][kind]
            print(f"{s:<10} {label:<34} {f['any_overlap']:>12.1%} {f['half_inside']:>12.1%} {f['n']:>5}")
        f = row["first_sentence"].get("any_retrieved_chunk")
        if f and f["n"]:
            print(f"{s:<10} {'ceiling: any retrieved chunk':<34} {f['any_overlap']:>12.1%} {'':>12} {f['n']:>5}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qasper-index", type=Path)
    ap.add_argument("--lecoqa-index", type=Path)
    ap.add_argument("--unrelated-index", type=Path, help="index of unrelated documents, same embedder as lecoqa's")
    ap.add_argument("--limit", type=int, default=100, help="questions per set for the first-sentence figures")
    ap.add_argument("--floor-limit", type=int, default=200,
                    help="questions per set for the floor (a superset of the --limit sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "answer_quality.json")
    ap.add_argument("--analyse-only", action="store_true", help="re-analyse the records in --json")
    args = ap.parse_args(argv)

    if args.analyse_only:
        records = json.loads(args.json.read_text())["records"]
    else:
        records = []
        if args.qasper_index:
            records += collect("qasper", BENCH / "qasper-dev", args.qasper_index, None, args.limit,
                               args.floor_limit, args.seed)
        if args.lecoqa_index:
            records += collect("lecoqa", BENCH / "lecoqa-train", args.lecoqa_index, args.unrelated_index,
                               args.limit, args.floor_limit, args.seed)
    rep = analyse(records, 0.35)  # the single floor every embedder had before per-model floors
    print_report(rep)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.json.with_suffix(".tmp")
    tmp.write_text(json.dumps({"report": rep, "records": records}, ensure_ascii=False, indent=1))
    tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    from utils.errors import exit_with

    exit_with(main)
