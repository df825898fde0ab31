"""The on-disk index: plain JSON, JSONL and .npy — never pickle.

An index may come from someone else, so loading trusts nothing: every file is
parsed with a data-only parser (json, ``np.load(allow_pickle=False)``), and
counts, shapes and dtypes are checked against ``metadata.json`` before use.
Any inconsistency is one line naming the broken file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.chunker import Chunk
from tree_builder.tree import TreeNode
from utils.atomic import recover_directory
from utils.errors import IndexFormatError

FORMAT_NAME = "treerag-index"
FORMAT_VERSION = 1

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
_OPTIONAL_INT_FIELDS = frozenset({"page_start", "page_end"})
"""Added for paged sources (PDF); an index written before them reads them as 0 (no pages)."""


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
    """Write every file into ``directory`` (a fresh temporary one: the caller swaps it in)."""
    directory = Path(directory)
    with open(directory / TREE, "w", encoding="utf-8") as fh:
        json.dump(node_to_dict(root), fh, ensure_ascii=False)
    with open(directory / CHUNKS, "w", encoding="utf-8") as fh:
        for c in chunks:
            fh.write(json.dumps(chunk_to_dict(c), ensure_ascii=False))
            fh.write("\n")
    np.save(directory / EMBEDDINGS, np.ascontiguousarray(embeddings, dtype=np.float32), allow_pickle=False)
    np.save(directory / LEAF_EMBEDDINGS, np.ascontiguousarray(leaf_embeddings, dtype=np.float32), allow_pickle=False)
    bm25.save(directory)
    meta = dict(metadata)
    meta["format"] = FORMAT_NAME
    meta["format_version"] = FORMAT_VERSION
    # metadata.json last: a directory without it is never mistaken for an index
    with open(directory / METADATA, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, ensure_ascii=False, indent=2)


# --------------------------------------------------------------------------- read

def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise IndexFormatError(f"{path.name} is missing from the index at {path.parent}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexFormatError(f"{path.name} is corrupt ({exc.__class__.__name__}: {exc})") from None


def _require(obj: dict, key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], typ):
        raise IndexFormatError(f"{where}: field {key!r} missing or of the wrong type")
    return obj[key]


def _node_from_dict(d: Any, parent: TreeNode | None) -> TreeNode:
    if not isinstance(d, dict):
        raise IndexFormatError(f"{TREE}: a node is not an object")
    kwargs: dict[str, Any] = {}
    for f in _NODE_FIELDS:
        if f in _OPTIONAL_INT_FIELDS and f not in d:
            continue
        typ = int if f in ("level", "start_line", "end_line", "start_char", "end_char",
                           "content_start", "content_end") or f in _OPTIONAL_INT_FIELDS else str
        kwargs[f] = _require(d, f, typ, TREE)
    node = TreeNode(parent=parent, **kwargs)
    children = _require(d, "children", list, TREE)
    node.children = [_node_from_dict(c, node) for c in children]
    return node


def _load_tree(path: Path) -> TreeNode:
    data = _read_json(path)
    try:
        return _node_from_dict(data, None)
    except RecursionError:
        raise IndexFormatError(f"{TREE}: tree is nested too deeply") from None


def _load_chunks(path: Path) -> list[Chunk]:
    chunks: list[Chunk] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    raise IndexFormatError(f"{CHUNKS} line {lineno} is not valid JSON") from None
                kw = {}
                for f in _CHUNK_FIELDS:
                    if f in _OPTIONAL_INT_FIELDS and f not in d:
                        continue
                    typ = int if f in ("start_char", "end_char", "start_line", "end_line") \
                        or f in _OPTIONAL_INT_FIELDS else str
                    kw[f] = _require(d, f, typ, f"{CHUNKS} line {lineno}")
                chunks.append(Chunk(**kw))
    except FileNotFoundError:
        raise IndexFormatError(f"{CHUNKS} is missing from the index at {path.parent}") from None
    except UnicodeDecodeError:
        raise IndexFormatError(f"{CHUNKS} is not UTF-8") from None
    return chunks


def load_array(path: Path, mmap: bool = True) -> np.ndarray:
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except FileNotFoundError:
        raise IndexFormatError(f"{path.name} is missing from the index at {path.parent}") from None
    except (ValueError, OSError, EOFError) as exc:
        raise IndexFormatError(f"{path.name} is corrupt or not a plain .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise IndexFormatError(f"{path.name} is not a plain .npy array")
    return arr


def read_metadata(path: Path) -> dict[str, Any]:
    path = Path(path)
    recover_directory(path)
    if not path.exists():
        raise IndexFormatError(f"no index at {path} (build one with: python main.py index --input DOCS --output {path})")
    if not path.is_dir():
        raise IndexFormatError(f"{path} is not an index directory")
    meta = _read_json(path / METADATA)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise IndexFormatError(f"{METADATA} at {path} is not a TreeRAG index")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{METADATA}: index format version {version!r} is not supported (this TreeRAG reads "
            f"version {FORMAT_VERSION}); rebuild the index")
    counts = _require(meta, "counts", dict, METADATA)
    for key in ("documents", "nodes", "leaves", "chunks"):
        _require(counts, key, int, f"{METADATA} counts")
    emb = _require(meta, "embedder", dict, METADATA)
    _require(emb, "name", str, f"{METADATA} embedder")
    _require(emb, "model_id", str, f"{METADATA} embedder")
    _require(emb, "dim", int, f"{METADATA} embedder")
    return meta


def load_index(path: Path, mmap: bool = True) -> Index:
    path = Path(path)
    meta = read_metadata(path)
    counts = meta["counts"]
    dim = meta["embedder"]["dim"]
    root = _load_tree(path / TREE)
    n_nodes = sum(1 for n in root.iter_preorder() if n.kind != "root")
    if n_nodes != counts["nodes"]:
        raise IndexFormatError(f"{TREE} has {n_nodes} nodes but {METADATA} says {counts['nodes']}")
    n_leaves = len(root.leaves())
    if n_leaves != counts["leaves"]:
        raise IndexFormatError(f"{TREE} has {n_leaves} leaves but {METADATA} says {counts['leaves']}")
    chunks = _load_chunks(path / CHUNKS)
    if len(chunks) != counts["chunks"]:
        raise IndexFormatError(f"{CHUNKS} has {len(chunks)} chunks but {METADATA} says {counts['chunks']}")
    emb = load_array(path / EMBEDDINGS, mmap)
    if emb.dtype != np.float32 or emb.shape != (len(chunks), dim):
        raise IndexFormatError(
            f"{EMBEDDINGS} has shape {emb.shape} {emb.dtype}, expected ({len(chunks)}, {dim}) float32")
    leaf_emb = load_array(path / LEAF_EMBEDDINGS, mmap)
    if leaf_emb.dtype != np.float32 or leaf_emb.shape != (n_leaves, dim):
        raise IndexFormatError(
            f"{LEAF_EMBEDDINGS} has shape {leaf_emb.shape} {leaf_emb.dtype}, expected ({n_leaves}, {dim}) float32")
    bm25 = BM25Index.load(path, mmap=mmap)
    if bm25.n_rows != len(chunks):
        raise IndexFormatError(f"BM25 data covers {bm25.n_rows} chunks but {CHUNKS} has {len(chunks)}")
    index = Index(path=path, metadata=meta, root=root, chunks=chunks, embeddings=emb,
                  leaf_embeddings=leaf_emb, bm25=bm25)
    known = set(index.nodes)
    for c in chunks:
        if c.source_node_id not in known or not index.nodes[c.source_node_id].is_leaf:
            raise IndexFormatError(f"{CHUNKS}: chunk {c.chunk_id} points at unknown leaf {c.source_node_id}")
    return index
