"""ANN list count: recall and cost of capping the list count, measured where it can be (same run).

    python benchmarks/bench_ann_lists.py [--index DIR] [--queries N] [--cap LISTS] [--json OUT]

At 100,000 generated documents (10.5M chunk rows) the list rule (4 * sqrt(rows)) gives ~13,000 lists,
and filing every row under its nearest centroid costs rows x lists dot products (~10^14 flops). A cap
(``--cap``, default 4,096) cuts that ~3x but makes the lists ~2,560 rows long instead of ~810. Building
a 100,000-document index to compare both costs hours on this machine, so this benchmark keeps the
*rows per list* of each setting on the 10,000-document index of ``bench_scale.py``: the
rows per list 100,000 documents would get uncapped (~810; the baseline) against the rows per list the
cap gives them (~2,560), and the index's own list count beside. Each is trained and encoded in memory from the index's vectors
(one thread); per setting it prints recall@100 of the exact dense top 100 among the
``ann_candidates`` (default ``ann_probe``), ms per question, and the training and filing time, each
with its ratio to the baseline. Questions: ``queries-10000.json`` beside the index (bench_scale's).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, limit_blas_threads, machine_info,  # noqa: E402
                    machine_line, scale_index, scale_questions, stats, table)

sys.path.insert(0, str(ROOT))

ROWS_AT_100K = 10_500_000
"""Chunk rows of the 100,000-document generated corpus (~105 a document)."""


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from config import Config
    from indexing import ann_index
    from indexing.index_store import load_index

    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=None, help="questions (quick 20, full 60)")
    ap.add_argument("--cap", type=int, default=4096, help="the capped list count at 100,000 documents")
    args = ap.parse_args(argv)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    n_q = args.queries or (20 if args.quick else 60)
    limit_blas_threads(1)
    index = load_index(index_dir)
    config = Config()
    vecs = np.asarray(index.embeddings)
    rows, dim = vecs.shape
    questions, qvecs = scale_questions(index, qfile, n_q)
    exact = [set(np.argsort(-(vecs @ q), kind="stable")[:100].tolist()) for q in qvecs]
    info = machine_info()
    banner(f"ANN list count at {rows:,} rows: the rule vs the cap's rows per list")
    print(machine_line(info))
    report = Report("ann_lists", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "rows": rows, "queries": len(questions),
                            "probe": config.tuning.store.ann_probe, "candidates": config.tuning.store.ann_candidates})
    here = ann_index.plan(rows, dim)
    uncapped_100k = round(4 * math.sqrt(ROWS_AT_100K))

    def like(lists_at_100k: int) -> Any:
        return ann_index.AnnShape(max(1, round(rows * lists_at_100k / ROWS_AT_100K)), here.m, here.nbits)

    settings = {"rule (uncapped)": like(uncapped_100k),
                f"cap ({args.cap:,} lists at 100k)": like(args.cap),
                f"this index's own ({here.nlist:,} lists)": here}
    out: dict[str, dict[str, Any]] = {}
    for label, shape in settings.items():
        t = time.perf_counter()
        ann = ann_index.AnnIndex.build(vecs, rows, dim, label, shape)
        build_s = time.perf_counter() - t
        rec, ms = [], []
        for q, ex in zip(qvecs, exact):
            t = time.perf_counter()
            cand = ann.search(q, config.tuning.store.ann_candidates, config.tuning.store.ann_probe)
            ms.append((time.perf_counter() - t) * 1000)
            rec.append(len(ex & set(cand.tolist())) / 100)
        out[label] = {"nlist": shape.nlist, "rows_per_list": rows / shape.nlist, "build_s": build_s,
                      "recall": float(np.mean(rec)), "recall_min": float(np.min(rec)), "ms": stats(ms).to_dict()}
    base = out["rule (uncapped)"]
    print(table(["setting", "lists", "rows/list", "recall@100", "min", "ms p50", "ms p95", "x p50", "build s",
                 "x build"],
                [[k, v["nlist"], v["rows_per_list"], v["recall"], v["recall_min"], v["ms"]["p50"], v["ms"]["p95"],
                  v["ms"]["p50"] / base["ms"]["p50"], v["build_s"], v["build_s"] / base["build_s"]]
                 for k, v in out.items()]))
    flops = {n: ROWS_AT_100K * n * dim * 2 for n in (uncapped_100k, args.cap)}
    print("filing every chunk row at 100,000 documents (rows x lists x dim x 2 flops): "
          + ", ".join(f"{n:,} lists {f:.2e}" for n, f in flops.items()))
    report.results["settings"] = out
    cap = out[next(k for k in out if k.startswith("cap"))]
    report.headlines.append(Headline("recall@100 at the cap's rows per list", cap["recall"], "", goal=">= 0.95",
                                     ok=cap["recall"] >= 0.95, ratio=cap["recall"] / base["recall"],
                                     ratio_of="the rule's list count"))
    report.headlines.append(Headline("ANN ms per question at the cap's rows per list", cap["ms"]["p50"], "ms",
                                     ratio=cap["ms"]["p50"] / base["ms"]["p50"], ratio_of="the rule's list count"))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
