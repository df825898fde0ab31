"""The printed table and the ``--json`` dump of an evaluation run.

The JSON holds every ranked list with document path, character span and text,
so anyone can re-score a run without this code or the index.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluation.metrics import BUDGETS, LONG_LEAF_CHARS, SLICES, BootstrapCI
from evaluation.runner import ArmSummary, EvalRun, SliceSummary, read_passages
from utils.atomic import atomic_write_text
from indexing.kg_graph import GraphStats

COLUMNS = (("Hit@1", "hit@1"), ("Hit@5", "hit@5"), ("R@5", "recall@5"), ("R@10", "recall@10"),
           ("MRR@10", "mrr@10"), ("nDCG@10", "ndcg@10"), ("cov@2k", "cov@2k"), ("leafR", "leaf_recall"),
           ("leafP", "leaf_precision"))

SLICE_COLUMNS = (("dnDCG@10", "dndcg@10"), ("R@2k", "R@2k"), ("any@2k", "any@2k"), ("all@2k", "all@2k"),
                 ("cov@2k", "cov@2k"), ("R@8k", "R@8k"), ("any@8k", "any@8k"), ("all@8k", "all@8k"),
                 ("cov@8k", "cov@8k"))
"""The per-slice table (the 4k figures are in the JSON only, to keep it terminal-wide)."""


def _f(v: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


def _signed(v: float) -> str:
    return f"{v:+.3f}"


def _comparison(s: ArmSummary, ci: BootstrapCI | None) -> tuple[str, str]:
    if s.name == s.baseline:
        return "(baseline)", ""
    if ci is None:
        return "-", ""
    mark = " *" if ci.excludes_zero else ""
    cell = f"{_signed(ci.diff)} [{_signed(ci.low)}, {_signed(ci.high)}]{mark}"
    rel = "" if ci.rel is None else f"{ci.rel * 100:+.1f}%"
    if ci.rel_low is not None and ci.rel_high is not None:
        rel += f" [{ci.rel_low * 100:+.1f}, {ci.rel_high * 100:+.1f}]"
    return cell, rel


def format_table(run: EvalRun) -> str:
    o = run.options
    emb = run.index.embedder_identity
    rerank = "none" if o.config.reranker == "none" else o.config.reranker_model
    head = (f"eval {o.data}: {run.n_scored} question(s) scored (sampled {run.sampled} of "
            f"{len(run.eval_set.questions)}; seed {o.seed}), k={o.k}, embedder {emb.get('name')} "
            f"({emb.get('model_id')}), chunk context {chunk_context(run)}, rerank {rerank}")
    baseline = next((s.baseline for s in run.summaries if s.baseline), None) or "-"
    header = ["arm"] + [c for c, _ in COLUMNS] + ["p50 ms", "p95 ms",
                                                  f"ΔnDCG@10 vs {baseline} [95% CI]", "rel.",
                                                  "Δcov@2k rel."]
    rows: list[list[str]] = []
    for s in run.summaries:
        cells = [s.name] + [_f(s.means.get(key)) for _, key in COLUMNS]
        cells += [_f(s.p50_ms, "{:.1f}"), _f(s.p95_ms, "{:.1f}")]
        cells += list(_comparison(s, s.vs_baseline))
        cells.append(_comparison(s, s.vs_baseline_cov)[1])
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i in (0, len(cells) - 3, len(cells) - 2, len(cells) - 1)
                         else c.rjust(widths[i])
                         for i, c in enumerate(cells)).rstrip()

    out = [head, "", line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    notes: list[str] = []
    if any(s.vs_baseline is not None for s in run.summaries):
        notes.append(f"baseline = the best flat arm of this run by nDCG@10; * interval excludes zero "
                     f"(paired bootstrap over questions, {o.resamples} resamples, seed {o.seed})")
    if run.unscorable:
        notes.append(f"{len(run.unscorable)} sampled question(s) not scored: no chunk of the index covers their evidence")
    if run.eval_set.missing_evidence:
        notes.append(f"{run.eval_set.missing_evidence} evidence item(s) of the set not found verbatim: skipped")
    fb = [f"{s.name} {s.fallbacks}" for s in run.summaries if s.fallbacks]
    if fb:
        notes.append("questions with a recorded fallback: " + ", ".join(fb))
    for p in run.peers.values():
        vers = ", ".join(f"{k} {v}" for k, v in p.versions.items())
        conf = ", ".join(f"{k} {v}" for k, v in p.config.items() if v is not None)
        notes.append(f"peer arm {p.name}: {p.system} ({vers}); {conf}; {len(p.chunks)} chunks of its own")
    subset = run.index_info.get("documents")
    notes.append(f"{run.computed} run(s) computed, {run.cached} from cache; {run.seconds:.1f} s; "
                 f"index {run.index_info['source']} ({run.index_info['path']})"
                 + (f", holding only the {subset} of {len(run.eval_set.documents)} documents the sampled "
                    "questions are scoped to" if subset is not None else ""))
    graph = graph_note(run)
    if graph:
        notes.append(graph)
    return "\n".join(out + [""] + notes + format_slices(run))


def _ratio(ci: BootstrapCI | None) -> tuple[str, str]:
    """(mean_a / mean_b, its 95% interval): two cells, so a slice table stays terminal-wide.

    * marks a ratio whose interval excludes 1.
    """
    if ci is None or ci.rel is None:
        return "-", ""
    if ci.rel_low is None or ci.rel_high is None:
        return f"{1 + ci.rel:.2f}", ""
    mark = "*" if ci.rel_low > 0 or ci.rel_high < 0 else ""
    return f"{1 + ci.rel:.2f}{mark}", f"[{1 + ci.rel_low:.2f},{1 + ci.rel_high:.2f}]"


def _short(arm: str) -> str:
    return arm[len("flat-"):] if arm.startswith("flat-") else arm


def _slice_table(run: EvalRun, sl: SliceSummary) -> list[str]:
    """Means of every arm, then each tree arm's ratio to the slice's best flat arm per figure."""
    header = ["arm"] + [c for c, _ in SLICE_COLUMNS]
    rows = [[a.name] + [_f(sl.means.get(a.name, {}).get(k)) for _, k in SLICE_COLUMNS] for a in run.arms]
    ratios: list[list[str]] = []
    for a in run.arms:
        if a.is_tree and a.name in sl.vs_baseline:
            cells = [_ratio(sl.vs_baseline[a.name].get(k)) for _, k in SLICE_COLUMNS]
            ratios += [[a.name] + [c[0] for c in cells], [""] + [c[1] for c in cells]]
    if ratios:
        ratios.append(["best flat"] + [_short(sl.baseline.get(k, "-")) for _, k in SLICE_COLUMNS])
    peer_ratios: list[list[str]] = []
    for label, cis in sl.vs_peer.items():
        cells = [_ratio(cis.get(k)) for _, k in SLICE_COLUMNS]
        peer_ratios += [[label] + [c[0] for c in cells], [""] + [c[1] for c in cells]]
    if peer_ratios:
        peer_ratios.append(["best peer"] + [sl.peer_baseline.get(k, "-") for _, k in SLICE_COLUMNS])
    graph_ratios: list[list[str]] = []
    for label, cis in sl.vs_graph.items():
        cells = [_ratio(cis.get(k)) for _, k in SLICE_COLUMNS]
        graph_ratios += [[label] + [c[0] for c in cells], [""] + [c[1] for c in cells]]
    every = [header] + rows + ratios + peer_ratios + graph_ratios
    widths = [max(len(r[i]) for r in every) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                         for i, c in enumerate(cells)).rstrip()

    out = [f"slice {sl.name}: {sl.n} question(s)", line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if ratios:
        out += ["tree arm / the slice's best flat arm for that figure [95% CI]:"] + [line(r) for r in ratios]
    if peer_ratios:
        out += ["tree arm, best flat arm / the slice's best peer arm for that figure [95% CI]:"]
        out += [line(r) for r in peer_ratios]
    if graph_ratios:
        out += ["arm with the graph channel / the same arm without it [95% CI]:"] + [line(r) for r in graph_ratios]
    return out


def format_slices(run: EvalRun) -> list[str]:
    """One compact table per non-empty slice (metrics.SLICES order), and what the cells mean."""
    tables: list[str] = []
    for name in SLICES:
        sl = run.slices.get(name)
        if sl is None or sl.n == 0:
            continue
        tables += [""] + _slice_table(run, sl)
    if not tables:
        return []
    legend = (f"slices by where the evidence lies: one-leaf (all in one leaf), multi-leaf (two or more "
              f"leaves), multi-doc (two or more documents), long-leaf (a gold leaf over {LONG_LEAF_CHARS:,} "
              "characters), long-leaf-multi (two or more evidence items in the same long leaf). "
              "R/any/all/cov@B: what the answer step reads within B characters; "
              "dnDCG@10 counts each evidence item once. ratio = arm mean / the slice's best flat arm's mean "
              "for that figure [95% paired bootstrap CI], * the interval excludes 1 (best flat: its name without "
              "flat-); 4k figures in --json.")
    return tables + ["", legend]


def graph_note(run: EvalRun) -> str:
    """The index's long-leaf graphs and what extracting them cost, next to the index build's time."""
    kg = run.index.metadata.get("kg")
    if not isinstance(kg, dict) or kg.get("mode", "off") == "off":
        return ""
    stats = GraphStats.from_dict(kg)
    build = run.index.metadata.get("build_seconds")
    return f"index {stats.line()}" + (f"; this build of the index took {build:.1f} s in all" if build else "")


def chunk_context(run: EvalRun) -> str:
    """How the index's chunks were embedded and BM25-indexed (every arm of a run shares it)."""
    return str(run.index.metadata.get("chunk_context", "none"))


def _retrieved(run: EvalRun, rows: list[int], details: list[dict], sources: list[str],
               relevant: frozenset[int]) -> list[dict[str, Any]]:
    out = []
    for rank, (row, det, src) in enumerate(zip(rows, details, sources), 1):
        c = run.index.chunks[row]
        out.append({"rank": rank, "row": row, "chunk_id": c.chunk_id, "node_id": c.source_node_id,
                    "doc_path": c.doc_path, "start_char": c.start_char, "end_char": c.end_char,
                    "start_line": c.start_line, "end_line": c.end_line, "heading_path": c.heading_path,
                    "text": c.text, "scores": det, "source": src, "relevant": row in relevant})
    return out


def _peer_retrieved(texts: dict[str, str], peer: Any, rows: list[int], relevant: frozenset[int]
                    ) -> list[dict[str, Any]]:
    """A peer's ranked chunks, as ``_retrieved`` lists ours (``texts``: document path -> text)."""
    return [{"rank": rank, "row": row, "doc_path": doc, "start_char": s, "end_char": e,
             "text": texts[doc][s:e], "source": "peer", "relevant": row in relevant}
            for rank, (row, (doc, s, e)) in enumerate(((r, peer.chunks[r]) for r in rows), 1)]


def _located(run: EvalRun, located: list[dict[str, Any]], gold: frozenset[str]) -> list[dict[str, Any]]:
    out = []
    for item in located:
        node = run.index.get_node(item["node_id"])
        d = dict(item)
        if node is not None:
            d.update(heading_path=node.heading_path, doc_path=node.doc_path,
                     content_start=node.content_start, content_end=node.content_end)
        d["gold"] = item["node_id"] in gold
        out.append(d)
    return out


def _slices_dict(run: EvalRun) -> dict[str, Any]:
    return {name: {"n": sl.n, "means": sl.means, "baseline": sl.baseline,
                   "vs_baseline": {arm: {k: ci.to_dict() for k, ci in cis.items()}
                                   for arm, cis in sl.vs_baseline.items()},
                   "peer_baseline": sl.peer_baseline,
                   "vs_peer": {arm: {k: ci.to_dict() for k, ci in cis.items()} for arm, cis in sl.vs_peer.items()},
                   "vs_graph": {arm: {k: ci.to_dict() for k, ci in cis.items()}
                                for arm, cis in sl.vs_graph.items()}}
            for name, sl in run.slices.items()}


def _context(run: EvalRun, out: Any) -> list[dict[str, Any]]:
    """The passages the answer step reads at the largest budget, cut as the walk reads them."""
    return [{"doc_path": doc, "start_char": s, "end_char": e}
            for doc, (s, e) in read_passages(out, BUDGETS[-1], run.index)]


def run_to_dict(run: EvalRun) -> dict[str, Any]:
    o = run.options
    table = []
    for s in run.summaries:
        row: dict[str, Any] = {"arm": s.name, "n": s.n, **s.means, "p50_ms": s.p50_ms, "p95_ms": s.p95_ms,
                               "fallback_questions": s.fallbacks}
        row["chunk_context"] = chunk_context(run)
        row["baseline"] = s.baseline
        row["ndcg@10_vs_baseline"] = s.vs_baseline.to_dict() if s.vs_baseline else None
        row["cov@2k_vs_baseline"] = s.vs_baseline_cov.to_dict() if s.vs_baseline_cov else None
        table.append(row)
    questions = []
    doc_texts = {d.path: d.text for d in run.eval_set.documents} if run.peers else {}
    for r in run.results:
        q = r.question
        arms = {}
        for name, out in r.outputs.items():
            peer = run.peers.get(name)
            retrieved = (_peer_retrieved(doc_texts, peer, out.rows, r.peer_relevance[name].relevant) if peer else
                         _retrieved(run, out.rows, out.details, out.sources, r.relevance.relevant))
            arms[name] = {"scores": r.scores[name], "latency_ms": out.latency_ms, "locator": out.locator,
                          "fallbacks": out.fallbacks, "usage": out.usage,
                          "located": _located(run, out.located, r.relevance.gold_leaves),
                          "retrieved": retrieved,
                          "context": _context(run, out)}
        questions.append({
            "id": q.id, "query": q.query, "lang": q.lang, "scope": list(q.scope) if q.scope else None,
            "evidence": [{"doc": e.doc, "spans": [list(s) for s in e.spans]} for e in q.evidence],
            "relevant_chunks_in_index": len(r.relevance.relevant),
            "gold_leaves": sorted(r.relevance.gold_leaves),
            "slices": [name for name in SLICES if name in r.slices], "arms": arms})
    return {
        "set": str(o.data),
        "n_scored": run.n_scored, "n_sampled": run.sampled, "n_questions_in_set": len(run.eval_set.questions),
        "unscorable": run.unscorable,
        "evidence_items": run.eval_set.evidence_items, "missing_evidence": run.eval_set.missing_evidence,
        "options": {"k": o.k, "seed": o.seed, "limit": o.limit, "arms": [a.name for a in run.arms],
                    "resamples": o.resamples, "rerank_pool": o.rerank_pool,
                    "llm": ([getattr(o.llm, "provider", None), getattr(o.llm, "model", None)]
                            if o.llm is not None else None)},
        "config": o.config.to_dict(),
        "arm_configs": {a.name: a.config.to_dict() for a in run.arms},
        "index": {**run.index_info, "embedder": run.index.embedder_identity,
                  "counts": run.index.metadata.get("counts"), "kg": run.index.metadata.get("kg"),
                  "build_seconds": run.index.metadata.get("build_seconds")},
        "table": table,
        "context_budgets": list(BUDGETS),
        "slices": _slices_dict(run),
        "peers": {p.name: {"system": p.system, "versions": p.versions, "config": p.config,
                           "chunks": len(p.chunks)} for p in run.peers.values()},
        "seconds": round(run.seconds, 2),
        "questions": questions,
    }


def write_json(run: EvalRun, path: Path) -> None:
    atomic_write_text(Path(path), json.dumps(run_to_dict(run), ensure_ascii=False, indent=1))
