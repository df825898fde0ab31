"""Copying a file index into a seekdb server, per vector index type and number of insert sessions, in one run.

    python benchmarks/bench_seekdb_copy.py --index FILE_INDEX --queries QUERIES.json
        [--arms hnsw:1,hnsw_sq:1,hnsw_sq:2] [--queries-n 60] [--recall-n 20] [--min-free-gb 3]
        [--memory-budget 8G] [--keep LAST_ARM_DIR] [--json OUT]

Each arm (``TYPE:SESSIONS``, Config.store_vector_index and store_copy_sessions) gets a fresh server
(the wheel's binary on a free port of 127.0.0.1, its own base directory) so that its peak RSS is that
arm's alone. The file index (built once, e.g. ``main.py index --mock``) is copied by
``indexing.seekdb.publish.publish`` in this process: rows/s is chunks / copy wall, disk the growth
of the server's base directory. Then the index is queried in this process with the no-LLM hybrid
pipeline, over the whole collection and scoped to the question's document: a first pass on the
new engine (its caches empty) and a second, warm pass. The kNN recall is that of the engine's
1,000 candidates against the exact top 100 and top 1,000 by inner product (numpy over the file
index's vectors). The first arm is the baseline of the ratios. The copy stops (and its tables are
dropped) when the disk's free space falls below ``--min-free-gb``; each server is stopped at the end
of its arm, also on failure, and its directory deleted unless ``--keep``.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_seekdb import Server  # noqa: E402
from common import (Headline, Report, banner, base_parser, machine_info, machine_line, percentile,  # noqa: E402
                    table, workdir_of)
from bench_seekdb_query import process_cpu_s  # noqa: E402

GIB = 1 << 30


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def du(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


class DiskFull(RuntimeError):
    pass


def exact_top(emb: Any, qvecs: Any, k: int) -> list[set[int]]:
    """The exact top ``k`` rows of each question by inner product, one pass over the vectors."""
    import numpy as np

    q = np.asarray(qvecs, dtype=np.float32)
    best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), 0), dtype=np.int64)
    step = 262_144
    for a in range(0, len(emb), step):
        block = np.asarray(emb[a:a + step], dtype=np.float32)
        s = q @ block.T
        s_all = np.concatenate([best_s, s], axis=1)
        i_all = np.concatenate([best_i, np.broadcast_to(np.arange(a, a + len(block)), s.shape)], axis=1)
        keep = np.argpartition(-s_all, min(k, s_all.shape[1] - 1), axis=1)[:, :k]
        best_s = np.take_along_axis(s_all, keep, axis=1)
        best_i = np.take_along_axis(i_all, keep, axis=1)
    return [set(map(int, row)) for row in best_i]


def run_arm(args: Any, arm: str, work: Path, queries: list[dict[str, Any]], exact: dict[str, Any]) -> dict[str, Any]:
    from config import Config
    from indexing.index_store import METADATA, load_index
    from indexing.seekdb.publish import MANIFEST_FILES, keep_manifest, publish
    from indexing.seekdb.uri import parse_store_uri
    from pipeline import make_backends, run_pipeline

    kind, sessions = arm.split(":")
    base = work / f"server-{kind}-{sessions}"
    shutil.rmtree(base, ignore_errors=True)
    server = Server(base, memory_budget=args.memory_budget)
    res: dict[str, Any] = {"arm": arm}
    stop = threading.Event()
    try:
        disk0 = du(base)
        uri = parse_store_uri(server.uri)
        floor = int(args.min_free_gb * GIB)
        low: list[int] = []

        def watch() -> None:  # the index builds after the rows cannot be interrupted by advance()
            while not stop.wait(5):
                free = free_bytes(base)
                if free < floor:
                    low.append(free)
                if free < floor // 2:
                    server.stop()
                    return

        def advance(_: int) -> None:
            if low:
                raise DiskFull(f"free disk {low[-1] / GIB:.1f} GB < {args.min_free_gb} GB: copy stopped")

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        c0, s0, t0 = time.process_time(), process_cpu_s(server.proc.pid), time.perf_counter()
        fields = publish(Path(args.index), uri, advance, kind, int(sessions))
        res["copy_s"] = time.perf_counter() - t0
        res["copy_cpu_s"] = time.process_time() - c0
        res["copy_server_cpu_s"] = process_cpu_s(server.proc.pid) - s0
        res["copy_rss_mb"] = server.rss_mb()
        res["disk_mb"] = (du(base) - disk0) / (1 << 20)
        meta = json.loads((Path(args.index) / METADATA).read_text())
        chunks = int(meta["counts"]["chunks"])
        res["chunks"] = chunks
        res["rows_per_s"] = chunks / res["copy_s"]
        res["disk_bytes_per_chunk"] = res["disk_mb"] * (1 << 20) / chunks
        print(f"[{arm}] copied {chunks:,} chunks in {res['copy_s']:.0f} s ({res['rows_per_s']:,.0f} rows/s; "
              f"CPU here {res['copy_cpu_s']:.0f} s, server {res['copy_server_cpu_s']:.0f} s); server peak RSS "
              f"{res['copy_rss_mb']:,.0f} MB; disk +{res['disk_mb']:,.0f} MB", flush=True)
        idx = work / f"idx-{kind}-{sessions}"
        shutil.rmtree(idx, ignore_errors=True)
        idx.mkdir(parents=True)
        for name in (METADATA, *MANIFEST_FILES):
            shutil.copyfile(Path(args.index) / name, idx / name)
        keep_manifest(idx, fields)

        index = load_index(idx)
        config = Config()
        backends = make_backends(index, config, None)
        search = index.search
        got = []
        for qv in exact["vectors"]:
            got.append(set(search._knn(qv, "chunks", "row_id", config.tuning.store.store_candidates)))  # noqa: SLF001
        res["recall_top100"] = sum(len(g & e) for g, e in zip(got, exact["top100"])) / (100 * len(got))
        res["recall_top1000"] = sum(len(g & e) for g, e in zip(got, exact["top1000"])) / (1000 * len(got))
        for phase in ("first", "warm"):
            for mode in ("whole", "scoped"):
                times = []
                c0, s0 = time.process_time(), process_cpu_s(server.proc.pid)
                for q in queries:
                    t = time.perf_counter()
                    run_pipeline(q["query"], index, config, backends,
                                 doc_paths=set(q["scope"]) if mode == "scoped" else None)
                    times.append((time.perf_counter() - t) * 1000)
                res[f"{phase}_{mode}"] = {"p50": percentile(times, 50), "p95": percentile(times, 95),
                                          "cpu_ms": (time.process_time() - c0) * 1000 / len(times),
                                          "server_cpu_ms": (process_cpu_s(server.proc.pid) - s0) * 1000 / len(times)}
        res["rss_mb"] = server.rss_mb()
        w, s = res["warm_whole"], res["warm_scoped"]
        print(f"[{arm}] kNN recall of the exact top 100 / 1,000: {res['recall_top100']:.3f} / "
              f"{res['recall_top1000']:.3f}; first pass whole p95 {res['first_whole']['p95']:.0f} ms; warm whole "
              f"p50/p95 {w['p50']:.0f}/{w['p95']:.0f} ms (CPU {w['cpu_ms']:.0f} + server {w['server_cpu_ms']:.0f} ms), "
              f"scoped p95 {s['p95']:.0f} ms; server peak RSS {res['rss_mb']:,.0f} MB", flush=True)
        for eng in (search.engine, search.side, search.ahead):
            if eng is not None:
                eng.close()
    finally:
        stop.set()
        server.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
            shutil.rmtree(work / f"idx-{kind}-{sessions}", ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--index", required=True, help="a file index (main.py index --mock)")
    ap.add_argument("--queries", required=True, help="JSON list of {query, scope}")
    ap.add_argument("--arms", default="hnsw:1,hnsw_sq:1,hnsw_sq:2")
    ap.add_argument("--queries-n", type=int, default=60)
    ap.add_argument("--recall-n", type=int, default=20)
    ap.add_argument("--min-free-gb", type=float, default=3.0)
    ap.add_argument("--memory-budget", default="8G")
    ap.add_argument("--keep", action="store_true", help="keep the last server's directory and index")
    args = ap.parse_args(argv)
    os.environ.setdefault("TELEMETRY_ENABLED", "false")
    from config import Config
    from indexing.index_store import load_index
    from pipeline import query_embedder

    work = workdir_of(args) / "seekdb-copy"
    work.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    banner("seekdb copy: vector index types and insert sessions")
    print(machine_line(info), flush=True)
    queries = json.loads(Path(args.queries).read_text())[:args.queries_n]
    files = load_index(Path(args.index))
    embedder = query_embedder(files.embedder_identity, Config())
    vecs = [embedder.embed_query(q["query"]) for q in queries[:args.recall_n]]
    exact = {"vectors": list(vecs), "top100": exact_top(files.embeddings, vecs, 100),
             "top1000": exact_top(files.embeddings, vecs, 1000)}
    del files
    report = Report("bench_seekdb_copy", sys.argv, info, params=vars(args))
    arms = [run_arm(args, arm, work, queries, exact) for arm in args.arms.split(",")]
    base = arms[0]
    rows = [[a["arm"], a["rows_per_s"], a["rows_per_s"] / base["rows_per_s"], a["disk_bytes_per_chunk"],
             a["copy_rss_mb"], a["rss_mb"], a["recall_top100"], a["recall_top1000"], a["first_whole"]["p95"],
             a["warm_whole"]["p95"], a["warm_whole"]["p95"] / base["warm_whole"]["p95"], a["warm_scoped"]["p95"]]
            for a in arms]
    print()
    print(table(["arm", "rows/s", "x first", "disk B/chunk", "copy peak RSS MB", "peak RSS MB", "recall@100",
                 "recall@1000", "first whole p95", "warm whole p95", "x first", "warm scoped p95"], rows))
    report.results = {"arms": arms}
    for a in arms:
        report.headlines += [
            Headline(f"{a['arm']}: copy rows/s", a["rows_per_s"], "rows/s", ratio=a["rows_per_s"] / base["rows_per_s"],
                     ratio_of=base["arm"]),
            Headline(f"{a['arm']}: server peak RSS", a["rss_mb"], "MB", ratio=a["rss_mb"] / base["rss_mb"],
                     ratio_of=base["arm"]),
            Headline(f"{a['arm']}: warm whole-collection p95", a["warm_whole"]["p95"], "ms",
                     ratio=a["warm_whole"]["p95"] / base["warm_whole"]["p95"], ratio_of=base["arm"]),
        ]
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
