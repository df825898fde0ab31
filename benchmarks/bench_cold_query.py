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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (TEST_PAPER, TEST_QUERIES, Headline, Report, banner, base_parser, bench_env,  # noqa: E402
                    machine_info, machine_line, pick, python, read_jsonl, run_proc, stats, table, workdir_of)

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


if __name__ == "__main__":
    sys.exit(main())
