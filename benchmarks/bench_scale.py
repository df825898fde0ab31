"""Scale: generated folders of structured Markdown, 100 -> 10,000 documents and beyond.

    python benchmarks/bench_scale.py [--quick] [--sizes 100,300,1000] [--queries N] [--seed S] [--json OUT]
                                     [--drop-caches] [--reuse-index N=DIR ...] [--exact-max-docs N]
                                     [--update-one [--update-only]]

For each size a seeded generator writes N documents (front-matter title,
10 numbered sections x 3 subsections x 2-3 paragraphs, Zipf-distributed
vocabulary of invented words plus per-document topic words, numbers), about
100 chunks each. Then, each in a fresh process:

* ``main.py index --mock`` (hash embeddings): wall and CPU time, peak RSS of
  the index process (wait4 on that process), size on disk per file;
* a query worker: ``load_index`` time, warm in-process ``run_pipeline`` p50/p95
  per step with the no-LLM hybrid locator (whole index, and scoped to the
  question's document), ``toc_for_prompt`` (the LLM locator's prompt under the
  TOC budget, default 6,000 tokens) p50/p95, and the whole LLM-locator path
  with an instant scripted LLM (what remains when the model costs nothing),
  plus the peak RSS of the query process and a profile of the slowest path.

Each index is also queried by a second worker with ``ann=off`` (every vector scanned exactly): the
ANN path's baseline in the same run (p95, peak RSS), and where the recall@100 of the exact dense top
100 among the ANN candidates and the overlap of the flat top 10 are measured. ``--drop-caches``
(root) adds a cold query after dropping the page cache.

``--reuse-index N=DIR`` measures an index that exists (only those indexes unless ``--sizes`` is given) (e.g. one ``bench_index_throughput.py memory`` built) as the
N-document size instead of generating and building it: its questions come from the document folder its
metadata.json names, and its build figures are that build's own wall time from metadata.json (CPU and
peak RSS of a build not run here are not measured). ``--exact-max-docs N`` skips the ``ann=off`` worker
above N documents (it reads every vector per question: ~15 GB at 100,000 documents); recall@100 is then
measured in a process of its own, one pass over the vector file for all its questions. ``--update-one``
times an index update after one changed document (``main.py index`` without ``--rebuild``: a delta
segment and a new manifest, indexing/delta_update.py), then a second one on top of it, on hard-linked
copies of the index and its documents (``cp -al``: an update writes only new files and renames a new
manifest in, so the originals are never written; the changed document is a new file), then ``verify``:
wall, CPU, peak RSS and bytes written against the full build's. ``--update-only`` runs only the builds
and the updates (no query workers).

Baseline in the same run: the smallest size; every figure is also shown as
its growth factor against it, and extrapolated to 10,000 documents (a least-squares line over the sizes, with
the fitted power law beside it), naming what crosses its limit first. Slow
paths are sampled under a time budget per loop (--budget-s), so at 1,000
documents toc_for_prompt may get only a few samples: its p95 is then a max.
"""
from __future__ import annotations

import cProfile
import io
import json
import math
import pstats
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Headline, Report, banner, base_parser, bench_env, dir_sizes, drop_page_cache, limit_blas_threads,  # noqa: E402
                    machine_info, machine_line, pick, proc_memory_mb, python, run_proc, stats, table, workdir_of,
                    worker_result)

GEN_VERSION = 1
GOAL_RAM_MB = 1024.0
GOAL_INDEX_RAM_MB = 2048.0
GOAL_QUERY_MS = 200.0
COLD_BUDGET_S = 1.5
TARGET_DOCS = 10_000
ANN_QUALITY_QUERIES = 40
UPDATE_VERIFY_MAX_BYTES = 5e9
"""``--update-one`` runs ``verify`` on the updated index up to this size (it hashes every byte)."""
UPDATE_DISK_RESERVE = 3e9
"""``--update-one`` writes a delta segment (proportional to the change) into hard-linked copies: it is
skipped when less than this is free on the disk (other jobs write to the same disk)."""

# --------------------------------------------------------------------------- corpus generator

_ONSETS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "ch", "cl", "dr", "fl", "gr", "kr", "pl", "pr", "sh", "st", "th", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "l", "m", "x", "nd", "rt", "st"]
_FUNCTION = ["the", "of", "and", "a", "to", "in", "is", "for", "that", "with", "on", "by", "as", "we",
             "this", "are", "from", "its", "which", "our"]


def make_vocab(rng: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.choice((1, 2, 2, 3))))
        words.add(w + rng.choice(_CODAS))
    out = sorted(words)
    rng.shuffle(out)
    return out


class Generator:
    """Deterministic structured documents with a realistic (Zipf) vocabulary."""

    def __init__(self, seed: int, vocab_size: int = 40_000) -> None:
        self.rng = random.Random(seed)
        self.vocab = make_vocab(self.rng, vocab_size)
        cum, total = [], 0.0
        for r in range(1, vocab_size + 1):
            total += 1.0 / r ** 1.05
            cum.append(total)
        self.cum = cum

    def words(self, k: int, topic: list[str]) -> list[str]:
        rng = self.rng
        content = rng.choices(self.vocab, cum_weights=self.cum, k=k)
        out = []
        for w in content:
            r = rng.random()
            if r < 0.22:
                out.append(rng.choice(topic))
            elif r < 0.45:
                out.append(rng.choice(_FUNCTION))
            elif r < 0.48:
                out.append(str(rng.choice((rng.randint(2, 99), rng.randint(100, 9999), round(rng.random() * 100, 1)))))
            else:
                out.append(w)
        return out

    def sentence(self, topic: list[str]) -> str:
        ws = self.words(self.rng.randint(7, 17), topic)
        return " ".join(ws).capitalize() + "."

    def paragraph(self, topic: list[str]) -> str:
        n = self.rng.choices((1, 2, 3), weights=(5, 4, 1))[0]
        return " ".join(self.sentence(topic) for _ in range(n))

    def title(self, topic: list[str], k: int) -> str:
        return " ".join(w.capitalize() for w in self.words(k, topic) if not w[0].isdigit()) or "Untitled"

    def document(self, i: int) -> str:
        rng = self.rng
        topic = rng.sample(self.vocab[2000:], 30)
        title = self.title(topic, rng.randint(3, 6))
        parts = [f"---\ntitle: \"{title} ({i})\"\n---\n", f"# {title}\n", self.paragraph(topic) + "\n"]
        for s in range(1, 11):
            parts.append(f"## {s} {self.title(topic, rng.randint(1, 3))}\n")
            parts.append(self.paragraph(topic) + "\n")
            for t in range(1, 4):
                parts.append(f"### {s}.{t} {self.title(topic, rng.randint(2, 4))}\n")
                for _ in range(rng.randint(2, 3)):
                    parts.append(self.paragraph(topic) + "\n")
        return "\n".join(parts)


def generate_corpus(dest: Path, n_docs: int, seed: int) -> Path:
    """Write n_docs documents into dest (reused when already complete)."""
    done = dest / ".complete"
    if done.is_file():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    gen = Generator(seed)
    for i in range(n_docs):
        sub = dest / f"part-{i // 100:03d}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc-{i:05d}.md").write_text(gen.document(i), encoding="utf-8")
    done.write_text("ok")
    return dest


def make_queries(docs_dir: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """Questions built from a random paragraph of a random document, scoped to that document."""
    rng = random.Random(seed + 1)
    files = sorted(docs_dir.rglob("*.md"))
    out = []
    for _ in range(n):
        f = rng.choice(files)
        paras = [p for p in f.read_text(encoding="utf-8").split("\n\n")
                 if p.strip() and not p.startswith(("#", "---"))]
        words = [w.strip(".").lower() for w in rng.choice(paras).split()]
        content = [w for w in words if w not in _FUNCTION and not w[:1].isdigit()]
        picked = rng.sample(content, min(4, len(content))) if content else ["unknown"]
        out.append({"query": f"How does {' '.join(picked[:2])} relate to {' '.join(picked[2:])}?",
                    "scope": [str(f.relative_to(docs_dir))]})
    return out


# --------------------------------------------------------------------------- query worker (fresh process)

class InstantLLM:
    """A scripted 'real' LLM that answers instantly: picks the first leaves the prompt shows.

    Lets the LLM-locator path (TOC under budget, prompt, parsing, retrieval)
    be timed without the model's own latency.
    """

    provider = "instant"
    model = "scripted"
    _LEAF = re.compile(r"\[(\d{4,})\] [^\n]*\(叶子节点\)")

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None) -> Any:
        from utils.llm.types import LLMResponse, LLMUsage

        if json_mode:
            ids = self._LEAF.findall(prompt)[:3]
            text = json.dumps({"thinking": "scripted", "results": [{"node_id": i, "sub_query": ""} for i in ids]})
        else:
            text = "Scripted answer [来源: scripted]."
        return LLMResponse(text=text, usage=LLMUsage(), provider=self.provider, model=self.model)


def _profile_text(prof: cProfile.Profile, top: int) -> str:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = buf.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    return "\n".join(ln.replace(str(Path(__file__).resolve().parent.parent) + "/", "")
                     for ln in lines[start:start + top + 1])


def budgeted(items: list[Any], budget_s: float, min_n: int = 3) -> Any:
    """Yield items until ``budget_s`` has passed (but at least ``min_n``): slow paths get fewer samples."""
    t0 = time.perf_counter()
    for i, item in enumerate(items):
        if i >= min_n and time.perf_counter() - t0 > budget_s:
            return
        yield item


def ann_quality(index: Any, config: Any, queries: list[dict[str, Any]], embedder: Any) -> dict[str, Any]:
    """Recall@100 of the exact dense top 100 among the ANN's candidates, and how much of the exact
    whole-collection flat top 10 (dense + BM25 fused) the ANN path returns. Scans every vector:
    run in the exact worker, whose memory is measured before."""
    import numpy as np

    from retrieval.candidates import rank_scored
    from retrieval.scoring import flat_scores
    from retrieval.query import Query

    ann = index.search.ann.get("chunks")
    if ann is None:
        return {}
    rec, top10 = [], []
    off, on = config.replace(ann="off"), config.replace(ann="auto")
    for q in queries[:ANN_QUALITY_QUERIES]:
        question = Query.build(q["query"], embedder)
        qvec = question.dense_vector
        exact = np.argsort(-(np.asarray(index.embeddings) @ qvec), kind="stable")[:100]
        cand = ann.search(qvec, ann.proposals(on.tuning.store.ann_candidates, on.tuning.store.ann_candidates_growth), on.tuning.store.ann_probe)
        rec.append(len(set(exact.tolist()) & set(cand.tolist())) / 100)
        # the question's memo keys its scores by the settings: exact and ANN are two entries
        a = {h.row for h in rank_scored(index, flat_scores(index, question, off), 10, off.tuning.ranking.fused, "", "flat")}
        b = {h.row for h in rank_scored(index, flat_scores(index, question, on), 10, on.tuning.ranking.fused, "", "flat")}
        top10.append(len(a & b) / max(1, len(a)))
    return {"recall_at_100": float(np.mean(rec)), "recall_at_100_min": float(np.min(rec)),
            "flat_top10_overlap": float(np.mean(top10)), "queries": len(rec),
            "probe": on.tuning.store.ann_probe, "candidates": ann.proposals(on.tuning.store.ann_candidates, on.tuning.store.ann_candidates_growth)}


def recall_worker(index_dir: Path, queries_file: Path, out_file: Path) -> None:
    """``ann_quality``'s recall@100 without the exact worker: the exact dense top 100 of every question is
    found in one pass over the vector file, read in blocks with ``pread`` (not mapped: at 100,000
    documents the 15 GB file would otherwise be counted in this process and evict the page cache's
    useful pages), ties by row as ``np.argsort(..., kind="stable")`` breaks them."""
    import numpy as np

    from config import Config
    from indexing.ann_build import BLOCK_ROWS, RowReader
    from indexing.index_store import load_index
    from pipeline import make_backends
    from retrieval.query import Query

    limit_blas_threads(1)
    queries = json.loads(queries_file.read_text())[:ANN_QUALITY_QUERIES]
    index = load_index(index_dir)
    config = Config()
    ann = index.search.ann.get("chunks")
    if ann is None or not queries:
        out_file.write_text(json.dumps({}))
        return
    embedder = make_backends(index, config, None).embedder
    qv = np.stack([Query.build(q["query"], embedder).dense_vector for q in queries]).astype(np.float32)
    rows, dim = index.embeddings.shape
    reader = RowReader(index_dir / "embeddings.npy", rows, dim)
    k = 100
    top_s = [np.zeros(0, dtype=np.float32) for _ in queries]
    top_r = [np.zeros(0, dtype=np.int64) for _ in queries]
    t = time.perf_counter()
    for start in range(0, rows, BLOCK_ROWS):
        scores = reader[start:start + BLOCK_ROWS] @ qv.T  # (block rows, questions)
        ids = np.arange(start, start + len(scores), dtype=np.int64)
        for j in range(len(queries)):
            col = scores[:, j]
            keep = np.argpartition(-col, k - 1)[:k] if len(col) > k else np.arange(len(col))
            s_all = np.concatenate([top_s[j], col[keep]])
            r_all = np.concatenate([top_r[j], ids[keep]])
            order = np.lexsort((r_all, -s_all))[:k]
            top_s[j], top_r[j] = s_all[order], r_all[order]
    scan_s = time.perf_counter() - t
    proposals = ann.proposals(config.tuning.store.ann_candidates, config.tuning.store.ann_candidates_growth)  # what a question re-scores
    rec = []
    for j, qvec in enumerate(qv):
        cand = ann.search(qvec, proposals, config.tuning.store.ann_probe)
        rec.append(len(set(top_r[j].tolist()) & set(cand.tolist())) / k)
    out_file.write_text(json.dumps({"recall_at_100": float(np.mean(rec)), "recall_at_100_min": float(np.min(rec)),
                                    "queries": len(rec), "probe": config.tuning.store.ann_probe,
                                    "candidates": proposals, "exact_pass_s": scan_s}))


def worker(index_dir: Path, queries_file: Path, out_file: Path, n_toc: int, budget_s: float, ann: str) -> None:
    import resource

    from config import Config
    from indexing.index_store import load_index
    from pipeline import Backends, make_backends, run_pipeline
    from retrieval.node_locator import toc_for_prompt
    from retrieval.query import Query
    from utils.tokenizer import estimate_tokens

    limit_blas_threads(1)  # as main.py does for every CLI run
    queries = json.loads(queries_file.read_text())
    t = time.perf_counter()
    index = load_index(index_dir)
    load_s = time.perf_counter() - t
    rss_after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    config = Config(ann=ann)  # type: ignore[arg-type]
    backends = make_backends(index, config, None)
    for q in queries[:3]:
        run_pipeline(q["query"], index, config, backends)
    res: dict[str, Any] = {"load_s": load_s, "rss_after_load_mb": rss_after_load,
                           "chunks": index.metadata["counts"]["chunks"], "leaves": len(index.leaves),
                           "nodes": index.metadata["counts"]["nodes"]}
    for mode in ("whole", "scoped"):
        steps: dict[str, list[float]] = {}
        for q in budgeted(queries, budget_s, min_n=20):
            r = run_pipeline(q["query"], index, config, backends,
                             doc_paths=set(q["scope"]) if mode == "scoped" else None)
            for k, v in r.timing_ms.items():
                steps.setdefault(k, []).append(v)
        res[f"hybrid_{mode}"] = {k: stats(v).to_dict() for k, v in steps.items()}

    # what the whole forest would cost in the prompt: the per-node costs summed at build time
    # (serialising 100M characters here only to count them would dominate this process's memory)
    res["full_toc_tokens"] = int(index.tree.toc_tokens[1:].sum())
    toc_ms, toc_tokens, toc_nodes = [], [], []
    for q in budgeted(queries[:n_toc], budget_s):
        t = time.perf_counter()
        text, shown = toc_for_prompt(index, Query.build(q["query"], backends.embedder), config)
        toc_ms.append((time.perf_counter() - t) * 1000)
        toc_tokens.append(estimate_tokens(text))
        toc_nodes.append(shown)
    res["toc_for_prompt_ms"] = stats(toc_ms).to_dict()
    res["toc_tokens"] = stats(toc_tokens).to_dict(0)
    res["toc_nodes_shown"] = stats(toc_nodes).to_dict(0)
    res["toc_budget_tokens"] = config.tuning.locator.toc_budget_tokens

    cfg_llm = config.replace(locator="llm")
    b_llm = Backends(embedder=backends.embedder, reranker=backends.reranker, llm=InstantLLM())
    steps = {}
    fallbacks = 0
    for q in budgeted(queries[:n_toc], budget_s):
        r = run_pipeline(q["query"], index, cfg_llm, b_llm)
        fallbacks += bool(r.fallbacks)
        for k, v in r.timing_ms.items():
            steps.setdefault(k, []).append(v)
    res["llm_locator_whole"] = {k: stats(v).to_dict() for k, v in steps.items()}
    res["llm_locator_fallbacks"] = fallbacks

    prof = cProfile.Profile()
    prof.enable()
    for q in budgeted(queries[:10], budget_s / 3, min_n=3):
        run_pipeline(q["query"], index, config, backends)
    prof.disable()
    res["profile_hybrid_whole"] = _profile_text(prof, 12)
    prof = cProfile.Profile()
    prof.enable()
    for q in budgeted(queries[:3], budget_s / 3, min_n=1):
        toc_for_prompt(index, Query.build(q["query"], backends.embedder), config)
    prof.disable()
    res["profile_toc_for_prompt"] = _profile_text(prof, 10)
    res["rss_peak_in_worker_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["rss_split_mb"] = {k: v for k, v in proc_memory_mb().items() if k in ("VmHWM", "RssAnon", "RssFile")}
    res["ann_files"] = sorted(index.search.ann) if hasattr(index.search, "ann") else []
    if ann == "off":
        res["ann_quality"] = ann_quality(index, config, queries, backends.embedder)
    out_file.write_text(json.dumps(res))


# --------------------------------------------------------------------------- parent

def parse_reuse(specs: list[str] | None) -> dict[int, Path] | str:
    """``--reuse-index N=DIR`` values: size -> index directory, or the error line."""
    out: dict[int, Path] = {}
    for spec in specs or []:
        n, sep, d = spec.partition("=")
        if not sep or not n.strip().isdigit() or not d.strip():
            return f"--reuse-index takes N=DIR (a document count and an index directory), got {spec!r}"
        path = Path(d.strip())
        if not (path / "metadata.json").is_file():
            return f"--reuse-index {spec}: {path} is not an index directory (no metadata.json)"
        out[int(n)] = path
    return out


def reused_corpus(index_dir: Path) -> tuple[Path, float] | str:
    """The document folder a reused index was built from (its metadata.json "input") and that build's
    wall seconds, or the error line."""
    try:
        meta = json.loads((index_dir / "metadata.json").read_text(encoding="utf-8"))
        docs = Path(meta["input"])
        build_s = float(meta.get("build_seconds", float("nan")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"--reuse-index {index_dir}: its metadata.json cannot be read ({type(exc).__name__})"
    if not docs.is_dir():
        return f"--reuse-index {index_dir}: the documents it was built from ({docs}) are not there"
    return docs, build_s


def change_one_document(docs: Path, nth: float = 0.5) -> Path:
    """Add a sentence to the middle paragraph of one document (the middle one by default), written as a
    new file (the folder may be a hard-linked copy: writing the old file would change the original too)."""
    files = sorted(docs.rglob("*.md"))
    path = files[min(int(len(files) * nth), len(files) - 1)]
    paras = path.read_text(encoding="utf-8").split("\n\n")
    body = [i for i, p in enumerate(paras) if p.strip() and not p.lstrip().startswith(("#", "---"))]
    paras[body[len(body) // 2]] += " This sentence was added to measure an index update."
    path.unlink()
    path.write_text("\n\n".join(paras), encoding="utf-8")
    return path


def _written_bytes(index: Path) -> int:
    """Bytes of the files an update wrote into a hard-linked copy of an index: those no longer links."""
    return sum(f.stat().st_size for f in index.iterdir() if f.is_file() and f.stat().st_nlink == 1)


def update_one(work: Path, docs: Path, index_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """Wall, CPU, peak RSS and bytes written of ``main.py index`` (an update) after one changed document, on
    hard-linked copies of the documents and the index (an update writes a delta segment and renames a new
    manifest in: no existing file is written), then of a second update after another changed document
    (on top of the delta: unchanged files are recognised by their recorded size and time), then
    ``verify``; {"skipped": why} when the disk is nearly full."""
    free = shutil.disk_usage(work).free
    if free < UPDATE_DISK_RESERVE:
        return {"skipped": f"{free / 1e9:.1f} GB free, less than {UPDATE_DISK_RESERVE / 1e9:.0f} GB"}
    tmp = work / f"update-{index_dir.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for src, dst in ((docs, tmp / "docs"), (index_dir, tmp / "index")):
            subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
        out: dict[str, Any] = {}
        for key, nth in (("first", 0.5), ("second", 0.25)):
            changed = change_one_document(tmp / "docs", nth)
            r = run_proc(python("main.py", "index", "--input", tmp / "docs", "--output", tmp / "index", "--mock",
                                "--quiet"), env=env).check()
            out[key] = {"wall_s": r.wall_s, "cpu_s": r.cpu_s, "rss_mb": r.maxrss_mb, "summary": r.stdout.strip(),
                        "changed": str(changed.relative_to(tmp / "docs")),
                        "written_mb": _written_bytes(tmp / "index") / 1e6}
        meta = json.loads((tmp / "index" / "metadata.json").read_text(encoding="utf-8"))
        found = {"ann": meta.get("ann", {}), "segments": len(meta.get("segments", {}).get("segments", []))}
        size = sum(f.stat().st_size for f in (tmp / "index").iterdir() if f.is_file())
        if size <= UPDATE_VERIFY_MAX_BYTES:
            v = run_proc(python("main.py", "verify", "--index", tmp / "index"), env=env)
            found.update(verify_ok=v.returncode == 0, verify=(v.stdout or v.stderr).strip()[:200])
        else:
            found.update(verify_ok=None, verify=f"not run: it reads all {size / 1e9:.0f} GB")
        return {**out["first"], "second": out["second"], **found}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def index_for_size(n: int, seed: int, reuse: dict[int, Path], work: Path,
                   env: dict[str, str]) -> tuple[Path, Path, dict[str, Any]] | str:
    """(corpus, index, the build's figures) for ``n`` documents: a reused index with its recorded build
    wall, or a corpus generated and fully built here; an error line if a reused index has no corpus."""
    if n in reuse:
        index_dir = reuse[n]
        found = reused_corpus(index_dir)
        if isinstance(found, str):
            return found
        docs, build_wall = found
        return docs, index_dir, {"wall_s": build_wall, "cpu_s": float("nan"), "rss_mb": float("nan"),
                                 "summary": f"reused index {index_dir} (build not run here)"}
    docs = generate_corpus(work / f"docs-{n}-s{seed}-g{GEN_VERSION}", n, seed)
    index_dir = work / f"index-{n}"
    pr = run_proc(python("main.py", "index", "--input", docs, "--output", index_dir, "--mock", "--quiet",
                         "--rebuild"), env=env).check()
    return docs, index_dir, {"wall_s": pr.wall_s, "cpu_s": pr.cpu_s, "rss_mb": pr.maxrss_mb,
                             "summary": pr.stdout.strip()}


def update_only(args: Any, sizes: list[int], reuse: dict[int, Path], work: Path, env: dict[str, str]) -> int:
    """``--update-only``: per size, a full build (timed here, or a reused index's recorded wall) and the
    updates of ``update_one``, their ratios to the build printed; no query workers."""
    rows = []
    for n in sizes:
        got = index_for_size(n, args.seed, reuse, work, env)
        if isinstance(got, str):
            print(f"error: {got}", file=sys.stderr)
            return 2
        docs, index_dir, build = got
        disk_mb = sum(f.stat().st_size for f in index_dir.iterdir() if f.is_file()) / 1e6
        u = update_one(work, docs, index_dir, env)
        rows.append((n, build, disk_mb, u))
        print(f"[{n} docs] full build: wall {build['wall_s']:.1f} s, CPU {build['cpu_s']:.1f} s, peak RSS "
              f"{build['rss_mb']:.0f} MB, {disk_mb:.0f} MB on disk"
              + (" (reused index: its recorded build wall)" if n in reuse else ""))
        if "skipped" in u:
            print(f"    update skipped: {u['skipped']}")
            continue
        for key, x in (("first update", u), ("second update", u["second"])):
            print(f"    {key} ({x['changed']}): wall {x['wall_s']:.2f} s ({x['wall_s'] / build['wall_s']:.4f} of the "
                  f"build), CPU {x['cpu_s']:.2f} s ({x['cpu_s'] / build['cpu_s']:.4f}), peak RSS {x['rss_mb']:.0f} MB "
                  f"({x['rss_mb'] / build['rss_mb']:.3f}), written {x['written_mb']:.2f} MB "
                  f"({x['written_mb'] / disk_mb:.5f} of the index); {x['summary']}")
        ok = {True: "ok", False: "FAILED", None: "skipped"}[u["verify_ok"]]
        print(f"    verify after both: {ok}: {u['verify']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"sizes": [{"docs": n, "build": b, "disk_mb": d, "update": u}
                                                         for n, b, d, u in rows]}, indent=2))
    return 0


def fit(sizes: list[int], values: list[float]) -> tuple[float, float, float]:
    """(intercept, slope per document, log-log growth exponent), least squares over all sizes."""
    n = len(sizes)
    mx, my = sum(sizes) / n, sum(values) / n
    sxx = sum((x - mx) ** 2 for x in sizes)
    slope = sum((x - mx) * (y - my) for x, y in zip(sizes, values)) / sxx if sxx else 0.0
    if all(v > 0 for v in values) and sxx:
        lx = [math.log(x) for x in sizes]
        ly = [math.log(v) for v in values]
        mlx, mly = sum(lx) / n, sum(ly) / n
        k = sum((a - mlx) * (b - mly) for a, b in zip(lx, ly)) / sum((a - mlx) ** 2 for a in lx)
    else:
        k = float("nan")
    return my - slope * mx, slope, k


def crossing(sizes: list[int], values: list[float], intercept: float, slope: float, limit: float) -> float:
    """Document count at which ``limit`` is reached: interpolated between the measured sizes if a
    measurement already exceeds it (0 if the smallest does), else on the linear trend."""
    pts = sorted(zip(sizes, values))
    for i, (n, v) in enumerate(pts):
        if v >= limit:
            if i == 0:
                return 0.0
            (n0, v0) = pts[i - 1]
            return n0 + (limit - v0) * (n - n0) / (v - v0)
    if slope <= 0:
        return float("inf")
    return (limit - intercept) / slope


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--sizes", default=None, help="comma list of document counts (quick 100,300; full 100,1000,10000)")
    ap.add_argument("--queries", type=int, default=None, help="timed queries per mode (quick 40, full 100)")
    ap.add_argument("--toc-queries", type=int, default=None, help="toc_for_prompt / LLM-path queries (quick 10, full 30)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="time budget per measurement loop per size; slow paths get fewer samples (quick 10, full 40)")
    ap.add_argument("--drop-caches", action="store_true",
                    help="also time a cold query after dropping the page cache (root; every process on the "
                         "machine then reads its files from disk again)")
    ap.add_argument("--reuse-index", action="append", metavar="N=DIR",
                    help="measure the existing index DIR as the N-document size instead of building one "
                         "(repeatable; its documents: the folder its metadata.json names; its build figures: "
                         "that build's wall time from metadata.json)")
    ap.add_argument("--exact-max-docs", type=int, default=None,
                    help="skip the ann=off worker (every vector read per question) above this many documents; "
                         "recall@100 is then measured in one pass over the vector file")
    ap.add_argument("--target-docs", type=int, default=TARGET_DOCS,
                    help="the document count the growth table extrapolates to (default 10,000; e.g. 1000000)")
    ap.add_argument("--update-one", action="store_true",
                    help="also time an index update after one changed document, on hard-linked copies (cp -al) "
                         "of the index and its documents, against the full build's wall time")
    ap.add_argument("--update-only", action="store_true",
                    help="with --update-one: only the full build and the updates (no query workers)")
    ap.add_argument("--worker", nargs=6, metavar=("INDEX", "QUERIES", "OUT", "NTOC", "BUDGET", "ANN"),
                    help=argparse_hidden())
    ap.add_argument("--recall-worker", nargs=3, metavar=("INDEX", "QUERIES", "OUT"), help=argparse_hidden())
    args = ap.parse_args(argv)
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), Path(args.worker[2]), int(args.worker[3]),
               float(args.worker[4]), args.worker[5])
        return 0
    if args.recall_worker:
        recall_worker(*(Path(a) for a in args.recall_worker))
        return 0
    reuse = parse_reuse(args.reuse_index)
    if isinstance(reuse, str):
        print(f"error: {reuse}", file=sys.stderr)
        return 2
    budget = pick(args.budget_s, args.quick, 10.0, 40.0)
    if reuse and args.sizes is None:  # only the indexes given: nothing is generated or built
        sizes = sorted(reuse)
    else:
        sizes = sorted({int(x) for x in pick(args.sizes, args.quick, "100,300", "100,1000,10000").split(",")}
                       | set(reuse))
    n_q = pick(args.queries, args.quick, 40, 100)
    n_toc = pick(args.toc_queries, args.quick, 10, 30)
    work = workdir_of(args) / "scale"
    work.mkdir(parents=True, exist_ok=True)
    env = bench_env()
    info = machine_info()
    banner(f"Scale: {sizes[0]:,} -> {sizes[-1]:,} generated documents, hash embeddings")
    print(machine_line(info))
    report = Report("scale", sys.argv[1:] if argv is None else list(argv), info,
                    params={"sizes": sizes, "queries": n_q, "toc_queries": n_toc, "seed": args.seed,
                            "budget_s": budget})
    if args.update_only:
        return update_only(args, sizes, reuse, work, env)
    per: dict[int, dict[str, Any]] = {}
    for n in sizes:
        got = index_for_size(n, args.seed, reuse, work, env)
        if isinstance(got, str):
            print(f"error: {got}", file=sys.stderr)
            return 2
        docs, index_dir, build = got
        size_mb = sum(f.stat().st_size for f in docs.rglob("*.md")) / 1e6
        print(f"[{n} docs, {size_mb:.1f} MB] {build['summary']}; wall {build['wall_s']:.1f} s, CPU "
              f"{build['cpu_s']:.1f} s, peak RSS {build['rss_mb']:.0f} MB", flush=True)
        qfile = work / f"queries-{n}.json"
        qfile.write_text(json.dumps(make_queries(docs, n_q, args.seed)))
        out = work / f"worker-{n}.json"
        w, wr = worker_result(python(Path(__file__).resolve(), "--worker", index_dir, qfile, out, n_toc, budget, "auto"),
                              out, env=env)
        if args.exact_max_docs is None or n <= args.exact_max_docs:
            # the same index scored exactly (ann=off): the baseline of the ANN path, in a process of its own
            out_x = work / f"worker-{n}-exact.json"
            wx, xr = worker_result(python(Path(__file__).resolve(), "--worker", index_dir, qfile, out_x, n_toc, budget,
                                          "off"), out_x, env=env)
            w["exact"] = {"query_rss_mb": xr.maxrss_mb, "hybrid_whole": wx["hybrid_whole"],
                          "hybrid_scoped": wx["hybrid_scoped"], "llm_locator_whole": wx["llm_locator_whole"],
                          "rss_split_mb": wx["rss_split_mb"]}
            w["ann_quality"] = wx.get("ann_quality", {})
        else:
            nan = {"total": {"p50": float("nan"), "p95": float("nan")}}
            w["exact"] = {"query_rss_mb": float("nan"), "hybrid_whole": nan, "hybrid_scoped": nan,
                          "llm_locator_whole": nan, "rss_split_mb": {}, "skipped": True}
            out_r = work / f"recall-{n}.json"
            w["ann_quality"] = worker_result(python(Path(__file__).resolve(), "--recall-worker", index_dir, qfile, out_r),
                                             out_r, env=env)[0]
        question = json.loads(qfile.read_text())[0]["query"]
        for key, flags in (("cold_query", ["--mock"]), ("cold_hybrid", [])):
            # --mock: the spec's mock (keyword locator); none: the default CLI path without an LLM key
            # (hybrid locator over every chunk and leaf vector of the index)
            colds = [run_proc(python("main.py", "query", "--index", index_dir, *flags, "--no-log", "-q", question),
                              env=env).check() for _ in range(3)]
            cold = sorted(colds, key=lambda r: r.wall_s)[1]
            w[f"{key}_s"], w[f"{key}_rss_mb"] = cold.wall_s, cold.maxrss_mb
        if args.drop_caches:
            dropped = drop_page_cache()
            if dropped:
                r = run_proc(python("main.py", "query", "--index", index_dir, "--no-log", "-q", question),
                             env=env).check()
                w["cold_dropped_s"], w["cold_dropped_rss_mb"] = r.wall_s, r.maxrss_mb
            else:
                print("    (page cache not dropped: needs root)", flush=True)
        if args.update_one:
            w["update_one"] = update_one(work, docs, index_dir, env)
            u = w["update_one"]
            print("    one changed document: " + (f"skipped ({u['skipped']})" if "skipped" in u else
                  f"update wall {u['wall_s']:.1f} s, CPU {u['cpu_s']:.1f} s, peak RSS {u['rss_mb']:.0f} MB = "
                  f"{u['wall_s'] / build['wall_s']:.3f} of the full build's wall ({build['wall_s']:.0f} s)"),
                  flush=True)
        per[n] = {"docs_mb": size_mb, "index_wall_s": build["wall_s"], "index_cpu_s": build["cpu_s"],
                  "index_rss_mb": build["rss_mb"], "disk": dir_sizes(index_dir), "query_rss_mb": wr.maxrss_mb,
                  "summary": build["summary"], "reused": n in reuse, **w}
        print(f"    load_index {w['load_s']:.2f} s; query p95 whole {w['hybrid_whole']['total']['p95']:.1f} ms, "
              f"scoped {w['hybrid_scoped']['total']['p95']:.1f} ms; toc_for_prompt p95 "
              f"{w['toc_for_prompt_ms']['p95']:.1f} ms; LLM path p95 {w['llm_locator_whole']['total']['p95']:.1f} ms; "
              f"query process peak RSS {wr.maxrss_mb:.0f} MB; cold `main.py query --mock` median of 3 "
              f"{w['cold_query_s']:.2f} s, {w['cold_query_rss_mb']:.0f} MB; without --mock (hybrid locator) "
              f"{w['cold_hybrid_s']:.2f} s, {w['cold_hybrid_rss_mb']:.0f} MB; warm process at its end: "
              f"{w['rss_split_mb'].get('RssAnon', float('nan')):.0f} MB own, "
              f"{w['rss_split_mb'].get('RssFile', float('nan')):.0f} MB mapped index files", flush=True)
        x = w["exact"]
        q = w["ann_quality"]
        print(f"    ANN ({', '.join(w['ann_files']) or 'none in this index'}) vs exact (ann=off), same index: "
              f"p95 whole {w['hybrid_whole']['total']['p95']:.1f} / {x['hybrid_whole']['total']['p95']:.1f} ms "
              f"(x{w['hybrid_whole']['total']['p95'] / x['hybrid_whole']['total']['p95']:.2f}); LLM path "
              f"{w['llm_locator_whole']['total']['p95']:.1f} / {x['llm_locator_whole']['total']['p95']:.1f} ms; "
              f"query process peak RSS {wr.maxrss_mb:.0f} / {x['query_rss_mb']:.0f} MB "
              f"(x{wr.maxrss_mb / x['query_rss_mb']:.2f})"
              + (f"; recall@100 of the exact dense top 100 among {q.get('candidates')} candidates {q['recall_at_100']:.3f} (min {q['recall_at_100_min']:.2f})"
                 + (f", flat top-10 overlap {q['flat_top10_overlap']:.3f}" if "flat_top10_overlap" in q else "")
                 + f" over {q['queries']} queries" if q else "")
              + ("; ann=off not run at this size (--exact-max-docs)" if x.get("skipped") else "")
              + (f"; cold after dropping the page cache {w['cold_dropped_s']:.2f} s, "
                 f"{w['cold_dropped_rss_mb']:.0f} MB" if "cold_dropped_s" in w else ""), flush=True)
    report.results["per_size"] = {str(k): v for k, v in per.items()}

    # growth table
    base_n = sizes[0]
    metrics: list[tuple[str, Any, str, float | None]] = [
        ("chunks", lambda r: r["chunks"], "", None),
        ("index wall", lambda r: r["index_wall_s"], "s", None),
        ("index CPU", lambda r: r["index_cpu_s"], "s", None),
        ("index peak RSS", lambda r: r["index_rss_mb"], "MB", GOAL_INDEX_RAM_MB),
        ("index on disk", lambda r: r["disk"]["total"] / 1e6, "MB", None),
        ("load_index", lambda r: r["load_s"], "s", COLD_BUDGET_S),
        ("warm query process peak RSS", lambda r: r["query_rss_mb"], "MB", None),
        ("  of it own memory at the end", lambda r: r["rss_split_mb"].get("RssAnon", float("nan")), "MB", None),
        ("  of it mapped index files at the end", lambda r: r["rss_split_mb"].get("RssFile", float("nan")), "MB",
         None),
        ("cold main.py query --mock", lambda r: r["cold_query_s"], "s", COLD_BUDGET_S),
        ("cold query --mock peak RSS", lambda r: r["cold_query_rss_mb"], "MB", GOAL_RAM_MB),
        ("cold main.py query (hybrid locator)", lambda r: r["cold_hybrid_s"], "s", None),
        ("cold query (hybrid) peak RSS", lambda r: r["cold_hybrid_rss_mb"], "MB", None),
        ("cold main.py query after dropping the page cache", lambda r: r.get("cold_dropped_s", float("nan")), "s",
         None),
        ("recall@100 of the exact dense top 100", lambda r: r["ann_quality"].get("recall_at_100", float("nan")), "",
         None),
        ("update after one changed document", lambda r: r.get("update_one", {}).get("wall_s", float("nan")), "s",
         None),
        ("query p95, hybrid, whole index", lambda r: r["hybrid_whole"]["total"]["p95"], "ms", GOAL_QUERY_MS),
        ("  same, exact (ann=off)", lambda r: r["exact"]["hybrid_whole"]["total"]["p95"], "ms", None),
        ("query process peak RSS, exact (ann=off)", lambda r: r["exact"]["query_rss_mb"], "MB", None),
        ("query p95, hybrid, scoped", lambda r: r["hybrid_scoped"]["total"]["p95"], "ms", GOAL_QUERY_MS),
        ("toc_for_prompt p95", lambda r: r["toc_for_prompt_ms"]["p95"], "ms", None),
        ("query p95, LLM locator (instant LLM)", lambda r: r["llm_locator_whole"]["total"]["p95"], "ms",
         GOAL_QUERY_MS),
        ("full TOC (tokens, summed per node)", lambda r: r["full_toc_tokens"], "tok", None),
        ("TOC sent (tokens, p95)", lambda r: r["toc_tokens"]["p95"], "tok", None),
    ]
    target = args.target_docs
    headers = ["metric"] + [f"{n} docs" for n in sizes] + [f"x vs {base_n}", "growth exp.",
                                                            f"{target:,} (linear)", f"{target:,} (power)",
                                                            "limit", "limit reached at"]
    rows = []
    extrap: dict[str, Any] = {}
    for name, get, unit, limit in metrics:
        vals = [float(get(per[n])) for n in sizes]
        if len(sizes) >= 2:
            a, b, k = fit(sizes, vals)
            linear = a + b * target
            power = vals[-1] * (target / sizes[-1]) ** k if not math.isnan(k) else float("nan")
            cross = crossing(sizes, vals, a, b, limit) if limit else float("nan")
        else:
            k = linear = power = cross = float("nan")
        extrap[name] = {"values": vals, "unit": unit, "exponent": k, "target_docs": target,
                        "at_target_linear": linear, "at_target_power": power,
                        "limit": limit, "crosses_at_docs": cross}
        rows.append([f"{name} ({unit})" if unit else name, *vals, vals[-1] / vals[0] if vals[0] else float("nan"),
                     k, linear, power, limit if limit else "",
                     ((f"<= {sizes[0]} docs" if cross == 0 else f"~{cross:,.0f} docs") if limit and math.isfinite(cross)
                      else ("never" if limit else ""))])
    report.results["extrapolation"] = extrap
    print()
    print(f"growth {sizes[0]} -> {sizes[-1]} documents (x = ratio to the {base_n}-document run; growth exponent = "
          f"log-log slope, 1 = linear) and the trend to {target:,} documents (least-squares line over all "
          f"sizes; the power law shown beside it); a limit already passed is located between the measured sizes:")
    print(table(headers, rows))

    big = per[sizes[-1]]
    print()
    print(f"index files at {sizes[-1]} docs (MB): " + ", ".join(
        f"{k} {v / 1e6:.1f}" for k, v in sorted(big["disk"].items(), key=lambda kv: -kv[1]) if k != "total"))
    print(f"TOC budget {big['toc_budget_tokens']} tokens: the full tree is {big['full_toc_tokens']:,} tokens "
          f"(per-node costs from the build); sent p95 {big['toc_tokens']['p95']:.0f} tokens, "
          f"{big['toc_nodes_shown']['p50']:.0f} nodes shown (p50)")
    print(f"\nprofile, 10 whole-index hybrid queries at {sizes[-1]} docs (own time):\n{big['profile_hybrid_whole']}")
    print(f"\nprofile, 5 toc_for_prompt calls at {sizes[-1]} docs (own time):\n{big['profile_toc_for_prompt']}")

    limited = sorted(((name, e) for name, e in extrap.items() if e["limit"]), key=lambda kv: kv[1]["crosses_at_docs"])
    if limited:
        print("\nlimits in the order the linear trends reach them:")
        for name, e in limited:
            at = e["crosses_at_docs"]
            where = (f"already at {sizes[0]:,} documents" if at == 0 else
                     (f"~{at:,.0f} documents" + (" (measured)" if at <= sizes[-1] else " (trend)")
                      if math.isfinite(at) else "not on this trend"))
            print(f"  {name}: {e['limit']:g} {e['unit']} -> {where}")
        first_name, first = limited[0]
        if math.isfinite(first["crosses_at_docs"]):
            report.notes.append(f"first limit reached as documents grow: {first_name} ({first['limit']:g} "
                                f"{first['unit']}) at ~{first['crosses_at_docs']:,.0f} documents")
    for name, e in limited:
        report.results.setdefault("at_target_linear", {})[name] = e["at_target_linear"]

    n = sizes[-1]
    if args.update_one:
        for size in sizes:
            u = per[size].get("update_one", {})
            if "wall_s" in u:
                share = u["wall_s"] / per[size]["index_wall_s"]
                report.headlines.append(Headline(
                    f"one changed document re-indexed at {size} docs: update wall / full build wall "
                    f"({u['wall_s']:.0f} s / {per[size]['index_wall_s']:.0f} s)", share, "", goal="<= 0.02",
                    ok=share <= 0.02 if math.isfinite(share) else None))
    if big.get("reused"):
        report.notes.append(f"the {n}-document index was reused: its build wall is the one its metadata.json "
                            "records; build CPU and peak RSS were not measured in this run")
    report.headlines += [
        Headline(f"index peak RSS at {n} docs ({big['chunks']:,} chunks)", big["index_rss_mb"], "MB",
                 goal=f"<= {GOAL_INDEX_RAM_MB:.0f} MB",
                 ok=big["index_rss_mb"] <= GOAL_INDEX_RAM_MB if math.isfinite(big["index_rss_mb"]) else None,
                 ratio=big["index_rss_mb"] / per[base_n]["index_rss_mb"], ratio_of=f"{base_n} docs"),
        Headline(f"warm query process peak RSS at {n} docs (at its end {big['rss_split_mb'].get('RssAnon', 0):.0f} MB "
                 f"own + {big['rss_split_mb'].get('RssFile', 0):.0f} MB mapped index files)", big["query_rss_mb"], "MB",
                 ratio=big["query_rss_mb"] / per[base_n]["query_rss_mb"], ratio_of=f"{base_n} docs"),
        Headline(f"query p95 at {n} docs, hybrid locator, whole index", big["hybrid_whole"]["total"]["p95"], "ms",
                 goal=f"<= {GOAL_QUERY_MS:.0f} ms", ok=big["hybrid_whole"]["total"]["p95"] <= GOAL_QUERY_MS,
                 ratio=big["hybrid_whole"]["total"]["p95"] / per[base_n]["hybrid_whole"]["total"]["p95"],
                 ratio_of=f"{base_n} docs"),
        Headline(f"query p95 at {n} docs, LLM locator with TOC budget (LLM time excluded)",
                 big["llm_locator_whole"]["total"]["p95"], "ms", goal=f"<= {GOAL_QUERY_MS:.0f} ms",
                 ok=big["llm_locator_whole"]["total"]["p95"] <= GOAL_QUERY_MS,
                 ratio=big["llm_locator_whole"]["total"]["p95"] / per[base_n]["llm_locator_whole"]["total"]["p95"],
                 ratio_of=f"{base_n} docs"),
        Headline(f"cold `main.py query --mock` at {n} docs", big["cold_query_s"], "s",
                 goal=f"<= {COLD_BUDGET_S} s and <= {GOAL_RAM_MB:.0f} MB (peak {big['cold_query_rss_mb']:.0f} MB)",
                 ok=big["cold_query_s"] <= COLD_BUDGET_S and big["cold_query_rss_mb"] <= GOAL_RAM_MB,
                 ratio=big["cold_query_s"] / per[base_n]["cold_query_s"], ratio_of=f"{base_n} docs"),
        Headline(f"cold `main.py query` (hybrid locator, every vector read) at {n} docs, peak RSS "
                 f"{big['cold_hybrid_rss_mb']:.0f} MB", big["cold_hybrid_s"], "s",
                 ratio=big["cold_hybrid_s"] / per[base_n]["cold_hybrid_s"], ratio_of=f"{base_n} docs"),
        Headline(f"query p95 at {n} docs, hybrid, whole index: ANN path vs exact scan (ann=off) of the same index",
                 big["hybrid_whole"]["total"]["p95"], "ms",
                 ratio=big["hybrid_whole"]["total"]["p95"] / big["exact"]["hybrid_whole"]["total"]["p95"],
                 ratio_of="exact"),
        Headline(f"query process peak RSS at {n} docs incl. mapped index pages: ANN path vs exact",
                 big["query_rss_mb"], "MB", ratio=big["query_rss_mb"] / big["exact"]["query_rss_mb"],
                 ratio_of="exact"),
        *([Headline(f"recall@100 of the exact dense top 100 among the ANN candidates at {n} docs",
                    big["ann_quality"]["recall_at_100"], "", goal=">= 0.95",
                    ok=big["ann_quality"]["recall_at_100"] >= 0.95)] if big.get("ann_quality") else []),
        Headline(f"index build wall at {n} docs", big["index_wall_s"], "s",
                 ratio=big["index_wall_s"] / per[base_n]["index_wall_s"], ratio_of=f"{base_n} docs"),
        Headline(f"load_index at {n} docs", big["load_s"], "s", ratio=big["load_s"] / per[base_n]["load_s"],
                 ratio_of=f"{base_n} docs"),
    ]
    report.finish(args.json)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
