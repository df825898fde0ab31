"""Cold `python main.py query` wall time, each run a fresh process (goal: median <= 1.5 s).

    python benchmarks/bench_cold_query.py [--quick] [--runs N] [--torch-runs N] [--json OUT]

Indexes test_data/test_paper.md twice (``--embedder local``, i.e. torch, and
hash), then runs, interleaved so a busy machine hurts every command alike:

* baselines: ``python -c pass`` (bare interpreter) and ``python main.py --help``;
* ``main.py query --no-log --llm mock`` on the local-embedding index (the
  query side runs the int8 ONNX twin of the model, see pipeline.query_embedder),
  in English and, separately, in Chinese (a CJK query loads jieba);
* the same on the hash index;
* optionally (--torch-runs) forcing ``--embedder local`` so the query imports torch.

One untimed run of every command first warms the OS file cache and writes the
bytecode cache (as any install has; this sandbox sets PYTHONDONTWRITEBYTECODE,
so one row shows a query without it): "cold" means a fresh interpreter, not a
cold disk. Wall time is fork -> exit of that process;
CPU is its user+sys time, the figure a busy machine disturbs least.
Then a fresh-process breakdown of where a cold query's time goes.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any
import page_cache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, TEST_PAPER, TEST_QUERIES, Headline, Report, add_baseline_code, banner, base_parser, bench_env,  # noqa: E402
                    code_arms, drop_page_cache, machine_info, machine_line, pick, python, read_jsonl, run_proc,
                    run_with_modes, stats, table, workdir_of)

GOAL_S = 1.5

BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
import main  # noqa: F401  (what the CLI imports first)
from config import Config
from indexing.index_store import load_index
from pipeline import make_backends, run_pipeline
from utils.render import render_result
t1 = time.perf_counter()
index = load_index(sys.argv[1])
t2 = time.perf_counter()
backends = make_backends(index, Config(), None)
emb = backends.embedder
if hasattr(emb, "load"):
    emb.load()
t3 = time.perf_counter()
emb.embed_query(sys.argv[2])
t4 = time.perf_counter()
res = run_pipeline(sys.argv[2], index, Config(), backends)
t5 = time.perf_counter()
render_result(res)
t6 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "load_index": t2 - t1, "embedder load": t3 - t2,
                  "first embed_query": t4 - t3, "run_pipeline (model warm)": t5 - t4, "render": t6 - t5,
                  "timing_ms": res.timing_ms, "embedder": emb.name}))
"""


OWN = {"main", "config", "pipeline", "indexing", "retrieval", "tree_builder", "utils", "evaluation"}


def import_profile(stderr: str, top: int = 8) -> list[tuple[str, float]]:
    """Seconds of import per package from ``python -X importtime`` output.

    Sums each module's *self* time into its top-level package, whoever
    imported it, so numpy is charged to numpy and not to the first TreeRAG
    module that happened to import it. TreeRAG's own modules are one group.
    """
    agg: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        head, _cumulative, name = line.split("|")
        self_us = head.split(":", 1)[1].strip()
        if not self_us.isdigit():
            continue
        pkg = name.strip().split(".")[0]
        pkg = "(TreeRAG's own modules)" if pkg in OWN else pkg
        agg[pkg] = agg.get(pkg, 0.0) + int(self_us) / 1e6
    return sorted(agg.items(), key=lambda kv: -kv[1])[:top]


def _english_queries() -> list[str]:
    return [q["query"] for q in read_jsonl(TEST_QUERIES) if q.get("lang") == "en"]


def _chinese_query() -> str:
    zh = [q["query"] for q in read_jsonl(TEST_QUERIES) if q.get("lang") == "zh"]
    return zh[0] if zh else "AdaRouter使用什么算法？"


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--runs", type=int, default=None, help="timed fresh-process runs per command (quick 3, full 7)")
    ap.add_argument("--torch-runs", type=int, default=None,
                    help="runs forcing the torch embedder at query time (quick 0, full 3; 0 = skip)")
    args = ap.parse_args(argv)
    runs = pick(args.runs, args.quick, 3, 7)
    torch_runs = pick(args.torch_runs, args.quick, 0, 3)
    work = workdir_of(args) / "cold"
    work.mkdir(parents=True, exist_ok=True)
    env = bench_env()
    info = machine_info()
    banner("Cold `python main.py query` in fresh processes")
    print(machine_line(info))
    report = Report("cold_query", sys.argv[1:] if argv is None else list(argv), info,
                    params={"runs": runs, "torch_runs": torch_runs})

    idx_local, idx_hash = work / "paper-local", work / "paper-hash"
    builds = {}
    for name, out, extra in (("local", idx_local, ["--embedder", "local"]), ("hash", idx_hash, ["--mock"])):
        pr = run_proc(python("main.py", "index", "--input", TEST_PAPER, "--output", out, "--quiet", *extra),
                      env=env).check()
        builds[name] = {"wall_s": pr.wall_s, "cpu_s": pr.cpu_s, "maxrss_mb": pr.maxrss_mb,
                        "summary": pr.stdout.strip()}
        print(f"index [{name}]: {pr.wall_s:.2f} s wall ({pr.stdout.strip()})", flush=True)
    report.results["builds"] = builds

    en = _english_queries()
    zh = _chinese_query()

    def query_cmd(index: Path, q: str, *extra: str) -> list[str]:
        return python("main.py", "query", "--index", index, "--query", q, "--no-log", "--llm", "mock", *extra)

    commands: dict[str, Any] = {
        "python -c pass (baseline)": lambda i: python("-c", "pass"),
        "main.py --help": lambda i: python("main.py", "--help"),
        "query, local index (onnx at query), EN": lambda i: query_cmd(idx_local, en[i % len(en)]),
        "query, local index (onnx at query), ZH": lambda i: query_cmd(idx_local, zh),
        "query, hash index, EN": lambda i: query_cmd(idx_hash, en[i % len(en)]),
    }
    env_nopyc = bench_env(bytecode_cache=False)
    commands["query, local index, EN, no bytecode cache"] = lambda i: query_cmd(idx_local, en[i % len(en)])
    plan = {name: runs for name in commands}
    if torch_runs > 0:
        commands["query, local index, --embedder local (torch), EN"] = \
            lambda i: query_cmd(idx_local, en[i % len(en)], "--embedder", "local")
        plan["query, local index, --embedder local (torch), EN"] = torch_runs

    print("warming the file cache (one untimed run each) ...", flush=True)
    for name, make in commands.items():
        pr = run_proc(make(0), env=env_nopyc if "no bytecode" in name else env, timeout=300)
        if pr.returncode != 0:
            raise SystemExit(f"{name} failed: {pr.stderr.strip()[-500:]}")
        if "query" in name and "Step 1" not in pr.stdout:
            raise SystemExit(f"{name}: unexpected output:\n{pr.stdout[:500]}")

    samples: dict[str, list[Any]] = {name: [] for name in commands}
    for i in range(max(plan.values())):
        for name, make in commands.items():
            if i < plan[name]:
                pr = run_proc(make(i), env=env_nopyc if "no bytecode" in name else env, timeout=300).check()
                samples[name].append(pr)
        print(f"  round {i + 1}/{max(plan.values())} done", flush=True)

    bare = statistics.median(p.wall_s for p in samples["python -c pass (baseline)"])
    help_ = statistics.median(p.wall_s for p in samples["main.py --help"])
    rows = []
    res: dict[str, Any] = {}
    for name, prs in samples.items():
        w = stats(p.wall_s for p in prs)
        c = stats(p.cpu_s for p in prs)
        rss = max(p.maxrss_mb for p in prs)
        res[name] = {"wall_s": w.to_dict(3), "cpu_s": c.to_dict(3), "maxrss_mb": round(rss, 1),
                     "ratio_vs_bare_python": w.p50 / bare, "ratio_vs_help": w.p50 / help_,
                     "walls": [round(p.wall_s, 3) for p in prs]}
        rows.append([name, w.n, w.p50, w.min, w.max, c.p50, rss, w.p50 / bare, w.p50 / help_])
    report.results["commands"] = res
    print()
    print(table(["command", "runs", "median wall s", "min s", "max s", "median CPU s", "peak RSS MB",
                 "x bare python", "x --help"], rows))

    # where the time goes, in fresh processes
    parts: list[dict[str, Any]] = []
    for i in range(3):
        pr = run_proc(python("-c", BREAKDOWN, idx_local, en[i % len(en)]), env=env, timeout=300).check()
        parts.append(json.loads(pr.stdout.strip().splitlines()[-1]))
    keys = [k for k in parts[0] if k not in ("timing_ms", "embedder")]
    med = {k: statistics.median(p[k] for p in parts) for k in keys}
    report.results["breakdown_s"] = med
    report.results["breakdown_timing_ms"] = parts[-1]["timing_ms"]
    print()
    print(f"where a cold query's time goes (local index, {parts[0]['embedder']} at query time, median of 3 fresh "
          f"processes; interpreter start-up ~{bare:.2f} s comes on top):")
    print(table(["phase", "seconds"], [[k, v] for k, v in med.items()]))

    prof: dict[str, list[tuple[str, float]]] = {}
    for label, q_text in (("EN", en[0]), ("ZH", zh)):
        pr = run_proc(python("-X", "importtime", "main.py", "query", "--index", idx_local, "--query", q_text,
                             "--no-log", "--llm", "mock"), env=env, timeout=300).check()
        prof[label] = import_profile(pr.stderr)
    report.results["import_profile_s"] = prof
    print()
    print("imports of one cold query (seconds of import per package, python -X importtime self times; "
          "lazy imports made while answering included):")
    print(table(["EN query: package", "s", "ZH query: package", "s"],
                [[*a, *b] for a, b in zip(prof["EN"], prof["ZH"])]))

    main_name = "query, local index (onnx at query), EN"
    q = res[main_name]
    med_wall = q["wall_s"]["p50"]
    report.headlines.append(Headline("cold query wall, local-embedding index (median)", med_wall, "s",
                                     goal=f"<= {GOAL_S} s", ok=med_wall <= GOAL_S,
                                     ratio=q["ratio_vs_bare_python"], ratio_of=f"bare python {bare:.3f} s"))
    report.headlines.append(Headline("cold query CPU, local-embedding index (median)", q["cpu_s"]["p50"], "s",
                                     goal=f"<= {GOAL_S} s", ok=q["cpu_s"]["p50"] <= GOAL_S))
    hq = res["query, hash index, EN"]
    report.headlines.append(Headline("cold query wall, hash index (median)", hq["wall_s"]["p50"], "s",
                                     ratio=hq["ratio_vs_bare_python"], ratio_of="bare python"))
    zq = res["query, local index (onnx at query), ZH"]
    report.headlines.append(Headline("cold query wall, local index, Chinese query (median)", zq["wall_s"]["p50"],
                                     "s", goal=f"<= {GOAL_S} s", ok=zq["wall_s"]["p50"] <= GOAL_S,
                                     ratio=zq["ratio_vs_bare_python"], ratio_of="bare python"))
    tname = "query, local index, --embedder local (torch), EN"
    if tname in res:
        report.headlines.append(Headline("cold query wall forcing torch (median)", res[tname]["wall_s"]["p50"], "s",
                                         ratio=res[tname]["wall_s"]["p50"] / med_wall, ratio_of="onnx cold query"))
    report.finish(args.json)
    return 0


# --------------------------------------------------------------------------- mode process

PROCESS_DOC = """Cold start on a large index: a fresh `python main.py query` process, warm page cache and dropped.

    python benchmarks/bench_cold_query.py process [--index DIR] [--runs N] [--evict-files] [--drop-caches]
                                          [--baseline-code DIR] [--json OUT]

The index defaults to the 10,000-document index of ``bench_scale.py`` (``WORKDIR/scale/index-10000``);
the question to the first of that run's generated questions (``queries-10000.json`` beside it).
Each row is a fresh process (wall fork -> exit, peak RSS from ``wait4``, median of ``--runs``):

* ``python -c pass``: the interpreter alone, the floor;
* ``main.py query``: the default CLI path (hybrid locator, no LLM key: mock answer);
* the same with ``--mock`` (keyword locator);
* ``--baseline-code DIR``: the same two commands run from another checkout of TreeRAG (e.g.
  ``git worktree add ../base main``) on the same index, in the same run, interleaved;
* an in-process breakdown: imports, ``load_index``, the first question (each with the bytes it
  read from disk).

``--evict-files``: the cold case without disturbing others. Each command is run once under strace to
list every file it opens (interpreter, standard library, site-packages, bytecode cache, the index);
then ``--runs`` more runs per command, each after ``posix_fadvise(DONTNEED)`` on the union of those
lists (page_cache.py), so the files a query reads come from disk while every other process keeps its
page cache. The table shows what was still cached after the eviction (``mincore``: pages another live
process maps, such as a shared libc, cannot be evicted, as with ``drop_caches``), and the bytes each
run read from the disk (``ru_inblock``). The breakdown is then measured evicted too.

``--drop-caches`` (root) repeats every command once after ``sync; echo 3 > /proc/sys/vm/drop_caches``:
every byte the process needs is then read from disk. Other processes on the machine lose their page
cache too, so use it once, at the end.

Goals: <= 1.0 s and 1 GB at 10,000 documents, <= 2 s and 2 GB from 100,000 (read from the index).
CPU seconds (user + sys) are shown beside wall: on a shared machine they move far less.
"""


GOALS = ((100_000, 2.0, 2048.0), (0, 1.0, 1024.0))
"""(from this many documents, wall seconds, peak RSS MB): the cold-start goals by collection size."""

PROCESS_BREAKDOWN = r"""
import json, sys, time
def read_mb():
    try:
        with open("/proc/self/io") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith("read_bytes:")) / 1e6
    except (OSError, StopIteration):
        return float("nan")
t0, r0 = time.perf_counter(), read_mb()
import main  # noqa: F401
from config import Config
from indexing.index_store import load_index
from pipeline import make_backends, run_pipeline
t1, r1 = time.perf_counter(), read_mb()
index = load_index(sys.argv[1])
t2, r2 = time.perf_counter(), read_mb()
res = run_pipeline(sys.argv[2], index, Config(), make_backends(index, Config(), None))
t3, r3 = time.perf_counter(), read_mb()
print(json.dumps({"imports": t1 - t0, "load_index": t2 - t1, "first question": t3 - t2,
                  "read_mb": {"imports": r1 - r0, "load_index": r2 - r1, "first question": r3 - r2},
                  "timing_ms": res["timing_ms"] if isinstance(res, dict) else res.timing_ms}))  # an older checkout: a dict
"""


def goals_for(index: Path) -> tuple[float, float]:
    """The wall and RSS goals for the collection size the index's metadata.json counts."""
    try:
        docs = int(json.loads((index / "metadata.json").read_text())["counts"]["documents"])
    except (OSError, ValueError, KeyError, TypeError):
        docs = 0
    return next((s, mb) for n, s, mb in GOALS if docs >= n)


def process_main(argv: list[str] | None = None) -> int:
    ap = base_parser(PROCESS_DOC)
    ap.add_argument("--index", type=Path, default=None, help="index directory (default: bench_scale's 10,000)")
    ap.add_argument("--question", default=None)
    ap.add_argument("--runs", type=int, default=None, help="fresh processes per command (quick 3, full 5)")
    ap.add_argument("--evict-files", action="store_true",
                    help="the cold case without disturbing others: before each run, evict from the page cache "
                         "only the files the command reads (listed by one run under strace)")
    ap.add_argument("--drop-caches", action="store_true", help="also one run per command after dropping "
                                                                "the whole page cache (root; every process loses it)")
    add_baseline_code(ap)
    args = ap.parse_args(argv)
    index = args.index or workdir_of(args) / "scale" / "index-10000"
    if not (index / "metadata.json").is_file():
        print(f"error: no index at {index} (build it with benchmarks/bench_scale.py --sizes 10000, or pass --index)",
              file=sys.stderr)
        return 2
    question = args.question
    qfile = index.parent / f"queries-{index.name.rsplit('-', 1)[-1]}.json"
    if question is None and qfile.is_file():
        question = json.loads(qfile.read_text())[0]["query"]
    question = question or "What does the first section describe?"
    runs = args.runs or (3 if args.quick else 5)
    goal_s, goal_mb = goals_for(index)
    env = bench_env()
    info = machine_info()
    banner(f"Cold start: fresh query processes on {index}")
    print(machine_line(info))
    report = Report("cold_start", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index), "runs": runs, "question": question, "goal_s": goal_s,
                            "goal_mb": goal_mb})
    commands: dict[str, tuple[list[str], Path]] = {"python -c pass": (python("-c", "pass"), ROOT)}
    for label, code in code_arms(args.baseline_code):
        main_py = Path(code) / "main.py"
        commands[f"{label}: main.py query"] = (
            python(main_py, "query", "--index", index, "--no-log", "-q", question), Path(code))
        commands[f"{label}: main.py query --mock"] = (
            python(main_py, "query", "--index", index, "--mock", "--no-log", "-q", question), Path(code))
    breakdown_cmd = python("-c", PROCESS_BREAKDOWN, index, question)
    for cmd, cwd in commands.values():  # warm the page cache and the bytecode cache once
        run_proc(cmd, cwd=cwd, env=env).check()
    walls: dict[str, list[float]] = {k: [] for k in commands}
    cpus: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(runs):  # interleaved: a busy machine hurts every command alike
        for label, (cmd, cwd) in commands.items():
            r = run_proc(cmd, cwd=cwd, env=env).check()
            walls[label].append(r.wall_s)
            cpus[label].append(r.cpu_s)
            rss[label].append(r.maxrss_mb)
    evicted: dict[str, list[Any]] = {k: [] for k in commands}
    if args.evict_files:
        evicted = _evicted_runs(commands, breakdown_cmd, index, env, runs)
    dropped: dict[str, Any] = {}
    if args.drop_caches:
        for label, (cmd, cwd) in commands.items():
            if not drop_page_cache():
                print("    (page cache not dropped: needs root)")
                break
            dropped[label] = run_proc(cmd, cwd=cwd, env=env).check()
    base = statistics.median(walls["python -c pass"])
    rows = []
    for label in commands:
        w = statistics.median(walls[label])
        rows.append([label, w, min(walls[label]), max(walls[label]), statistics.median(cpus[label]), w / base,
                     max(rss[label])])
    print("warm page cache:")
    print(table(["command", "wall median s", "min", "max", "CPU median s", "x python", "peak RSS MB"], rows))
    if args.evict_files:
        rows = []
        for label in commands:
            ev = evicted[label]
            rows.append([label, statistics.median(e["wall"] for e in ev), min(e["wall"] for e in ev),
                         max(e["wall"] for e in ev), statistics.median(e["cpu"] for e in ev),
                         max(e["rss"] for e in ev), statistics.median(e["read_mb"] for e in ev),
                         statistics.median(e["major_faults"] for e in ev),
                         f"{max(e['left_mb'] for e in ev):.1f} of {ev[0]['listed_mb']:.0f}"])
        print(f"its files evicted before each run ({runs} runs each, interleaved):")
        print(table(["command", "wall median s", "min", "max", "CPU median s", "peak RSS MB", "disk read MB",
                     "major faults", "MB still cached"], rows))
    if dropped:
        print("after dropping the whole page cache (one run each):")
        print(table(["command", "wall s", "CPU s", "peak RSS MB", "disk read MB"],
                    [[k, r.wall_s, r.cpu_s, r.maxrss_mb, r.read_mb] for k, r in dropped.items()]))
    bd = run_proc(breakdown_cmd, env=env).check()
    parts = json.loads(bd.stdout.strip().splitlines()[-1])
    print("in-process breakdown (warm page cache): " + _phases(parts))
    ev_parts = evicted.get("breakdown")
    if ev_parts:
        print("in-process breakdown (its files evicted): " + _phases(ev_parts))
    report.results.update(walls=walls, cpus=cpus, rss=rss, evicted=evicted,
                          dropped={k: [r.wall_s, r.maxrss_mb, r.cpu_s, r.read_mb] for k, r in dropped.items()},
                          breakdown=parts)
    key = "this code: main.py query"
    w, m = statistics.median(walls[key]), max(rss[key])
    report.headlines.append(Headline("cold main.py query (warm page cache), median", w, "s",
                                     goal=f"<= {goal_s} s and <= {goal_mb:.0f} MB (peak {m:.0f} MB)",
                                     ok=w <= goal_s and m <= goal_mb, ratio=w / base, ratio_of="python -c pass"))
    b = "baseline code: main.py query"
    if args.evict_files:
        ew = statistics.median(e["wall"] for e in evicted[key])
        em = max(e["rss"] for e in evicted[key])
        report.headlines.append(Headline("cold main.py query, its files evicted from the page cache, median", ew,
                                         "s", goal=f"<= {goal_s} s (peak {em:.0f} MB)", ok=ew <= goal_s and
                                         em <= goal_mb))
        if args.baseline_code is not None:
            bw = statistics.median(e["wall"] for e in evicted[b])
            report.headlines.append(Headline("files evicted: this code vs the baseline code, same index", ew, "s",
                                             ratio=ew / bw, ratio_of="baseline"))
            bc = statistics.median(e["cpu"] for e in evicted[b])
            ec = statistics.median(e["cpu"] for e in evicted[key])
            report.headlines.append(Headline("files evicted, CPU: this code vs the baseline code", ec, "s",
                                             ratio=ec / bc, ratio_of="baseline"))
    if key in dropped:
        report.headlines.append(Headline("cold main.py query after dropping the page cache", dropped[key].wall_s,
                                         "s", goal=f"<= {goal_s} s", ok=dropped[key].wall_s <= goal_s))
    if args.baseline_code is not None:
        report.headlines.append(Headline("cold main.py query: this code vs the baseline code, same index", w, "s",
                                         ratio=w / statistics.median(walls[b]), ratio_of="baseline"))
        report.headlines.append(Headline("cold main.py query peak RSS: this code vs the baseline code", m, "MB",
                                         ratio=m / max(rss[b]), ratio_of="baseline"))
        if key in dropped and b in dropped:
            report.headlines.append(Headline("after dropping the page cache: this code vs the baseline code",
                                             dropped[key].wall_s, "s", ratio=dropped[key].wall_s / dropped[b].wall_s,
                                             ratio_of="baseline"))
    report.finish(args.json)
    return 0


def _phases(parts: dict[str, Any]) -> str:
    reads = parts.get("read_mb", {})
    return ", ".join(f"{k} {v:.3f} s" + (f" ({reads[k]:.0f} MB read)" if k in reads else "")
                     for k, v in parts.items() if isinstance(v, float)) + f"; steps {parts['timing_ms']}"


def _evicted_runs(commands: dict[str, tuple[list[str], Path]], breakdown_cmd: list[str], index: Path,
                  env: dict[str, str], runs: int) -> dict[str, Any]:
    """``runs`` interleaved runs per command, each after evicting the union of the files every command
    (and the breakdown) opened; then the breakdown once, evicted. Per run: wall, CPU, peak RSS, bytes
    read from disk, major faults and what stayed cached of the listed files."""
    listed: set[Path] = set(page_cache.files_under(index))
    for cmd, cwd in [*commands.values(), (breakdown_cmd, ROOT)]:
        listed.update(page_cache.traced_files(cmd, cwd, env))
    files = sorted(listed)
    total_mb = sum(p.stat().st_size for p in files) / 1e6
    print(f"    evicting {len(files)} files ({total_mb:.0f} MB, the index's {len(page_cache.files_under(index))}"
          " included) before each run")

    def evict() -> float:
        page_cache.evict(files)
        return page_cache.resident(files).bytes_resident / 1e6

    out: dict[str, Any] = {k: [] for k in commands}
    for _ in range(runs):
        for label, (cmd, cwd) in commands.items():
            left = evict()
            r = run_proc(cmd, cwd=cwd, env=env).check()
            out[label].append({"wall": r.wall_s, "cpu": r.cpu_s, "rss": r.maxrss_mb, "read_mb": r.read_mb,
                               "major_faults": r.major_faults, "left_mb": left, "listed_mb": total_mb})
    evict()
    bd = run_proc(breakdown_cmd, env=env).check()
    out["breakdown"] = json.loads(bd.stdout.strip().splitlines()[-1])
    return out


MODES = {"process": process_main}
"""``python benchmarks/bench_cold_query.py MODE [options]`` runs a mode (each has its own ``--help``); without a
mode, the benchmark this file is named for (what ``run_all.py`` runs)."""


if __name__ == "__main__":
    sys.exit(run_with_modes(main, MODES, sys.argv[1:]))
