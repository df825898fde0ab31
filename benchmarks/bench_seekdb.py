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
import re
import shutil
import threading

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import GEN_VERSION, generate_corpus, make_queries  # noqa: E402
from common import (ROOT, Headline, Report, add_baseline_code, banner, base_parser, bench_env, code_arms,  # noqa: E402
                    limit_blas_threads, machine_info, machine_line, percentile, pick, proc_memory_mb, python, ratio,
                    run_proc, run_with_modes, stats, table, workdir_of, worker_result)


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
        """The server's peak resident memory so far, in MB."""
        return proc_memory_mb(self.proc.pid).get("VmHWM", float("nan"))

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
            w = worker_result(python(Path(__file__).resolve(), "--worker", out, qfile, wres, n_q), wres, env=env)[0]
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


# --------------------------------------------------------------------------- mode query

QUERY_DOC = """Query latency on engine-backed indexes that already exist: this checkout against a baseline checkout, in one run.

    python benchmarks/bench_seekdb.py query --index embedded=IDX --index server=IDX [--index files=IDX]
        --queries QUERIES.json [--baseline-code CHECKOUT] [--queries-n N] [--rounds N] [--json OUT]

Copying 10,000 generated documents into seekdb takes ~18 minutes per engine, so this benchmark does
not build: it queries indexes made once (``bench_seekdb.py`` makes them, or ``main.py index --store``;
a server named by an index must be running). QUERIES is a JSON list of ``{"query", "scope"}``
(``bench_scale.py``/``bench_seekdb.py`` write one beside their corpus).

Each store is queried by fresh worker processes, alternately with the code of this checkout and of
``--baseline-code`` (another checkout, e.g. ``git worktree add --detach ../base main``; default: none), in
the order baseline, new, new, baseline... so that a change in the machine's load hits both. A worker
opens the index as a long-running process does (Config.store_prewarm: an embedded engine warms its
tables too), times its first question (open + first question: what a one-shot query pays), warms up on
3 questions, waits for the store's warming to end (its seconds are reported) and the engine to idle,
then times the no-LLM hybrid pipeline on every question over
the whole collection and scoped to the question's document (``run_pipeline``, as ``bench_seekdb.py``).
p50/p95 pool all rounds; ratios are new / baseline of the same store in the same run.

An embedded database keeps its memory_budget between processes (a build or an earlier run may have raised
it): ``--embedded-budget 8G`` sets it before every worker, so that each code starts its engine from the
same database.
"""


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 when it is gone)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def set_budget(checkout: Path, index_dir: Path, size: str) -> None:
    """Set the memory_budget of the embedded database ``index_dir`` names to ``size`` (this process
    starts the engine for it, before any worker does)."""
    # this checkout's tree (put on the path by common.py) must not answer for the other one's modules
    sys.path[:] = [str(checkout)] + [p for p in sys.path if Path(p or ".").resolve() not in (Path(__file__).resolve().parent, ROOT)]
    import os

    os.environ.setdefault("TELEMETRY_ENABLED", "false")
    from indexing.seekdb.engine import Engine
    from indexing.seekdb.uri import store_uri_of

    engine = Engine(store_uri_of(json.loads((index_dir / "metadata.json").read_text())))
    try:
        engine.run("ALTER SYSTEM SET memory_budget = %s", (size,))
    finally:
        engine.close()


def _engine_pids(server_pid: int) -> list[int]:
    """The engine serving this worker: the server's process, or the embedded engine this process started."""
    import os

    if server_pid:
        return [server_pid]
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


IDLE_S = 5.0
"""Seconds the engine's idle CPU is sampled before the timed questions."""
SETTLED_MS_PER_S = 60.0
"""An engine idling below this CPU rate has settled (a settled seekdb idles at 20-35 ms/s here)."""
SETTLE_MAX_S = 90.0


def _settle(engine: list[int]) -> float:
    """Wait (at most SETTLE_MAX_S) until the engine idles below SETTLED_MS_PER_S over 2 s; the seconds waited.

    Why: an embedded engine started by this worker keeps loading its vector indexes in the background
    for tens of seconds after the warm-up questions (100-180 ms/s of CPU); timed then, every question
    looked ~3x its engine cost, and the old and new code alike."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < SETTLE_MAX_S:
        e0 = sum(process_cpu_s(p) for p in engine)
        time.sleep(2.0)
        if (sum(process_cpu_s(p) for p in engine) - e0) / 2.0 * 1000 < SETTLED_MS_PER_S:
            break
    return time.perf_counter() - t0


def query_worker(checkout: Path, index_dir: Path, queries_file: Path, out_file: Path, n: int, server_pid: int,
                 warm_all: bool = False, prewarm: str = "") -> None:
    """Timed questions with ``checkout``'s code (imported first: this file's own tree is not on the path);
    ``warm_all``: every question asked once before (the engine's caches then hold what they read, as in
    a long-running process; a new embedded engine otherwise spends its first questions reading its tables);
    ``prewarm``: Config.store_prewarm for ``checkout``'s code (empty: its default)."""
    # this checkout's tree (put on the path by common.py) must not answer for the other one's modules
    sys.path[:] = [str(checkout)] + [p for p in sys.path if Path(p or ".").resolve() not in (Path(__file__).resolve().parent, ROOT)]
    import inspect
    import os

    os.environ.setdefault("TELEMETRY_ENABLED", "false")
    from threadpoolctl import threadpool_limits

    from config import Config
    from indexing.index_store import load_index
    from pipeline import make_backends, run_pipeline

    queries = json.loads(queries_file.read_text())[:n]
    with threadpool_limits(1):
        t = time.perf_counter()
        index = load_index(index_dir)
        res: dict[str, Any] = {"open_s": time.perf_counter() - t,
                               "code": str(Path(sys.modules["pipeline"].__file__ or "").resolve().parent)}
        config = Config() if not prewarm else Config(store_prewarm=prewarm)
        t = time.perf_counter()
        # many questions follow: a long-running process (Config.store_prewarm "auto"), where the code knows one
        if "long_running" in inspect.signature(make_backends).parameters:
            backends = make_backends(index, config, None, long_running=True)
        else:
            backends = make_backends(index, config, None)
        warm_from = t
        warm_up = queries if warm_all else queries[:3]
        t = time.perf_counter()
        run_pipeline(warm_up[0]["query"], index, config, backends)
        res["first_s"] = time.perf_counter() - t  # a one-shot query's question: what open + this cost is the sum
        for q in warm_up[1:]:
            run_pipeline(q["query"], index, config, backends)
        warmer = getattr(index.search, "warmer", None)
        if warmer is not None:  # the warming started at open, to its end: reported, not hidden by the settling
            warmer.join()
            res["warm_s"] = time.perf_counter() - warm_from
            res["warm_steps_s"] = dict(warmer.report.seconds)
            res["warm_error"] = warmer.report.error
        engine = _engine_pids(server_pid)
        res["engine_settle_s"] = _settle(engine)
        # the engine's background threads burn CPU while it answers nothing (~175 ms/s on a seekdb
        # server here): measured first, then taken out of its CPU per question, which would otherwise
        # grow with the wall time a busy machine adds
        e0 = sum(process_cpu_s(p) for p in engine)
        time.sleep(IDLE_S)
        idle_rate = (sum(process_cpu_s(p) for p in engine) - e0) / IDLE_S
        res["engine_idle_ms_per_s"] = idle_rate * 1000
        for mode in ("whole", "scoped"):
            times = []
            c0, e0, w0 = time.process_time(), sum(process_cpu_s(p) for p in engine), time.perf_counter()
            for q in queries:
                t = time.perf_counter()
                run_pipeline(q["query"], index, config, backends,
                             doc_paths=set(q["scope"]) if mode == "scoped" else None)
                times.append((time.perf_counter() - t) * 1000)
            res[mode] = times
            # CPU per question, this process and the engine's (gross, and net of its idle rate): what a
            # busy machine's wall time hides
            engine_ms = (sum(process_cpu_s(p) for p in engine) - e0) * 1000
            res[mode + "_cpu_ms"] = [(time.process_time() - c0) * 1000 / len(queries), engine_ms / len(queries),
                                     (engine_ms - idle_rate * 1000 * (time.perf_counter() - w0)) / len(queries)]
    import resource

    # peak resident memory: this process (TreeRAG), and the engine (an embedded one is this worker's own;
    # a server's is its peak since it started)
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["engine_peak_rss_mb"] = sum(proc_memory_mb(p).get("VmHWM", 0.0) for p in engine)
    out_file.write_text(json.dumps(res))


def statistics_mean(values: Any) -> float:
    xs = [float(v) for v in values]
    return sum(xs) / len(xs) if xs else float("nan")


def query_main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # a worker process this mode started, with another checkout's code
        query_worker(Path(argv[1]), Path(argv[2]), Path(argv[3]), Path(argv[4]), int(argv[5]), int(argv[6]),
                     argv[7] == "--warm-all", argv[8])
        return 0
    if argv[:1] == ["--set-budget"]:
        set_budget(Path(argv[1]), Path(argv[2]), argv[3])
        return 0
    ap = base_parser(QUERY_DOC)
    ap.add_argument("--index", action="append", required=True, metavar="NAME=DIR",
                    help="an index to query (repeat): e.g. embedded=/idx/emb server=/idx/srv files=/idx/files")
    ap.add_argument("--queries", type=Path, required=True, help="JSON list of {query, scope}")
    ap.add_argument("--queries-n", type=int, default=None, help="timed questions per mode (quick 20, full 60)")
    ap.add_argument("--rounds", type=int, default=None, help="worker processes per store and code (quick 1, full 2)")
    add_baseline_code(ap)
    ap.add_argument("--warm-all", action="store_true",
                    help="ask every question once before timing them (warm engine caches, as a long-running process)")
    ap.add_argument("--prewarm", default="", choices=["", "auto", "off", "indexes", "tables"],
                    help="Config.store_prewarm for this checkout's workers (default: the code's own, for a "
                         "long-running process); the baseline keeps its own")
    ap.add_argument("--embedded-budget", default="", metavar="SIZE",
                    help="set an embedded database's memory_budget to SIZE (e.g. 8G) before every worker, so "
                         "that both codes start from the same database (its budget persists between processes)")
    ap.add_argument("--server-pid", type=int, default=0,
                    help="the seekdb server's process id: its CPU time per question is reported (an embedded "
                         "engine's is found as the worker's child)")
    args = ap.parse_args(argv)
    n = args.queries_n or (20 if args.quick else 60)
    rounds = args.rounds or (1 if args.quick else 2)
    stores: list[tuple[str, Path]] = []
    for spec in args.index:
        name, sep, path = spec.partition("=")
        if not sep or not name or not (Path(path) / "metadata.json").is_file():
            print(f"error: --index {spec}: expected NAME=DIR of an index (metadata.json)", file=sys.stderr)
            return 2
        stores.append((name, Path(path)))
    if not args.queries.is_file():
        print(f"error: --queries {args.queries}: no such file", file=sys.stderr)
        return 2
    if args.embedded_budget and not re.fullmatch(r"[1-9][0-9]*[MG]", args.embedded_budget):
        print(f"error: --embedded-budget {args.embedded_budget}: expected a size such as 8G", file=sys.stderr)
        return 2
    codes = code_arms(args.baseline_code, "new", "baseline")
    work = workdir_of(args) / "seekdb-query"
    work.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    banner(f"engine-backed query latency, {n} questions, {rounds} round(s), " + ", ".join(n for n, _ in stores))
    print(machine_line(info), flush=True)
    report = Report("bench_seekdb.py query", sys.argv[1:] if argv is None else argv, info,
                    params={"queries": n, "rounds": rounds, "baseline": str(args.baseline_code or ""),
                            "warm_all": args.warm_all, "embedded_budget": args.embedded_budget})
    times: dict[tuple[str, str], dict[str, list[float]]] = {}
    opens: dict[tuple[str, str], list[float]] = {}
    firsts: dict[tuple[str, str], list[float]] = {}
    warms: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[list[float]]] = {}
    rss: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for store, index_dir in stores:
        for r in range(rounds):
            order = codes if r % 2 else list(reversed(codes))
            for code, checkout in order:
                env = bench_env()
                env["PYTHONPATH"] = str(checkout)
                out = work / f"{store}-{code}-{r}.json"
                uri = str((json.loads((index_dir / "metadata.json").read_text()).get("store") or {}).get("uri", ""))
                server_pid = args.server_pid if uri.startswith("seekdb://") and not uri.startswith("seekdb:///") else 0
                if args.embedded_budget and uri.startswith("seekdb:///"):
                    run_proc(python(Path(__file__).resolve(), "query", "--set-budget", ROOT, index_dir.resolve(),
                                    args.embedded_budget), cwd=ROOT, env=bench_env()).check()
                got = worker_result(python(Path(__file__).resolve(), "query", "--worker", checkout, index_dir.resolve(),
                                           args.queries.resolve(), out, n, server_pid,
                                           "--warm-all" if args.warm_all else "-",
                                           args.prewarm if code == "new" else ""), out, env=env, cwd=checkout)[0]
                if Path(got["code"]) != checkout.resolve():
                    raise RuntimeError(f"the {code} worker ran the code in {got['code']}, not {checkout}")
                slot = times.setdefault((store, code), {"whole": [], "scoped": []})
                for mode in slot:
                    slot[mode] += got[mode]
                cpu.setdefault((store, code), []).append(got["whole_cpu_ms"])
                opens.setdefault((store, code), []).append(got["open_s"])
                firsts.setdefault((store, code), []).append(got["first_s"])
                warms.setdefault((store, code), []).append(got.get("warm_s", 0.0))
                rss.setdefault((store, code), []).append((got.get("peak_rss_mb", 0.0), got.get("engine_peak_rss_mb", 0.0)))
                w = stats(got["whole"])
                print(f"[{store} / {code} / round {r + 1}] whole p50 {w.p50:.1f} p95 {w.p95:.1f} ms "
                      f"(CPU per question: {got['whole_cpu_ms'][0]:.0f} ms here, {got['whole_cpu_ms'][1]:.0f} ms "
                      f"in the engine, {got['whole_cpu_ms'][2]:.0f} ms net of its idle "
                      f"{got['engine_idle_ms_per_s']:.0f} ms/s, settled after {got.get('engine_settle_s', 0):.0f} s); "
                      f"scoped p95 {stats(got['scoped']).p95:.1f} ms; open {got['open_s']:.2f} s + first question "
                      f"{got['first_s']:.2f} s = {got['open_s'] + got['first_s']:.2f} s; warming done "
                      f"{got.get('warm_s', 0):.1f} s after open {got.get('warm_steps_s', '')}"
                      f"{' (error: ' + got['warm_error'] + ')' if got.get('warm_error') else ''}"
                      f"; peak RSS "
                      f"{got.get('peak_rss_mb', 0):.0f} MB here, {got.get('engine_peak_rss_mb', 0):.0f} MB engine",
                      flush=True)
    rows = []
    for (store, code), t in times.items():
        w, s = stats(t["whole"]), stats(t["scoped"])
        base = times.get((store, "baseline"))
        bw = stats(base["whole"]) if base and code == "new" else None
        client, engine, net = (statistics_mean(c[i] for c in cpu[(store, code)]) for i in (0, 1, 2))
        rows.append([store, code, w.p50, w.p95, ratio(w.p95, bw.p95) if bw else "-", client, engine, net, s.p50,
                     s.p95, min(opens[(store, code)]), statistics_mean(firsts[(store, code)]),
                     statistics_mean(o + f for o, f in zip(opens[(store, code)], firsts[(store, code)])),
                     statistics_mean(warms[(store, code)]), max(r for r, _ in rss[(store, code)]),
                     max(e for _, e in rss[(store, code)])])
        report.results[f"{store}/{code}"] = {"whole": w.to_dict(), "scoped": s.to_dict(),
                                             "open_s": opens[(store, code)], "first_s": firsts[(store, code)],
                                             "warm_s": warms[(store, code)],
                                             "peak_rss_mb": [r for r, _ in rss[(store, code)]],
                                             "engine_peak_rss_mb": [e for _, e in rss[(store, code)]],
                                             "whole_cpu_ms_per_question": {"client": client, "engine": engine,
                                                                           "engine_net_of_idle": net}}
        if code == "new":
            report.headlines.append(Headline(f"{store}: whole-collection query p95", w.p95, "ms",
                                             ratio=ratio(w.p95, bw.p95) if bw else None,
                                             ratio_of="baseline checkout, same run" if bw else ""))
    print()
    print(table(["store", "code", "whole p50 ms", "whole p95 ms", "x baseline", "whole CPU ms/q here",
                 "whole CPU ms/q engine", "engine net of idle", "scoped p50 ms", "scoped p95 ms", "open s",
                 "first question s", "open + first s", "warming s", "peak RSS MB", "engine peak RSS MB"], rows))
    print("(CPU per question: means over the rounds; a busy machine's wall time is mostly waiting for a core; "
          "net of idle: less the engine's CPU rate while idle times the questions' wall time; open s: the "
          "fastest worker's; first question: the first warm-up question, what a one-shot query pays after "
          "opening; warming: from opening the backends until the store's warming ended, 0 without; peak RSS: "
          "the largest over the workers, TreeRAG's process and the engine's (a server's since it started))")
    report.finish(args.json)
    return 0


# --------------------------------------------------------------------------- mode copy

COPY_DOC = """Copying a file index into a seekdb server, per vector index type and number of insert sessions, in one run.

    python benchmarks/bench_seekdb.py copy --index FILE_INDEX --queries QUERIES.json
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


def copy_main(argv: list[str] | None = None) -> int:
    ap = base_parser(COPY_DOC)
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
    report = Report("bench_seekdb.py copy", sys.argv, info, params=vars(args))
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


MODES = {"query": query_main, "copy": copy_main}
"""``python benchmarks/bench_seekdb.py MODE [options]`` runs a mode (each has its own ``--help``); without a
mode, the benchmark this file is named for (what ``run_all.py`` runs)."""


if __name__ == "__main__":
    raise SystemExit(run_with_modes(main, MODES, sys.argv[1:]))
