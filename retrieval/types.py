"""Data contracts between the three query steps."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

from indexing.chunker import Chunk


# ----------------------------------------------------------------------------- tuning parameters
# config.py composes them and every command imports config.py (``--help`` included), so they live here,
# in a light module that imports neither config.py nor the modules that read them

@dataclass(frozen=True)
class LocatorParams:
    """How many leaves the no-LLM locators return and how the hybrid one scores a leaf
    (retrieval/node_locator.py); how much of the tree an LLM locator is shown."""

    keyword_top_leaves: int = 3
    """Leaves the keyword locator (the spec's mock, the tree-keyword arm of eval) returns."""
    hybrid_top_leaves: int = 5
    """Leaves the hybrid locator (the default without an LLM) returns."""
    locator_leaf_weight: float = 0.3
    """Share of a leaf's heading+summary similarity in its hybrid locator score (rest: its best chunk)."""
    toc_budget_tokens: int = 6000
    """Largest table of contents an LLM locator is shown; a larger tree is cut to its hybrid-best leaves."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "keyword_top_leaves": (1, math.inf), "hybrid_top_leaves": (1, math.inf),
        "locator_leaf_weight": (0, 1), "toc_budget_tokens": (1, math.inf)}


@dataclass(frozen=True)
class AnswerParams:
    """How the extractive answer picks its sentences (retrieval/extractive.py)."""

    answer_max_chars: int = 600
    """Length budget of the extractive answer's quotes (characters)."""
    answer_max_sentences: int = 4
    """Most sentences the extractive answer quotes."""
    answer_rank_weight: float = 0.5
    """Share of a sentence's score from the step-2 rank of the best hit in its passage (the rest: its
    own dense + BM25 match with the question)."""
    answer_bm25_weight: float = 0.5
    """Weight of a sentence's BM25 against its dense cosine, apart from retrieval's ``bm25_weight`` so the
    answer is tuned without moving retrieval (chosen by evaluation, docs/evaluation.md)."""
    answer_dense_candidates: int = 16
    """Sentences embedded for the dense part of their score (0 = all), the rest ranked out by BM25 and
    rank first: each costs an embedding, and 16 answered within noise of all (docs/pipeline.md)."""
    answer_min_relative: float = 0.5
    """A sentence joins the answer only if its score is at least this share of the best one's."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "answer_max_chars": (1, math.inf), "answer_max_sentences": (1, math.inf), "answer_rank_weight": (0, 1),
        "answer_bm25_weight": (0, 1), "answer_dense_candidates": (0, math.inf), "answer_min_relative": (0, 1)}


@dataclass(frozen=True)
class ContextParams:
    """How a detail question's context budget is spent (a wider question's plan narrows both:
    retrieval/query_plan.py ``QueryPlan``); read by retrieval/context_assembly.py."""

    context_leaf_share: float = 0.5
    """Share of the budget one leaf may take before other leaves' hits are read (a detail question
    is allowed more, an overview or multi-part one less)."""
    context_units_per_budget: int = 3
    """A detail question's hit is read as up to budget / this many characters on the first pass (its
    paragraph whole when that fits): three, not six, reads more of each evidence paragraph at 2,000
    characters (chosen by evaluation, docs/evaluation.md)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {"context_leaf_share": (0.05, 1),
                                                        "context_units_per_budget": (1, 1000)}


@dataclass(frozen=True)
class BreadthParams:
    """Whether questions are told apart by kind, and whether a multi-part one's parts are searched
    on their own (both on by default, chosen by evaluation; off reproduces the plain pipeline)."""

    query_routing: bool = True
    """Tell overview, detail and multi-part questions apart and spend the context budget accordingly;
    off: every question is a detail question (retrieval/query_plan.py)."""
    aspect_retrieval: bool = True
    """A multi-part question's parts are each located and retrieved as a sub-query, and their ranked
    lists join the whole question's in the context pool (taking turns: retrieval/breadth.py)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {}


# ----------------------------------------------------------------------------- step data

@dataclass
class LocatedNode:
    node_id: str
    sub_query: str
    heading_path: str = ""
    score: float | None = None
    """Locator's own score where it has one (keyword / hybrid locators)."""


@dataclass
class Fallback:
    """A degraded path the pipeline took, recorded so it is never silent."""

    step: str
    """locate | rerank | synthesis | embed ..."""
    reason: str
    used: str
    """What was used instead (e.g. "keyword locator", "fused order")."""

    def to_dict(self) -> dict[str, str]:
        return {"step": self.step, "reason": self.reason, "used": self.used}


@dataclass
class LocateResult:
    nodes: list[LocatedNode]
    thinking: str
    locator: str
    """Which locator produced ``nodes``: llm | keyword | hybrid."""
    fallbacks: list[Fallback] = field(default_factory=list)
    toc_nodes: int | None = None
    """How many nodes the LLM was shown (TOC budget); None when no LLM was asked."""
    raw_response: str | None = None
    candidates: list[LocatedNode] = field(default_factory=list)
    """Scored leaves considered before the cut (for the run record)."""


@dataclass(frozen=True)
class RetrievedChunk:
    """One candidate as one stage scored it: a snapshot.

    Frozen, with a read-only ``retrieval_detail``: a later stage (union ordering, rerank) makes a
    new object with ``with_scores`` instead of changing this one, so what the audit record keeps
    for an earlier stage is what that stage computed (an auditable pipeline keeps each stage's own values).
    """

    chunk: Chunk
    score: float
    retrieval_detail: Mapping[str, Any]
    """dense_score, bm25_score, fused_score and, after later stages, their scores (rerank_score...)."""
    row: int = -1
    """Row of the chunk in the index (embeddings / BM25)."""
    sub_query: str = ""
    source: str = "tree"
    """tree: from a located leaf; net: from the flat ranking, outside the located leaves; flat: a
    flat arm's."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "retrieval_detail", MappingProxyType(dict(self.retrieval_detail)))

    @classmethod
    def at(cls, index: Any, row: int, dense: float, bm25: float, fused: float, sub_query: str,
           source: str) -> "RetrievedChunk":
        """The index's chunk at ``row`` as a candidate with its two signals and their fusion."""
        return cls(chunk=index.chunks[row], score=float(fused),
                   retrieval_detail={"dense_score": round(float(dense), 4), "bm25_score": round(float(bm25), 4),
                                     "fused_score": round(float(fused), 4)},
                   row=int(row), sub_query=sub_query, source=source)

    def with_scores(self, score: float, **detail: Any) -> "RetrievedChunk":
        """This candidate as the next stage scored it (a new snapshot; this one is unchanged)."""
        return replace(self, score=float(score), retrieval_detail={**self.retrieval_detail, **detail})
