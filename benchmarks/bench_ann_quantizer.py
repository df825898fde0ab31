"""The ANN's coarse quantizer: flat (every centroid compared) vs HNSW (a graph over the centroids).

    python benchmarks/bench_ann_quantizer.py [--index DIR] [--queries N] [--synthetic-rows N]
                                             [--synthetic-lists N] [--json OUT]

Part 1, the 10,000-document index of ``bench_scale.py`` (979,420 chunk vectors, hash embeddings),
with the lists as long as ``plan`` makes them at 100,000 documents (``ROWS_PER_LIST`` rows a list).
Two IVF-PQ indexes are trained on the same sample and filled in memory, one thread:

* **flat** (the baseline): one k-means, every row filed under its exact nearest centroid;
* **hnsw**: a two-level k-means, every row filed by the HNSW graph over the centroids, once per
  ``--ef`` (the graph's search breadth; ``HNSW_EF_SEARCH`` is what the build uses).

Times are CPU seconds of this process (one thread for BLAS and faiss): on a shared machine they
move far less than wall time.

Per arm: training seconds, filing seconds per 100,000 rows (the coarse assignment alone, and with
the PQ encoding), the share of rows filed under their exact nearest centroid (a sample of rows),
recall@100 of the exact dense top 100 among ``ann_candidates`` (default ``ann_probe``) and the IVF ms
per question, each with its ratio to the flat arm; then each index is written and read back
memory-mapped in a fresh process: load seconds and the RSS it adds.

Part 2, the cost at 100,000 documents without building it: ``--synthetic-lists`` centroids (default
42,000, what ``plan`` gives 10.5M rows; synthetic rows, or with ``--synthetic-train`` trained by the
two-level k-means on a synthetic sample), and ``--synthetic-rows`` rows (default 100,000) filed by the graph; a flat filing of 8,192 rows is the
baseline of the same run. Synthetic rows are hash-embedding-like: the normalised sum of two random
chunk vectors of the index. The figures are extrapolated to the 10.5M chunk rows of 100,000 documents.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, bench_env, limit_blas_threads,  # noqa: E402
                    machine_info, machine_line, python, ratio, run_proc, scale_index, scale_questions,
                    stats, table)

sys.path.insert(0, str(ROOT))

ROWS_AT_100K = 10_500_000
AGREEMENT_SAMPLE = 50_000
FLAT_SYNTHETIC_ROWS = 8_192

LOADER = r"""
import json, resource, sys, time
import faiss, numpy as np
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
before = rss()
t = time.perf_counter()
index = faiss.read_index(sys.argv[1], faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
load = time.perf_counter() - t
after = rss()
print(json.dumps({"load_s": load, "rss_added_mb": after - before}))
"""


def synthetic(vecs: Any, n: int, seed: int) -> Any:
    """``n`` rows like the index's: the normalised sum of two random rows of it."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = np.sort(rng.integers(0, len(vecs), n))
    b = np.sort(rng.integers(0, len(vecs), n))
    x = np.asarray(vecs[a], dtype=np.float32) + np.asarray(vecs[b], dtype=np.float32)[rng.permutation(n)]
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return x


def agreement(index: Any, x: Any) -> tuple[float, float]:
    """(share of rows filed under their exact nearest centroid, mean score lost when not)."""
    import numpy as np

    from indexing import ann_index

    centroids = index.quantizer.reconstruct_n(0, index.nlist)
    _, lists = ann_index.coarse(index, x, 1)
    lists = lists[:, 0]
    same, loss = 0, []
    for start in range(0, len(x), 4096):
        s = x[start:start + 4096] @ centroids.T
        best = np.argmax(s, axis=1)
        got = lists[start:start + 4096]
        same += int((best == got).sum())
        rows = np.arange(len(s))
        loss.extend((s[rows, best] - s[rows, got])[best != got].tolist())
    return same / len(x), float(np.mean(loss)) if loss else 0.0


def coverage(index: Any, qvecs: list[Any], efs: list[int], probe: float) -> dict[str, Any]:
    """Part 0 (``--coverage``): on the index's own ANN (flat quantizer), the graph's filing of the rows
    that matter. For each question's exact dense top 100, the share filed under a list the question
    scans (``probe`` of the lists, chosen exactly), flat vs the graph over the same centroids at each
    ef: the ceiling of recall@100 each filing allows, without re-filing the other rows."""
    import faiss
    import numpy as np

    from indexing import ann_index

    ann = index.search.ann["chunks"]
    centroids = ann.index.quantizer.reconstruct_n(0, ann.index.nlist)
    graph = ann_index.hnsw_quantizer(centroids)
    flat_lists, _ = ann_index.by_row(ann.index, ann.rows, ann.name)
    dense = index.embeddings
    nprobe = max(1, int(np.ceil(probe * ann.index.nlist)))
    out: dict[str, Any] = {"lists": int(ann.index.nlist), "probe_lists": nprobe}
    tops, scanned = [], []
    for q in qvecs:
        tops.append(np.sort(np.argsort(-(np.asarray(dense) @ q), kind="stable")[:100]))
        scanned.append(set(np.argsort(-(centroids @ q))[:nprobe].tolist()))
    rows = np.concatenate(tops)
    x = np.ascontiguousarray(np.asarray(dense[rows], dtype=np.float32))
    exact = np.argmax(x @ centroids.T, axis=1)
    def covered(lists: Any) -> float:
        per = np.split(lists, len(qvecs))
        return float(np.mean([np.mean([int(v) in s for v in part]) for part, s in zip(per, scanned)]))
    out["stored (flat)"] = {"exact_list_share": float((flat_lists[rows] == exact).mean()),
                            "in_scanned_lists": covered(flat_lists[rows])}
    for ef in efs:
        _, got = graph.search(x, 1, params=faiss.SearchParametersHNSW(efSearch=ef))
        out[f"hnsw ef {ef}"] = {"exact_list_share": float((got[:, 0] == exact).mean()),
                                "in_scanned_lists": covered(got[:, 0])}
    return out


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from config import Config
    from indexing import ann_index
    from indexing.index_store import load_index

    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=None, help="questions (quick 20, full 40)")
    ap.add_argument("--synthetic-rows", type=int, default=None, help="rows filed at 100k scale (0: skip part 2)")
    ap.add_argument("--synthetic-lists", type=int, default=None, help="lists at 100k scale (default: plan's)")
    ap.add_argument("--every", type=int, default=None, help="index every Nth row of the vectors (default 1: all; "
                    "4 keeps a quarter, at the same rows per list)")
    ap.add_argument("--synthetic-train", action="store_true", help="train the 100k-scale centroids (two-level "
                    "k-means on 40 rows a list: ~2.6 GB, minutes) instead of taking synthetic rows as centroids")
    ap.add_argument("--coverage", default=None, help="comma list of small ef values: only part 0 (the index's "
                    "own ANN, the top rows filed by the graph), then exit")
    ap.add_argument("--probe-groups", default="4,8", help="groups a two-level quantizer searches per row")
    ap.add_argument("--ef", default=None, help="comma list of HNSW search breadths (default: 16 and the build's)")
    args = ap.parse_args(argv)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    n_q = args.queries or (20 if args.quick else 40)
    limit_blas_threads(1)
    import faiss

    faiss.omp_set_num_threads(1)
    index = load_index(index_dir)
    config = Config()
    every = max(1, args.every or 1)
    vecs = np.asarray(index.embeddings)[::every] if every > 1 else index.embeddings
    rows, dim = vecs.shape
    info = machine_info()
    banner(f"ANN coarse quantizer at {rows:,} rows: flat vs HNSW, lists as at 100,000 documents")
    print(machine_line(info))
    report = Report("ann_quantizer", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "rows": rows, "every": every, "queries": n_q, "probe": config.tuning.store.ann_probe,
                            "candidates": config.tuning.store.ann_candidates, "hnsw_m": ann_index.HNSW_M,
                            "ef_search": ann_index.HNSW_EF_SEARCH})
    if args.coverage:
        _, qv = scale_questions(index, qfile, n_q)
        cov = coverage(index, qv, sorted({int(e) for e in args.coverage.split(",")}), config.tuning.store.ann_probe)
        print(table(["filing of the exact top 100 rows", "lists", "under the exact nearest list",
                     "under a scanned list"],
                    [[k, cov["lists"], v["exact_list_share"], v["in_scanned_lists"]]
                     for k, v in cov.items() if isinstance(v, dict)]))
        report.results["coverage"] = cov
        report.finish(args.json)
        return 0
    here = ann_index.plan(rows, dim)
    nlist = max(1, round(rows / ann_index.ROWS_PER_LIST))
    _, qvecs = scale_questions(index, qfile, n_q)
    dense = np.asarray(vecs)
    exact = [set(np.argsort(-(dense @ q), kind="stable")[:100].tolist()) for q in qvecs]
    sample = np.sort(np.random.default_rng(1).choice(rows, AGREEMENT_SAMPLE, replace=False))
    xs = np.ascontiguousarray(dense[sample])
    out: dict[str, dict[str, Any]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="ann_quantizer_"))
    default_ef = ann_index.HNSW_EF_SEARCH
    efs = sorted({int(e) for e in (args.ef or f"16,{ann_index.HNSW_EF_SEARCH}").split(",") if e.strip()})
    clock = time.process_time
    trained_by_kind: dict[str, tuple[Any, float]] = {}
    arms = [("flat", "flat", 0)] + [(f"hnsw ef {ef}", "hnsw", ef) for ef in efs]
    for label, kind, ef in arms:
        if ef:
            ann_index.HNSW_EF_SEARCH = ef  # the module constant the filing reads (this process only)
        shape = ann_index.AnnShape(nlist, here.m, here.nbits, kind)
        if kind not in trained_by_kind:
            t = clock()
            trained_by_kind[kind] = (ann_index.train(dense, rows, dim, shape), clock() - t)
        trained, train_s = trained_by_kind[kind]
        t = clock()
        for start in range(0, rows, ann_index.BLOCK_ROWS):
            ann_index.coarse(trained, np.ascontiguousarray(dense[start:start + ann_index.BLOCK_ROWS]), 1)
        assign_s = clock() - t
        t = clock()
        lists = np.empty(rows, dtype=np.int64)
        codes = np.empty((rows, trained.code_size), dtype=np.uint8)
        for start in range(0, rows, ann_index.BLOCK_ROWS):
            x = np.ascontiguousarray(dense[start:start + ann_index.BLOCK_ROWS])
            lists[start:start + len(x)], codes[start:start + len(x)] = ann_index.encode(trained, x)
        encode_s = clock() - t
        ann = ann_index.AnnIndex(ann_index.assemble(trained, lists, codes), rows, label)
        same, loss = agreement(ann.index, xs)
        rec, ms = [], []
        for q, ex in zip(qvecs, exact):
            t = time.perf_counter()
            cand = ann.search(q, config.tuning.store.ann_candidates, config.tuning.store.ann_probe)
            ms.append((time.perf_counter() - t) * 1000)
            rec.append(len(ex & set(cand.tolist())) / 100)
        path = tmp / f"{kind}-{ef}.faiss"
        faiss.write_index(ann.index, str(path))
        loaded = json.loads(run_proc(python("-c", LOADER, path), env=bench_env()).check().stdout.strip())
        out[label] = {"nlist": nlist, "train_s": train_s, "assign_s_per_100k": assign_s / rows * 1e5,
                     "file_s_per_100k": encode_s / rows * 1e5, "exact_list_share": same, "score_lost": loss,
                     "recall": float(np.mean(rec)), "recall_min": float(np.min(rec)), "ms": stats(ms).to_dict(),
                     "file_mb": path.stat().st_size / 1e6, **loaded}
        path.unlink()
        del ann, trained, lists, codes
    base = out["flat"]
    print(table(["quantizer", "lists", "train s", "assign s/100k", "x", "file s/100k", "exact list", "recall@100",
                 "min", "IVF ms p50", "x p50", "load s", "RSS MB"],
                [[k, v["nlist"], v["train_s"], v["assign_s_per_100k"],
                  ratio(v["assign_s_per_100k"], base["assign_s_per_100k"]), v["file_s_per_100k"],
                  v["exact_list_share"], v["recall"], v["recall_min"], v["ms"]["p50"],
                  ratio(v["ms"]["p50"], base["ms"]["p50"]), v["load_s"], v["rss_added_mb"]]
                 for k, v in out.items()]))
    report.results["index"] = out
    h = out.get(f"hnsw ef {default_ef}") or out[[k for k in out if k.startswith("hnsw")][-1]]
    report.headlines.append(Headline("recall@100, HNSW quantizer, lists as at 100k", h["recall"], "",
                                     goal=">= 0.95", ok=h["recall"] >= 0.95, ratio=ratio(h["recall"], base["recall"]),
                                     ratio_of="flat quantizer, same run"))
    report.headlines.append(Headline("IVF ms per question, HNSW quantizer", h["ms"]["p50"], "ms",
                                     ratio=ratio(h["ms"]["p50"], base["ms"]["p50"]), ratio_of="flat quantizer"))

    n_syn = 100_000 if args.synthetic_rows is None else args.synthetic_rows
    if n_syn > 0:
        lists_100k = args.synthetic_lists or ann_index.plan(ROWS_AT_100K, dim).nlist
        dense = np.asarray(index.embeddings)
        t = clock()
        if args.synthetic_train:
            train_x = synthetic(dense, lists_100k * ann_index.TRAIN_PER_LIST, seed=2)
            centroids = ann_index.two_level_centroids(train_x, lists_100k)
            del train_x
        else:  # the filing's cost does not depend on how the centroids were found: rows as centroids
            centroids = synthetic(dense, lists_100k, seed=2)
        train_s = clock() - t
        t = clock()
        q = ann_index.hnsw_quantizer(centroids)
        graph_s = clock() - t
        x = synthetic(dense, FLAT_SYNTHETIC_ROWS, seed=7)
        flat = faiss.IndexFlatIP(dim)
        flat.add(centroids)
        t = clock()
        _, exact_lists = flat.search(x, 1)
        per_flat = (clock() - t) / FLAT_SYNTHETIC_ROWS * 1e5
        syn: dict[str, Any] = {"lists": lists_100k, "rows_filed": n_syn, "train_s": train_s, "graph_s": graph_s,
                               "flat_s_per_100k": per_flat, "flat_s_at_100k_docs": per_flat * ROWS_AT_100K / 1e5,
                               "hnsw": {}}
        table_rows = [[f"flat ({FLAT_SYNTHETIC_ROWS:,} rows timed)", lists_100k, "-", per_flat,
                       syn["flat_s_at_100k_docs"], 1.0, 1.0]]
        for ef in efs:
            params = faiss.SearchParametersHNSW(efSearch=ef)
            done, hnsw_s = 0, 0.0
            while done < n_syn:
                xb = synthetic(dense, min(ann_index.BLOCK_ROWS, n_syn - done), seed=100 + done)
                t = clock()
                q.search(xb, 1, params=params)
                hnsw_s += clock() - t
                done += len(xb)
            _, got = q.search(x, 1, params=params)
            share = float((got[:, 0] == exact_lists[:, 0]).mean())
            per = hnsw_s / n_syn * 1e5
            syn["hnsw"][ef] = {"s_per_100k": per, "s_at_100k_docs": per * ROWS_AT_100K / 1e5, "exact_list_share": share}
            table_rows.append([f"hnsw ef {ef} ({n_syn:,} rows timed)", lists_100k, graph_s, per,
                               per * ROWS_AT_100K / 1e5, share, ratio(per, per_flat)])
        # the other approximate scheme measured: a two-level quantizer (an IVF over the centroids,
        # ~sqrt(lists) groups, ``--probe-groups`` of them searched per row)
        groups = max(1, round(lists_100k ** 0.5))
        two = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, groups, faiss.METRIC_INNER_PRODUCT)
        two.quantizer.add(ann_index._kmeans(centroids, groups, 0))  # noqa: SLF001 - the build's own k-means
        two.is_trained = True
        two.add(centroids)
        syn["two_level"] = {}
        for pg in sorted({int(v) for v in args.probe_groups.split(",") if v.strip()}):
            params = faiss.SearchParametersIVF(nprobe=pg)
            t = clock()
            _, got = two.search(x, 1, params=params)
            per = (clock() - t) / FLAT_SYNTHETIC_ROWS * 1e5
            share = float((got[:, 0] == exact_lists[:, 0]).mean())
            syn["two_level"][pg] = {"s_per_100k": per, "exact_list_share": share}
            table_rows.append([f"two-level, {pg} of {groups} groups", lists_100k, "-", per,
                               per * ROWS_AT_100K / 1e5, share, ratio(per, per_flat)])
        print(table(["at 100k documents (CPU s)", "lists", "graph s", "file s/100k rows", "10.5M rows s",
                     "exact list", "x flat"], table_rows))
        report.results["synthetic_100k"] = syn
        mine = syn["hnsw"].get(default_ef) or syn["hnsw"][efs[-1]]
        report.headlines.append(Headline("coarse filing of 10.5M rows (100k documents), HNSW", mine["s_at_100k_docs"],
                                         "CPU s", ratio=ratio(mine["s_per_100k"], per_flat),
                                         ratio_of="flat filing, same run"))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
