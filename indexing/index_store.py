"""The on-disk index: plain JSON, JSONL and .npy — never pickle.

An index may come from someone else, so loading trusts nothing: every file is
parsed with a data-only parser (json, ``np.load(allow_pickle=False)``), and
counts, shapes and dtypes are checked against ``metadata.json`` before use.
Any inconsistency is one line naming the broken file.

Every file is read through one opened directory and checked against the
manifest in ``metadata.json`` (size, sampled digest, build id), so a query
running while the index is rebuilt sees exactly one version (see index_files.py).

Why loading reads so little (format 3): at 10,000 documents the chunk records
and section texts are gigabytes. They stay on disk as JSON lines with a byte
offset per line (``chunk_offsets.npy``, ``node_content_offsets.npy``), memory-
mapped; a record is parsed and validated when it is read, so a query pays for
the chunks it returns, not for the corpus. Vectors and BM25 postings are
memory-mapped .npy arrays. ``load_index`` checks every count, shape, offset
table and the tree; ``verify_index`` also reads every record and every vector
(``python main.py verify``).
"""
from __future__ import annotations

import json
import math
import os
import uuid
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence, overload

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from indexing.leaf_terms import build_leaf_terms
from indexing.chunker import Chunk
from tree_builder.tree import TreeNode
from indexing.index_files import (METADATA_MAX_BYTES, IndexChanged, IndexDir, IndexFileMissing, fsync_directory,
                                  loads_strict, parse_manifest, write_manifest_entry)
from utils.atomic import recover_directory
from utils.errors import BackendError, IndexFormatError

if TYPE_CHECKING:
    import mmap

FORMAT_NAME = "treerag-index"
FORMAT_VERSION = 3
"""2: metadata.json carries build_id and a manifest (size + sha256 of every other file).
3: chunk records and node contents read lazily through byte-offset tables; leaf -> chunk rows stored;
   the manifest adds a sampled digest; metadata records the build settings (incremental updates)."""
MAX_TREE_DEPTH = 64
"""Far deeper than any document tree (root > documents > six heading levels); bounds recursion."""
LOAD_ATTEMPTS = 5
"""A load that raced a rebuild's swap starts over on the new version at most this often."""

METADATA = "metadata.json"
TREE = "tree.json"
CHUNKS = "chunks.jsonl"
EMBEDDINGS = "embeddings.npy"
LEAF_EMBEDDINGS = "leaf_embeddings.npy"
CHUNK_OFFSETS = "chunk_offsets.npy"
LEAF_CHUNKS = "leaf_chunks.npy"
NODE_CONTENTS = "node_contents.jsonl"
NODE_CONTENT_OFFSETS = "node_content_offsets.npy"
FILES = (METADATA, TREE, CHUNKS, CHUNK_OFFSETS, LEAF_CHUNKS, NODE_CONTENTS, NODE_CONTENT_OFFSETS,
         EMBEDDINGS, LEAF_EMBEDDINGS)
"""Every file of an index but BM25's (bm25_builder.FILES)."""
RECORD_CACHE = 4096
"""Parsed chunk records kept per index (a query reads tens; the cache is dropped when full)."""

_NODE_FIELDS = (
    "node_id", "heading", "level", "summary", "heading_path", "doc_path", "kind",
    "start_line", "end_line", "start_char", "end_char", "content_start", "content_end",
    "page_start", "page_end",
)
_CHUNK_FIELDS = (
    "chunk_id", "source_node_id", "heading_path", "doc_path",
    "start_char", "end_char", "start_line", "end_line", "text", "page_start", "page_end",
)
_PAGE_FIELDS = frozenset({"page_start", "page_end"})
"""1-based pages of PDF text (0 for formats without pages); every format-2 index has them."""


class Records:
    """JSON lines in a memory-mapped file, read one at a time through a byte-offset table."""

    def __init__(self, data: "mmap.mmap | bytes", offsets: np.ndarray, name: str) -> None:
        self.data = data
        self.offsets = offsets
        self.name = name

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, i: int) -> Any:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return loads_strict(self.data[a:b], f"{self.name} line {i + 1}")


def check_offsets(offsets: np.ndarray, count: int, size: int, name: str, table: str) -> None:
    """An offset table must start at 0, never go back, end at the file's size and have count+1 rows."""
    if offsets.dtype != np.int64 or offsets.shape != (count + 1,):
        raise IndexFormatError(f"{table} has shape {offsets.shape} {offsets.dtype}, expected ({count + 1},) int64")
    if offsets[0] != 0 or offsets[-1] != size or (count and bool(np.any(np.diff(offsets) < 0))):
        raise IndexFormatError(f"{table} does not describe the lines of {name}")


class StoredNode(TreeNode):
    """A node loaded from an index: its content stays on disk until something reads it."""

    def __init__(self, contents: Records, position: int, **fields: Any) -> None:
        self._contents = contents
        self._position = position
        super().__init__(content=_ON_DISK, **fields)

    @property  # type: ignore[override]
    def content(self) -> str:
        own = self.__dict__.get("_content")
        if own is not _ON_DISK:
            return own
        text = self._contents.raw(self._position)
        if not isinstance(text, str):
            raise IndexFormatError(f"{self._contents.name} line {self._position + 1}: not a JSON string")
        return text

    @content.setter
    def content(self, value: str) -> None:
        self.__dict__["_content"] = value


_ON_DISK: Any = object()


class ChunkTable(Sequence[Chunk]):
    """Chunk records of an index, parsed and validated when read (row = position in chunks.jsonl)."""

    def __init__(self, records: Records, leaf_ptr: np.ndarray, leaves: list[TreeNode]) -> None:
        self.records = records
        self.leaf_ptr = leaf_ptr
        self.leaves = leaves
        self._cache: dict[int, Chunk] = {}

    def __len__(self) -> int:
        return len(self.records)

    @overload
    def __getitem__(self, row: int) -> Chunk: ...

    @overload
    def __getitem__(self, row: slice) -> list[Chunk]: ...

    def __getitem__(self, row: int | slice) -> Chunk | list[Chunk]:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        n = len(self)
        if row < 0:
            row += n
        if not 0 <= row < n:
            raise IndexError(row)
        hit = self._cache.get(row)
        if hit is None:
            hit = self._read(row)
            if len(self._cache) >= RECORD_CACHE:
                self._cache.clear()
            self._cache[row] = hit
        return hit

    def _read(self, row: int) -> Chunk:
        where = f"{CHUNKS} line {row + 1}"
        d = self.records.raw(row)
        kw = {f: _require(d, f, int if f in _CHUNK_INTS or f in _PAGE_FIELDS else str, where) for f in _CHUNK_FIELDS}
        _check_spans({f: kw[f] for f in _CHUNK_INTS}, where)
        leaf_pos = int(np.searchsorted(self.leaf_ptr, row, side="right")) - 1
        leaf = self.leaves[leaf_pos]
        k = row - int(self.leaf_ptr[leaf_pos])
        if kw["source_node_id"] != leaf.node_id or kw["doc_path"] != leaf.doc_path \
                or kw["chunk_id"] != f"{leaf.node_id}_chunk_{k:02d}":
            raise IndexFormatError(f"{where}: chunk {kw['chunk_id']!r} is not chunk {k} of leaf {leaf.node_id} "
                                   f"as {LEAF_CHUNKS} says")
        return Chunk(**kw)


@dataclass
class Index:
    """A loaded index: what retrieval asks of a store.

    Rows: chunk ``i`` is line ``i`` of chunks.jsonl, row ``i`` of ``embeddings`` and of the BM25
    index; a leaf's (and a document's) chunks are contiguous rows. Chunks and node contents are read
    from disk when used.
    """

    path: Path
    metadata: dict[str, Any]
    root: TreeNode
    chunks: Sequence[Chunk]
    embeddings: np.ndarray
    leaf_embeddings: np.ndarray
    bm25: BM25Index
    leaf_ptr: np.ndarray
    leaf_terms: BM25Index
    """Words of each leaf's heading path and summary (row = leaf, pre-order): the keyword locator's."""
    """leaves[i] (pre-order) owns chunk rows [leaf_ptr[i], leaf_ptr[i+1])."""
    nodes: dict[str, TreeNode] = field(default_factory=dict)
    leaves: list[TreeNode] = field(default_factory=list)
    leaf_rows: dict[str, tuple[int, int]] = field(default_factory=dict)
    doc_rows: dict[str, tuple[int, int]] = field(default_factory=dict)
    derived: dict[str, Any] = field(default_factory=dict, repr=False)
    """Per-index memo of values derived from it (e.g. tokenised headings); lives as long as the index."""

    def __post_init__(self) -> None:
        self.nodes = {n.node_id: n for n in self.root.iter_preorder()}
        self.leaves = self.root.leaves()
        ptr = self.leaf_ptr.tolist()
        self.leaf_rows = {n.node_id: (ptr[i], ptr[i + 1]) for i, n in enumerate(self.leaves) if ptr[i + 1] > ptr[i]}
        doc_rows: dict[str, tuple[int, int]] = {}
        last = None
        for n in self.leaves:
            rows = self.leaf_rows.get(n.node_id)
            if rows is None:
                continue
            if n.doc_path != last and n.doc_path in doc_rows:
                raise IndexFormatError(f"{TREE}: leaves of document {n.doc_path!r} are not contiguous")
            start = doc_rows[n.doc_path][0] if n.doc_path in doc_rows else rows[0]
            doc_rows[n.doc_path] = (start, rows[1])
            last = n.doc_path
        self.doc_rows = doc_rows

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


# --------------------------------------------------------------------------- write

def node_to_dict(node: TreeNode) -> dict[str, Any]:
    """A node and its subtree without contents (those are in node_contents.jsonl)."""
    d = {f: getattr(node, f) for f in _NODE_FIELDS}
    d["children"] = [node_to_dict(c) for c in node.children]
    return d


def _write_lines(path: Path, values: Iterable[Any], offsets_path: Path) -> None:
    """One JSON value per line, and the byte offset of every line (plus the end) beside it."""
    offsets = [0]
    with open(path, "wb") as fh:
        for v in values:
            line = json.dumps(v, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
            fh.write(line)
            offsets.append(offsets[-1] + len(line))
    np.save(offsets_path, np.asarray(offsets, dtype=np.int64), allow_pickle=False)


def chunk_to_dict(chunk: Chunk) -> dict[str, Any]:
    return {f: getattr(chunk, f) for f in _CHUNK_FIELDS}


class _RowsFile:
    """A float32 .npy file written a block of rows at a time; the header gets the final shape at the end.

    The header is a fixed 128 bytes (format 1.0, padded with spaces as numpy pads
    it), so writing the true row count at the end never moves the data.
    """

    HEADER_BYTES = 128

    def __init__(self, path: Path, dim: int) -> None:
        self.path, self.dim, self.rows = path, dim, 0
        self.fh = open(path, "wb")
        self.fh.write(b"\0" * self.HEADER_BYTES)

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=np.float32)
        if block.ndim != 2 or block.shape[1] != self.dim:
            raise BackendError(f"the embedder returned vectors of shape {block.shape}, expected (n, {self.dim})")
        if not np.isfinite(block).all():  # checked once here, so a load need not read every vector
            raise BackendError(f"the embedder returned NaN or infinite values for {self.path.name}")
        self.fh.write(block.tobytes())
        self.rows += block.shape[0]

    def finish(self) -> None:
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (self.rows, self.dim)
        pad = self.HEADER_BYTES - 10 - len(header) - 1
        raw = b"\x93NUMPY\x01\x00" + (self.HEADER_BYTES - 10).to_bytes(2, "little") \
            + (header + " " * pad + "\n").encode("ascii")
        self.fh.seek(0)
        self.fh.write(raw)
        self.fh.close()

    def close(self) -> None:
        self.fh.close()


class IndexWriter:
    """Writes one index into a fresh directory piece by piece, so a build never holds it whole.

    Chunks arrive leaf by leaf in the tree's order (with their vectors), leaf
    vectors after them; ``finish`` writes the tree, the offset tables, BM25 and,
    last, metadata.json with the manifest. Each file is forced to disk and listed
    in the manifest, so the caller's swap never exposes a file a crash could still
    empty, and a reader can tell every file of this build from any other.
    """

    def __init__(self, directory: Path, leaves: list[TreeNode], dim: int) -> None:
        self.directory = Path(directory)
        self._leaf_pos = {n.node_id: i for i, n in enumerate(leaves)}
        self._leaf_counts = np.zeros(len(leaves), dtype=np.int64)
        self._last_leaf = -1
        self._chunks = open(self.directory / CHUNKS, "wb")
        self._offsets = array("q", [0])
        self.vectors = {EMBEDDINGS: _RowsFile(self.directory / EMBEDDINGS, dim),
                        LEAF_EMBEDDINGS: _RowsFile(self.directory / LEAF_EMBEDDINGS, dim)}

    @property
    def n_chunks(self) -> int:
        return len(self._offsets) - 1

    def add_chunks(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        for c in chunks:
            i = self._leaf_pos.get(c.source_node_id)
            if i is None or i < self._last_leaf:
                raise ValueError(f"chunk {c.chunk_id} is out of leaf order")
            self._leaf_counts[i] += 1
            self._last_leaf = i
            line = json.dumps(chunk_to_dict(c), ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
            self._chunks.write(line)
            self._offsets.append(self._offsets[-1] + len(line))
        self.vectors[EMBEDDINGS].append(vectors)

    def add_leaf_vectors(self, vectors: np.ndarray) -> None:
        self.vectors[LEAF_EMBEDDINGS].append(vectors)

    def close(self) -> None:
        """Release the open files (after a failure; the caller removes the directory)."""
        self._chunks.close()
        for f in self.vectors.values():
            f.close()

    def finish(self, metadata: dict[str, Any], root: TreeNode, bm25: BM25Index, leaf_terms: BM25Index) -> None:
        directory = self.directory
        self._chunks.close()
        n_leaves = len(self._leaf_counts)
        if self.vectors[EMBEDDINGS].rows != self.n_chunks or self.vectors[LEAF_EMBEDDINGS].rows != n_leaves:
            raise ValueError("vectors and chunks (or leaves) differ in number")
        for f in self.vectors.values():
            f.finish()
        np.save(directory / CHUNK_OFFSETS, np.frombuffer(self._offsets, dtype=np.int64), allow_pickle=False)
        np.save(directory / LEAF_CHUNKS, np.concatenate([[0], np.cumsum(self._leaf_counts)]).astype(np.int64),
                allow_pickle=False)
        with open(directory / TREE, "w", encoding="utf-8") as fh:
            json.dump(node_to_dict(root), fh, ensure_ascii=False, allow_nan=False)
        _write_lines(directory / NODE_CONTENTS, (n.content for n in root.iter_preorder()),
                     directory / NODE_CONTENT_OFFSETS)
        bm25.save(directory)
        leaf_terms.save(directory, LEAF_TERMS_PREFIX)
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


def write_index_files(
    directory: Path,
    metadata: dict[str, Any],
    root: TreeNode,
    chunks: list[Chunk],
    embeddings: np.ndarray,
    leaf_embeddings: np.ndarray,
    bm25: BM25Index,
) -> None:
    """Everything at once (tools and benchmarks that hold a whole index); see IndexWriter."""
    writer = IndexWriter(Path(directory), root.leaves(), int(embeddings.shape[1]))
    try:
        writer.add_chunks(chunks, embeddings)
        writer.add_leaf_vectors(leaf_embeddings)
        writer.finish(metadata, root, bm25, build_leaf_terms(root.leaves()))
    except BaseException:
        writer.close()
        raise


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


_NODE_TYPES = tuple((f, int if f in _NODE_INTS or f in _PAGE_FIELDS else str) for f in _NODE_FIELDS)


def _node_from_dict(d: Any, parent: TreeNode | None, contents: Records, counter: list[int],
                    depth: int = 0) -> TreeNode:
    if not isinstance(d, dict):
        raise IndexFormatError(f"{TREE}: a node is not an object")
    if depth > MAX_TREE_DEPTH:
        raise IndexFormatError(f"{TREE}: tree is nested deeper than {MAX_TREE_DEPTH} levels")
    kwargs: dict[str, Any] = {}
    for f, typ in _NODE_TYPES:  # type(...) is: bool is not int, and this runs for every node
        v = d.get(f)
        if type(v) is not typ:
            _require(d, f, typ, TREE)  # raises the one-line error
        kwargs[f] = v
    if min(kwargs[f] for f in _NODE_INTS) < 0 or kwargs["end_line"] < kwargs["start_line"] \
            or kwargs["end_char"] < kwargs["start_char"] or kwargs["content_end"] < kwargs["content_start"]:
        _check_spans({f: kwargs[f] for f in _NODE_INTS}, f"{TREE} node {kwargs['node_id']!r}")
    node = StoredNode(contents, counter[0], parent=parent, **kwargs)
    counter[0] += 1
    children = d.get("children")
    if type(children) is not list:
        _require(d, "children", list, TREE)
    node.children = [_node_from_dict(c, node, contents, counter, depth + 1) for c in children]
    return node


def _load_tree(files: IndexDir, contents: Records) -> TreeNode:
    data = files.read_json(TREE)
    try:
        root = _node_from_dict(data, None, contents, [0])
    except RecursionError:
        raise IndexFormatError(f"{TREE}: tree is nested too deeply") from None
    seen: set[str] = set()
    for n in root.iter_preorder():
        if n.node_id in seen:
            raise IndexFormatError(f"{TREE}: node id {n.node_id!r} occurs twice")
        seen.add(n.node_id)
    return root


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


def _open_index_dir(path: Path, verify: bool = False) -> IndexDir:
    recover_directory(path)
    try:
        return IndexDir(path, verify)
    except IndexFileMissing:
        raise IndexFormatError(
            f"no index at {path} (build one with: python main.py index --input DOCS --output {path})") from None


def read_metadata(path: Path) -> dict[str, Any]:
    path = Path(path)
    with _open_index_dir(path) as files:
        return _check_metadata(files.read_json(METADATA, METADATA_MAX_BYTES), path)


def load_index(path: Path, mmap: bool = True, verify: bool = False) -> Index:
    """Load one consistent version of the index at ``path``.

    A rebuild that swaps the directory while this runs makes a file vanish or
    mismatch the manifest; then the load starts over on the new directory.
    ``verify``: full sha256 of every file (see ``verify_index`` for the rest).
    """
    path = Path(path)
    for attempt in range(LOAD_ATTEMPTS):
        files = _open_index_dir(path, verify)
        try:
            return _load_from(files, path, mmap)
        except (IndexFileMissing, IndexChanged):
            if attempt + 1 < LOAD_ATTEMPTS and files.replaced():
                continue
            raise
        finally:
            files.close()
    raise AssertionError("unreachable")


def _load_records(files: IndexDir, name: str, offsets_name: str, count: int, mmap: bool) -> Records:
    offsets = files.read_array(offsets_name, mmap=False)
    data = files.map_bytes(name)
    check_offsets(offsets, count, len(data), name, offsets_name)
    return Records(data, offsets, name)


def _load_from(files: IndexDir, path: Path, mmap: bool) -> Index:
    meta = _check_metadata(files.read_json(METADATA, METADATA_MAX_BYTES), path)
    files.hold_all(parse_manifest(meta["files"], METADATA))
    counts = meta["counts"]
    dim = meta["embedder"]["dim"]
    contents = _load_records(files, NODE_CONTENTS, NODE_CONTENT_OFFSETS, counts["nodes"] + 1, mmap)
    root = _load_tree(files, contents)
    n_nodes = sum(1 for n in root.iter_preorder() if n.kind != "root")
    if n_nodes != counts["nodes"]:
        raise IndexFormatError(f"{TREE} has {n_nodes} nodes but {METADATA} says {counts['nodes']}")
    leaves = root.leaves()
    n_leaves = len(leaves)
    if n_leaves != counts["leaves"]:
        raise IndexFormatError(f"{TREE} has {n_leaves} leaves but {METADATA} says {counts['leaves']}")
    n_chunks = counts["chunks"]
    records = _load_records(files, CHUNKS, CHUNK_OFFSETS, n_chunks, mmap)
    leaf_ptr = files.read_array(LEAF_CHUNKS, mmap=False)
    if (leaf_ptr.dtype != np.int64 or leaf_ptr.shape != (n_leaves + 1,) or leaf_ptr[0] != 0
            or leaf_ptr[-1] != n_chunks or bool(np.any(np.diff(leaf_ptr) < 0))):
        raise IndexFormatError(f"{LEAF_CHUNKS} does not split the {n_chunks} chunks among the {n_leaves} leaves")
    emb = files.read_array(EMBEDDINGS, mmap)
    if emb.dtype != np.float32 or emb.shape != (n_chunks, dim):
        raise IndexFormatError(
            f"{EMBEDDINGS} has shape {emb.shape} {emb.dtype}, expected ({n_chunks}, {dim}) float32")
    leaf_emb = files.read_array(LEAF_EMBEDDINGS, mmap)
    if leaf_emb.dtype != np.float32 or leaf_emb.shape != (n_leaves, dim):
        raise IndexFormatError(
            f"{LEAF_EMBEDDINGS} has shape {leaf_emb.shape} {leaf_emb.dtype}, expected ({n_leaves}, {dim}) float32")
    bm25 = BM25Index.load(path, mmap=mmap, files=files)
    if bm25.n_rows != n_chunks:
        raise IndexFormatError(f"BM25 data covers {bm25.n_rows} chunks but {CHUNKS} has {n_chunks}")
    leaf_terms = BM25Index.load(path, mmap=mmap, files=files, prefix=LEAF_TERMS_PREFIX)
    if leaf_terms.n_rows != n_leaves:
        raise IndexFormatError(f"{LEAF_TERMS_PREFIX}* covers {leaf_terms.n_rows} leaves but {TREE} has {n_leaves}")
    return Index(path=path, metadata=meta, root=root, chunks=ChunkTable(records, leaf_ptr, leaves),
                 embeddings=emb, leaf_embeddings=leaf_emb, bm25=bm25, leaf_ptr=leaf_ptr, leaf_terms=leaf_terms)


def _require_finite(arr: np.ndarray, name: str) -> None:
    """NaN or Inf in a vector silently reorders rankings and turns scores into NaN."""
    step = 65536
    for start in range(0, len(arr), step):
        if not math.isfinite(float(np.sum(arr[start:start + step], dtype=np.float64))):
            raise IndexFormatError(f"{name} holds NaN or infinite values; rebuild the index")


@dataclass(frozen=True)
class Verified:
    files: int
    chunks: int
    nodes: int

    def line(self, path: Path) -> str:
        return (f"index at {path} is intact: {self.files} files match their sha256, {self.chunks} chunk records "
                f"and {self.nodes} node contents are valid, every vector is finite")


def verify_index(path: Path) -> Verified:
    """Everything ``load_index`` leaves for later: full hashes, every record, every vector."""
    index = load_index(path, verify=True)
    for row in range(len(index.chunks)):
        index.chunks[row]
    for node in index.root.iter_preorder():
        node.content
    _require_finite(index.embeddings, EMBEDDINGS)
    _require_finite(index.leaf_embeddings, LEAF_EMBEDDINGS)
    return Verified(files=len(index.metadata["files"]), chunks=len(index.chunks), nodes=len(index.nodes))
