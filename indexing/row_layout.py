"""Which leaf, section and document every chunk row belongs to: the groups the section ranker pools over.

Why here and not in retrieval: it is a fact of the index's structure (the node table and the
leaf -> row table), the same for every question, so it is computed once per loaded index
(``Index.layout``) instead of being cached by a query step on the shared index.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from indexing.node_table import KINDS, NodeTable


@dataclass(frozen=True, eq=False)
class RowLayout:
    """Row -> leaf / section / document positions of an index."""

    row_leaf: np.ndarray
    """Leaf position (index.leaves order) of every chunk row."""
    leaf_section: np.ndarray
    """Per leaf: a section id shared by the leaves under one parent section (own id if none)."""
    row_doc: np.ndarray
    """Document position (``doc_rows`` order) of every chunk row."""
    n_docs: int


def row_layout(tree: NodeTable, leaf_ptr: np.ndarray, doc_rows: Mapping[str, tuple[int, int]]) -> RowLayout:
    ptr = np.asarray(leaf_ptr)
    n = int(ptr[-1]) if len(ptr) else 0
    row_leaf = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    leaf_rows = tree.leaf_rows
    parents = tree.parent[leaf_rows]
    under_section = tree.kind[parents] == KINDS.index("section")
    # leaves under one parent section share its id; any other leaf is a section of its own
    _, leaf_section = np.unique(np.where(under_section, parents, leaf_rows), return_inverse=True)
    row_doc = np.empty(n, dtype=np.int64)
    for j, (s, e) in enumerate(doc_rows.values()):
        row_doc[s:e] = j
    return RowLayout(row_leaf, leaf_section.astype(np.int64), row_doc, len(doc_rows))
