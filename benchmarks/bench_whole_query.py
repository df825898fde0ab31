"""Whole-collection questions on a large index: warm latency, and the same answers as another checkout.

    python benchmarks/bench_whole_query.py [--index DIR] [--queries N] [--runs N] [--ann auto,off]
                                           [--baseline-code DIR] [--profile] [--json OUT]

The index defaults to the 10,000-document index of ``bench_scale.py`` (``WORKDIR/scale/index-10000``),
the questions to that run's generated questions (``queries-10000.json`` beside it). Each worker is a
fresh process that loads the index once, answers every question once untimed (so the pages a
question reads are in the page cache for whichever checkout runs first: at 100,000 documents the
first reading of a question's pages from the disk otherwise falls on one checkout only and decides
its p95; cold questions are ``bench_cold_query.py``'s), then every question over the whole collection (``run_pipeline``, hybrid locator, mock answer), timed in process (wall,
and CPU seconds of the process: on a shared machine the CPU figure moves far less), then the same
question on the LLM locator's path (TOC under its budget, ``bench_scale``'s instant scripted LLM); it also
ranks the leaves (``hybrid_leaf_scores``: the 50 best and their scores) and cuts the TOC the LLM
locator would be shown (``toc_for_prompt``) for each question.

``--baseline-code DIR`` (e.g. ``git worktree add ../base main``): the same worker run from that
checkout on the same index, interleaved with this code's (``--runs`` rounds), is the baseline of
the latency ratios. Every answer (the run record without its ids, times and dates, and without
settings only one checkout has), leaf ranking
and TOC is digested per question; the benchmark reports how many questions differ between the
two checkouts, for each ``--ann`` setting.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, bench_env, machine_info,  # noqa: E402
                    machine_line, python, ratio, run_proc, scale_index, stats, table)

GOAL_MS = 100.0
VOLATILE = ("run_id", "created_at", "timing_ms", "logged")
"""Run-record keys that differ between two runs of the same code."""

WORKER = r"""
import cProfile, hashlib, io, json, pstats, sys, time
sys.path.insert(0, ".")
from benchmarks.common import limit_blas_threads
limit_blas_threads(1)  # as main.py does
from config import Config
from indexing.index_store import load_index
from pipeline import Backends, make_backends, run_pipeline
from retrieval.node_locator import hybrid_leaf_scores, toc_for_prompt
sys.path.insert(0, "benchmarks")
from bench_scale import InstantLLM
from retrieval.query import Query
from utils.similarity import top_order

index_dir, queries_file, n, ann, volatile, profile, shared_file = sys.argv[1:8]
shared = set(json.loads(open(shared_file).read())) if shared_file != "-" else set(Config().to_dict())
queries = [q["query"] for q in json.loads(open(queries_file).read())][:int(n)]
index = load_index(index_dir)
config = Config(ann=ann)
backends = make_backends(index, config, None)

def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]

config_llm = config.replace(locator="llm")
backends_llm = Backends(embedder=backends.embedder, reranker=backends.reranker, llm=InstantLLM())
for q in queries:  # untimed: the question's pages read in before either checkout is timed
    run_pipeline(q, index, config, backends)
    run_pipeline(q, index, config_llm, backends_llm)
out = {"total_ms": [], "cpu_ms": [], "locate_ms": [], "answers": [], "leaves": [], "toc": [], "llm_ms": [],
       "llm_cpu_ms": [], "llm_fallbacks": 0}
prof = cProfile.Profile() if profile == "1" else None
for q in queries:
    if prof:
        prof.enable()
    t, c = time.perf_counter(), time.process_time()
    r = run_pipeline(q, index, config, backends)
    out["total_ms"].append((time.perf_counter() - t) * 1000)
    out["cpu_ms"].append((time.process_time() - c) * 1000)
    if prof:
        prof.disable()
    out["locate_ms"].append(r.timing_ms.get("locate", 0.0))
    d = r.to_dict() if hasattr(r, "to_dict") else dict(r)
    d = {k: v for k, v in d.items() if k not in volatile.split(",")}
    # the settings both checkouts share: a setting one of them added is not part of the answer
    d["config"] = {k: v for k, v in (d.get("config") or {}).items() if k in shared}
    out["answers"].append(digest(d))
    question = Query.build(q, backends.embedder)
    _, total = hybrid_leaf_scores(index, question, config)
    top = top_order(total, 50)
    out["leaves"].append(digest([[int(i), round(float(total[int(i)]), 6)] for i in top]))
    out["toc"].append(digest(toc_for_prompt(index, question, config)))
    t, c = time.perf_counter(), time.process_time()
    r = run_pipeline(q, index, config_llm, backends_llm)  # the LLM locator's path, the model costing nothing
    out["llm_ms"].append((time.perf_counter() - t) * 1000)
    out["llm_cpu_ms"].append((time.process_time() - c) * 1000)
    out["llm_fallbacks"] += bool(r.fallbacks)
if prof:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
    out["profile"] = buf.getvalue()
print(json.dumps(out))
"""


def config_fields(code: Path) -> set[str]:
    """The settings (every name ``Config.to_dict`` records) a checkout has."""
    env = bench_env()
    env["PYTHONPATH"] = str(code)
    r = run_proc(python("-c", "import json, config; print(json.dumps(sorted(config.Config().to_dict())))"),
                 cwd=code, env=env).check()
    return set(json.loads(r.stdout.strip().splitlines()[-1]))


def run_worker(code: Path, index_dir: Path, qfile: Path, n: int, ann: str, profile: bool,
               shared: Path | None) -> dict[str, Any]:
    env = bench_env()
    env["PYTHONPATH"] = str(code)
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread, as main.py sets before numpy loads
        env.setdefault(var, "1")
    r = run_proc(python("-c", WORKER, index_dir, qfile, n, ann, ",".join(VOLATILE), int(profile),
                        shared if shared else "-"), cwd=code, env=env).check()
    res: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    res["maxrss_mb"] = r.maxrss_mb
    return res


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None, help="index directory (default: bench_scale's 10,000)")
    ap.add_argument("--queries", type=int, default=None, help="questions per worker (quick 20, full 60)")
    ap.add_argument("--runs", type=int, default=None, help="interleaved rounds of workers (quick 1, full 2)")
    ap.add_argument("--ann", default="auto,off", help="comma list of ann settings to run (auto, on, off)")
    ap.add_argument("--baseline-code", type=Path, default=None, help="another TreeRAG checkout: the baseline")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of this code's questions")
    args = ap.parse_args(argv)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    settings = [a.strip() for a in args.ann.split(",") if a.strip()]
    if not settings or any(a not in ("auto", "on", "off") for a in settings):
        print(f"error: --ann takes auto, on, off (got {args.ann!r})", file=sys.stderr)
        return 2
    if args.baseline_code is not None and not (args.baseline_code / "main.py").is_file():
        print(f"error: --baseline-code {args.baseline_code} is not a TreeRAG checkout", file=sys.stderr)
        return 2
    n = args.queries or (20 if args.quick else 60)
    runs = args.runs or (1 if args.quick else 2)
    codes = {"this code": ROOT} | ({"baseline": args.baseline_code.resolve()} if args.baseline_code else {})
    info = machine_info()
    banner(f"whole-collection questions on {index_dir.name}: {n} questions, {runs} round(s)")
    print(machine_line(info))
    report = Report("whole_query", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "queries": n, "runs": runs, "ann": settings,
                            "baseline_code": str(args.baseline_code) if args.baseline_code else None})
    shared = None
    if len(codes) > 1:  # a setting only one checkout has shows in its run record's config: not an answer
        fields = set.intersection(*(config_fields(code) for code in codes.values()))
        shared = Path(tempfile.mkdtemp(prefix="whole-query-")) / "shared-settings.json"
        shared.write_text(json.dumps(sorted(fields)), encoding="utf-8")
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for round_no in range(runs):
        for ann in settings:
            # interleaved, the first in turn: the machine's load falls on both alike
            order = list(codes.items())
            for label, code in (order if round_no % 2 == 0 else order[::-1]):
                got.setdefault((label, ann), []).append(
                    run_worker(code, index_dir, qfile, n, ann, args.profile and label == "this code", shared))
    if shared is not None:
        shutil.rmtree(shared.parent, ignore_errors=True)
    rows, results = [], {}
    for ann in settings:
        base = got.get(("baseline", ann))
        base_p95 = stats([t for w in base for t in w["total_ms"]]).p95 if base else None
        base_cpu = stats([t for w in base for t in w["cpu_ms"]]).p95 if base and "cpu_ms" in base[0] else None
        for label in codes:
            workers = got[(label, ann)]
            total = stats([t for w in workers for t in w["total_ms"]])
            cpu = stats([t for w in workers for t in w["cpu_ms"]])
            locate = stats([t for w in workers for t in w["locate_ms"]])
            same = {}
            if base and label != "baseline":
                for key in ("answers", "leaves", "toc"):
                    same[key] = sum(a == b for a, b in zip(workers[0][key], base[0][key]))
            results[f"{label} ann={ann}"] = {"total_ms": total.to_dict(), "cpu_ms": cpu.to_dict(),
                                             "locate_ms": locate.to_dict(),
                                             "maxrss_mb": max(w["maxrss_mb"] for w in workers),
                                             "identical_to_baseline": same}
            rows.append([label, ann, total.p50, total.p95, cpu.p50, cpu.p95, locate.p95,
                         max(w["maxrss_mb"] for w in workers), ratio(total.p95, base_p95) if base_p95 else "-",
                         ratio(cpu.p95, base_cpu) if base_cpu else "-",
                         " / ".join(f"{same[k]}/{n}" for k in ("answers", "leaves", "toc")) if same else "-"])
            if args.profile and label == "this code" and "profile" in workers[0]:
                print(f"--- profile, this code, ann={ann}\n{workers[0]['profile']}")
    print(table(["code", "ann", "p50 ms", "p95 ms", "CPU p50", "CPU p95", "locate p95", "peak RSS MB", "x p95",
                 "x CPU p95",
                 "same answers / leaves / TOC"], rows))
    llm_rows = []
    for ann in settings:
        base = got.get(("baseline", ann))
        base_cpu = stats([t for w in base for t in w.get("llm_cpu_ms", [])]).p95 if base and "llm_cpu_ms" in base[0] else None
        for label in codes:
            workers = got[(label, ann)]
            if "llm_ms" not in workers[0]:
                continue
            wall = stats([t for w in workers for t in w["llm_ms"]])
            cpu = stats([t for w in workers for t in w["llm_cpu_ms"]])
            results[f"{label} ann={ann}"].update(llm_ms=wall.to_dict(), llm_cpu_ms=cpu.to_dict(),
                                                 llm_fallbacks=sum(w["llm_fallbacks"] for w in workers))
            llm_rows.append([label, ann, wall.p50, wall.p95, cpu.p50, cpu.p95,
                             ratio(cpu.p95, base_cpu) if base_cpu else "-", sum(w["llm_fallbacks"] for w in workers)])
    print("LLM locator path (TOC budget, an instant scripted LLM):")
    print(table(["code", "ann", "p50 ms", "p95 ms", "CPU p50", "CPU p95", "x CPU p95", "fallbacks"], llm_rows))
    report.results["runs"] = results
    for ann in settings:
        mine = results[f"this code ann={ann}"]
        base_r = results.get(f"baseline ann={ann}")
        report.headlines.append(Headline(
            f"whole-collection p95, ann={ann}", mine["total_ms"]["p95"], "ms", goal=f"<= {GOAL_MS:.0f}",
            ok=mine["total_ms"]["p95"] <= GOAL_MS,
            ratio=ratio(mine["total_ms"]["p95"], base_r["total_ms"]["p95"]) if base_r else None,
            ratio_of="the baseline checkout" if base_r else ""))
        if mine["identical_to_baseline"]:
            same_all = min(mine["identical_to_baseline"].values())
            report.headlines.append(Headline(f"questions answered identically to the baseline, ann={ann}",
                                             same_all, f"of {n}", goal=f"= {n}", ok=same_all == n))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
