"""Warm query latency per pipeline step over QASPER (goal: p95 <= 50 ms without rerank).

    python benchmarks/bench_query_latency.py [--quick] [--docs N] [--queries N] [--embedder onnx]
                                             [--index-vectors proxy|real] [--index DIR]
                                             [--rerank auto|off] [--json OUT]

One process, models loaded once, mock LLM (no LLM calls: the default no-LLM
hybrid locator and the extractive answer), rerank off; then rerank on with a
cross-encoder (a real one if it is in the local model cache, else one with the
exact architecture of ms-marco-MiniLM-L-6-v2 and a fresh head, built from the
packaged MiniLM: same cost per pair, meaningless scores).

Questions come from qasper-dev/qa.jsonl; each is asked twice: scoped to its
paper (as the evaluation asks it) and against the whole index. Per step
p50/p95 come from run_pipeline's own ``timing_ms``; the embedder is wrapped so
the model-inference share of each query is known exactly.

Baseline in the same run: ``embed_query`` alone on the same questions, so
total / embed says how much of a query is not the model.

Index vectors: ``real`` embeds all chunks with the model (48,634 chunks for
276 papers: ~25 minutes on this shared 2-core machine). ``proxy`` (default)
builds the same index (same tree, chunks, BM25, leaves) with 384-dimensional
hash vectors, and queries it with the real model: every step's cost depends on
the shapes (chunks x 384 float32, postings, leaves), not on the vector values,
so latency is the same while the build takes a minute. Rankings are then
meaningless, which this benchmark does not look at. ``--index DIR`` measures
any existing index instead (built by ``main.py index``).
"""
from __future__ import annotations

import cProfile
import io
import pstats
import random
import sys
import time
from pathlib import Path
from typing import Any
import json
import shutil
import tempfile
import subprocess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (QASPER_QA, ROOT, Headline, Report, add_baseline_code, banner, base_parser, bench_env, blas_threads,  # noqa: E402
                    build_tiny_cross_encoder, cached_index_ok, code_arms, code_fingerprint, copy_docs,
                    files_fingerprint, limit_blas_threads, machine_info, machine_line, pick, python, qasper_files,
                    quiet_transformers, ratio, read_jsonl, run_proc, run_with_modes, scale_index, stamp_index, stats,
                    table, workdir_of)
from bench_scale import change_one_document, make_queries, reused_corpus  # noqa: E402

GOAL_MS = 50.0
STEPS = ("locate", "retrieve", "rerank", "context", "synthesize", "total")


class TimedEmbedder:
    """Wraps the query embedder: counts calls and milliseconds spent in the model."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.model_id = inner.model_id
        self.variant = getattr(inner, "variant", inner.name)
        self.calls = 0
        self.ms = 0.0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: list[str], progress: Any = None) -> Any:
        return self.inner.embed_documents(texts, progress=progress)

    def embed_query(self, text: str) -> Any:
        t = time.perf_counter()
        v = self.inner.embed_query(text)
        self.ms += (time.perf_counter() - t) * 1000
        self.calls += 1
        return v

    def reset(self) -> None:
        self.calls, self.ms = 0, 0.0


class TimedReranker:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.pairs = 0
        self.ms = 0.0

    def score(self, query: str, texts: list[str]) -> list[float]:
        t = time.perf_counter()
        out = self.inner.score(query, texts)
        self.ms += (time.perf_counter() - t) * 1000
        self.pairs += len(texts)
        return out

    def reset(self) -> None:
        self.pairs, self.ms = 0, 0.0


def prepare_index(args: Any, work: Path, embedder_name: str, n_docs: int) -> tuple[Path, str, list[str]]:
    """Build (or reuse) the QASPER index. Returns (index dir, vectors description, document names)."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    if args.index:
        from indexing.index_store import read_metadata

        meta = read_metadata(Path(args.index))
        return Path(args.index), f"existing index ({meta['embedder']['name']})", \
            [d["path"] for d in meta.get("documents", [])]
    files = qasper_files()[:n_docs]
    docs_dir = copy_docs(files, work / f"qasper-docs-{len(files)}")
    build_name = "hash" if args.index_vectors == "proxy" else embedder_name
    out = work / f"qasper-{len(files)}-{build_name}"
    fp = {"files": files_fingerprint(files), "code": code_fingerprint(), "embedder": build_name}
    if cached_index_ok(out, fp):
        print(f"reusing the cached index {out}", flush=True)
    else:
        print(f"building the index of {len(files)} QASPER papers with {build_name} vectors -> {out} ...", flush=True)
        config = Config(embedder=build_name)
        t = time.perf_counter()
        rep = build_index(docs_dir, out, config, make_embedder(build_name, config), update=False)
        print(f"  {rep.summary_line()} (wall {time.perf_counter() - t:.1f} s)", flush=True)
        stamp_index(out, fp)
    desc = ("proxy: 384-d hash vectors in the index, real model for queries" if build_name == "hash"
            else f"real {build_name} vectors")
    return out, desc, [f.name for f in files]


def pick_questions(doc_names: list[str], n: int, seed: int) -> list[dict[str, Any]]:
    names = set(doc_names)
    qs = [q for q in read_jsonl(QASPER_QA) if q.get("scope") and set(q["scope"]) <= names]
    random.Random(seed).shuffle(qs)
    return qs[:n]


def run_pass(questions: list[dict[str, Any]], index: Any, config: Any, backends: Any, scoped: bool
             ) -> dict[str, list[float]]:
    from pipeline import run_pipeline

    emb: TimedEmbedder = backends.embedder
    rr = backends.reranker
    out: dict[str, list[float]] = {k: [] for k in (*STEPS, "inference", "not inference", "CPU (all threads)",
                                                   "embed calls", "rerank pairs", "rerank inference")}
    for q in questions:
        emb.reset()
        if isinstance(rr, TimedReranker):
            rr.reset()
        cpu0 = time.process_time()
        res = run_pipeline(q["query"], index, config, backends, doc_paths=set(q["scope"]) if scoped else None)
        out["CPU (all threads)"].append((time.process_time() - cpu0) * 1000)
        tm = res.timing_ms
        for k in STEPS:
            out[k].append(float(tm.get(k, 0.0)))
        inf = emb.ms + (rr.ms if isinstance(rr, TimedReranker) else 0.0)
        out["inference"].append(inf)
        out["not inference"].append(tm["total"] - inf)
        out["embed calls"].append(emb.calls)
        if isinstance(rr, TimedReranker):
            out["rerank pairs"].append(rr.pairs)
            out["rerank inference"].append(rr.ms)
        if any(f.step == "rerank" for f in res.fallbacks):
            raise RuntimeError(f"rerank fell back: {res.fallbacks}")
    return out


def embed_baseline(questions: list[dict[str, Any]], embedder: Any, cpu: list[float] | None = None) -> list[float]:
    out = []
    for q in questions:
        t, c = time.perf_counter(), time.process_time()
        embedder.embed_query(q["query"])
        out.append((time.perf_counter() - t) * 1000)
        if cpu is not None:
            cpu.append((time.process_time() - c) * 1000)
    return out


def profile_pass(questions: list[dict[str, Any]], index: Any, config: Any, backends: Any, top: int = 14) -> str:
    from pipeline import run_pipeline

    prof = cProfile.Profile()
    prof.enable()
    for q in questions:
        run_pipeline(q["query"], index, config, backends)
    prof.disable()
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    lines = buf.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    return "\n".join(lines[start:start + top + 1])


def load_cross_encoder(config: Any, work: Path) -> tuple[Any, str]:
    """A real cross-encoder from the local cache if there is one, else the tiny stand-in."""
    from retrieval.rerankers import CrossEncoderReranker

    quiet_transformers()
    real = CrossEncoderReranker(config.reranker_model)
    try:
        real.score("warm-up", ["a passage"])
        return real, f"{config.reranker_model} (trained, from the local cache)"
    except Exception:  # noqa: BLE001 - not in the cache: fall through to the stand-in
        pass
    path = build_tiny_cross_encoder(work / "tiny-cross-encoder")
    rr = CrossEncoderReranker(str(path))
    rr.score("warm-up", ["a passage"])
    return rr, ("MiniLM-L6 body + fresh 1-logit head (architecture of ms-marco-MiniLM-L-6-v2; cost is real, "
                "scores are not)")


def step_rows(label: str, r: dict[str, list[float]], steps: tuple[str, ...]) -> list[list[Any]]:
    rows = []
    for k in steps:
        s = stats(r[k])
        rows.append([label, k, s.p50, s.p95, s.mean, s.max])
        label = ""
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--docs", type=int, default=None, help="first N QASPER papers (quick 40, full all 276)")
    ap.add_argument("--queries", type=int, default=None, help="timed questions per pass (quick 60, full 200)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--embedder", default="onnx", help="query embedder: onnx (default), local (torch), hash")
    ap.add_argument("--index-vectors", choices=("proxy", "real"), default="proxy")
    ap.add_argument("--index", default=None, help="measure this existing index instead of building one")
    ap.add_argument("--rerank", choices=("auto", "off"), default="auto", help="auto: also measure rerank on")
    ap.add_argument("--rerank-queries", type=int, default=None, help="questions with rerank on (quick 10, full 30)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n_docs = pick(args.docs, args.quick, 40, 276)
    n_q = pick(args.queries, args.quick, 60, 200)
    n_rr = pick(args.rerank_queries, args.quick, 10, 30)
    work = workdir_of(args) / "latency"
    work.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    banner("Warm query latency per step")
    print(machine_line(info))
    report = Report("query_latency", sys.argv[1:] if argv is None else list(argv), info,
                    params={"docs": n_docs, "queries": n_q, "rerank_queries": n_rr, "embedder": args.embedder,
                            "index_vectors": args.index_vectors, "seed": args.seed})

    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_store import load_index
    from pipeline import Backends, make_backends

    index_dir, vectors, doc_names = prepare_index(args, work, args.embedder, n_docs)
    t = time.perf_counter()
    index = load_index(index_dir)
    load_s = time.perf_counter() - t
    counts = index.metadata["counts"]
    print(f"index: {counts['documents']} documents, {counts['leaves']} leaves, {counts['chunks']:,} chunks; "
          f"{vectors}; load_index {load_s:.2f} s", flush=True)
    config = Config(reranker="none")
    if args.index:
        inner = make_backends(index, config, None, None).embedder
    else:
        inner = make_embedder(args.embedder, config)
    if hasattr(inner, "load"):
        inner.load()
    emb = TimedEmbedder(inner)
    backends = Backends(embedder=emb, reranker=None, llm=None)

    questions = pick_questions(doc_names, n_q + args.warmup, args.seed)
    warm, timed = questions[:args.warmup], questions[args.warmup:]
    if not timed:
        raise SystemExit("no QASPER question is scoped to the indexed documents")
    print(f"questions: {len(timed)} timed (+{len(warm)} warm-up), from {QASPER_QA.name}; embedder "
          f"{inner.name} ({inner.model_id}); mock LLM -> hybrid locator + extractive answer", flush=True)
    report.params.update({"chunks": counts["chunks"], "leaves": counts["leaves"], "documents": counts["documents"],
                          "index_vectors_desc": vectors, "load_index_s": load_s})
    default_blas = blas_threads()
    cap = limit_blas_threads(1)  # as main.py does for every CLI run (OPENBLAS_NUM_THREADS=1)
    print(f"numpy BLAS threads: {1 if cap is not None else default_blas} for the measured passes (as the CLI); "
          f"library default {default_blas}", flush=True)
    report.params.update({"blas_threads_default": default_blas, "blas_threads_measured": 1 if cap else default_blas})
    run_pass(warm, index, config, backends, scoped=True)
    run_pass(warm, index, config, backends, scoped=False)
    embed_baseline(warm, inner)

    base_cpu: list[float] = []
    base_a = embed_baseline(timed, inner, base_cpu)
    off_scoped = run_pass(timed, index, config, backends, scoped=True)
    off_whole = run_pass(timed, index, config, backends, scoped=False)
    base_b = embed_baseline(timed, inner, base_cpu)
    base = stats(base_a + base_b)
    report.results["embed_query_ms"] = base.to_dict()
    report.results["embed_query_cpu_ms"] = stats(base_cpu).to_dict()
    report.results["rerank_off"] = {"scoped": {k: stats(v).to_dict() for k, v in off_scoped.items()},
                                    "whole": {k: stats(v).to_dict() for k, v in off_whole.items()}}
    # same-run A/B: numpy's BLAS with its library default thread count (not what the CLI uses)
    ab = limit_blas_threads(default_blas) if cap is not None and default_blas and default_blas > 1 else None
    if ab is not None:
        with ab:
            bn_scoped = run_pass(timed, index, config, backends, scoped=True)
            bn_whole = run_pass(timed, index, config, backends, scoped=False)
        report.results["rerank_off_blas_default"] = {
            "threads": default_blas, "scoped": {k: stats(v).to_dict() for k, v in bn_scoped.items()},
            "whole": {k: stats(v).to_dict() for k, v in bn_whole.items()}}
    print()
    bc = stats(base_cpu)
    print(f"baseline: embed_query alone ({inner.name}), {base.n} calls: p50 {base.p50:.2f} ms, p95 {base.p95:.2f} ms "
          f"(CPU p50 {bc.p50:.1f} ms)")
    shown = ("locate", "retrieve", "synthesize", "total", "inference", "not inference", "CPU (all threads)")
    rows = (step_rows("rerank off, scoped to the paper", off_scoped, shown)
            + step_rows("rerank off, whole index", off_whole, shown))
    if ab is not None:
        rows += (step_rows(f"A/B scoped, BLAS {default_blas} threads", bn_scoped, ("total", "inference", "not inference"))
                 + step_rows(f"A/B whole, BLAS {default_blas} threads", bn_whole,
                             ("total", "inference", "not inference")))
    print(table(["pass", "step", "p50 ms", "p95 ms", "mean ms", "max ms"], rows))
    calls = stats(off_whole["embed calls"])
    msg = (f"model calls per query: {calls.mean:.2f} embed_query calls on average "
           f"(min {calls.min:.0f}, max {calls.max:.0f})")
    if calls.min >= 2:
        msg += ": the same query text is embedded by the locator and again by the retriever"
    print(msg)
    report.results["embed_calls_per_query"] = calls.to_dict()

    for label, r in (("scoped", off_scoped), ("whole index", off_whole)):
        tot = stats(r["total"])
        report.headlines.append(Headline(f"query p95, rerank off, {label}", tot.p95, "ms", goal=f"<= {GOAL_MS:.0f} ms",
                                         ok=tot.p95 <= GOAL_MS, ratio=tot.p95 / base.p95,
                                         ratio_of=f"embed_query p95 {base.p95:.1f} ms"))
        ni = stats(r["not inference"])
        report.headlines.append(Headline(f"query p95 minus model inference, rerank off, {label}", ni.p95, "ms",
                                         ratio=stats(r["total"]).p50 / base.p50,
                                         ratio_of="total p50 / embed_query p50"))
    if ab is not None:
        for label, r in (("scoped", bn_scoped), ("whole index", bn_whole)):
            tot = stats(r["total"])
            report.headlines.append(Headline(f"query p95, rerank off, {label}, numpy default BLAS threads "
                                             f"({default_blas}; not the CLI)", tot.p95, "ms",
                                             ratio=tot.p95 / base.p95, ratio_of="embed_query p95"))

    prof = profile_pass(timed[:min(50, len(timed))], index, config, backends)
    report.results["profile_whole_index_top_tottime"] = prof
    print()
    print(f"cProfile of {min(50, len(timed))} whole-index queries, rerank off (top functions by own time):")
    print(prof)

    if args.rerank == "auto":
        try:
            t = time.perf_counter()
            rr_inner, rr_desc = load_cross_encoder(Config(reranker="cross-encoder"), workdir_of(args))
            rr_load = time.perf_counter() - t
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            report.notes.append(f"rerank on: not measurable here ({msg})")
            print(f"rerank on: not measurable here ({msg})")
        else:
            rr = TimedReranker(rr_inner)
            cfg_on = Config(reranker="cross-encoder", reranker_model=rr_inner.model)
            b_on = Backends(embedder=emb, reranker=rr, llm=None)
            rq = timed[:n_rr]
            run_pass(warm[:3], index, cfg_on, b_on, scoped=True)
            on_scoped = run_pass(rq, index, cfg_on, b_on, scoped=True)
            on_whole = run_pass(rq, index, cfg_on, b_on, scoped=False)
            report.results["rerank_on"] = {"model": rr_desc, "load_s": rr_load,
                                           "scoped": {k: stats(v).to_dict() for k, v in on_scoped.items()},
                                           "whole": {k: stats(v).to_dict() for k, v in on_whole.items()}}
            print()
            print(f"rerank on: {rr_desc}; loaded in {rr_load:.1f} s; {len(rq)} questions")
            print(table(["pass", "step", "p50 ms", "p95 ms", "mean ms", "max ms"],
                        step_rows("rerank on, scoped", on_scoped, STEPS + ("rerank pairs",))
                        + step_rows("rerank on, whole index", on_whole, STEPS + ("rerank pairs",))))
            for label, r in (("scoped", on_scoped), ("whole index", on_whole)):
                tot = stats(r["total"])
                report.headlines.append(Headline(f"query p95, rerank on, {label}", tot.p95, "ms",
                                                 ratio=tot.p95 / base.p95, ratio_of="embed_query p95"))
            import torch

            if torch.get_num_threads() > 1:  # same-run A/B: torch's intra-op threads on a busy 2-core box
                n_threads = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    one_t = run_pass(rq, index, cfg_on, b_on, scoped=True)
                finally:
                    torch.set_num_threads(n_threads)
                a, b = stats(on_scoped["rerank"]), stats(one_t["rerank"])
                report.results["rerank_on"]["scoped_torch_1_thread"] = {k: stats(v).to_dict()
                                                                       for k, v in one_t.items()}
                print(f"rerank step, scoped, torch {n_threads} threads: p50 {a.p50:.0f} ms, p95 {a.p95:.0f} ms; "
                      f"1 thread: p50 {b.p50:.0f} ms, p95 {b.p95:.0f} ms (same run)")
    else:
        report.notes.append("rerank on: skipped (--rerank off)")
    report.finish(args.json)
    return 0


# --------------------------------------------------------------------------- mode whole

WHOLE_DOC = """Whole-collection questions on a large index: warm latency, and the same answers as another checkout.

    python benchmarks/bench_query_latency.py whole [--index DIR] [--queries N] [--runs N] [--ann auto,off]
                                           [--baseline-code DIR] [--profile] [--json OUT]

The index defaults to the 10,000-document index of ``bench_scale.py`` (``WORKDIR/scale/index-10000``),
the questions to that run's generated questions (``queries-10000.json`` beside it). Each worker is a
fresh process that loads the index once, answers every question once untimed (so the pages a
question reads are in the page cache for whichever checkout runs first: at 100,000 documents the
first reading of a question's pages from the disk otherwise falls on one checkout only and decides
its p95; cold questions are ``bench_cold_query.py``'s), then every question over the whole collection (``run_pipeline``, hybrid locator, mock answer), timed in process (wall,
and CPU seconds of the process: on a shared machine the CPU figure moves far less), then the same
question on the LLM locator's path (TOC under its budget, ``bench_scale``'s instant scripted LLM); it also
ranks the leaves (``hybrid_leaf_scores``: the 50 best and their scores) and cuts the TOC the LLM
locator would be shown (``toc_for_prompt``) for each question.

``--baseline-code DIR`` (e.g. ``git worktree add ../base main``): the same worker run from that
checkout on the same index, interleaved with this code's (``--runs`` rounds), is the baseline of
the latency ratios. Every answer (the run record without its ids, times and dates, and without
settings only one checkout has), leaf ranking
and TOC is digested per question; the benchmark reports how many questions differ between the
two checkouts, for each ``--ann`` setting.
"""


WHOLE_GOAL_MS = 100.0
VOLATILE = ("run_id", "created_at", "timing_ms", "logged")
"""Run-record keys that differ between two runs of the same code."""

WORKER = r"""
import cProfile, hashlib, io, json, pstats, sys, time
sys.path.insert(0, ".")
from benchmarks.common import limit_blas_threads
limit_blas_threads(1)  # as main.py does
from config import Config
from indexing.index_store import load_index
from pipeline import Backends, make_backends, run_pipeline
from retrieval.node_locator import hybrid_leaf_scores, toc_for_prompt
sys.path.insert(0, "benchmarks")
from bench_scale import InstantLLM
from retrieval.query import Query
from utils.similarity import top_order

index_dir, queries_file, n, ann, volatile, profile, shared_file = sys.argv[1:8]
shared = set(json.loads(open(shared_file).read())) if shared_file != "-" else set(Config().to_dict())
queries = [q["query"] for q in json.loads(open(queries_file).read())][:int(n)]
index = load_index(index_dir)
config = Config(ann=ann)
backends = make_backends(index, config, None)

def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]

config_llm = config.replace(locator="llm")
backends_llm = Backends(embedder=backends.embedder, reranker=backends.reranker, llm=InstantLLM())
for q in queries:  # untimed: the question's pages read in before either checkout is timed
    run_pipeline(q, index, config, backends)
    run_pipeline(q, index, config_llm, backends_llm)
out = {"total_ms": [], "cpu_ms": [], "locate_ms": [], "answers": [], "leaves": [], "toc": [], "llm_ms": [],
       "llm_cpu_ms": [], "llm_fallbacks": 0}
prof = cProfile.Profile() if profile == "1" else None
for q in queries:
    if prof:
        prof.enable()
    t, c = time.perf_counter(), time.process_time()
    r = run_pipeline(q, index, config, backends)
    out["total_ms"].append((time.perf_counter() - t) * 1000)
    out["cpu_ms"].append((time.process_time() - c) * 1000)
    if prof:
        prof.disable()
    out["locate_ms"].append(r.timing_ms.get("locate", 0.0))
    d = r.to_dict() if hasattr(r, "to_dict") else dict(r)
    d = {k: v for k, v in d.items() if k not in volatile.split(",")}
    # the settings both checkouts share: a setting one of them added is not part of the answer
    d["config"] = {k: v for k, v in (d.get("config") or {}).items() if k in shared}
    out["answers"].append(digest(d))
    question = Query.build(q, backends.embedder)
    _, total = hybrid_leaf_scores(index, question, config)
    top = top_order(total, 50)
    out["leaves"].append(digest([[int(i), round(float(total[int(i)]), 6)] for i in top]))
    out["toc"].append(digest(toc_for_prompt(index, question, config)))
    t, c = time.perf_counter(), time.process_time()
    r = run_pipeline(q, index, config_llm, backends_llm)  # the LLM locator's path, the model costing nothing
    out["llm_ms"].append((time.perf_counter() - t) * 1000)
    out["llm_cpu_ms"].append((time.process_time() - c) * 1000)
    out["llm_fallbacks"] += bool(r.fallbacks)
if prof:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
    out["profile"] = buf.getvalue()
print(json.dumps(out))
"""


def config_fields(code: Path) -> set[str]:
    """The settings (``Config`` fields) a checkout has."""
    env = bench_env()
    env["PYTHONPATH"] = str(code)
    r = run_proc(python("-c", "import json, config; c = config.Config(); "
                        "print(json.dumps(sorted(c.to_dict() if hasattr(c, 'to_dict') else config.Config.__dataclass_fields__)))"),
                 cwd=code, env=env).check()
    return set(json.loads(r.stdout.strip().splitlines()[-1]))


def run_worker(code: Path, index_dir: Path, qfile: Path, n: int, ann: str, profile: bool,
               shared: Path | None) -> dict[str, Any]:
    env = bench_env()
    env["PYTHONPATH"] = str(code)
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread, as main.py sets before numpy loads
        env.setdefault(var, "1")
    r = run_proc(python("-c", WORKER, index_dir, qfile, n, ann, ",".join(VOLATILE), int(profile),
                        shared if shared else "-"), cwd=code, env=env).check()
    res: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    res["maxrss_mb"] = r.maxrss_mb
    return res


def whole_main(argv: list[str] | None = None) -> int:
    ap = base_parser(WHOLE_DOC)
    ap.add_argument("--index", type=Path, default=None, help="index directory (default: bench_scale's 10,000)")
    ap.add_argument("--queries", type=int, default=None, help="questions per worker (quick 20, full 60)")
    ap.add_argument("--runs", type=int, default=None, help="interleaved rounds of workers (quick 1, full 2)")
    ap.add_argument("--ann", default="auto,off", help="comma list of ann settings to run (auto, on, off)")
    add_baseline_code(ap)
    ap.add_argument("--profile", action="store_true", help="print a cProfile of this code's questions")
    args = ap.parse_args(argv)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    settings = [a.strip() for a in args.ann.split(",") if a.strip()]
    if not settings or any(a not in ("auto", "on", "off") for a in settings):
        print(f"error: --ann takes auto, on, off (got {args.ann!r})", file=sys.stderr)
        return 2
    n = args.queries or (20 if args.quick else 60)
    runs = args.runs or (1 if args.quick else 2)
    codes = dict(code_arms(args.baseline_code, "this code", "baseline"))
    info = machine_info()
    banner(f"whole-collection questions on {index_dir.name}: {n} questions, {runs} round(s)")
    print(machine_line(info))
    report = Report("whole_query", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "queries": n, "runs": runs, "ann": settings,
                            "baseline_code": str(args.baseline_code) if args.baseline_code else None})
    shared = None
    if len(codes) > 1:  # a setting only one checkout has shows in its run record's config: not an answer
        fields = set.intersection(*(config_fields(code) for code in codes.values()))
        shared = Path(tempfile.mkdtemp(prefix="whole-query-")) / "shared-settings.json"
        shared.write_text(json.dumps(sorted(fields)), encoding="utf-8")
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for round_no in range(runs):
        for ann in settings:
            # interleaved, the first in turn: the machine's load falls on both alike
            order = list(codes.items())
            for label, code in (order if round_no % 2 == 0 else order[::-1]):
                got.setdefault((label, ann), []).append(
                    run_worker(code, index_dir, qfile, n, ann, args.profile and label == "this code", shared))
    if shared is not None:
        shutil.rmtree(shared.parent, ignore_errors=True)
    rows, results = [], {}
    for ann in settings:
        base = got.get(("baseline", ann))
        base_p95 = stats([t for w in base for t in w["total_ms"]]).p95 if base else None
        base_cpu = stats([t for w in base for t in w["cpu_ms"]]).p95 if base and "cpu_ms" in base[0] else None
        for label in codes:
            workers = got[(label, ann)]
            total = stats([t for w in workers for t in w["total_ms"]])
            cpu = stats([t for w in workers for t in w["cpu_ms"]])
            locate = stats([t for w in workers for t in w["locate_ms"]])
            same = {}
            if base and label != "baseline":
                for key in ("answers", "leaves", "toc"):
                    same[key] = sum(a == b for a, b in zip(workers[0][key], base[0][key]))
            results[f"{label} ann={ann}"] = {"total_ms": total.to_dict(), "cpu_ms": cpu.to_dict(),
                                             "locate_ms": locate.to_dict(),
                                             "maxrss_mb": max(w["maxrss_mb"] for w in workers),
                                             "identical_to_baseline": same}
            rows.append([label, ann, total.p50, total.p95, cpu.p50, cpu.p95, locate.p95,
                         max(w["maxrss_mb"] for w in workers), ratio(total.p95, base_p95) if base_p95 else "-",
                         ratio(cpu.p95, base_cpu) if base_cpu else "-",
                         " / ".join(f"{same[k]}/{n}" for k in ("answers", "leaves", "toc")) if same else "-"])
            if args.profile and label == "this code" and "profile" in workers[0]:
                print(f"--- profile, this code, ann={ann}\n{workers[0]['profile']}")
    print(table(["code", "ann", "p50 ms", "p95 ms", "CPU p50", "CPU p95", "locate p95", "peak RSS MB", "x p95",
                 "x CPU p95",
                 "same answers / leaves / TOC"], rows))
    llm_rows = []
    for ann in settings:
        base = got.get(("baseline", ann))
        base_cpu = stats([t for w in base for t in w.get("llm_cpu_ms", [])]).p95 if base and "llm_cpu_ms" in base[0] else None
        for label in codes:
            workers = got[(label, ann)]
            if "llm_ms" not in workers[0]:
                continue
            wall = stats([t for w in workers for t in w["llm_ms"]])
            cpu = stats([t for w in workers for t in w["llm_cpu_ms"]])
            results[f"{label} ann={ann}"].update(llm_ms=wall.to_dict(), llm_cpu_ms=cpu.to_dict(),
                                                 llm_fallbacks=sum(w["llm_fallbacks"] for w in workers))
            llm_rows.append([label, ann, wall.p50, wall.p95, cpu.p50, cpu.p95,
                             ratio(cpu.p95, base_cpu) if base_cpu else "-", sum(w["llm_fallbacks"] for w in workers)])
    print("LLM locator path (TOC budget, an instant scripted LLM):")
    print(table(["code", "ann", "p50 ms", "p95 ms", "CPU p50", "CPU p95", "x CPU p95", "fallbacks"], llm_rows))
    report.results["runs"] = results
    for ann in settings:
        mine = results[f"this code ann={ann}"]
        base_r = results.get(f"baseline ann={ann}")
        report.headlines.append(Headline(
            f"whole-collection p95, ann={ann}", mine["total_ms"]["p95"], "ms", goal=f"<= {GOAL_MS:.0f}",
            ok=mine["total_ms"]["p95"] <= WHOLE_GOAL_MS,
            ratio=ratio(mine["total_ms"]["p95"], base_r["total_ms"]["p95"]) if base_r else None,
            ratio_of="the baseline checkout" if base_r else ""))
        if mine["identical_to_baseline"]:
            same_all = min(mine["identical_to_baseline"].values())
            report.headlines.append(Headline(f"questions answered identically to the baseline, ann={ann}",
                                             same_all, f"of {n}", goal=f"= {n}", ok=same_all == n))
    report.finish(args.json)
    return 0


# --------------------------------------------------------------------------- mode deltas

DELTAS_DOC = """Questions on an index with delta segments against the same index fully built: the cost of reading segments.

    python benchmarks/bench_query_latency.py deltas [--index DIR] [--queries N] [--runs N] [--ann auto] [--json OUT]

The index defaults to the 10,000-document index of ``bench_scale.py``. A hard-linked copy of it and of its
documents (``cp -al``: an update writes only new files) gets two updates, each after one changed
document (``bench_scale.change_one_document``): two delta segments and two deleted documents. Then the
worker of ``bench_query_latency.py whole`` (a fresh process: ``load_index``, three warm-up questions, then every
question over the whole collection through ``run_pipeline``, hybrid locator, mock answer; wall and CPU
per question) runs on the original (the baseline) and on the updated copy, interleaved ``--runs`` times.
Printed: p50/p95 of each and their ratio, and the query processes' peak RSS. (The answers are not
compared here: two documents differ, so every BM25 score moves a little; that a segmented index answers
as a full build of the changed folder is tested in tests/test_delta_update.py.)
"""


def deltas_main(argv: list[str] | None = None) -> int:
    ap = base_parser(DELTAS_DOC)
    ap.add_argument("--index", type=Path, default=None, help="index directory (default: bench_scale's 10,000)")
    ap.add_argument("--queries", type=int, default=None, help="questions per worker (quick 20, full 40)")
    ap.add_argument("--runs", type=int, default=1, help="interleaved rounds of the two workers")
    ap.add_argument("--ann", default="auto", help="the ann setting of both workers")
    args = ap.parse_args(argv)
    work = workdir_of(args) / "delta-query"
    index = args.index
    if index is None:
        found = scale_index(args)
        if found is None:
            print("error: no index: give --index, or run bench_scale.py --sizes 10000 first", file=sys.stderr)
            return 2
        index = found[0]
    corpus = reused_corpus(index)
    if isinstance(corpus, str):
        print(f"error: {corpus}", file=sys.stderr)
        return 2
    docs = corpus[0]
    n = args.queries or (20 if args.quick else 40)
    info = machine_info()
    banner(f"Questions on an index with delta segments vs the same index fully built ({index})")
    print(machine_line(info))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = bench_env()
    try:
        for src, dst in ((docs, work / "docs"), (index, work / "index")):
            subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
        for nth in (0.5, 0.25):
            change_one_document(work / "docs", nth)
            r = run_proc(python("main.py", "index", "--input", work / "docs", "--output", work / "index", "--mock",
                                "--quiet"), env=env).check()
            print(f"  {r.stdout.strip()}")
        qfile = work / "queries.json"
        qfile.write_text(json.dumps(make_queries(docs, n, 0)))
        results: dict[str, list[dict[str, Any]]] = {"full build": [], "with 2 deltas": []}
        for _ in range(args.runs):
            for name, where in (("full build", index), ("with 2 deltas", work / "index")):
                results[name].append(run_worker(ROOT, where, qfile, n, args.ann, False, None))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows, summary = [], {}
    for name, runs in results.items():
        wall = stats([x for r in runs for x in r["total_ms"]])
        cpu = stats([x for r in runs for x in r["cpu_ms"]])
        rss = max(r["maxrss_mb"] for r in runs)
        summary[name] = {"wall": wall, "cpu": cpu, "rss_mb": rss}
        rows.append([name, f"{wall.p50:.0f} / {wall.p95:.0f}", f"{cpu.p50:.0f} / {cpu.p95:.0f}", f"{rss:.0f}"])
    base, seg = summary["full build"], summary["with 2 deltas"]
    rows.append(["ratio", f"{seg['wall'].p50 / base['wall'].p50:.2f} / {seg['wall'].p95 / base['wall'].p95:.2f}",
                 f"{seg['cpu'].p50 / base['cpu'].p50:.2f} / {seg['cpu'].p95 / base['cpu'].p95:.2f}",
                 f"{seg['rss_mb'] / base['rss_mb']:.2f}"])
    print(table(["index", "wall ms p50 / p95", "CPU ms p50 / p95", "peak RSS MB"], rows))
    report = Report("delta_query", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index), "queries": n, "runs": args.runs, "ann": args.ann})
    report.results = summary
    if args.json:
        Path(args.json).write_text(json.dumps(report.results, indent=2, default=str))
    return 0


MODES = {"whole": whole_main, "deltas": deltas_main}
"""``python benchmarks/bench_query_latency.py MODE [options]`` runs a mode (each has its own ``--help``); without a
mode, the benchmark this file is named for (what ``run_all.py`` runs)."""


if __name__ == "__main__":
    sys.exit(run_with_modes(main, MODES, sys.argv[1:]))
