"""Cold start on a large index: a fresh `python main.py query` process, warm page cache and dropped.

    python benchmarks/bench_cold_start.py [--index DIR] [--runs N] [--drop-caches] [--baseline-code DIR] [--json OUT]

The index defaults to the 10,000-document index of ``bench_scale.py`` (``WORKDIR/scale/index-10000``);
the question to the first of that run's generated questions (``queries-10000.json`` beside it).
Each row is a fresh process (wall fork -> exit, peak RSS from ``wait4``, median of ``--runs``):

* ``python -c pass``: the interpreter alone, the floor;
* ``main.py query``: the default CLI path (hybrid locator, no LLM key: mock answer);
* the same with ``--mock`` (keyword locator);
* ``--baseline-code DIR``: the same two commands run from another checkout of TreeRAG (e.g.
  ``git worktree add ../base main``) on the same index, in the same run, interleaved;
* an in-process breakdown: imports, ``load_index``, the first question.

``--drop-caches`` (root) repeats every command once after ``sync; echo 3 > /proc/sys/vm/drop_caches``:
every byte the process needs is then read from disk. Other processes on the machine lose their page
cache too.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Headline, Report, banner, base_parser, bench_env, drop_page_cache,  # noqa: E402
                    machine_info, machine_line, python, run_proc, table, workdir_of)

GOAL_S = 1.0
GOAL_MB = 1024.0

BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
import main  # noqa: F401
from config import Config
from indexing.index_store import load_index
from pipeline import make_backends, run_pipeline
t1 = time.perf_counter()
index = load_index(sys.argv[1])
t2 = time.perf_counter()
res = run_pipeline(sys.argv[2], index, Config(), make_backends(index, Config(), None))
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "load_index": t2 - t1, "first question": t3 - t2,
                  "timing_ms": res["timing_ms"] if isinstance(res, dict) else res.timing_ms}))  # an older checkout: a dict
"""


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None, help="index directory (default: bench_scale's 10,000)")
    ap.add_argument("--question", default=None)
    ap.add_argument("--runs", type=int, default=None, help="fresh processes per command (quick 3, full 5)")
    ap.add_argument("--drop-caches", action="store_true", help="also one run per command after dropping "
                                                                "the page cache (root)")
    ap.add_argument("--baseline-code", type=Path, default=None,
                    help="another TreeRAG checkout run on the same index as the baseline")
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
    env = bench_env()
    info = machine_info()
    banner(f"Cold start: fresh query processes on {index}")
    print(machine_line(info))
    report = Report("cold_start", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index), "runs": runs, "question": question})
    commands: dict[str, tuple[list[str], Path]] = {"python -c pass": (python("-c", "pass"), ROOT)}
    for label, code in (("this code", ROOT), ("baseline code", args.baseline_code)):
        if code is None:
            continue
        main_py = Path(code) / "main.py"
        commands[f"{label}: main.py query"] = (
            python(main_py, "query", "--index", index, "--no-log", "-q", question), Path(code))
        commands[f"{label}: main.py query --mock"] = (
            python(main_py, "query", "--index", index, "--mock", "--no-log", "-q", question), Path(code))
    for cmd, cwd in commands.values():  # warm the page cache and the bytecode cache once
        run_proc(cmd, cwd=cwd, env=env).check()
    walls: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(runs):  # interleaved: a busy machine hurts every command alike
        for label, (cmd, cwd) in commands.items():
            r = run_proc(cmd, cwd=cwd, env=env).check()
            walls[label].append(r.wall_s)
            rss[label].append(r.maxrss_mb)
    dropped: dict[str, tuple[float, float]] = {}
    if args.drop_caches:
        for label, (cmd, cwd) in commands.items():
            if not drop_page_cache():
                print("    (page cache not dropped: needs root)")
                break
            r = run_proc(cmd, cwd=cwd, env=env).check()
            dropped[label] = (r.wall_s, r.maxrss_mb)
    base = statistics.median(walls["python -c pass"])
    rows = []
    for label in commands:
        w = statistics.median(walls[label])
        d = dropped.get(label)
        rows.append([label, w, min(walls[label]), max(walls[label]), w / base, max(rss[label]),
                     d[0] if d else "", d[1] if d else ""])
    print(table(["command", "wall median s", "min", "max", "x python", "peak RSS MB", "after drop s",
                 "after drop MB"], rows))
    bd = run_proc(python("-c", BREAKDOWN, index, question), env=env).check()
    parts = json.loads(bd.stdout.strip().splitlines()[-1])
    print("in-process breakdown (warm page cache): " + ", ".join(
        f"{k} {v:.3f} s" for k, v in parts.items() if isinstance(v, float)) + f"; steps {parts['timing_ms']}")
    report.results.update(walls=walls, rss=rss, dropped=dropped, breakdown=parts)
    key = "this code: main.py query"
    w, m = statistics.median(walls[key]), max(rss[key])
    report.headlines.append(Headline("cold main.py query (warm page cache), median", w, "s",
                                     goal=f"<= {GOAL_S} s and <= {GOAL_MB:.0f} MB (peak {m:.0f} MB)",
                                     ok=w <= GOAL_S and m <= GOAL_MB, ratio=w / base, ratio_of="python -c pass"))
    if key in dropped:
        report.headlines.append(Headline("cold main.py query after dropping the page cache", dropped[key][0], "s",
                                         goal=f"<= {GOAL_S} s", ok=dropped[key][0] <= GOAL_S))
    if args.baseline_code is not None:
        b = "baseline code: main.py query"
        report.headlines.append(Headline("cold main.py query: this code vs the baseline code, same index", w, "s",
                                         ratio=w / statistics.median(walls[b]), ratio_of="baseline"))
        report.headlines.append(Headline("cold main.py query peak RSS: this code vs the baseline code", m, "MB",
                                         ratio=m / max(rss[b]), ratio_of="baseline"))
        if key in dropped and b in dropped:
            report.headlines.append(Headline("after dropping the page cache: this code vs the baseline code",
                                             dropped[key][0], "s", ratio=dropped[key][0] / dropped[b][0],
                                             ratio_of="baseline"))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
