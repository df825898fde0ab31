"""Measure the embedding backends (not a test; numbers go into README / compatible()).

    python -m evaluation.tools.embedder_check cosine       # onnx-int8 vs torch on ~200 varied texts
    python -m evaluation.tools.embedder_check cold         # fresh-process import+load and 1-query times
    python -m evaluation.tools.embedder_check throughput   # chunks/s on ~2,000 QASPER chunks (onnx, local)
    python -m evaluation.tools.embedder_check use          # chunks/s of `use` on ~300 Chinese articles
    python -m evaluation.tools.embedder_check all

Why: the onnx backend exists to make a cold `main.py query` fast, and it may
stand in for the torch model on the same index only if its vectors agree.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BENCH = Path(os.environ.get("TREERAG_BENCH", ROOT.parent / "shared" / "bench"))
QASPER = BENCH / "qasper-dev" / "docs"
LECOQA = BENCH / "lecoqa-train" / "docs"


def _paragraphs(pattern: str) -> list[str]:
    out = []
    for path in sorted(glob.glob(pattern, recursive=True)):
        text = Path(path).read_text(encoding="utf-8")
        for para in text.split("\n\n"):
            para = para.strip()
            if para and not para.startswith("#"):
                out.append(para)
    return out


def qasper_chunks(n: int = 2000, size: int = 200) -> list[str]:
    """~200-character pieces of QASPER paragraphs (the chunker's window size)."""
    chunks: list[str] = []
    for para in _paragraphs(str(QASPER / "*.md")):
        if len(para) < 40:
            continue
        for start in range(0, len(para), size):
            piece = para[start:start + size]
            if len(piece) >= 40:
                chunks.append(piece)
        if len(chunks) >= n:
            break
    return chunks[:n]


def chinese_articles(n: int = 300) -> list[str]:
    paras = [p for p in _paragraphs(str(LECOQA / "**" / "*.md")) if p.startswith("第") and len(p) > 20]
    random.Random(0).shuffle(paras)
    return paras[:n]


def varied_texts(n: int = 200) -> list[str]:
    """Short and long English, Chinese, mixed, code-ish and numeric texts."""
    rng = random.Random(1)
    en = [p for p in _paragraphs(str(QASPER / "*.md")) if len(p) > 40]
    rng.shuffle(en)
    zh = chinese_articles(400)
    short_en = [p[:120] for p in en[:50]]
    long_en = [p for p in en if len(p) > 1500][:30]  # > 256 word pieces: exercises truncation
    chunk_en = [p[:200] for p in en[50:100]]
    zh_part = zh[:40]
    mixed = [f"{a[:80]} {b[:80]}" for a, b in zip(en[100:115], zh[40:55])]
    misc = [
        "def f(x): return x ** 2  # square", "SELECT * FROM users WHERE id = 42;",
        "3.14159 2.71828 1.41421", "BERT-base F1 = 88.5% (±0.3) on SQuAD v1.1",
        "Hello!", "a", "the the the", "GPU", "李白", "AdaRouter 在 GLUE 上提升 2.3 分",
    ]
    texts = short_en + long_en + chunk_en + zh_part + mixed + misc
    texts += [p[:300] for p in en[200:200 + max(0, n - len(texts))]]  # top up to n
    return texts[:n]


def _config():
    from config import Config

    return Config()


def cmd_cosine() -> None:
    import numpy as np

    from indexing.embedders.factory import make_embedder

    texts = varied_texts()
    cfg = _config()
    a = make_embedder("onnx", cfg).embed_documents(texts)
    b = make_embedder("local", cfg).embed_documents(texts)
    cos = (a * b).sum(axis=1)
    print(f"cosine onnx-int8 vs torch over {len(texts)} texts: min {cos.min():.4f} "
          f"mean {cos.mean():.4f} median {np.median(cos):.4f}")
    worst = np.argsort(cos)[:5]
    for i in worst:
        print(f"  {cos[i]:.4f}  {texts[i][:70]!r}")
    # Does the int8 model preserve retrieval? rank texts by one query under both.
    agree = 0
    for q in range(20):
        ra = np.argsort(-(a @ a[q]))[1:6]
        rb = np.argsort(-(b @ b[q]))[1:6]
        agree += len(set(ra) & set(rb))
    print(f"top-5 neighbour overlap (20 probes): {agree / 100:.2%}")
    cmd_cross()


def cmd_cross(n_queries: int = 100) -> None:
    """What compatible() allows: an index embedded by torch, queried with onnx.

    Compares, per real QASPER question, the chunk scores and top-10 lists of
    torch-query x torch-chunks against onnx-query x torch-chunks.
    """
    import json

    import numpy as np

    from indexing.embedders.factory import make_embedder

    cfg = _config()
    chunks = qasper_chunks()
    queries = []
    with open(QASPER.parent / "qa.jsonl", encoding="utf-8") as fh:
        for line in fh:
            queries.append(json.loads(line)["query"])
            if len(queries) >= n_queries:
                break
    local, onnx = make_embedder("local", cfg), make_embedder("onnx", cfg)
    index = local.embed_documents(chunks)
    q_t = local.embed_documents(queries)
    q_o = onnx.embed_documents(queries)
    s_t, s_o = q_t @ index.T, q_o @ index.T
    diff = np.abs(s_t - s_o)
    overlap = [len(set(np.argsort(-a)[:10]) & set(np.argsort(-b)[:10])) / 10 for a, b in zip(s_t, s_o)]
    top1 = np.mean(s_t.argmax(axis=1) == s_o.argmax(axis=1))
    print(f"torch index x onnx queries ({len(queries)} questions, {len(chunks)} chunks): "
          f"|score diff| mean {diff.mean():.4f} max {diff.max():.4f}; "
          f"top-10 overlap mean {np.mean(overlap):.2%} min {np.min(overlap):.0%}; top-1 agree {top1:.0%}")


_COLD = r"""
import os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from config import Config
from indexing.embedders.factory import make_embedder
e = make_embedder({name!r}, Config())
v = e.embed_query("how does the router choose an expert?")
t1 = time.perf_counter()
v = e.embed_query("what dataset was used for evaluation?")
t2 = time.perf_counter()
print(f"{{t1 - t0:.3f}} {{(t2 - t1) * 1000:.1f}}")
"""


def cmd_cold(repeats: int = 3) -> None:
    for name in ("onnx", "local", "use", "hash"):
        rows = []
        walls = []
        for _ in range(repeats):
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _COLD.format(root=str(ROOT), name=name)],
                                 capture_output=True, text=True, cwd=str(ROOT))
            walls.append(time.perf_counter() - t)
            if out.returncode != 0:
                print(name, "failed:", out.stderr.strip().splitlines()[-1:])
                break
            first, second = out.stdout.split()
            rows.append((float(first), float(second)))
        if rows:
            print(f"{name:6s} import+load+1st query {statistics.median(r[0] for r in rows):.2f} s | "
                  f"warm query {statistics.median(r[1] for r in rows):.1f} ms | "
                  f"process wall {statistics.median(walls):.2f} s  (median of {len(rows)})")


def _throughput(name: str, texts: list[str]) -> str:
    """Wall and CPU-time throughput: the machine is shared, so CPU time (all
    threads) is the steadier figure for comparing backends."""
    from indexing.embedders.factory import make_embedder

    e = make_embedder(name, _config())
    e.embed_documents(texts[:16])  # load + warm up
    t, c = time.perf_counter(), time.process_time()
    e.embed_documents(texts)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return (f"{len(texts) / wall:7.1f} chunks/s wall, {len(texts) / cpu:7.1f} per CPU-second "
            f"(load avg {os.getloadavg()[0]:.1f})")


def cmd_throughput() -> None:
    texts = qasper_chunks()
    print(f"{len(texts)} QASPER chunks, mean {sum(map(len, texts)) / len(texts):.0f} chars")
    for name in ("onnx", "local", "hash"):
        print(f"  {name:6s} {_throughput(name, texts)}")


def cmd_use() -> None:
    texts = chinese_articles()
    print(f"{len(texts)} Chinese statute articles, mean {sum(map(len, texts)) / len(texts):.0f} chars")
    print(f"  use    {_throughput('use', texts)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["cosine", "cold", "throughput", "use", "all"])
    args = ap.parse_args()
    if args.what in ("cosine", "all"):
        cmd_cosine()
    if args.what in ("cold", "all"):
        cmd_cold()
    if args.what in ("throughput", "all"):
        cmd_throughput()
    if args.what in ("use", "all"):
        cmd_use()


if __name__ == "__main__":
    main()
