"""Run every benchmark, one after the other, and summarise the figures each is judged on.

    python benchmarks/run_all.py [--quick] [--only throughput,latency,cold,scale,incremental] [--workdir DIR] [--out FILE]

Each benchmark runs in its own process (so one's imported models and memory do
not bias the next) with its output streamed as it goes; each prints its
figures with ratios against a baseline measured in the same run. At the end,
one table of the headline figures, goal by goal. ``--quick`` uses small sizes
(the whole suite in a few minutes); without it the full sizes the goals are stated for.
Results are written as JSON (default benchmarks/out/, git-ignored).
Exit status: non-zero only if a benchmark crashed, never because a goal was missed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (RESULTS_DIR, ROOT, Headline, banner, bench_env, format_headline, machine_info, machine_line, table)  # noqa: E402

BENCHMARKS = {
    "throughput": "bench_index_throughput.py",
    "latency": "bench_query_latency.py",
    "cold": "bench_cold_query.py",
    "scale": "bench_scale.py",
    "incremental": "bench_incremental.py",
    "seekdb": "bench_seekdb.py",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: a few minutes in all")
    ap.add_argument("--only", default=",".join(BENCHMARKS), help=f"comma list of: {', '.join(BENCHMARKS)}")
    ap.add_argument("--workdir", type=Path, default=None, help="scratch folder (indexes, generated corpora)")
    ap.add_argument("--out", type=Path, default=None, help="combined JSON (default benchmarks/out/run-<time>.json)")
    args = ap.parse_args(argv)
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or RESULTS_DIR / f"run-{stamp}{'-quick' if args.quick else ''}.json"
    parts_dir = out.parent / (out.stem + ".parts")
    parts_dir.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    banner(f"TreeRAG benchmarks ({'quick' if args.quick else 'full'}): {', '.join(chosen)}")
    print(machine_line(info), flush=True)

    combined: dict = {"machine": info, "quick": args.quick, "benchmarks": {}}
    failed: list[str] = []
    t_all = time.perf_counter()
    for name in chosen:
        part = parts_dir / f"{name}.json"
        cmd = [sys.executable, str(Path(__file__).resolve().parent / BENCHMARKS[name]), "--json", str(part)]
        if args.quick:
            cmd.append("--quick")
        if args.workdir:
            cmd += ["--workdir", str(args.workdir)]
        print(f"\n$ {' '.join(cmd[1:])}", flush=True)
        t = time.perf_counter()
        rc = subprocess.call(cmd, cwd=str(ROOT), env=bench_env())
        secs = time.perf_counter() - t
        if rc != 0 or not part.is_file():
            failed.append(name)
            combined["benchmarks"][name] = {"error": f"exit status {rc}", "seconds": secs}
            print(f"!! {name} failed (exit status {rc})", flush=True)
            continue
        data = json.loads(part.read_text())
        data["seconds"] = secs
        combined["benchmarks"][name] = data
        print(f"-- {name}: {secs:.0f} s", flush=True)

    combined["seconds"] = time.perf_counter() - t_all
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(combined, indent=2))
    banner(f"Summary ({combined['seconds'] / 60:.1f} min)")
    print(machine_line(info))
    rows = []
    for name, data in combined["benchmarks"].items():
        for h in data.get("headlines", []):
            hl = Headline(**{**h, "value": float("nan") if h.get("value") is None else h["value"]})
            verdict = "" if hl.ok is None else ("met" if hl.ok else "MISSED")
            rows.append([name, hl.name, f"{format_headline(hl).split(': ', 1)[1].split('  ')[0]}",
                         "" if hl.ratio is None else f"{hl.ratio:.3g} ({hl.ratio_of})", hl.goal, verdict])
        for n in data.get("notes", []):
            rows.append([name, f"note: {n}", "", "", "", ""])
    print(table(["benchmark", "figure", "value", "ratio (baseline)", "goal", "goal?"], rows))
    for name in failed:
        print(f"FAILED: {name}")
    print(f"\nresults: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
