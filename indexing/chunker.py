"""Leaf content -> chunks (paragraph first, then a 200/50 sliding window).

CONTRACT (implementation pending): every chunk's ``text`` is exactly
``doc_text[start_char:end_char]`` of its document, so citations are exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Chunk:
    chunk_id: str
    """``<node_id>_chunk_<NN>`` (spec)."""
    text: str
    source_node_id: str
    heading_path: str
    embedding: list[float] = field(default_factory=list, repr=False)
    """Kept for the spec's contract; on disk embeddings live in embeddings.npy."""
    doc_path: str = ""
    start_char: int = 0
    end_char: int = 0
    """Span [start, end) in the normalised document text."""
    start_line: int = 0
    end_line: int = 0
    """1-based inclusive lines of the span, for ``doc.md:L12-L15`` citations."""
