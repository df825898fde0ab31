"""The section tree of a build, a batch of documents at a time: parsed, numbered, summarised.

Why batches: the whole tree of 100,000 documents (5.3M nodes with their text and summaries) is
several GB; the index needs each node once, in pre-order, and pre-order over the root's children
is each document's subtree in turn. So a batch of documents is parsed, numbered from where the
previous batch stopped, summarised (its own nodes only: a summary reads a node's children, never
another document), written and dropped. The ids, paths and summaries are those of the whole tree
built at once (``build_tree`` numbers its forest the same way). A small batch rather than one
document keeps an LLM summariser's worker threads busy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from indexing.build_plan import BuildPlan
from tree_builder.document import Document
from tree_builder.summary import save_summaries, summarize_tree
from tree_builder.tree import TreeNode, document_tops, new_root, number_nodes

DOC_BATCH = 32
"""Documents parsed and summarised together (~3 MB of generated Markdown and its tree)."""


@dataclass
class DocumentSections:
    """One document and its nodes below the root, in pre-order, summarised."""

    document: Document
    nodes: list[TreeNode]


def section_batches(plan: BuildPlan, documents: Iterable[Document]) -> Iterator[list[DocumentSections]]:
    """The documents' trees, a batch at a time, in order; summaries lent by the previous index for
    unchanged documents, else written (by the LLM across ``summary_workers`` threads, or extractively)."""
    next_id = plan.first_node
    unchanged = set(plan.changes.unchanged) if plan.previous is not None and plan.changes is not None else set()
    batch: list[Document] = []
    try:
        for doc in documents:
            batch.append(doc)
            if len(batch) >= DOC_BATCH:
                out, next_id = _sections(plan, batch, next_id, unchanged)
                batch = []
                yield out
        if batch:
            out, next_id = _sections(plan, batch, next_id, unchanged)
            yield out
    finally:
        save_summaries(plan.summarizer)


def _sections(plan: BuildPlan, docs: list[Document], first_id: int,
              unchanged: set[str]) -> tuple[list[DocumentSections], int]:
    root = new_root()
    if plan.structure is not None:
        docs = [plan.structure.check(doc) for doc in docs]
    tops = [document_tops(doc, plan.config, plan.folder_mode, root) for doc in docs]
    for t in tops:
        root.children.extend(t)
    next_id = number_nodes(root.children, first_id)
    keep: set[str] = set()
    if plan.previous is not None and unchanged:
        keep = plan.previous.lend_summaries(root, unchanged)
    if plan.summarizer is not None and plan.summary_workers > 1:
        from tree_builder.llm_summary import summarize_tree_parallel  # noqa: PLC0415

        summarize_tree_parallel(root, plan.summarizer, plan.summary_workers, None, keep=keep)
    else:
        summarize_tree(root, plan.config, plan.summarizer, keep=keep, save=False)
    return [DocumentSections(doc, [n for top in t for n in top.iter_preorder()]) for doc, t in zip(docs, tops)], next_id
