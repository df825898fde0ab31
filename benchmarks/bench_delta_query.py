"""Questions on an index with delta segments against the same index fully built: the cost of reading segments.

    python benchmarks/bench_delta_query.py [--index DIR] [--queries N] [--runs N] [--ann auto] [--json OUT]

The index defaults to the 10,000-document index of ``bench_scale.py``. A hard-linked copy of it and of its
documents (``cp -al``: an update writes only new files) gets two updates, each after one changed
document (``bench_scale.change_one_document``): two delta segments and two deleted documents. Then the
worker of ``bench_whole_query.py`` (a fresh process: ``load_index``, three warm-up questions, then every
question over the whole collection through ``run_pipeline``, hybrid locator, mock answer; wall and CPU
per question) runs on the original (the baseline) and on the updated copy, interleaved ``--runs`` times.
Printed: p50/p95 of each and their ratio, and the query processes' peak RSS. (The answers are not
compared here: two documents differ, so every BM25 score moves a little; that a segmented index answers
as a full build of the changed folder is tested in tests/test_delta_update.py.)
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import change_one_document, make_queries, reused_corpus  # noqa: E402
from bench_whole_query import run_worker  # noqa: E402
from common import (ROOT, Report, banner, base_parser, bench_env, machine_info, machine_line, python,  # noqa: E402
                    run_proc, scale_index, stats, table, workdir_of)


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None, help="index directory (default: bench_scale's 10,000)")
    ap.add_argument("--queries", type=int, default=None, help="questions per worker (quick 20, full 40)")
    ap.add_argument("--runs", type=int, default=1, help="interleaved rounds of the two workers")
    ap.add_argument("--ann", default="auto", help="the ann setting of both workers")
    args = ap.parse_args(argv)
    work = workdir_of(args) / "delta-query"
    index = args.index
    if index is None:
        found = scale_index(args)
        if found is None:
            print("error: no index: give --index, or run bench_scale.py --sizes 10000 first", file=sys.stderr)
            return 2
        index = found[0]
    corpus = reused_corpus(index)
    if isinstance(corpus, str):
        print(f"error: {corpus}", file=sys.stderr)
        return 2
    docs = corpus[0]
    n = args.queries or (20 if args.quick else 40)
    info = machine_info()
    banner(f"Questions on an index with delta segments vs the same index fully built ({index})")
    print(machine_line(info))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = bench_env()
    try:
        for src, dst in ((docs, work / "docs"), (index, work / "index")):
            subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
        for nth in (0.5, 0.25):
            change_one_document(work / "docs", nth)
            r = run_proc(python("main.py", "index", "--input", work / "docs", "--output", work / "index", "--mock",
                                "--quiet"), env=env).check()
            print(f"  {r.stdout.strip()}")
        qfile = work / "queries.json"
        qfile.write_text(json.dumps(make_queries(docs, n, 0)))
        results: dict[str, list[dict[str, Any]]] = {"full build": [], "with 2 deltas": []}
        for _ in range(args.runs):
            for name, where in (("full build", index), ("with 2 deltas", work / "index")):
                results[name].append(run_worker(ROOT, where, qfile, n, args.ann, False, None))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows, summary = [], {}
    for name, runs in results.items():
        wall = stats([x for r in runs for x in r["total_ms"]])
        cpu = stats([x for r in runs for x in r["cpu_ms"]])
        rss = max(r["maxrss_mb"] for r in runs)
        summary[name] = {"wall": wall, "cpu": cpu, "rss_mb": rss}
        rows.append([name, f"{wall.p50:.0f} / {wall.p95:.0f}", f"{cpu.p50:.0f} / {cpu.p95:.0f}", f"{rss:.0f}"])
    base, seg = summary["full build"], summary["with 2 deltas"]
    rows.append(["ratio", f"{seg['wall'].p50 / base['wall'].p50:.2f} / {seg['wall'].p95 / base['wall'].p95:.2f}",
                 f"{seg['cpu'].p50 / base['cpu'].p50:.2f} / {seg['cpu'].p95 / base['cpu'].p95:.2f}",
                 f"{seg['rss_mb'] / base['rss_mb']:.2f}"])
    print(table(["index", "wall ms p50 / p95", "CPU ms p50 / p95", "peak RSS MB"], rows))
    report = Report("delta_query", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index), "queries": n, "runs": args.runs, "ann": args.ann})
    report.results = summary
    if args.json:
        Path(args.json).write_text(json.dumps(report.results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
