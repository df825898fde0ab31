"""Run every benchmark, one after the other, and summarise the figures each is judged on.

    python benchmarks/run_all.py [--quick] [--only throughput,latency,...] [--workdir DIR] [--out FILE]

Each benchmark runs in its own process (so one's imported models and memory do
not bias the next) with its output streamed as it goes; each prints its
figures with ratios against a baseline measured in the same run. At the end,
one table of the headline figures, goal by goal. ``--quick`` uses small sizes
(the whole suite in well under an hour on 2 cores); without it the full sizes the goals are stated for.
A benchmark's modes (``bench_query_latency.py whole``, ``bench_seekdb.py copy``, ...) compare
against another checkout or an existing large index and are run by hand (benchmarks/README.md).
Results are written as JSON (default benchmarks/out/, git-ignored).
Exit status: non-zero only if a benchmark crashed, never because a goal was missed; a benchmark
whose optional dependency is not installed is reported as skipped.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (BENCH_DATA, RESULTS_DIR, ROOT, Headline, banner, bench_env, format_headline, machine_info,  # noqa: E402
                    machine_line, table)

@dataclass(frozen=True)
class Bench:
    """How to run one benchmark script."""

    script: str
    standard: bool = True
    """Takes common.base_parser's ``--json OUT --quick --workdir DIR`` and writes a ``Report``."""
    quick: tuple[str, ...] = ()
    full: tuple[str, ...] = ()
    needs: str = ""
    """A module of an optional dependency; without it the benchmark is skipped, not failed."""


BENCHMARKS = {
    "throughput": Bench("bench_index_throughput.py"),
    "latency": Bench("bench_query_latency.py"),
    "cold": Bench("bench_cold_query.py"),
    "scale": Bench("bench_scale.py"),
    "incremental": Bench("bench_incremental.py"),
    "seekdb": Bench("bench_seekdb.py", needs="pylibseekdb"),
    "formats": Bench("bench_formats.py"),
    "serve": Bench("bench_serve.py"),
    "hostile": Bench("probe_hostile.py", standard=False),
    "peer": Bench("peer_llamaindex.py", standard=False, needs="llama_index.core",
                  quick=("--embedder", "hash", "--limit", "10", "--configs", "li-hybrid-256:256:64:hybrid"),
                  full=("--embedder", "onnx")),
}


def command(name: str, bench: Bench, part: Path, quick: bool, workdir: Path | None) -> list[str]:
    """The benchmark's command line: the standard options, or its own (the peer writes its rankings)."""
    cmd = [sys.executable, str(Path(__file__).resolve().parent / bench.script)]
    if bench.standard:
        cmd += ["--json", str(part)] + (["--quick"] if quick else []) + (["--workdir", str(workdir)] if workdir else [])
    elif name == "peer":
        cmd += ["--data", str(BENCH_DATA / "qasper-dev"), "--out", str(part.with_suffix(".peer.json"))]
    return cmd + list(bench.quick if quick else bench.full)


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
        bench = BENCHMARKS[name]
        if bench.needs and importlib.util.find_spec(bench.needs.split(".")[0]) is None:
            combined["benchmarks"][name] = {"skipped": f"{bench.needs} is not installed", "seconds": 0.0}
            print(f"\n-- {name}: skipped ({bench.needs} is not installed"
                  + (": pip install -r benchmarks/requirements-peer.txt" if name == "peer" else "") + ")", flush=True)
            continue
        cmd = command(name, bench, part, args.quick, args.workdir)
        print(f"\n$ {' '.join(cmd[1:])}", flush=True)
        t = time.perf_counter()
        rc = subprocess.call(cmd, cwd=str(ROOT), env=bench_env())
        secs = time.perf_counter() - t
        if rc == 0 and not bench.standard:  # exit status only: the script prints its own summary
            combined["benchmarks"][name] = {"seconds": secs, "notes": [f"{bench.script}: exit status 0"]}
            print(f"-- {name}: {secs:.0f} s", flush=True)
            continue
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
