"""Data contracts between the three query steps."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from indexing.chunker import Chunk


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
