"""The on-disk index: plain JSON, JSONL and .npy — never pickle.

An index may come from someone else, so loading trusts nothing: every file is
parsed with a data-only parser (json, ``np.load(allow_pickle=False)``), and
counts, shapes and dtypes are checked against ``metadata.json`` before use.
Any inconsistency is one line naming the broken file.

Every file is read through one opened directory and checked against the
manifest in ``metadata.json`` (size, sha256, build id), so a query running
while the index is rebuilt sees exactly one version (see index_files.py).
"""
from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.chunker import Chunk
from tree_builder.tree import TreeNode
from indexing.index_files import (METADATA_MAX_BYTES, IndexChanged, IndexDir, IndexFileMissing, fsync_directory,
                                  loads_strict, parse_manifest, write_manifest_entry)
from utils.atomic import recover_directory
from utils.errors import IndexFormatError

FORMAT_NAME = "treerag-index"
FORMAT_VERSION = 2
"""2: metadata.json carries build_id and a manifest (size + sha256 of every other file)."""
MAX_TREE_DEPTH = 64
"""Far deeper than any document tree (root > documents > six heading levels); bounds recursion."""
LOAD_ATTEMPTS = 5
"""A load that raced a rebuild's swap starts over on the new version at most this often."""

METADATA = "metadata.json"
TREE = "tree.json"
CHUNKS = "chunks.jsonl"
EMBEDDINGS = "embeddings.npy"
LEAF_EMBEDDINGS = "leaf_embeddings.npy"

_NODE_FIELDS = (
    "node_id", "heading", "level", "content", "summary", "heading_path", "doc_path", "kind",
    "start_line", "end_line", "start_char", "end_char", "content_start", "content_end",
    "page_start", "page_end",
)
_CHUNK_FIELDS = (
    "chunk_id", "source_node_id", "heading_path", "doc_path",
    "start_char", "end_char", "start_line", "end_line", "text", "page_start", "page_end",
)
_PAGE_FIELDS = frozenset({"page_start", "page_end"})
"""1-based pages of PDF text (0 for formats without pages); every format-2 index has them."""


@dataclass
class Index:
    """A loaded index. Chunk rows of one leaf (and of one document) are contiguous."""

    path: Path
    metadata: dict[str, Any]
    root: TreeNode
    chunks: list[Chunk]
    embeddings: np.ndarray
    leaf_embeddings: np.ndarray
    bm25: BM25Index
    nodes: dict[str, TreeNode] = field(default_factory=dict)
    leaves: list[TreeNode] = field(default_factory=list)
    leaf_rows: dict[str, tuple[int, int]] = field(default_factory=dict)
    doc_rows: dict[str, tuple[int, int]] = field(default_factory=dict)
    derived: dict[str, Any] = field(default_factory=dict, repr=False)
    """Per-index memo of values derived from it (e.g. tokenised headings); lives as long as the index."""

    def __post_init__(self) -> None:
        self.nodes = {n.node_id: n for n in self.root.iter_preorder()}
        self.leaves = self.root.leaves()
        self.leaf_rows = _contiguous_ranges([c.source_node_id for c in self.chunks], "source_node_id")
        self.doc_rows = _contiguous_ranges([c.doc_path for c in self.chunks], "doc_path")

    @property
    def embedder_identity(self) -> dict[str, Any]:
        return dict(self.metadata["embedder"])

    def get_node(self, node_id: str) -> TreeNode | None:
        return self.nodes.get(node_id)

    def leaf_index(self, node_id: str) -> int:
        """Row of a leaf in ``leaf_embeddings`` (leaves are stored in pre-order)."""
        pos = self.derived.get("leaf_pos")
        if pos is None:
            pos = self.derived["leaf_pos"] = {n.node_id: i for i, n in enumerate(self.leaves)}
        return pos[node_id]


def _contiguous_ranges(keys: list[str], what: str) -> dict[str, tuple[int, int]]:
    ranges: dict[str, tuple[int, int]] = {}
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            key = keys[start]
            if key in ranges:
                raise IndexFormatError(f"{CHUNKS}: chunks of {what} {key!r} are not contiguous")
            ranges[key] = (start, i)
            start = i
    return ranges


# --------------------------------------------------------------------------- write

def node_to_dict(node: TreeNode) -> dict[str, Any]:
    d = {f: getattr(node, f) for f in _NODE_FIELDS}
    d["children"] = [node_to_dict(c) for c in node.children]
    return d


def chunk_to_dict(chunk: Chunk) -> dict[str, Any]:
    return {f: getattr(chunk, f) for f in _CHUNK_FIELDS}


def write_index_files(
    directory: Path,
    metadata: dict[str, Any],
    root: TreeNode,
    chunks: list[Chunk],
    embeddings: np.ndarray,
    leaf_embeddings: np.ndarray,
    bm25: BM25Index,
) -> None:
    """Write every file into ``directory`` (a fresh temporary one: the caller swaps it in).

    Each file is forced to disk and listed in metadata.json's manifest, so the
    swap never exposes a file that a crash could still empty, and a reader can
    tell every file of this build from any other.
    """
    directory = Path(directory)
    with open(directory / TREE, "w", encoding="utf-8") as fh:
        json.dump(node_to_dict(root), fh, ensure_ascii=False, allow_nan=False)
    with open(directory / CHUNKS, "w", encoding="utf-8") as fh:
        for c in chunks:
            fh.write(json.dumps(chunk_to_dict(c), ensure_ascii=False, allow_nan=False))
            fh.write("\n")
    np.save(directory / EMBEDDINGS, np.ascontiguousarray(embeddings, dtype=np.float32), allow_pickle=False)
    np.save(directory / LEAF_EMBEDDINGS, np.ascontiguousarray(leaf_embeddings, dtype=np.float32), allow_pickle=False)
    bm25.save(directory)
    meta = dict(metadata)
    meta["format"] = FORMAT_NAME
    meta["format_version"] = FORMAT_VERSION
    meta["build_id"] = uuid.uuid4().hex
    meta["files"] = {name: write_manifest_entry(directory, name)
                     for name in sorted(os.listdir(directory)) if name != METADATA}
    # metadata.json last: a directory without it is never mistaken for an index
    with open(directory / METADATA, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, ensure_ascii=False, indent=2, allow_nan=False)
        fh.flush()
        os.fsync(fh.fileno())
    fsync_directory(directory)


# --------------------------------------------------------------------------- read

def _require(obj: dict, key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], typ):
        raise IndexFormatError(f"{where}: field {key!r} missing or of the wrong type")
    if typ is int and isinstance(obj[key], bool):
        raise IndexFormatError(f"{where}: field {key!r} must be an integer, not {obj[key]!r}")
    return obj[key]


_NODE_INTS = ("level", "start_line", "end_line", "start_char", "end_char", "content_start", "content_end")
_CHUNK_INTS = ("start_char", "end_char", "start_line", "end_line")


def _check_spans(d: dict[str, Any], where: str) -> None:
    for f in d:
        if d[f] < 0:
            raise IndexFormatError(f"{where}: {f} is negative ({d[f]})")
    for a, b in (("start_char", "end_char"), ("start_line", "end_line"), ("content_start", "content_end")):
        if a in d and b in d and d[b] < d[a]:
            raise IndexFormatError(f"{where}: {b} ({d[b]}) is before {a} ({d[a]})")


def _node_from_dict(d: Any, parent: TreeNode | None, depth: int = 0) -> TreeNode:
    if not isinstance(d, dict):
        raise IndexFormatError(f"{TREE}: a node is not an object")
    if depth > MAX_TREE_DEPTH:
        raise IndexFormatError(f"{TREE}: tree is nested deeper than {MAX_TREE_DEPTH} levels")
    kwargs: dict[str, Any] = {}
    for f in _NODE_FIELDS:
        kwargs[f] = _require(d, f, int if f in _NODE_INTS or f in _PAGE_FIELDS else str, TREE)
    _check_spans({f: kwargs[f] for f in _NODE_INTS}, f"{TREE} node {kwargs['node_id']!r}")
    node = TreeNode(parent=parent, **kwargs)
    children = _require(d, "children", list, TREE)
    node.children = [_node_from_dict(c, node, depth + 1) for c in children]
    return node


def _load_tree(files: IndexDir) -> TreeNode:
    data = files.read_json(TREE)
    try:
        root = _node_from_dict(data, None)
    except RecursionError:
        raise IndexFormatError(f"{TREE}: tree is nested too deeply") from None
    seen: set[str] = set()
    for n in root.iter_preorder():
        if n.node_id in seen:
            raise IndexFormatError(f"{TREE}: node id {n.node_id!r} occurs twice")
        seen.add(n.node_id)
    return root


def _load_chunks(files: IndexDir) -> list[Chunk]:
    data = files.read_bytes(CHUNKS)
    lines = [(n, line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]
    try:  # one decode of all lines (fast); a failure is located line by line below
        rows = loads_strict(b"[" + b",".join(line for _, line in lines) + b"]", CHUNKS)
        if not isinstance(rows, list) or len(rows) != len(lines):
            raise IndexFormatError(f"{CHUNKS}: a line holds more than one JSON value")
    except IndexFormatError:
        rows = [loads_strict(line, f"{CHUNKS} line {n}") for n, line in lines]
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for (lineno, _), d in zip(lines, rows):
        kw = {}
        where = f"{CHUNKS} line {lineno}"
        for f in _CHUNK_FIELDS:
            kw[f] = _require(d, f, int if f in _CHUNK_INTS or f in _PAGE_FIELDS else str, where)
        _check_spans({f: kw[f] for f in _CHUNK_INTS}, where)
        if kw["chunk_id"] in seen:
            raise IndexFormatError(f"{where}: chunk id {kw['chunk_id']!r} occurs twice")
        seen.add(kw["chunk_id"])
        chunks.append(Chunk(**kw))
    return chunks


def _require_finite(arr: np.ndarray, name: str) -> None:
    """NaN or Inf in a vector silently reorders rankings and turns scores into NaN."""
    if arr.size and not math.isfinite(float(np.sum(arr, dtype=np.float64))):
        raise IndexFormatError(f"{name} holds NaN or infinite values; rebuild the index")


def load_array(path: Path, mmap: bool = True) -> np.ndarray:
    """One .npy file on its own (regular file, plain numbers), e.g. for tools and tests."""
    path = Path(path)
    with IndexDir(path.parent) as files:
        return files.read_array(path.name, mmap)


def _check_metadata(meta: Any, path: Path) -> dict[str, Any]:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise IndexFormatError(f"{METADATA} at {path} is not a TreeRAG index")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{METADATA}: index format version {version!r} is not supported (this TreeRAG reads "
            f"version {FORMAT_VERSION}); rebuild the index")
    _require(meta, "build_id", str, METADATA)
    counts = _require(meta, "counts", dict, METADATA)
    for key in ("documents", "nodes", "leaves", "chunks"):
        if _require(counts, key, int, f"{METADATA} counts") < 0:
            raise IndexFormatError(f"{METADATA} counts: {key} is negative")
    emb = _require(meta, "embedder", dict, METADATA)
    _require(emb, "name", str, f"{METADATA} embedder")
    _require(emb, "model_id", str, f"{METADATA} embedder")
    if _require(emb, "dim", int, f"{METADATA} embedder") <= 0:
        raise IndexFormatError(f"{METADATA} embedder: dim must be positive")
    parse_manifest(meta.get("files"), METADATA)
    return meta


def _open_index_dir(path: Path) -> IndexDir:
    recover_directory(path)
    try:
        return IndexDir(path)
    except IndexFileMissing:
        raise IndexFormatError(
            f"no index at {path} (build one with: python main.py index --input DOCS --output {path})") from None


def read_metadata(path: Path) -> dict[str, Any]:
    path = Path(path)
    with _open_index_dir(path) as files:
        return _check_metadata(files.read_json(METADATA, METADATA_MAX_BYTES), path)


def load_index(path: Path, mmap: bool = True) -> Index:
    """Load one consistent version of the index at ``path``.

    A rebuild that swaps the directory while this runs makes a file vanish or
    mismatch the manifest; then the load starts over on the new directory.
    """
    path = Path(path)
    for attempt in range(LOAD_ATTEMPTS):
        files = _open_index_dir(path)
        try:
            return _load_from(files, path, mmap)
        except (IndexFileMissing, IndexChanged):
            if attempt + 1 < LOAD_ATTEMPTS and files.replaced():
                continue
            raise
        finally:
            files.close()
    raise AssertionError("unreachable")


def _load_from(files: IndexDir, path: Path, mmap: bool) -> Index:
    meta = _check_metadata(files.read_json(METADATA, METADATA_MAX_BYTES), path)
    files.hold_all(parse_manifest(meta["files"], METADATA))
    counts = meta["counts"]
    dim = meta["embedder"]["dim"]
    root = _load_tree(files)
    n_nodes = sum(1 for n in root.iter_preorder() if n.kind != "root")
    if n_nodes != counts["nodes"]:
        raise IndexFormatError(f"{TREE} has {n_nodes} nodes but {METADATA} says {counts['nodes']}")
    n_leaves = len(root.leaves())
    if n_leaves != counts["leaves"]:
        raise IndexFormatError(f"{TREE} has {n_leaves} leaves but {METADATA} says {counts['leaves']}")
    chunks = _load_chunks(files)
    if len(chunks) != counts["chunks"]:
        raise IndexFormatError(f"{CHUNKS} has {len(chunks)} chunks but {METADATA} says {counts['chunks']}")
    emb = files.read_array(EMBEDDINGS, mmap)
    if emb.dtype != np.float32 or emb.shape != (len(chunks), dim):
        raise IndexFormatError(
            f"{EMBEDDINGS} has shape {emb.shape} {emb.dtype}, expected ({len(chunks)}, {dim}) float32")
    _require_finite(emb, EMBEDDINGS)
    leaf_emb = files.read_array(LEAF_EMBEDDINGS, mmap)
    if leaf_emb.dtype != np.float32 or leaf_emb.shape != (n_leaves, dim):
        raise IndexFormatError(
            f"{LEAF_EMBEDDINGS} has shape {leaf_emb.shape} {leaf_emb.dtype}, expected ({n_leaves}, {dim}) float32")
    _require_finite(leaf_emb, LEAF_EMBEDDINGS)
    bm25 = BM25Index.load(path, mmap=mmap, files=files)
    if bm25.n_rows != len(chunks):
        raise IndexFormatError(f"BM25 data covers {bm25.n_rows} chunks but {CHUNKS} has {len(chunks)}")
    index = Index(path=path, metadata=meta, root=root, chunks=chunks, embeddings=emb,
                  leaf_embeddings=leaf_emb, bm25=bm25)
    known = set(index.nodes)
    for c in chunks:
        if c.source_node_id not in known or not index.nodes[c.source_node_id].is_leaf:
            raise IndexFormatError(f"{CHUNKS}: chunk {c.chunk_id} points at unknown leaf {c.source_node_id}")
    return index
