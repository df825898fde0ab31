"""The section tree of an index, stored flat and materialised one node at a time.

Why flat: at 10,000 documents a tree has ~500,000 nodes; parsing a nested
``tree.json`` into objects took ~10 s and hundreds of MB per query process,
while a query reads a handful of nodes. On disk the tree is:

    node_table.npy    int32 (N, 3)  per node in pre-order (row 0 = root): parent row, document
                                    number (metadata.json "documents"; -1 for the root), kind code
    nodes.jsonl       one JSON object per node: ids, heading, summary, heading path, spans
    node_contents.jsonl  one JSON string per node: its own text (leaves hold the text)
    (+ *_offsets.npy byte-offset tables for both JSONL files)

The table alone answers what queries ask of the whole tree (which rows are
leaves, which leaves belong to a document, who is whose parent) with numpy; a
``StoredNode`` is built, and its record validated, only when code touches it.
A ``StoredNode`` is a ``TreeNode``: its parent, children and content resolve
from the table on first access, so code written for an in-memory tree runs
unchanged (walking the whole tree materialises it, at the old cost).

Node ids are the pre-order row as four or more digits (``0000`` is the root),
as the tree builder assigns them; a record whose id does not match its row is
refused, so ids are unique by construction.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence, overload

import numpy as np

from indexing.node_columns import DOC, KIND, KINDS, PARENT
from indexing.records import Records, check_spans, typed_fields
from tree_builder.tree import TreeNode
from utils.errors import IndexFormatError
from tree_builder.visualizer import node_block
from utils.tokenizer import estimate_tokens

if TYPE_CHECKING:
    from indexing.segments import Runs

NODES = "nodes.jsonl"
NODE_OFFSETS = "node_offsets.npy"
NODE_CONTENTS = "node_contents.jsonl"
NODE_CONTENT_OFFSETS = "node_content_offsets.npy"
NODE_TABLE = "node_table.npy"
NODE_TOC_TOKENS = "node_toc_tokens.npy"
MAX_TREE_DEPTH = 64
"""Far deeper than any document tree (root > documents > six heading levels); bounds every walk."""
CONTENT_CACHE_CHARS = 4_000_000
"""Section texts kept per index once read (``NodeTable.content``): ~8-16 MB at most."""

NODE_FIELDS = (
    "node_id", "heading", "level", "summary", "heading_path", "doc_path", "kind",
    "start_line", "end_line", "start_char", "end_char", "content_start", "content_end",
    "page_start", "page_end",
)
NODE_INTS = ("level", "start_line", "end_line", "start_char", "end_char", "content_start", "content_end")
_TYPES = tuple((f, int if f in NODE_INTS or f.startswith("page_") else str) for f in NODE_FIELDS)
_ON_DISK: Any = object()


def node_id_of(row: int) -> str:
    return f"{row:04d}"


def row_of(node_id: Any, n: int) -> int | None:
    """The pre-order row a node id names, or None when it names no node of this table."""
    if not isinstance(node_id, str) or not node_id.isdigit() or not node_id.isascii():
        return None
    row = int(node_id)
    return row if row < n and node_id_of(row) == node_id else None


# --------------------------------------------------------------------------- write

def node_record(node: TreeNode) -> dict[str, Any]:
    return {f: getattr(node, f) for f in NODE_FIELDS}


def node_table(root: TreeNode, doc_number: Mapping[str, int]) -> tuple[list[TreeNode], np.ndarray]:
    """Pre-order nodes and their table; ``doc_number`` maps a document path to its number."""
    nodes = list(root.iter_preorder())
    row = {id(n): i for i, n in enumerate(nodes)}
    table = np.empty((len(nodes), 3), dtype=np.int32)
    for i, n in enumerate(nodes):
        if n.node_id != node_id_of(i):
            raise ValueError(f"node {n.node_id!r} is at pre-order row {i}: ids must be pre-order rows")
        table[i, PARENT] = -1 if n.parent is None else row[id(n.parent)]
        table[i, DOC] = -1 if n.kind == "root" else doc_number[n.doc_path]
        table[i, KIND] = KINDS.index(n.kind)
    return nodes, table


def toc_tokens(nodes: list[TreeNode], table: np.ndarray) -> np.ndarray:
    """Estimated tokens of each node's block of the serialised tree (+2 for the blank line between
    blocks; 0 for the root): what the LLM locator's TOC budget sums, computed once at build time."""
    depth = depths(np.asarray(table[:, PARENT], dtype=np.int64))
    out = np.zeros(len(nodes), dtype=np.int32)
    for i, n in enumerate(nodes[1:], 1):
        out[i] = estimate_tokens(node_block(n, int(depth[i]))) + 2
    return out


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every row as the serialisation indents it (root -1, top-level nodes 0), int8.

    Every row takes its parent's depth + 1, over the whole table at once, until nothing changes:
    one gather per level (a tree of depth d settles in d + 2 passes; ~0.1 s at 5.3M rows, where
    compacting the rows still below each level cost 0.3-0.5 s). A tree deeper than MAX_TREE_DEPTH
    raises ValueError (a cycle would too, but parents always come first).
    """
    depth = np.full(len(parent), -1, dtype=np.int8)  # at most MAX_TREE_DEPTH + 1 while it settles
    if len(parent) < 2:
        return depth
    up = np.maximum(parent, 0)
    for _ in range(MAX_TREE_DEPTH + 1):  # deepest allowed: MAX_TREE_DEPTH - 1, as the loader always read it
        new = depth[up] + np.int8(1)
        new[0] = -1
        if np.array_equal(new, depth):
            return depth
        depth = new
    raise ValueError(f"tree is nested deeper than {MAX_TREE_DEPTH} levels")


# --------------------------------------------------------------------------- read

class NodeTable:
    """The flat tree of one index: numpy arrays for structure, records read on demand."""

    def __init__(self, table: np.ndarray, records: Records, contents: Records, doc_paths: list[str],
                 id_rows: "Runs | None" = None) -> None:
        self.records = records
        self.id_rows = id_rows
        """A segmented index (indexing/segments.py): its rows' ids are their physical rows, mapped by these
        runs; None: a node's id is its row."""
        self.contents = contents
        self.doc_paths = doc_paths
        # int32 as stored (the table's own type): at 100,000 documents (5.3M rows) each int64 copy of a
        # column was 42 MB of the query process
        self.parent = np.ascontiguousarray(table[:, PARENT], dtype=np.int32)
        self.doc = np.ascontiguousarray(table[:, DOC], dtype=np.int32)
        self.kind = np.ascontiguousarray(table[:, KIND], dtype=np.int32)
        n = len(self.parent)
        leaf = np.ones(n, dtype=bool)
        parents = self.parent[1:]
        leaf[parents[(parents >= 0) & (parents < n)]] = False  # a parent has children (``check`` rejects the rest)
        leaf[0] = False
        self.leaf_rows = np.flatnonzero(leaf)
        """Pre-order rows of the leaves: leaf i of the index is node row leaf_rows[i]."""
        self.leaf_of_row = np.full(n, -1, dtype=np.int32)
        self.leaf_of_row[self.leaf_rows] = np.arange(len(self.leaf_rows), dtype=np.int32)
        self.depth = np.zeros(0, dtype=np.int8)
        """Serialisation depth per row (root -1); set by ``check``."""
        self._child_ptr: np.ndarray | None = None
        self._child_rows: np.ndarray | None = None
        self.toc_tokens = np.zeros(n, dtype=np.int32)
        """Estimated TOC tokens per row (node_toc_tokens.npy), set by the loader."""
        self._toc_total: tuple[np.ndarray, int] | None = None
        self._cache: dict[int, StoredNode] = {}
        self._doc_order: np.ndarray | None = None
        self._doc_bounds = np.zeros(0, dtype=np.int64)
        self._texts: dict[int, str] = {}
        self._text_chars = 0
        self._texts_lock = threading.Lock()  # questions on several threads share one loaded index

    def __len__(self) -> int:
        return len(self.parent)

    def toc_total(self) -> int:
        """The TOC tokens of every node but the root (row 0), summed once per ``toc_tokens`` array.

        Why kept: the LLM locator compares it with its budget on every whole-collection question; at
        100,000 documents the sum runs over 5.3M rows (~3 ms a question). Keyed by the array, so a loader
        that sets ``toc_tokens`` after this was asked gets a fresh sum."""
        tokens = self.toc_tokens
        memo = self._toc_total
        if memo is None or memo[0] is not tokens:
            memo = (tokens, int(tokens[1:].sum()))
            self._toc_total = memo
        return memo[1]

    def id_of(self, row: int) -> str:
        """The node id of ``row`` (its row, or in a segmented index the physical row it was written at)."""
        if self.id_rows is None:
            return node_id_of(row)
        return node_id_of(int(self.id_rows.to_phys(np.array([row]))[0]))

    def row_of_id(self, node_id: Any) -> int | None:
        """The row of the node ``node_id`` names, or None when it names no node of this table."""
        if self.id_rows is None:
            return row_of(node_id, len(self))
        phys = row_of(node_id, 1 << 62)
        if phys is None:
            return None
        row = int(self.id_rows.to_log(np.array([phys]))[0])
        return row if row >= 0 else None

    def _children_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(child_ptr, child_rows), built on first use: only a walk of the tree (an update, the engine's
        copy) asks for children by row; a question does not, and at 5.3M rows the sort costs ~0.4 s and 84 MB."""
        if self._child_ptr is None or self._child_rows is None:
            n = len(self.parent)
            counts = np.bincount(self.parent[1:], minlength=n) if n > 1 else np.zeros(n, dtype=np.int64)
            self._child_rows = np.argsort(self.parent[1:], kind="stable").astype(np.int64) + 1
            self._child_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return self._child_ptr, self._child_rows

    @property
    def child_ptr(self) -> np.ndarray:
        """Row r's children are ``child_rows[child_ptr[r]:child_ptr[r+1]]``."""
        return self._children_index()[0]

    @property
    def child_rows(self) -> np.ndarray:
        return self._children_index()[1]

    def is_leaf_row(self, row: int) -> bool:
        """Whether node ``row`` has no children (the root only in an empty tree)."""
        return len(self) == 1 if row == 0 else bool(self.leaf_of_row[row] >= 0)

    def check(self, name: str) -> None:
        """Structure, checked with numpy at load: a tree, shallow enough, documents contiguous."""
        n, parent, kind, doc = len(self), self.parent, self.kind, self.doc
        if n == 0 or parent[0] != -1 or kind[0] != 0 or doc[0] != -1:
            raise IndexFormatError(f"{name}: row 0 must be the root")
        if n == 1:
            self.depth = depths(parent)
            return
        # whole-column minima, maxima and one gather: ~5 passes over 5.3M rows at 100,000 documents
        up, kinds, docs = parent[1:], kind[1:], doc[1:]
        if int(up.min()) < 0 or bool(np.any(up >= np.arange(1, n, dtype=up.dtype))):
            raise IndexFormatError(f"{name}: every node's parent must come before it")
        if int(kinds.min()) < 1 or int(kinds.max()) >= len(KINDS):
            raise IndexFormatError(f"{name}: unknown node kind")
        if int(docs.min()) < 0 or int(docs.max()) >= len(self.doc_paths):
            raise IndexFormatError(f"{name}: a node names a document metadata.json does not list")
        if bool(np.any((doc[up] != docs) & (up > 0))):
            raise IndexFormatError(f"{name}: a node belongs to another document than its parent")
        try:
            self.depth = depths(parent)
        except ValueError as exc:
            raise IndexFormatError(f"{name}: {exc}") from None
        if len(self.leaf_rows) > 1 and np.any(np.diff(doc[self.leaf_rows]) < 0):
            raise IndexFormatError(f"{name}: the leaves of a document are not contiguous")

    def prefetch(self, rows: Iterable[int]) -> None:
        """Read the records of ``rows`` not yet kept in one batch, when the store reads in batches
        (an engine: one statement instead of one per node); files: their lines requested from the
        disk together (``Records.will_need``), read when used."""
        many = getattr(self.records, "raw_many", None)
        ahead = getattr(self.records, "will_need", None)
        if many is None and ahead is None:
            return
        want = [int(r) for r in rows if 0 <= int(r) < len(self) and int(r) not in self._cache]
        if want and many is None:  # files: the lines requested from the disk together, read when used
            ahead(want)
            texts = getattr(self.contents, "will_need", None)
            if texts is not None:  # and their section texts, which a question reads for the leaves it keeps
                texts([r for r in want if r not in self._texts])
        elif want:
            for row, raw in many(want).items():
                self.node(row, raw)

    def node(self, row: int, raw: Any = None) -> "StoredNode":
        """``raw``: the row's record when already read (``prefetch``)."""
        hit = self._cache.get(row)
        if hit is None:
            hit = self._cache[row] = StoredNode(self, row, **self.fields(row, raw))
        return hit

    def fields(self, row: int, raw: Any = None) -> dict[str, Any]:
        """One node's checked record, not kept (a walk over many nodes, e.g. an update's, holds none).
        ``raw``: the row's record when already read."""
        where = self.records.where(row)
        fields = typed_fields(self.records.raw(row) if raw is None else raw, _TYPES, where)
        check_spans(fields, NODE_INTS, where)
        if fields["node_id"] != self.id_of(row):
            raise IndexFormatError(f"{where}: node id {fields['node_id']!r} is not its row ({self.id_of(row)})")
        if fields["kind"] != KINDS[self.kind[row]]:
            raise IndexFormatError(f"{where}: kind {fields['kind']!r} differs from the node table's")
        if row and fields["doc_path"] != self.doc_paths[self.doc[row]]:
            raise IndexFormatError(f"{where}: document {fields['doc_path']!r} differs from the node table's")
        return fields

    def document_rows(self, number: int) -> np.ndarray:
        """Pre-order rows of document ``number``'s nodes (the order built once, on first use)."""
        if self._doc_order is None:
            self._doc_order = np.argsort(self.doc, kind="stable")
            self._doc_bounds = np.searchsorted(self.doc[self._doc_order], np.arange(len(self.doc_paths) + 1))
        lo, hi = self._doc_bounds[number], self._doc_bounds[number + 1]
        return self._doc_order[lo:hi]

    def children(self, row: int) -> list[int]:
        return self.child_rows[self.child_ptr[row]:self.child_ptr[row + 1]].tolist()

    def prefetch_contents(self, rows: Iterable[int]) -> None:
        """The section texts of ``rows`` not yet kept, read in one batch when the store reads in
        batches (an engine: one statement instead of one per text; a whole-collection question read
        ~29 texts one by one, 18 of them for the paragraph order of its pool, which reads every pool
        hit's leaf). Kept as ``content`` keeps them; elsewhere nothing is done here."""
        many = getattr(self.contents, "raw_many", None)
        if many is None:
            return
        want = sorted({int(r) for r in rows if 0 <= int(r) < len(self) and int(r) not in self._texts})
        if not want:
            return
        for row, text in many(want).items():
            if not isinstance(text, str):
                raise IndexFormatError(f"{self.contents.where(row)}: not a JSON string")
            self._keep_text(row, text)

    def _keep_text(self, row: int, text: str) -> None:
        with self._texts_lock:
            if self._text_chars + len(text) > CONTENT_CACHE_CHARS:
                self._texts.clear()
                self._text_chars = 0
            if len(text) <= CONTENT_CACHE_CHARS and row not in self._texts:
                self._texts[row] = text
                self._text_chars += len(text)

    def content(self, row: int) -> str:
        """A node's section text, kept once read: a question reads the same few leaves' texts tens of
        times (passages, quotes, line numbers), and on an engine each read is a SQL round trip. At
        most CONTENT_CACHE_CHARS characters are kept; the cache is dropped when full."""
        text = self._texts.get(row)
        if text is not None:
            return text
        text = self.contents.raw(row)
        if not isinstance(text, str):
            raise IndexFormatError(f"{self.contents.where(row)}: not a JSON string")
        self._keep_text(row, text)
        return text


def doc_rows(tree: NodeTable, leaf_ptr: np.ndarray) -> dict[str, tuple[int, int]]:
    """Document path -> its contiguous chunk rows (documents with chunks only)."""
    docs = tree.doc[tree.leaf_rows]
    if not len(docs):
        return {}
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
    ends = np.r_[starts[1:], len(docs)]
    first, end = leaf_ptr[starts], leaf_ptr[ends]
    keep = end > first
    paths = tree.doc_paths
    return {paths[d]: (s, e) for d, s, e in zip(docs[starts][keep].tolist(), first[keep].tolist(), end[keep].tolist())}


class StoredNode(TreeNode):
    """A node of a loaded index: parent, children and content resolve from the table when read."""

    def __init__(self, table: NodeTable, row: int, **fields: Any) -> None:
        self._table = table
        self._row = row
        super().__init__(content=_ON_DISK, parent=_ON_DISK, children=_ON_DISK, **fields)

    @property  # type: ignore[override]
    def content(self) -> str:
        own = self.__dict__["_content"]
        return self._table.content(self._row) if own is _ON_DISK else own

    @content.setter
    def content(self, value: str) -> None:
        self.__dict__["_content"] = value

    @property  # type: ignore[override]
    def parent(self) -> TreeNode | None:
        own = self.__dict__["_parent"]
        if own is _ON_DISK:
            p = int(self._table.parent[self._row])
            own = self.__dict__["_parent"] = None if p < 0 else self._table.node(p)
        return own

    @parent.setter
    def parent(self, value: TreeNode | None) -> None:
        self.__dict__["_parent"] = value

    @property  # type: ignore[override]
    def children(self) -> list[TreeNode]:
        own = self.__dict__["_children"]
        if own is _ON_DISK:
            own = self.__dict__["_children"] = [self._table.node(r) for r in self._table.children(self._row)]
        return own

    @children.setter
    def children(self, value: list[TreeNode]) -> None:
        self.__dict__["_children"] = value

    @property
    def is_leaf(self) -> bool:
        own = self.__dict__["_children"]
        if own is _ON_DISK:
            return self._table.is_leaf_row(self._row)
        return len(own) == 0


def first_children(node: TreeNode, n: int) -> tuple[list[TreeNode], int]:
    """The first ``n`` children of ``node`` and how many it has. A loaded index's node reads only
    those ``n`` from its table (a document of 100,000 top-level sections would otherwise read them
    all to show a few)."""
    if isinstance(node, StoredNode) and node.__dict__["_children"] is _ON_DISK:
        rows = node._table.children(node._row)
        return [node._table.node(r) for r in rows[:max(0, n)]], len(rows)
    return node.children[:max(0, n)], len(node.children)


class NodeMap(Mapping[str, TreeNode]):
    """node_id -> node, built on access."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table

    def __getitem__(self, node_id: str) -> TreeNode:
        row = self.table.row_of_id(node_id)
        if row is None:
            raise KeyError(node_id)
        return self.table.node(row)

    def __iter__(self) -> Iterator[str]:
        return (self.table.id_of(r) for r in range(len(self.table)))

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, node_id: object) -> bool:
        return self.table.row_of_id(node_id) is not None


class LeafList(Sequence[TreeNode]):
    """Leaves in pre-order (a subset when ``positions`` is given), built on access."""

    def __init__(self, table: NodeTable, positions: np.ndarray | None = None) -> None:
        self.table = table
        self.positions = np.arange(len(table.leaf_rows)) if positions is None else positions
        """Leaf numbers (rows of leaf_embeddings) of the listed leaves."""

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> TreeNode: ...

    @overload
    def __getitem__(self, i: slice) -> list[TreeNode]: ...

    def __getitem__(self, i: int | slice) -> TreeNode | list[TreeNode]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self.table.node(int(self.table.leaf_rows[self.positions[i]]))


class LeafRows(Mapping[str, tuple[int, int]]):
    """leaf node_id -> its chunk rows [start, end); only leaves with chunks are keys."""

    def __init__(self, table: NodeTable, leaf_ptr: np.ndarray) -> None:
        self.table = table
        self.ptr = leaf_ptr
        self._with_rows = np.flatnonzero(np.diff(leaf_ptr) > 0)

    def __getitem__(self, node_id: str) -> tuple[int, int]:
        row = self.table.row_of_id(node_id)
        leaf = -1 if row is None else int(self.table.leaf_of_row[row])
        if leaf < 0 or self.ptr[leaf + 1] == self.ptr[leaf]:
            raise KeyError(node_id)
        return int(self.ptr[leaf]), int(self.ptr[leaf + 1])

    def __iter__(self) -> Iterator[str]:
        return (self.table.id_of(int(self.table.leaf_rows[i])) for i in self._with_rows)

    def __len__(self) -> int:
        return len(self._with_rows)
