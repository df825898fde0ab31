"""The section tree: the data contract every later stage reads.

A TreeNode is the spec's (node_id, heading, level, content, summary, parent,
children, heading_path) plus what traceability needs: the document it came
from and its source span in the *normalised* document text, so any chunk can
be cited back to ``doc.md:L12-L15``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

ROOT_ID = "0000"


@dataclass
class TreeNode:
    node_id: str
    heading: str
    level: int
    content: str
    summary: str = ""
    parent: Optional["TreeNode"] = field(default=None, repr=False, compare=False)
    children: list["TreeNode"] = field(default_factory=list)
    heading_path: str = ""
    doc_path: str = ""
    """Document path relative to the input (file name for a single file)."""
    kind: str = "section"
    """root | document | section | intro  (intro = text a parent holds before its first child)."""
    start_line: int = 0
    end_line: int = 0
    """1-based inclusive line span of the whole section (heading line included)."""
    start_char: int = 0
    end_char: int = 0
    """Character span [start, end) of the whole section in the normalised document."""
    content_start: int = 0
    content_end: int = 0
    """Character span of ``content``: ``doc_text[content_start:content_end] == content``."""

    @property
    def is_leaf(self) -> bool:
        return len(self.children) == 0

    def iter_preorder(self) -> Iterator["TreeNode"]:
        yield self
        for child in self.children:
            yield from child.iter_preorder()

    def leaves(self) -> list["TreeNode"]:
        return [n for n in self.iter_preorder() if n.is_leaf and n.kind != "root"]

    def ancestors(self) -> list["TreeNode"]:
        """Ancestors from the top down, excluding the synthetic root."""
        out: list[TreeNode] = []
        node = self.parent
        while node is not None and node.kind != "root":
            out.append(node)
            node = node.parent
        return out[::-1]


@dataclass
class Document:
    """One Markdown source after normalisation (BOM stripped, CRLF/CR -> LF)."""

    path: str
    """Relative to the input folder (or the file name)."""
    text: str
    title: str
    content_hash: str
    front_matter: dict = field(default_factory=dict)
    body_start: int = 0
    """Character offset where the body begins (after YAML front matter)."""


def get_all_leaves(root: TreeNode) -> list[TreeNode]:
    return root.leaves()


def node_map(root: TreeNode) -> dict[str, TreeNode]:
    return {n.node_id: n for n in root.iter_preorder()}
