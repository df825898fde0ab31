"""The seekdb store beside the file store: ingest rate and query latency, in the same run.

    python benchmarks/bench_seekdb.py [--quick] [--docs N] [--queries N] [--no-server] [--no-embedded] [--json OUT]

A seeded generated corpus (bench_scale.py's generator: ~105 chunks a document)
is indexed with hash embeddings three ways, each by the real CLI in a fresh
process:

1. files (the baseline): ``main.py index --mock``;
2. embedded seekdb: the same with ``--store seekdb:///<workdir>/db``;
3. a seekdb server: the binary shipped in the pylibseekdb wheel, started on a
   free port of 127.0.0.1 with a temporary base directory (``--store
   seekdb://root@127.0.0.1:PORT/treerag``), stopped at the end.

An engine build writes the file index first and then copies it into the
engine, so its copy time is (engine build wall) - (file build wall), and the
ingest rate is chunks / copy time. Then per store, in a fresh process: index
open time, warm query p50/p95 with the no-LLM hybrid locator over the whole
index and scoped to the question's document, and a cold ``main.py query
--mock``. Ratios are against the file store measured in this run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import GEN_VERSION, generate_corpus, make_queries  # noqa: E402
from common import (Headline, Report, banner, base_parser, bench_env, limit_blas_threads, machine_info,  # noqa: E402
                    machine_line, pick, python, run_proc, stats, table, workdir_of)


def worker(index_dir: Path, queries_file: Path, out_file: Path, n: int) -> None:
    """Warm queries in one process (fresh per store)."""
    from config import Config
    from indexing.index_store import load_index
    from pipeline import make_backends, run_pipeline

    limit_blas_threads(1)
    queries = json.loads(queries_file.read_text())[:n]
    t = time.perf_counter()
    index = load_index(index_dir)
    res: dict[str, Any] = {"open_s": time.perf_counter() - t}
    config = Config()
    backends = make_backends(index, config, None)
    for q in queries[:3]:
        run_pipeline(q["query"], index, config, backends)
    for mode in ("whole", "scoped"):
        times = []
        for q in queries:
            t = time.perf_counter()
            run_pipeline(q["query"], index, config, backends, doc_paths=set(q["scope"]) if mode == "scoped" else None)
            times.append((time.perf_counter() - t) * 1000)
        res[mode] = stats(times).to_dict()
    out_file.write_text(json.dumps(res))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """The wheel's seekdb binary on a free port with its own base directory; stopped on exit."""

    def __init__(self, base: Path, memory_budget: str = "8G") -> None:
        import pylibseekdb

        self.base = base
        self.port = _free_port()
        base.mkdir(parents=True, exist_ok=True)
        self.log = open(base / "server.log", "wb")
        self.proc = subprocess.Popen(
            [str(Path(pylibseekdb.__file__).parent / "seekdb"), "--nodaemon", "--port", str(self.port),
             "--base-dir", str(base), "--parameter", f"memory_budget={memory_budget}", "--parameter", "cpu_count=2"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "TELEMETRY_ENABLED": "false"})
        import pymysql

        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"seekdb server exited with {self.proc.returncode}")
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root@sys", password="",
                                connect_timeout=2).close()
                break
            except pymysql.Error:
                if time.monotonic() - t0 > 120:
                    self.stop()
                    raise RuntimeError("seekdb server gave no SQL login within 120 s") from None
                time.sleep(0.5)
        self.start_s = time.monotonic() - t0

    @property
    def uri(self) -> str:
        return f"seekdb://root@127.0.0.1:{self.port}/treerag"

    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=60)
        self.log.close()


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--docs", type=int, default=None, help="documents (quick 100, full 1000)")
    ap.add_argument("--queries", type=int, default=None, help="timed queries per mode (quick 20, full 60)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-server", action="store_true", help="skip the server arm")
    ap.add_argument("--no-embedded", action="store_true",
                    help="skip the embedded arm (at 10,000 documents its default 1 GB memory budget runs out)")
    ap.add_argument("--worker", nargs=4, metavar=("INDEX", "QUERIES", "OUT", "N"), help=__import__("argparse").SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), Path(args.worker[2]), int(args.worker[3]))
        return 0
    n_docs = pick(args.docs, args.quick, 100, 1000)
    n_q = pick(args.queries, args.quick, 20, 60)
    work = workdir_of(args) / "seekdb"
    work.mkdir(parents=True, exist_ok=True)
    env = bench_env()
    info = machine_info()
    banner(f"seekdb store vs file store: {n_docs:,} generated documents, hash embeddings")
    print(machine_line(info), flush=True)
    report = Report("bench_seekdb", sys.argv, info, params={"docs": n_docs, "queries": n_q, "seed": args.seed})
    docs = generate_corpus(work / f"docs-{n_docs}-s{args.seed}-g{GEN_VERSION}", n_docs, args.seed)
    qfile = work / f"queries-{n_docs}.json"
    qfile.write_text(json.dumps(make_queries(docs, n_q, args.seed)))
    question = json.loads(qfile.read_text())[0]["query"]
    server = None
    arms: dict[str, dict[str, Any]] = {}
    try:
        stores: list[tuple[str, str | None]] = [("files", None)]
        if not args.no_embedded:
            stores.append(("embedded", f"seekdb://{work / 'db'}"))
        if not args.no_server:
            server = Server(work / "server")
            print(f"server: SQL login {server.start_s:.1f} s after start, port {server.port}", flush=True)
            stores.append(("server", server.uri))
        for name, uri in stores:
            out = work / f"index-{name}-{n_docs}"
            cmd = ["main.py", "index", "--input", docs, "--output", out, "--mock", "--quiet", "--rebuild"]
            if uri:
                cmd += ["--store", uri]
            build = run_proc(python(*cmd), env=env).check()
            wres = work / f"worker-{name}.json"
            run_proc(python(Path(__file__).resolve(), "--worker", out, qfile, wres, n_q), env=env).check()
            w = json.loads(wres.read_text())
            colds = [run_proc(python("main.py", "query", "--index", out, "--mock", "--no-log", "-q", question),
                              env=env).check() for _ in range(3)]
            cold = sorted(colds, key=lambda r: r.wall_s)[1]
            arms[name] = {"build_s": build.wall_s, "build_rss_mb": build.maxrss_mb, "summary": build.stdout.strip(),
                          "cold_s": cold.wall_s, "cold_rss_mb": cold.maxrss_mb, **w}
            print(f"[{name}] {build.stdout.strip()}; wall {build.wall_s:.1f} s; open {w['open_s']:.2f} s; "
                  f"p95 whole {w['whole']['p95']:.1f} ms, scoped {w['scoped']['p95']:.1f} ms; "
                  f"cold query {cold.wall_s:.2f} s", flush=True)
        if server is not None:
            arms["server"]["server_rss_mb"] = server.rss_mb()
    finally:
        if server is not None:
            server.stop()
    chunks = int(next(iter(arms.values()))["summary"].split(" chunks")[0].split()[-1])
    base = arms["files"]
    rows = []
    for name, a in arms.items():
        copy_s = a["build_s"] - base["build_s"]
        a["copy_s"], a["ingest_rows_per_s"] = copy_s, (chunks / copy_s if name != "files" and copy_s > 0 else None)
        rows.append([name, a["build_s"], a["ingest_rows_per_s"] or "-", a["open_s"], a["whole"]["p50"],
                     a["whole"]["p95"], a["whole"]["p95"] / base["whole"]["p95"], a["scoped"]["p95"],
                     a["scoped"]["p95"] / base["scoped"]["p95"], a["cold_s"], a["cold_rss_mb"]])
    print()
    print(table(["store", "build wall s", "ingest rows/s", "open s", "whole p50 ms", "whole p95 ms", "x files",
                 "scoped p95 ms", "x files", "cold query s", "cold RSS MB"], rows))
    report.results = {"chunks": chunks, "arms": arms}
    for name in arms:
        if name == "files":
            continue
        a = arms[name]
        report.headlines += [
            Headline(f"{name}: ingest into seekdb ({chunks:,} chunks)", a["ingest_rows_per_s"] or float("nan"),
                     "rows/s"),
            Headline(f"{name}: warm query p95, whole index", a["whole"]["p95"], "ms",
                     ratio=a["whole"]["p95"] / base["whole"]["p95"], ratio_of="file store"),
            Headline(f"{name}: warm query p95, scoped to one document", a["scoped"]["p95"], "ms",
                     ratio=a["scoped"]["p95"] / base["scoped"]["p95"], ratio_of="file store"),
            Headline(f"{name}: cold main.py query --mock", a["cold_s"], "s", ratio=a["cold_s"] / base["cold_s"],
                     ratio_of="file store"),
        ]
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
