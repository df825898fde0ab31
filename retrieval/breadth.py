"""Breadth for questions with several parts: each part gets its own sections and its own hits.

The ranked list for a whole question favours the section that matches most of its words; a
question with two parts ("which datasets and which metrics") then reads one section deeply
and never the other. Here each part of a multi-part question (``retrieval.query_plan``) is
located and retrieved as a sub-query of its own, exactly as the whole question is (the same
locator, the same in-section ranking), and the context pool takes turns: the whole question's
best hit, each part's best hit not yet taken, the whole question's second, and so on. Step 2's
top-k list stays the whole question's; only what the answer step reads is widened.

Every ranked list, flat or tree, also lists each paragraph's best window before any paragraph's
second (``paragraph_first``).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from indexing.chunker import paragraph_at, paragraph_spans
from retrieval.query_plan import QueryPlan
from retrieval.types import LocatedNode, RetrievedChunk


def interleave(lists: Sequence[Sequence[RetrievedChunk]], limit: int) -> list[RetrievedChunk]:
    """Round-robin over ranked lists, each chunk once (first list first in every round)."""
    out: list[RetrievedChunk] = []
    seen: set[int] = set()
    cursors = [0] * len(lists)
    while len(out) < limit and any(c < len(lst) for c, lst in zip(cursors, lists)):
        for i, lst in enumerate(lists):
            while cursors[i] < len(lst) and lst[cursors[i]].row in seen:
                cursors[i] += 1
            if cursors[i] < len(lst) and len(out) < limit:
                hit = lst[cursors[i]]
                seen.add(hit.row)
                out.append(hit)
                cursors[i] += 1
    return out


def aspect_pool(whole: list[RetrievedChunk], aspects: Sequence[str],
                retrieve_for: Callable[[str], list[RetrievedChunk]], limit: int) -> list[RetrievedChunk]:
    """The whole question's ranked hits merged with each part's own ranked hits: strict round-robin,
    the whole question first in every round (reciprocal-rank fusion of the lists read no more:
    docs/evaluation.md)."""
    if len(aspects) < 2:
        return whole[:limit]
    return interleave([whole] + [retrieve_for(a) for a in aspects], limit)


def sub_questions(plan: QueryPlan, located: Sequence[LocatedNode], query: str) -> list[str]:
    """The parts to retrieve for on their own: the analyser's parts of a multi-part question, else
    the distinct sub-queries an LLM locator wrote for its leaves (its own decomposition), if two or more."""
    if plan.route == "multi-part":
        return list(plan.aspects)
    subs = list(dict.fromkeys(n.sub_query.strip() for n in located if n.sub_query and n.sub_query.strip()))
    subs = [s for s in subs if s != query.strip()]
    return subs if len(subs) >= 2 else []


def paragraph_first(pool: Sequence[RetrievedChunk], index: Any) -> list[RetrievedChunk]:
    """Each paragraph's best hit first, in rank order; a paragraph's further windows after them.

    Chunks are 200-character windows overlapping by 50, so a long paragraph that matches
    the question fills a ranked list with windows of itself, and a reader (or an evaluation that
    counts each piece of evidence once) gains nothing from the second window that the first did
    not give. Every retrieval, flat or tree, lists distinct paragraphs first.
    """
    paragraphs: ParagraphMemo = {}
    first: list[RetrievedChunk] = []
    later: list[RetrievedChunk] = []
    seen: set[tuple[str, int]] = set()
    prefetch = getattr(index, "prefetch_contents", None)
    if prefetch is not None:  # every hit's leaf text is read below: one statement on an engine
        prefetch(hit.chunk.source_node_id for hit in pool)
    for hit in pool:
        key = paragraph_key(hit.chunk, index, paragraphs)
        (later if key in seen else first).append(hit)
        seen.add(key)
    return first + later


ParagraphMemo = dict[str, "tuple[int, list[tuple[int, int]]]"]
"""A leaf's content start and paragraph spans, by leaf id: read once per leaf."""


def paragraph_key(c: Any, index: Any, memo: ParagraphMemo) -> tuple[str, int]:
    """(leaf, paragraph number) of the chunk's middle character; a chunk whose leaf text cannot be read,
    or that lies between paragraphs, is its own paragraph (its chunk id, -1)."""
    leaf = memo.get(c.source_node_id)
    if leaf is None:
        node = index.get_node(c.source_node_id)
        leaf = memo[c.source_node_id] = ((node.content_start, paragraph_spans(node.content)) if node is not None
                                         else (0, []))
    start, spans = leaf
    i = paragraph_at(spans, (c.start_char + c.end_char) // 2 - start)
    return (c.source_node_id, i) if i >= 0 else (c.chunk_id, -1)


def paragraph_ids(index: Any, rows: np.ndarray, memo: ParagraphMemo | None = None,
                  keys: dict[tuple[str, int], int] | None = None) -> np.ndarray:
    """A paragraph number per row of ``rows`` (every row read),
    equal for rows whose middle character lies in one paragraph of one leaf. ``memo`` and ``keys`` (the
    (leaf, paragraph) key of each number, filled in) let a caller read the paragraphs' text after."""
    memo = {} if memo is None else memo
    keys = {} if keys is None else keys
    return np.array([keys.setdefault(paragraph_key(index.chunks[r], index, memo), len(keys))
                     for r in rows.tolist()], dtype=np.int64)
