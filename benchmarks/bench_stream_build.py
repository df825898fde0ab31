"""Index build memory and throughput on the generated corpus: this code against a baseline checkout.

Each build is ``main.py index --mock --rebuild`` (hash embeddings) in a fresh process, the baseline's
and this checkout's one after the other (never at once), on the same corpus. Measured: wall, CPU
(user + sys) and peak RSS from ``wait4``; the RSS sampled every ``--sample-s`` with the stage the
build's progress names at that moment; and the two indexes compared file by file (every byte;
metadata.json without its time stamps and build id), so a faster build is also the same build.

    python benchmarks/bench_stream_build.py --sizes 1000,10000 --baseline-code ../base
    python benchmarks/bench_stream_build.py --sizes 100000 --no-baseline --nice 19 --max-rss-mb 8000 --stop-at 11:10

``--stop-at HH:MM`` (UTC) or ``--max-rss-mb`` end a build early (killed, its staging directory removed):
the samples up to then are still reported.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, banner, base_parser, machine_info, machine_line, ratio, workdir_of  # noqa: E402

_STAGE_LINE = re.compile(r"^(?P<stage>[a-z][^:]*): (?:(?P<done>[\d,]+)/(?P<total>[\d,]+) (?P<unit>\w+))?")
_VOLATILE = ("created_at", "build_seconds", "build_id", "input")


@dataclass
class Build:
    code: str
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_mb: float = 0.0
    finished: bool = False
    stopped: str = ""
    samples: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def last_stage(err_path: Path) -> tuple[str, int | None]:
    """The stage the build's progress names last, and the documents done when it says."""
    try:
        with open(err_path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(err_path) - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "", None
    for line in reversed(lines):
        m = _STAGE_LINE.match(line.strip())
        if m:
            done = int(m.group("done").replace(",", "")) if m.group("done") else None
            return m.group("stage"), done
    return "", None


def run_build(code: Path, docs: Path, out: Path, work: Path, args: Any, label: str) -> Build:
    """One build in a fresh process, sampled; killed at ``--stop-at`` or past ``--max-rss-mb``."""
    shutil.rmtree(out, ignore_errors=True)
    err_path = work / f"{label}.stderr"
    cmd = [sys.executable, "main.py", "index", "--input", str(docs), "--output", str(out), "--mock", "--rebuild"]
    nice = args.nice
    commit = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    res = Build(code=f"{code} at {commit}")
    t0 = time.perf_counter()
    with open(err_path, "wb") as err, open(work / f"{label}.stdout", "wb") as so:
        proc = subprocess.Popen(cmd, cwd=str(code), stdout=so, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None, start_new_session=True)
        status = None
        while status is None:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = (st, ru)
                break
            mb = rss_mb(proc.pid)
            stage, done = last_stage(err_path)
            res.samples.append({"t": round(time.perf_counter() - t0, 1), "rss_mb": round(mb, 1), "stage": stage,
                                "done": done})
            why = ""
            if args.max_rss_mb and mb > args.max_rss_mb:
                why = f"RSS {mb:.0f} MB past {args.max_rss_mb} MB"
            elif args.stop_at and time.time() >= args.stop_at:
                why = "the time limit"
            if why:
                res.stopped = why
                status = _interrupt(proc.pid)
                break
            time.sleep(args.sample_s)
    res.wall_s = time.perf_counter() - t0
    st, ru = status
    res.cpu_s = ru.ru_utime + ru.ru_stime
    res.peak_mb = ru.ru_maxrss / 1024
    res.finished = not res.stopped and os.waitstatus_to_exitcode(st) == 0
    res.stdout = (work / f"{label}.stdout").read_text(errors="replace").strip()
    if not res.finished and not res.stopped:
        sys.exit(f"{label}: the build failed: {err_path.read_text(errors='replace')[-2000:]}")
    for leftover in out.parent.glob(f".{out.name}.building-*"):  # what a killed build may leave
        shutil.rmtree(leftover, ignore_errors=True)
    return res


def _interrupt(pid: int) -> tuple[int, Any]:
    """Ctrl-C the build (it removes its staging directory on the way out), kill it after 120 s."""
    os.killpg(pid, signal.SIGINT)
    deadline = time.time() + 120
    while time.time() < deadline:
        got, st, ru = os.wait4(pid, os.WNOHANG)
        if got:
            return st, ru
        time.sleep(0.5)
    os.killpg(pid, signal.SIGKILL)
    _, st, ru = os.wait4(pid, 0)
    return st, ru


def differences(a: Path, b: Path) -> list[str]:
    """Files that differ between two indexes (metadata.json without its volatile fields)."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    out = []
    for n in names:
        pa, pb = a / n, b / n
        if not pa.exists() or not pb.exists():
            out.append(f"{n} (only in one)")
        elif n == "metadata.json":
            ma, mb = json.loads(pa.read_text()), json.loads(pb.read_text())
            for m in (ma, mb):
                for k in _VOLATILE:
                    m.pop(k, None)
            if ma != mb:
                out.append(n)
        elif not _same_bytes(pa, pb):
            out.append(n)
    return out


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def curve(b: Build, total_docs: int) -> list[str]:
    """RSS when each stage's line appears (a stage writes its line when it ends) and at every tenth
    of the documents indexed; the peak up to then."""
    rows: list[str] = []
    stage = ""
    marks = {total_docs * k // 10 for k in range(1, 11)}
    seen_marks: set[int] = set()
    peak = 0.0
    for s in b.samples:
        peak = max(peak, s["rss_mb"])
        if s["stage"] != stage and s["stage"]:
            stage = s["stage"]
            rows.append(f"  {stage:<28} done by {s['t']:>8.0f} s, RSS {s['rss_mb']:>7,.0f} MB, peak so far {peak:,.0f} MB")
        if s["stage"] == "indexing documents" and s["done"] in marks and s["done"] not in seen_marks:
            seen_marks.add(s["done"])
            rows.append(f"  {s['done']:>7,} documents indexed by {s['t']:>8.0f} s, RSS {s['rss_mb']:>7,.0f} MB, "
                        f"peak so far {peak:,.0f} MB")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__)
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline-code", type=Path, help="a checkout of the code to compare with (git worktree add)")
    p.add_argument("--no-baseline", action="store_true", help="this code only (a size too large to build twice)")
    p.add_argument("--corpus-dir", type=Path, help="where the generated corpora are (default: the workdir)")
    p.add_argument("--nice", type=int, default=0)
    p.add_argument("--sample-s", type=float, default=1.0)
    p.add_argument("--max-rss-mb", type=float, default=0.0)
    p.add_argument("--stop-at", default="", help="HH:MM UTC: stop a build still running then")
    args = p.parse_args(argv)
    if not args.no_baseline and args.baseline_code is None:
        p.error("--baseline-code DIR (or --no-baseline)")
    if args.stop_at:
        hh, mm = (int(x) for x in args.stop_at.split(":"))
        now = time.gmtime()
        args.stop_at = time.mktime(time.struct_time((now.tm_year, now.tm_mon, now.tm_mday, hh, mm, 0, 0, 0, 0))) \
            - time.timezone
    from bench_scale import GEN_VERSION, generate_corpus  # noqa: PLC0415

    work = workdir_of(args) / "stream_build"
    work.mkdir(parents=True, exist_ok=True)
    banner("Index build: peak RSS and wall, this code vs a baseline checkout (generated corpus, --mock)")
    print(machine_line(machine_info()), flush=True)
    results: dict[str, Any] = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        docs = generate_corpus((args.corpus_dir or work) / f"docs-{n}-s{args.seed}-g{GEN_VERSION}", n, args.seed)
        codes = [("this", ROOT)] + ([] if args.no_baseline else [("baseline", args.baseline_code.resolve())])
        builds: dict[str, Build] = {}
        for name, code in reversed(codes):  # the baseline first
            b = builds[name] = run_build(code, docs, work / f"index-{n}-{name}", work, args, f"{n}-{name}")
            state = "finished" if b.finished else f"stopped ({b.stopped})"
            print(f"[{n:,} docs, {name}: {b.code}] {state}: wall {b.wall_s:,.1f} s, CPU {b.cpu_s:,.1f} s, "
                  f"peak RSS {b.peak_mb:,.0f} MB; {b.stdout.splitlines()[-1] if b.stdout else ''}", flush=True)
            for row in curve(b, n):
                print(row, flush=True)
        entry: dict[str, Any] = {name: b.__dict__ for name, b in builds.items()}
        if "baseline" in builds and all(b.finished for b in builds.values()):
            diff = differences(work / f"index-{n}-baseline", work / f"index-{n}-this")
            entry["differences"] = diff
            t, base = builds["this"], builds["baseline"]
            print(f"[{n:,} docs] this / baseline: peak RSS {t.peak_mb:,.0f} / {base.peak_mb:,.0f} MB = "
                  f"{ratio(t.peak_mb, base.peak_mb):.2f}; wall {t.wall_s:,.1f} / {base.wall_s:,.1f} s = "
                  f"{ratio(t.wall_s, base.wall_s):.2f}; CPU {t.cpu_s:,.1f} / {base.cpu_s:,.1f} s = "
                  f"{ratio(t.cpu_s, base.cpu_s):.2f}; index files that differ: {', '.join(diff) or 'none'}",
                  flush=True)
            for name in builds:
                shutil.rmtree(work / f"index-{n}-{name}", ignore_errors=True)
        results[str(n)] = entry
        (work / "results.json").write_text(json.dumps(results, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
