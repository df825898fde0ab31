"""What a chunk and a leaf are embedded and BM25-indexed as, and the walk that chunks the leaves.

The build, the benchmarks and the evaluation all need the same texts: one place decides them,
so a comparison of arms never credits one for text another was denied.
"""
from __future__ import annotations

from typing import Iterator

from config import Config
from indexing.chunker import Chunk, chunk_leaf
from tree_builder.document import Document
from tree_builder.markdown_headings import line_starts
from tree_builder.tree import TreeNode


def leaf_text_for_embedding(leaf: TreeNode) -> str:
    """What represents a whole leaf for the no-LLM locator: where it is and what it says."""
    return f"{leaf.heading_path}\n{leaf.summary}"


def chunk_representation(chunk: Chunk, title: str, context: str) -> str:
    """The text a chunk is embedded and BM25-indexed as (never what is stored or cited).

    Headings are worth a lot to a retriever that sees them: "Results" or "第三章 合同的履行" says
    what a bare paragraph does not. Every arm, flat or tree, searches the same representation, so a
    comparison of arms never credits the tree for text the flat arm was denied.
    """
    if context == "none":
        return chunk.text
    path = chunk.heading_path
    if title and not (path == title or path.startswith(title + " > ")):
        path = f"{title} > {path}" if path else title
    return f"{path}\n{chunk.text}" if path else chunk.text


def chunk_texts(chunks: list[Chunk], docs: list[Document], config: Config) -> list[str]:
    """What every chunk is embedded and BM25-indexed as, under ``chunk_context`` (ChunkParams)."""
    titles = {d.path: d.title for d in docs}
    return [chunk_representation(c, titles.get(c.doc_path, ""), config.tuning.chunking.chunk_context) for c in chunks]


def chunk_documents(root: TreeNode, docs: list[Document], config: Config) -> list[Chunk]:
    """Every chunk of the tree, in row order (all in memory: for tests and benchmarks, not builds)."""
    return [c for _, _, chunks in leaf_chunks(root.leaves(), {d.path: d for d in docs}, config) for c in chunks]


def leaf_chunks(leaves: list[TreeNode], by_path: dict[str, Document],
                config: Config) -> Iterator[tuple[TreeNode, Document, list[Chunk]]]:
    """Each leaf with its document and chunks, in order; a document's line starts computed once."""
    doc_path, starts = None, None
    for leaf in leaves:
        doc = by_path[leaf.doc_path]
        if doc.path != doc_path:
            doc_path, starts = doc.path, line_starts(doc.text)
        yield leaf, doc, chunk_leaf(leaf, doc.text, config, starts, doc.page_starts)
