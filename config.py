"""Configuration: one frozen dataclass passed down explicitly (no global state).

Every tunable of the pipeline lives here so that the evaluation harness can vary
one field at a time with ``dataclasses.replace`` and a run record can snapshot
the whole thing with ``dataclasses.asdict``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

FusionMode = Literal["weighted", "rrf"]
IdfScope = Literal["leaf", "document", "corpus"]


@dataclass(frozen=True)
class Config:
    # --- tree builder -----------------------------------------------------
    max_depth: int = 3
    """Deepest section level that becomes a node; deeper headings stay as text."""
    summary_mode: Literal["extractive", "llm"] = "extractive"
    summary_max_chars: int = 160
    """Cap on an extractive summary (characters; CJK and Latin alike)."""
    short_section_tokens: int = 200
    """Sections shorter than this use their own text as summary (PageIndex rule)."""

    # --- chunking ---------------------------------------------------------
    chunk_size: int = 200
    chunk_overlap: int = 50
    min_chunk_chars: int = 20

    # --- embeddings -------------------------------------------------------
    embedder: str = "hash"
    """hash | local | onnx | openai | use  (see indexing/embedder.py)."""
    embedder_model: str | None = None
    embed_batch_size: int = 64
    hash_dim: int = 384

    # --- BM25 -------------------------------------------------------------
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    bm25_epsilon: float = 0.25
    bm25_idf_scope: IdfScope = "leaf"

    # --- query pipeline ---------------------------------------------------
    locator: str = "auto"
    """auto | llm | keyword | hybrid.  auto = llm when one is configured, else hybrid."""
    max_located: int = 5
    keyword_top_leaves: int = 3
    hybrid_top_leaves: int = 3
    """Leaves the no-LLM hybrid locator returns."""
    locator_leaf_weight: float = 0.3
    """Share of a leaf's heading+summary similarity in its hybrid locator score (rest: best chunk)."""
    locator_fallback: str = "keyword"
    """Locator used when the LLM locator fails: keyword (spec) | hybrid."""
    top_k_per_leaf: int = 5
    final_top_k: int = 5
    fusion: FusionMode = "weighted"
    dense_weight: float = 0.5
    bm25_weight: float = 0.5
    rrf_k: int = 60
    reranker: str = "none"
    """none | cross-encoder"""
    reranker_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    safety_net: bool = False
    safety_net_top_k: int = 5
    toc_budget_tokens: int = 6000

    # --- LLM ----------------------------------------------------------------
    llm: str = "auto"
    """auto | mock | anthropic:MODEL | openai:MODEL"""
    llm_cache: bool = True

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
