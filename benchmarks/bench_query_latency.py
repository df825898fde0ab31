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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (QASPER_QA, Headline, Report, banner, base_parser, build_tiny_cross_encoder,  # noqa: E402
                    blas_threads, cached_index_ok, code_fingerprint, copy_docs, files_fingerprint, limit_blas_threads,
                    machine_info, machine_line, pick, qasper_files, quiet_transformers, read_jsonl, stamp_index,
                    stats, table, workdir_of)

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
        if res.get("fallbacks") and any(f["step"] == "rerank" for f in res["fallbacks"]):
            raise RuntimeError(f"rerank fell back: {res['fallbacks']}")
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


if __name__ == "__main__":
    sys.exit(main())
