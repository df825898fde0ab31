"""Step 1 with a small prompt: the LLM re-orders the hybrid locator's best leaves.

The spec's locator shows the LLM the whole serialised tree (up to the TOC budget,
thousands of tokens for a paper). A small local model spends minutes reading it and
then picks sections little better than the no-LLM locator. This variant keeps the
no-LLM locator's recall and asks the model only what it may be good at: which of
ten candidate sections, each shown by heading path and summary, answer the question.
The prompt is ~10x smaller, so a CPU-served model answers in seconds.

Whatever the model returns is validated against the candidates only (an id outside
them is dropped), and any failure falls back, recorded, to the hybrid locator's own
order, so this locator is never worse-formed than running without an LLM.
"""
from __future__ import annotations

from config import Config
from indexing.index_store import Index
from retrieval.locate_prompts import LEAF_RERANK_PROMPT
from retrieval.node_locator import ask_for_leaves, hybrid_leaf_scores, hybrid_locate
from retrieval.query import Query
from retrieval.types import LocatedNode, LocateResult
from utils.llm.types import LLMClient, UsageMeter
from utils.similarity import top_order

RERANK_CANDIDATES = 10
"""Leaves the model is shown: the hybrid locator's top ten (its recall@10 of gold leaves is what
this variant can reach at best)."""
SUMMARY_CHARS = 300
"""Per-candidate summary shown; ten of them keep the prompt near 1,000 tokens."""

def candidate_block(index: Index, node_id: str) -> str:
    node = index.nodes[node_id]
    summary = " ".join((node.summary or "").split())
    if len(summary) > SUMMARY_CHARS:
        summary = summary[:SUMMARY_CHARS].rstrip() + "…"
    return f"[{node_id}] {node.heading_path}\n摘要: {summary}" if summary else f"[{node_id}] {node.heading_path}"


def leaf_rerank_prompt(index: Index, query: Query, candidates: list[LocatedNode]) -> str:
    blocks = "\n\n".join(candidate_block(index, c.node_id) for c in candidates)
    return LEAF_RERANK_PROMPT.format(n=len(candidates), query=" ".join(query.text.split()), candidates=blocks)


def top_candidates(index: Index, query: Query, config: Config, doc_paths: set[str] | None) -> list[LocatedNode]:
    """The hybrid locator's best ``RERANK_CANDIDATES`` leaves with a positive score, best first."""
    leaves, total = hybrid_leaf_scores(index, query, config, doc_paths)
    order = top_order(total, RERANK_CANDIDATES)
    return [LocatedNode(leaves[i].node_id, query.text, leaves[i].heading_path, round(float(total[i]), 4))
            for i in order if total[i] > 0]


def llm_rerank_locate(index: Index, llm: LLMClient, query: Query, config: Config,
                      doc_paths: set[str] | None = None, usage: UsageMeter | None = None) -> LocateResult:
    """The LLM's choice among the hybrid locator's top leaves; the hybrid order on any failure."""
    cands = top_candidates(index, query, config, doc_paths)
    if not cands:
        return hybrid_locate(index, query, config, doc_paths)
    # the model's order is the belief: its nodes carry no score (leaf_priors ranks an unscored list)
    return ask_for_leaves(index, llm, query, config, doc_paths, usage,
                          prompt=leaf_rerank_prompt(index, query, cands), max_tokens=500, locator="llm-rerank",
                          shown=len(cands), allowed={c.node_id for c in cands},
                          failure="LLM re-ranking failed", candidates=cands)
