"""The least similar rows of a whole-collection question: a quarter of the probe share against a cap on
the lists scanned; the same row found, and the scan's CPU, same run.

    python benchmarks/bench_ann_far.py [--index DIR] [--queries N] [--lists 4096,1024,512] [--json OUT]

Why: a whole-collection question answered from the ANN adds the row least similar to it (the exact
minimum of the ``FAR_CANDIDATES`` rows the ANN finds nearest to the negated question) so that the dense
min-max normalisation spans what an exact scan's does. That scan searched ``ann_probe`` / 4 of the
lists: 2,936 of 39,145 at 100,000 documents, ~50 ms of CPU. The least similar row lies in the lists
least similar to the question, so scanning fewer of them may find the same row. The baseline is the
quarter share (the code before ``FAR_MAX_LISTS``); a row that differs is reported with how far its
score is from the baseline's, as a share of the candidates' dense range (the normalisation's span).
Questions: ``queries-N.json`` beside the index (bench_scale's).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, limit_blas_threads, machine_info, scale_ann,  # noqa: E402
                    machine_line, scale_index, scale_questions, stats, table)

sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from config import Config
    from indexing.file_search import FAR_CANDIDATES, FAR_MAX_LISTS

    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=None, help="questions (quick 20, full 60)")
    ap.add_argument("--lists", default=f"4096,{FAR_MAX_LISTS},512,256",
                    help="caps on the lists scanned for the least similar rows")
    args = ap.parse_args(argv)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    try:
        caps = [int(c) for c in args.lists.split(",") if c.strip()]
    except ValueError:
        caps = []
    if not caps or min(caps) < 1:
        print("error: --lists takes positive list counts (4096,1024)", file=sys.stderr)
        return 2
    limit_blas_threads(1)
    loaded = scale_ann(index_dir)
    if loaded is None:
        return 2
    index, ann = loaded
    config = Config()
    nlist = int(ann.index.nlist)
    quarter = config.tuning.store.ann_probe / 4
    _, qlist = scale_questions(index, qfile, args.queries or (20 if args.quick else 60))
    info = machine_info()
    banner(f"least similar rows at {len(index.embeddings):,} rows ({nlist:,} lists): a quarter of the probe "
           f"share ({int(np.ceil(quarter * nlist)):,} lists) against caps")
    print(machine_line(info))
    report = Report("ann_far", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "lists": nlist, "queries": len(qlist), "caps": caps,
                            "far_candidates": FAR_CANDIDATES, "probe": config.tuning.store.ann_probe})
    settings: list[tuple[str, int | None]] = [("quarter of the probe share", None)]
    settings += [(f"at most {c:,} lists", c) for c in caps]
    cpu: dict[str, list[float]] = {name: [] for name, _ in settings}
    rows: dict[str, list[int]] = {name: [] for name, _ in settings}
    gaps: dict[str, list[float]] = {name: [] for name, _ in settings}
    for q in qlist:
        qvec = np.asarray(q, dtype=np.float32)
        near = ann.search(qvec, ann.proposals(config.tuning.store.ann_candidates, config.tuning.store.ann_candidates_growth), config.tuning.store.ann_probe)
        top = float(index.search.dense(qvec, near).max())
        mins = {}
        for name, cap in settings:
            ann.search(-qvec, FAR_CANDIDATES, quarter, max_lists=cap)  # its lists read in: CPU, not the disk
            c = time.process_time()
            far = np.sort(ann.search(-qvec, FAR_CANDIDATES, quarter, max_lists=cap))
            cpu[name].append((time.process_time() - c) * 1000)
            dense = index.search.dense(qvec, far)
            rows[name].append(int(far[np.argmin(dense)]))
            mins[name] = float(dense.min())
        base = mins[settings[0][0]]
        for name, _ in settings:
            gaps[name].append((mins[name] - base) / max(top - base, 1e-12))
    base_rows = rows[settings[0][0]]
    base_cpu = stats(cpu[settings[0][0]]).p50
    out = {}
    for name, cap in settings:
        lists = int(np.ceil(quarter * nlist)) if cap is None else min(int(np.ceil(quarter * nlist)), cap)
        same = sum(a == b for a, b in zip(rows[name], base_rows))
        c = stats(cpu[name])
        out[name] = {"lists": lists, "same_row": same, "gap_mean": float(np.mean(gaps[name])),
                     "gap_max": float(np.max(gaps[name])), "cpu_ms": c.to_dict()}
    print(table(["far scan", "lists", "same row", "min gap mean", "min gap max", "CPU ms p50", "x CPU p50"],
                [[k, v["lists"], f"{v['same_row']}/{len(qlist)}", v["gap_mean"], v["gap_max"], v["cpu_ms"]["p50"],
                  v["cpu_ms"]["p50"] / base_cpu if base_cpu else "-"] for k, v in out.items()]))
    report.results["settings"] = out
    mine = out.get(f"at most {FAR_MAX_LISTS:,} lists")
    if mine is not None:
        report.headlines.append(Headline(f"same least similar row at FAR_MAX_LISTS {FAR_MAX_LISTS}", mine["same_row"],
                                         f"of {len(qlist)}", goal=f"= {len(qlist)}", ok=mine["same_row"] == len(qlist),
                                         ratio=mine["cpu_ms"]["p50"] / base_cpu if base_cpu else None,
                                         ratio_of="the quarter share's CPU"))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
