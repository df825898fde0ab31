"""BM25 build memory: postings held and sorted in memory vs spilled in sorted runs and merged.

    python benchmarks/bench_bm25_build.py [--quick] [--rows 1000000,3000000] [--json OUT]

Each measurement is a fresh process that feeds ``BM25Builder`` generated token rows shaped like the
chunks of ``bench_scale.py``'s corpus (~26 tokens, ~21 distinct a row, Zipf over a 100,000-word
vocabulary: 1M rows ~ 10,000 documents) and saves the index, once with every posting in memory
(``run_postings`` above the total: what a build did before spilling) and once with the default
spill threshold. Printed per size: wall, peak RSS of that process (``wait4``), the saved files'
equality, and the ratio spilled / in memory (the baseline of the same run), plus the growth of each
with the rows. The tokens themselves are built per row and dropped, as a streaming build does, so
the peak is the builder's.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, bench_env, machine_info, machine_line,  # noqa: E402
                    pick, python, run_proc, table, workdir_of)

VOCAB = 100_000
TOKENS_PER_ROW = 26


def worker(rows: int, run_postings: int, out_dir: Path, result: Path) -> None:
    """Build and save one BM25 index in this process; write timings and file digests."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from indexing.bm25_builder import FILES, BM25Builder

    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(VOCAB)]
    builder = BM25Builder(run_postings=run_postings, spill_dir=out_dir)
    t = time.perf_counter()
    block = 4096
    for start in range(0, rows, block):
        n = min(block, rows - start)
        ids = np.minimum(rng.zipf(1.15, size=(n, TOKENS_PER_ROW)) - 1, VOCAB - 1)
        for row in ids.tolist():
            builder.add([vocab[i] for i in row])
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    index = builder.finish()
    dest = out_dir / "index"
    dest.mkdir()
    index.save(dest)
    finish_s = time.perf_counter() - t
    digests = {}
    for name in FILES:
        h = hashlib.sha256()
        with open(dest / name, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        digests[name] = h.hexdigest()
    result.write_text(json.dumps({"add_s": add_s, "finish_s": finish_s, "postings": int(index.indptr[-1]),
                                  "terms": index.vocab_size, "digests": digests}))


def main(argv: list[str] | None = None) -> int:
    import shutil

    ap = base_parser(__doc__)
    ap.add_argument("--rows", default=None, help="comma list of row counts (quick 300000; full 1000000,3000000)")
    ap.add_argument("--worker", nargs=4, help=__import__("argparse").SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(int(args.worker[0]), int(args.worker[1]), Path(args.worker[2]), Path(args.worker[3]))
        return 0
    sizes = [int(x) for x in pick(args.rows, args.quick, "300000", "1000000,3000000").split(",")]
    from indexing.bm25_builder import RUN_POSTINGS

    work = workdir_of(args) / "bm25_build"
    env = bench_env()
    info = machine_info()
    banner("BM25 build: postings in memory vs spilled in sorted runs")
    print(machine_line(info))
    report = Report("bm25_build", sys.argv[1:] if argv is None else list(argv), info,
                    params={"rows": sizes, "run_postings": RUN_POSTINGS, "vocab": VOCAB})
    per: dict[int, dict[str, Any]] = {}
    for n in sizes:
        res: dict[str, Any] = {}
        for mode, run in (("memory", 1 << 62), ("spilled", RUN_POSTINGS)):
            d = work / f"{n}-{mode}"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            pr = run_proc(python(Path(__file__).resolve(), "--worker", n, run, d, d / "result.json"), env=env).check()
            r = json.loads((d / "result.json").read_text())
            res[mode] = {"wall_s": pr.wall_s, "rss_mb": pr.maxrss_mb, **r}
            shutil.rmtree(d, ignore_errors=True)
        res["same_files"] = res["memory"]["digests"] == res["spilled"]["digests"]
        per[n] = res
        m, s = res["memory"], res["spilled"]
        print(f"[{n:,} rows, {m['postings']:,} postings, {m['terms']:,} terms] in memory {m['wall_s']:.1f} s "
              f"{m['rss_mb']:.0f} MB; spilled {s['wall_s']:.1f} s {s['rss_mb']:.0f} MB (x{s['rss_mb'] / m['rss_mb']:.2f} "
              f"memory, x{s['wall_s'] / m['wall_s']:.2f} time); files identical: {res['same_files']}", flush=True)
    print(table(["rows", "postings", "memory: peak MB", "spilled: peak MB", "x", "memory: s", "spilled: s", "x",
                 "same files"],
                [[n, r["memory"]["postings"], r["memory"]["rss_mb"], r["spilled"]["rss_mb"],
                  r["spilled"]["rss_mb"] / r["memory"]["rss_mb"], r["memory"]["wall_s"], r["spilled"]["wall_s"],
                  r["spilled"]["wall_s"] / r["memory"]["wall_s"], r["same_files"]] for n, r in per.items()]))
    report.results["per_size"] = {str(k): {m: {kk: vv for kk, vv in v.items() if kk != "digests"}
                                           for m, v in r.items() if isinstance(v, dict)} for k, r in per.items()}
    big = per[sizes[-1]]
    report.headlines.append(Headline(f"BM25 build peak RSS at {sizes[-1]:,} rows, spilled", big["spilled"]["rss_mb"],
                                     "MB", ratio=big["spilled"]["rss_mb"] / big["memory"]["rss_mb"],
                                     ratio_of="in memory"))
    report.headlines.append(Headline(f"BM25 build wall at {sizes[-1]:,} rows, spilled", big["spilled"]["wall_s"], "s",
                                     ratio=big["spilled"]["wall_s"] / big["memory"]["wall_s"], ratio_of="in memory"))
    report.finish(args.json)
    return 0 if all(r["same_files"] for r in per.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
