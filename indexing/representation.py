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
from tree_builder.readers.pdf_tables import is_column_header, is_table_line, is_table_row
from tree_builder.tree import TreeNode

_TABLE_LOOKBACK_CHARS = 6000
_ROW_MAX_CHARS = 400
"""A table row is one short line: a chunk whose first line runs longer opens no table, and reading
no further keeps a document of one very long line linear to chunk."""
_PROSE_CHARS = 60


def leaf_text_for_embedding(leaf: TreeNode) -> str:
    """What represents a whole leaf for the no-LLM locator: where it is and what it says."""
    return f"{leaf.heading_path}\n{leaf.summary}"


def column_header_above(text: str, start: int, floor: int = 0) -> str:
    """The column header ("2022 2021") of the table a chunk starting at ``start`` opens inside.

    A chunk cut from the middle of a financial statement starts with rows such as "Total revenues
    66,608 62,286": read alone, nothing says which year each figure is. "" when there is none.
    """
    span = column_header_span(text, start, floor)
    return text[span[0]:span[1]].strip() if span else ""


def column_header_span(text: str, start: int, floor: int = 0) -> tuple[int, int] | None:
    """Where ``column_header_above`` finds the header line, [start, end) in ``text``.

    When the line at ``start`` is a table row, the lines above it (from ``floor``) are walked back
    through the table to its header; prose ends the walk. None when there is none.
    """
    end = text.find("\n", start, start + _ROW_MAX_CHARS + 1)
    if end < 0 and start + _ROW_MAX_CHARS < len(text):
        return None  # a first line longer than any table row
    if not is_table_row(text[start:end if end >= 0 else len(text)].strip()):
        return None
    floor = max(floor, start - _TABLE_LOOKBACK_CHARS)
    pos = start
    while pos > floor:
        line_start = text.rfind("\n", floor, pos - 1) + 1
        a = max(line_start, floor)
        line = text[a:pos].strip()
        if line and is_column_header(line):
            return a, a + len(text[a:pos].rstrip())
        pos = line_start if line_start > floor else floor
        if len(line) > _PROSE_CHARS and not is_table_line(line):
            return None
    return None


def chunk_representation(chunk: Chunk, title: str, context: str, table_header: str = "") -> str:
    """The text a chunk is embedded and BM25-indexed as (never what is stored or cited).

    Headings are worth a lot to a retriever that sees them: "Results" or "第三章 合同的履行" says
    what a bare paragraph does not. Every arm, flat or tree, searches the same representation, so a
    comparison of arms never credits the tree for text the flat arm was denied. A chunk cut from
    inside a table also carries the table's column header (``column_header_above``), so its rows
    still say which period each figure is; the stored and cited text stays the exact span.
    """
    if context == "none":
        return chunk.text
    path = chunk.heading_path
    if title and not (path == title or path.startswith(title + " > ")):
        path = f"{title} > {path}" if path else title
    body = f"{table_header}\n{chunk.text}" if table_header else chunk.text
    return f"{path}\n{body}" if path else body


def chunk_texts(chunks: list[Chunk], docs: list[Document], config: Config) -> list[str]:
    """What every chunk is embedded and BM25-indexed as, under ``chunk_context`` (ChunkParams)."""
    by_path = {d.path: d for d in docs}
    out = []
    for c in chunks:
        doc = by_path.get(c.doc_path)
        header = column_header_above(doc.text, c.start_char) if doc is not None else ""
        out.append(chunk_representation(c, doc.title if doc is not None else "", config.tuning.chunking.chunk_context, header))
    return out


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
