"""`main.py serve` under concurrent clients, against answering the same questions in process.

The server runs as its own process on 127.0.0.1 (a free port) over an index of the 276 QASPER
papers (default: the cached onnx evaluation index that `eval --data qasper-dev --embedder onnx`
builds; `--index DIR` for any other). N clients (1, 4, 16) each post their share of a bounded
number of QASPER questions to POST /api/query, each question scoped to its paper as the set
defines it, and wait for the whole record. Reported per level: throughput (questions/s), p50/p95
latency as a client sees it, errors (non-200 or a failed connection; the goal is 0), and the
server's resident memory (now and peak). The baseline is the CLI's in-process path (`TreeRAG.run`,
what `query` and `interactive` call) over the same questions one after another in this process;
ratios are server over baseline. No LLM is configured (extractive answers): the figures are
TreeRAG's own cost, not a provider's.

    python benchmarks/bench_serve.py [--quick] [--index DIR] [--requests 64] [--clients 1,4,16] [--workers 4] [--json OUT]
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import sys

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (QASPER_QA, ROOT, base_parser, cached_index_ok, code_fingerprint, copy_docs, machine_info,  # noqa: E402
                    machine_line, pick, proc_memory_mb, python, ratio, run_proc, stamp_index, stats, workdir_of)

sys.path.insert(0, str(ROOT))
from tests.serve_process import running_server  # noqa: E402  (the tests' launcher: free port, always stopped)

QASPER_ONNX_INDEX = Path.home() / ".cache" / "treerag" / "eval" / "indexes" / "7b083bc0daaf0f1a9989"


def questions(path: Path, n: int) -> list[dict[str, Any]]:
    """The first ``n`` QASPER questions, each with the paper it is asked of."""
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append({"question": row["query"], "documents": list(row.get("scope") or [])})
            if len(out) == n:
                break
    return out


def in_process(index: Path, qs: list[dict[str, Any]]) -> dict[str, Any]:
    from pipeline import TreeRAG

    rag = TreeRAG.open(index, llm="mock")
    rag.run(qs[0]["question"], qs[0]["documents"] or None)  # models loaded, caches warm, as in a server
    lat = []
    t0 = time.perf_counter()
    for q in qs:
        t = time.perf_counter()
        rag.run(q["question"], q["documents"] or None)
        lat.append((time.perf_counter() - t) * 1000)
    wall = time.perf_counter() - t0
    return {"throughput": len(qs) / wall, "latency_ms": stats(lat).to_dict(), "errors": 0}


def load(url: str, qs: list[dict[str, Any]], clients: int) -> dict[str, Any]:
    import httpx

    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    shares = [qs[i::clients] for i in range(clients)]

    def client(share: list[dict[str, Any]]) -> None:
        with httpx.Client(base_url=url, timeout=300) as c:
            for q in share:
                body = {"question": q["question"], **({"documents": q["documents"]} if q["documents"] else {})}
                t = time.perf_counter()
                try:
                    r = c.post("/api/query", json=body)
                    ok = r.status_code == 200 and "answer" in r.json()
                    why = f"HTTP {r.status_code}: {r.text[:120]}"
                except httpx.HTTPError as exc:
                    ok, why = False, f"{type(exc).__name__}: {exc}"
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    (lat.append(ms) if ok else errors.append(why))

    threads = [threading.Thread(target=client, args=(s,)) for s in shares if s]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"throughput": len(lat) / wall, "latency_ms": stats(lat).to_dict(), "errors": len(errors),
            "error_examples": errors[:3]}


def quick_index(qs: list[dict[str, Any]], work: Path) -> Path:
    """A hash-embedder index of just the papers ``qs`` are asked of (``--quick``: the server's own cost on
    a small index, without the evaluation index); built once per set of papers and code."""
    papers = sorted({d for q in qs for d in q["documents"]})
    docs = copy_docs([QASPER_QA.parent / "docs" / p for p in papers], work / "serve-docs")
    index = work / "serve-index"
    stamp = {"papers": papers, "code": code_fingerprint()}
    if not cached_index_ok(index, stamp):
        run_proc(python("main.py", "index", "--input", docs, "--output", index, "--embedder", "hash",
                        "--quiet")).check()
        stamp_index(index, stamp)
    return index


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None,
                    help="the index to serve (default: the cached onnx QASPER evaluation index; --quick: a small "
                         "hash-embedder index of the questions' papers, built in the work folder)")
    ap.add_argument("--qa", type=Path, default=QASPER_QA)
    ap.add_argument("--requests", type=int, default=None, help="questions per concurrency level (quick 8, full 64)")
    ap.add_argument("--clients", default=None, help="client counts (quick 1,4; full 1,4,16)")
    ap.add_argument("--workers", type=int, default=None, help="the server's --workers (quick 2, full 4)")
    args = ap.parse_args(argv)
    args.requests = pick(args.requests, args.quick, 8, 64)
    args.clients = pick(args.clients, args.quick, "1,4", "1,4,16")
    args.workers = pick(args.workers, args.quick, 2, 4)
    if args.index is None:
        args.index = quick_index(questions(args.qa, args.requests), workdir_of(args)) if args.quick else QASPER_ONNX_INDEX
    if not (args.index / "metadata.json").exists():
        sys.exit(f"error: no index at {args.index}: build it with python main.py eval --data "
                 f"{QASPER_QA.parent} --embedder onnx (it is cached there), or pass --index DIR")
    levels = [int(c) for c in args.clients.split(",")]
    qs = questions(args.qa, args.requests)
    info = machine_info()
    print(machine_line(info))
    meta = json.loads((args.index / "metadata.json").read_text(encoding="utf-8"))
    print(f"index: {meta['counts']['documents']} documents, {meta['counts']['chunks']:,} chunks, "
          f"embedder {meta['embedder']['name']}; {len(qs)} questions per level from {args.qa.parent.name}, each scoped to its paper when the set says; no LLM")

    base = in_process(args.index, qs)
    print(f"baseline (in process, sequential): {base['throughput']:.2f} q/s, p50 {base['latency_ms']['p50']:.0f} ms, "
          f"p95 {base['latency_ms']['p95']:.0f} ms")
    results: dict[str, Any] = {"machine": info, "baseline": base, "levels": {}}
    env = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with running_server("--index", str(args.index), "--no-log", "--llm", "mock", "--workers", str(args.workers),
                        env=env) as srv:
        pid = srv.proc.pid
        load(srv.url, qs[:2], 1)  # warm: the first request loads nothing more, but pages the index in
        print(f"server idle after warm-up: RSS {proc_memory_mb(pid).get('VmRSS', float('nan')):.0f} MB")
        print(f"{'clients':>7} {'q/s':>7} {'x base':>7} {'p50 ms':>8} {'p95 ms':>8} {'p50 x base':>10} {'errors':>6} "
              f"{'RSS MB':>7} {'peak MB':>7}")
        for c in levels:
            r = load(srv.url, qs, c)
            mem = proc_memory_mb(pid)
            r["rss_mb"], r["peak_rss_mb"] = mem.get("VmRSS", float("nan")), mem.get("VmHWM", float("nan"))
            results["levels"][c] = r
            lat = r["latency_ms"]
            print(f"{c:>7} {r['throughput']:>7.2f} {ratio(r['throughput'], base['throughput']):>7.2f} "
                  f"{lat['p50']:>8.0f} {lat['p95']:>8.0f} {ratio(lat['p50'], base['latency_ms']['p50']):>10.2f} "
                  f"{r['errors']:>6} {r['rss_mb']:>7.0f} {r['peak_rss_mb']:>7.0f}")
            for e in r["error_examples"]:
                print(f"        error: {e}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
