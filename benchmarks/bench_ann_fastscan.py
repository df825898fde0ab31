"""The IVF scan: the index's IVF-PQ (8-bit codes) against IVF-PQ fast-scan (4-bit codes, SIMD) on the
same lists, and smaller probe shares with more proposals; recall@100 and CPU per search, same run.

    python benchmarks/bench_ann_fastscan.py [--index DIR] [--queries N] [--m4 M (0: none)] [--probes 0.3,0.2,0.1]
                                            [--proposals 1000,2000,4000] [--json OUT]

Why: at 100,000 documents the three IVF scans are about half a whole-collection question's CPU. A
fast-scan index reads 4-bit codes with SIMD table lookups, several times faster per code; a smaller
probe share scans fewer lists and may keep recall with more proposals (re-scored exactly anyway).
The fast-scan index re-uses the stored index's coarse quantizer (the same lists), trains its 4-bit
product quantizer on 100,000 sampled rows and encodes every chunk vector in memory (one thread). The
baseline is the stored IVF-PQ at the default probe share and proposals. Recall@100: the share of the
exact dense top 100 (one pass over the vectors) among the proposals. Questions: ``queries-N.json``
beside the index (bench_scale's).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, limit_blas_threads, machine_info, scale_ann,  # noqa: E402
                    machine_line, scale_index, scale_questions, stats, table)

sys.path.insert(0, str(ROOT))

SAMPLE = 100_000
BLOCK = 1 << 17


def _exact_top(vecs: Any, qvecs: Any, k: int = 100) -> Any:
    """Each question's exact dense top ``k`` rows, one pass over the vectors in blocks."""
    import numpy as np

    best_s = np.full((len(qvecs), k), -np.inf, np.float32)
    best_i = np.zeros((len(qvecs), k), np.int64)
    for a in range(0, len(vecs), 1 << 18):
        blk = np.asarray(vecs[a:a + (1 << 18)])
        s = np.concatenate([best_s, qvecs @ blk.T], 1)
        ids = np.concatenate([best_i, np.broadcast_to(np.arange(a, a + len(blk)), (len(qvecs), len(blk)))], 1)
        top = np.argpartition(-s, k, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(s, top, 1), np.take_along_axis(ids, top, 1)
    return best_i


def main(argv: list[str] | None = None) -> int:
    import faiss
    import numpy as np

    from config import Config

    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=None, help="questions (quick 20, full 40)")
    ap.add_argument("--m4", type=int, default=96,
                    help="sub-quantizers of the 4-bit codes (96: 48 bytes a row); 0: the stored IVF-PQ only")
    ap.add_argument("--probes", default="0.3,0.2,0.1", help="probe shares")
    ap.add_argument("--proposals", default="1000,2000,4000", help="proposals per question")
    args = ap.parse_args(argv)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    try:
        probes = [float(p) for p in args.probes.split(",")]
        proposals = [int(k) for k in args.proposals.split(",")]
    except ValueError:
        print("error: --probes takes shares (0.3,0.2), --proposals counts (1000,2000)", file=sys.stderr)
        return 2
    limit_blas_threads(1)
    loaded = scale_ann(index_dir)
    if loaded is None:
        return 2
    index, ann = loaded
    config = Config()
    ivf, vecs = ann.index, index.embeddings
    rows, dim = vecs.shape
    if args.m4 < 0 or (args.m4 and dim % args.m4):
        print(f"error: --m4 {args.m4} is negative or does not divide the dimension {dim}", file=sys.stderr)
        return 2
    _, qlist = scale_questions(index, qfile, args.queries or (20 if args.quick else 40))
    qvecs = np.stack([np.asarray(q, dtype=np.float32) for q in qlist])
    info = machine_info()
    banner(f"IVF scan at {rows:,} rows ({ivf.nlist:,} lists): IVF-PQ 8-bit vs fast-scan 4-bit, probe shares")
    print(machine_line(info))
    default_k = ann.proposals(config.tuning.store.ann_candidates, config.tuning.store.ann_candidates_growth)
    if config.tuning.store.ann_probe in probes:  # the default's row is the ratio's baseline: always measured
        proposals = sorted(set(proposals) | {default_k})
    report = Report("ann_fastscan", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "rows": rows, "queries": len(qvecs), "m4": args.m4,
                            "probes": probes, "proposals": proposals})
    exact = _exact_top(vecs, qvecs)
    indexes: list[tuple[str, Any]] = [("IVF-PQ 8-bit", ivf)]
    if args.m4:
        fast, report.results["fastscan_build_cpu_s"] = _fast_scan(faiss, ivf, vecs, args.m4)
        indexes.append((f"fast-scan {args.m4}x4-bit", fast))
    out: dict[str, dict[str, Any]] = {}
    for probe in probes:
        for k in proposals:
            for name, ix in indexes:
                ix.nprobe = max(1, int(np.ceil(probe * ivf.nlist)))
                cpu, rec = [], []
                for i, q in enumerate(qvecs):
                    c = time.process_time()
                    _, found_rows = ix.search(q[None], k)
                    cpu.append((time.process_time() - c) * 1000)
                    rec.append(len(np.intersect1d(found_rows[0], exact[i])) / 100)
                out[f"{name}, probe {probe}, {k} proposals"] = {
                    "recall": float(np.mean(rec)), "recall_min": float(np.min(rec)), "cpu_ms": stats(cpu).to_dict()}
    base = out.get(f"IVF-PQ 8-bit, probe {config.tuning.store.ann_probe}, {default_k} proposals")
    print(table(["index, probe share, proposals", "recall@100", "min", "CPU ms p50", "CPU ms p95", "x CPU p50"],
                [[k, v["recall"], v["recall_min"], v["cpu_ms"]["p50"], v["cpu_ms"]["p95"],
                  v["cpu_ms"]["p50"] / base["cpu_ms"]["p50"] if base else "-"] for k, v in out.items()]))
    report.results["settings"] = out
    ivf_best = max((v["recall"], k) for k, v in out.items() if k.startswith("IVF-PQ"))
    report.headlines.append(Headline("best IVF-PQ recall@100", ivf_best[0], "", goal=">= 0.95", ok=ivf_best[0] >= 0.95))
    if args.m4:
        best = max((v["recall"], k) for k, v in out.items() if k.startswith("fast-scan"))
        report.headlines.append(Headline("best fast-scan recall@100", best[0], "", goal=">= 0.95", ok=best[0] >= 0.95))
    report.finish(args.json)
    return 0


def _fast_scan(faiss: Any, ivf: Any, vecs: Any, m4: int) -> tuple[Any, float]:
    """A fast-scan IVF-PQ on the stored index's lists (4-bit codes trained on sampled rows, every row
    encoded in memory, one thread) and the CPU seconds that took: the encoding is its real cost."""
    import numpy as np

    rows, dim = vecs.shape
    fast = faiss.IndexIVFPQFastScan(faiss.downcast_index(ivf.quantizer), dim, ivf.nlist, m4, 4,
                                    faiss.METRIC_INNER_PRODUCT)
    sample = np.sort(np.random.default_rng(0).choice(rows, min(SAMPLE, rows), replace=False))
    t = time.process_time()
    fast.train(np.asarray(vecs[sample]))
    for a in range(0, rows, BLOCK):
        fast.add(np.asarray(vecs[a:a + BLOCK]))
    build_cpu = time.process_time() - t
    print(f"fast-scan: {m4} x 4-bit codes trained and {rows:,} rows encoded in {build_cpu:.0f} s of CPU")
    return fast, build_cpu


if __name__ == "__main__":
    sys.exit(main())
