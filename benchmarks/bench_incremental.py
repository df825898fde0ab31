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
from common import (Headline, Report, banner, base_parser, bench_env, copy_docs, machine_info,  # noqa: E402
                    machine_line, pick, python, qasper_files, run_proc, table, workdir_of)

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


if __name__ == "__main__":
    sys.exit(main())
