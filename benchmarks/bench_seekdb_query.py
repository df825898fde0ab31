"""Query latency on engine-backed indexes that already exist: this checkout against a baseline checkout, in one run.

    python benchmarks/bench_seekdb_query.py --index embedded=IDX --index server=IDX [--index files=IDX]
        --queries QUERIES.json [--baseline CHECKOUT] [--queries-n N] [--rounds N] [--json OUT]

Copying 10,000 generated documents into seekdb takes ~18 minutes per engine, so this benchmark does
not build: it queries indexes made once (``bench_seekdb.py`` makes them, or ``main.py index --store``;
a server named by an index must be running). QUERIES is a JSON list of ``{"query", "scope"}``
(``bench_scale.py``/``bench_seekdb.py`` write one beside their corpus).

Each store is queried by fresh worker processes, alternately with the code of this checkout and of
``--baseline`` (another checkout, e.g. ``git worktree add --detach ../base main``; default: none), in
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
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 when it is gone). Here, not in
    common.py: a worker must not import common, which puts this checkout's tree on the path."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """The peak resident memory of process ``pid`` so far (VmHWM), in MB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def set_budget(checkout: Path, index_dir: Path, size: str) -> None:
    """Set the memory_budget of the embedded database ``index_dir`` names to ``size`` (this process
    starts the engine for it, before any worker does)."""
    sys.path[:] = [str(checkout)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
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


def worker(checkout: Path, index_dir: Path, queries_file: Path, out_file: Path, n: int, server_pid: int,
           warm_all: bool = False, prewarm: str = "") -> None:
    """Timed questions with ``checkout``'s code (imported first: this file's own tree is not on the path);
    ``warm_all``: every question asked once before (the engine's caches then hold what they read, as in
    a long-running process; a new embedded engine otherwise spends its first questions reading its tables);
    ``prewarm``: Config.store_prewarm for ``checkout``'s code (empty: its default)."""
    sys.path[:] = [str(checkout)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
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
    res["engine_peak_rss_mb"] = sum(peak_rss_mb(p) for p in engine)
    out_file.write_text(json.dumps(res))


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--worker":
    worker(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]), int(sys.argv[6]),
           int(sys.argv[7]), sys.argv[8] == "--warm-all", sys.argv[9])
    raise SystemExit(0)
if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--set-budget":
    set_budget(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
    raise SystemExit(0)


sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, bench_env, machine_info, machine_line,  # noqa: E402
                    python, ratio, run_proc, stats, table, workdir_of)


def statistics_mean(values: Any) -> float:
    xs = [float(v) for v in values]
    return sum(xs) / len(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--index", action="append", required=True, metavar="NAME=DIR",
                    help="an index to query (repeat): e.g. embedded=/idx/emb server=/idx/srv files=/idx/files")
    ap.add_argument("--queries", type=Path, required=True, help="JSON list of {query, scope}")
    ap.add_argument("--queries-n", type=int, default=None, help="timed questions per mode (quick 20, full 60)")
    ap.add_argument("--rounds", type=int, default=None, help="worker processes per store and code (quick 1, full 2)")
    ap.add_argument("--baseline", type=Path, default=None, help="a checkout of the code to compare with")
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
    if args.baseline is not None and not (args.baseline / "pipeline.py").is_file():
        print(f"error: --baseline {args.baseline}: not a TreeRAG checkout", file=sys.stderr)
        return 2
    codes = [("new", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    work = workdir_of(args) / "seekdb-query"
    work.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    banner(f"engine-backed query latency, {n} questions, {rounds} round(s), " + ", ".join(n for n, _ in stores))
    print(machine_line(info), flush=True)
    report = Report("bench_seekdb_query", sys.argv[1:] if argv is None else argv, info,
                    params={"queries": n, "rounds": rounds, "baseline": str(args.baseline or ""),
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
                    run_proc(python(Path(__file__).resolve(), "--set-budget", ROOT, index_dir.resolve(),
                                    args.embedded_budget), cwd=ROOT, env=bench_env()).check()
                run_proc(python(Path(__file__).resolve(), "--worker", checkout, index_dir.resolve(),
                                args.queries.resolve(), out, n, server_pid,
                                "--warm-all" if args.warm_all else "-",
                                args.prewarm if code == "new" else ""), cwd=checkout, env=env).check()
                got = json.loads(out.read_text())
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


if __name__ == "__main__":
    raise SystemExit(main())
