"""Data contracts between the three query steps."""
from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class RetrievedChunk:
    chunk: Chunk
    score: float
    retrieval_detail: dict[str, Any]
    """dense_score, bm25_score, fused_score and, after rerank, rerank_score."""
    row: int = -1
    """Row of the chunk in the index (embeddings / BM25)."""
    sub_query: str = ""
    source: str = "tree"
    """tree | net  (net = reached by the flat safety net)."""
