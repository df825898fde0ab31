"""Retrieval arms: flat baselines and TreeRAG variants over one shared index.

Every arm sees the same chunks, embeddings and BM25 statistics, returns at
most ``k`` ranked index rows, and honours a question's scope (flat arms rank
only the scoped documents' chunks; tree arms show the locator only their
subtrees). Rerank, when configured, is applied to every arm alike: flat arms
rerank their top ``rerank_pool`` candidates, tree arms their usual
candidates (located leaves' top chunks, plus the safety net for ``+net``).

Every arm goes through the product's step 2 (``retrieval.retriever.Retriever.retrieve``): tree
arms through the query pipeline's own ``run_retrieval`` with the evaluation variants' orderings
(evaluation/variants.py), flat arms with a flat ordering and nothing located. They stop before
synthesis: eval measures retrieval and must never spend a real LLM call on an answer nobody reads.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from config import Config
from evaluation.metrics import BUDGETS
from evaluation.variants import VARIANTS, FlatOrdering, with_net
from indexing.index_store import Index
from pipeline import Backends, question_plan, run_retrieval
from retrieval.breadth import aspect_pool
from retrieval.pool_lead import lead_pool
from retrieval.context_assembly import assemble_planned
from retrieval.ordering import Ask, keep
from retrieval.query import Query
from retrieval.query_plan import QueryPlan
from retrieval.retriever import Retriever
from retrieval.types import Fallback, RetrievedChunk
from utils.errors import InputError
from utils.llm.types import UsageMeter

FLAT_ARMS = ("flat-bm25", "flat-dense", "flat-hybrid", "flat-hybrid-rrf", "flat-learned", "flat-hybrid-card")
TREE_ARMS = ("tree-keyword", "tree-hybrid", "tree-llm", "tree-llm-rerank")
NET = "+net"
KG = "+kg"
"""A tree arm with the graph channel on (retrieval/graph_channel.py); without the suffix an arm takes
``kg_channel`` from the base config (``--set kg_channel=off``), except that in a run of both
``tree-hybrid`` and ``tree-hybrid+kg`` the plain arm runs without the channel: on an index with graphs
the pair measures the channel against its absence question by question."""
BASELINE = "flat-hybrid"
LLM_STEMS = ("tree-llm", "tree-llm-rerank")
LLM_ARMS = tuple(n for s in LLM_STEMS for n in (s, s + NET))

ARM_MODULE = __name__
"""The module whose import closure computes every arm's output: the result cache is keyed by a digest
of that closure's source (evaluation/code_digest.py), so editing any code an arm can reach re-runs it."""


def all_arm_names(with_llm: bool) -> list[str]:
    tree = [t for t in TREE_ARMS if with_llm or t not in LLM_STEMS]
    return list(FLAT_ARMS) + [n for t in tree for n in (t, t + NET)]


def parse_arms(spec: str | None, with_llm: bool) -> list[str]:
    """``--arms`` comma list -> arm names in the canonical order (default: all available)."""
    available = all_arm_names(with_llm)
    if spec is None or not spec.strip():
        return available
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    known = all_arm_names(True)
    known = known + [n + KG for n in known if not n.startswith("flat-")]
    available = available + [n + KG for n in available if not n.startswith("flat-")]
    for name in wanted:
        if name not in known:
            raise InputError(f"unknown arm {name!r} (choose from: {', '.join(known)})")
        if name not in available:
            raise InputError(f"arm {name!r} needs an LLM: pass --llm anthropic[:MODEL] or openai[:MODEL]")
    return [n for n in known if n in set(wanted)]


@dataclass(frozen=True)
class Arm:
    name: str
    kind: str
    """flat | tree"""
    method: str
    """flat: bm25 | dense | hybrid;  tree: the locator (keyword | hybrid | llm)."""
    config: Config

    @property
    def is_tree(self) -> bool:
        return self.kind == "tree"


def make_arm(name: str, base: Config, k: int, paired_with_graph: bool = False) -> Arm:
    """The arm's effective config: the base config with what the arm fixes.

    ``paired_with_graph``: the run also has this arm with ``+kg``, so this one runs without the
    graph channel (the pair then measures the channel alone)."""
    if name in FLAT_ARMS:
        method = {"flat-bm25": "bm25", "flat-dense": "dense", "flat-learned": "learned",
                  "flat-hybrid-card": "hybrid-card"}.get(name, "hybrid")
        changes: dict[str, Any] = {"final_top_k": k}
        if name in ("flat-hybrid", "flat-hybrid-card"):
            changes["fusion"] = base.tuning.ranking.fusion if base.tuning.ranking.fusion != "rrf" else "weighted"
        elif name == "flat-hybrid-rrf":
            changes["fusion"] = "rrf"
        return Arm(name, "flat", method, base.replace(**changes))
    graph = name.endswith(KG)
    plain = name[:-len(KG)] if graph else name
    stem = plain[:-len(NET)] if plain.endswith(NET) else plain
    if stem not in TREE_ARMS:
        raise InputError(f"unknown arm {name!r}")
    method = stem.split("-", 1)[1]
    changes: dict[str, Any] = {"kg_channel": True} if graph else {"kg_channel": False} if paired_with_graph else {}
    for setting in ("document_order", "collection_order"):  # a +net arm's orderings draw on the net too
        changes[setting] = with_net(getattr(base.tuning.ranking, setting), plain.endswith(NET))
    return Arm(name, "tree", method, base.replace(**{"locator": method, "final_top_k": k, **changes}))


@dataclass
class ArmOutput:
    """One arm's answer to one question, in plain JSON types (it is cached as is)."""

    rows: list[int]
    """Ranked index rows, best first (at most k)."""
    details: list[dict[str, float]]
    """Per row: dense/bm25/fused (and rerank) scores."""
    sources: list[str]
    """Per row: flat | tree | net."""
    latency_ms: float
    located: list[dict[str, Any]] = field(default_factory=list)
    """Tree arms: [{node_id, score, sub_query}] the locator returned."""
    locator: str | None = None
    fallbacks: list[dict[str, str]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    contexts: dict[str, list[list[Any]]] = field(default_factory=dict)
    """Budget in characters (as a string) -> the passages the answer step reads at that budget,
    each ``[doc_path, start_char, end_char]``, in reading order (retrieval.context_assembly)."""

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "details": self.details, "sources": self.sources,
                "latency_ms": self.latency_ms, "located": self.located, "locator": self.locator,
                "fallbacks": self.fallbacks, "usage": self.usage, "contexts": self.contexts}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ArmOutput":
        return cls(rows=[int(r) for r in d["rows"]], details=list(d["details"]),
                   sources=list(d["sources"]), latency_ms=float(d["latency_ms"]),
                   located=list(d.get("located") or []), locator=d.get("locator"),
                   fallbacks=list(d.get("fallbacks") or []), usage=dict(d.get("usage") or {}),
                   contexts={str(b): [list(p) for p in ps] for b, ps in (d.get("contexts") or {}).items()})

    @property
    def located_ids(self) -> list[str]:
        return [n["node_id"] for n in self.located]


@dataclass
class ArmContext:
    index: Index
    backends: Backends
    rerank_pool: int = 20
    """Flat candidates handed to the reranker (at least)."""
    budgets: tuple[int, ...] = BUDGETS
    """Context budgets (characters) each arm's context is assembled at (a set with evidence pages
    adds metrics.PAGE_BUDGETS)."""


def contexts_of(index: Index, pool: list[RetrievedChunk], plan: QueryPlan, cfg: Config,
                budgets: tuple[int, ...] = BUDGETS) -> dict[str, list[list[Any]]]:
    """The same assembly for every arm (flat or tree), at each evaluation budget."""
    return {str(b): [list(s) for s in assemble_planned(index, pool, b, plan, cfg.tuning.context).spans()]
            for b in budgets}  # what the answer step would read at each evaluation budget


def _pack(hits: list[RetrievedChunk], t0: float, **extra: Any) -> ArmOutput:
    return ArmOutput(rows=[h.row for h in hits],
                     details=[{k: float(v) for k, v in h.retrieval_detail.items()} for h in hits],
                     sources=[h.source for h in hits],
                     latency_ms=round((time.perf_counter() - t0) * 1000, 3), **extra)


def flat_pools(arm: Arm, ctx: ArmContext, query: str, plan: QueryPlan, doc_paths: set[str] | None,
               fallbacks: list[Fallback]) -> tuple[list[RetrievedChunk], list[RetrievedChunk]]:
    """A flat arm's (ranked hits, context pool), through the product's step 2 as the tree's are:
    each paragraph's best window first, and for a multi-part question each part's own hits taking
    turns in the pool. Step 2's list is the first k ranked hits; the context reads the pool."""
    cfg = arm.config
    top = max(keep(cfg), ctx.rerank_pool if ctx.backends.reranker is not None else 0)
    ordering = FlatOrdering(arm.method, top)
    retriever = Retriever(ctx.index, cfg, ctx.backends.embedder, ctx.backends.reranker, ordering, ordering)
    embedder = None if arm.method == "bm25" else ctx.backends.embedder  # BM25 alone embeds nothing

    def ranked_for(q: Query) -> list[RetrievedChunk]:
        return retriever.retrieve(Ask(q, [], doc_paths), fallbacks).ranked

    question = Query.build(query, embedder)  # one per question: the lead reuses what ranking memoized
    ranked = ranked_for(question)
    pool = ranked
    if cfg.tuning.breadth.aspect_retrieval and plan.route == "multi-part":
        pool = aspect_pool(ranked, plan.aspects, lambda part: ranked_for(Query.build(part, embedder)), keep(cfg))
    return ranked, lead_pool(question, pool, ctx.index, cfg)


def run_arm(arm: Arm, ctx: ArmContext, query: str, doc_paths: set[str] | None) -> ArmOutput:
    """One question through one arm, timed end to end (query embedding included)."""
    t0 = time.perf_counter()
    cfg = arm.config
    fallbacks: list[Fallback] = []
    if not arm.is_tree:
        plan = question_plan(query, ctx.index, cfg.tuning.breadth, doc_paths)
        ranked, pool = flat_pools(arm, ctx, query, plan, doc_paths, fallbacks)
        out = _pack(ranked[:cfg.final_top_k], t0, fallbacks=[f.to_dict() for f in fallbacks])
        out.contexts = contexts_of(ctx.index, pool, plan, cfg, ctx.budgets)  # untimed: latency is retrieval's
        return out
    usage = UsageMeter()
    r = run_retrieval(query, ctx.index, cfg, ctx.backends, doc_paths, usage, orderings=VARIANTS)
    if r.stopword_only:  # run_pipeline answers these with a notice and retrieves nothing
        return _pack([], t0, locator=None)
    loc, final = r.located, r.final
    fallbacks.extend(r.fallbacks)
    located = [{"node_id": n.node_id, "score": n.score, "sub_query": n.sub_query} for n in loc.nodes]
    out = _pack(final, t0, located=located, locator=loc.locator,
                fallbacks=[f.to_dict() for f in fallbacks], usage=usage.total().to_dict())
    assert r.plan is not None  # set whenever the question is not stop-words only
    out.contexts = contexts_of(ctx.index, r.pool, r.plan, cfg, ctx.budgets)
    return out
