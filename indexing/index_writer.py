"""Writing an index into a fresh directory, piece by piece (see index_store.py for the layout).

Why piece by piece: a build of 10,000 documents has a million chunks; holding
their records and vectors at once took gigabytes. Chunks arrive in blocks with
their vectors and go straight to disk; what must wait for the end (the tree,
offset tables, BM25, the manifest) is small next to them.
"""
from __future__ import annotations

import json
import os
import uuid
from array import array
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.chunker import Chunk
from indexing.index_files import fsync_directory, write_manifest_entry
from indexing.index_store import (CHUNK_FIELDS, CHUNK_KEYS, CHUNK_OFFSETS, CHUNKS, EMBEDDINGS, FORMAT_NAME,
                                  FORMAT_VERSION, KEY_BYTES, LEAF_CHUNKS, LEAF_EMBEDDINGS, LEAF_KEYS, METADATA, text_key)
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from indexing.leaf_terms import build_leaf_terms
from indexing.node_table import (KINDS, NODE_CONTENT_OFFSETS, NODE_CONTENTS, NODE_OFFSETS, NODE_TABLE,
                                 NODE_TOC_TOKENS, NODES, node_id_of, node_record)
from tree_builder.tree import TreeNode
from utils.errors import BackendError
from tree_builder.visualizer import node_block
from utils.tokenizer import estimate_tokens


def chunk_record(chunk: Chunk) -> dict[str, Any]:
    return {f: getattr(chunk, f) for f in CHUNK_FIELDS}


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


class _LinesFile:
    """JSON values written one a line as they come, with the byte offset of every line (plus the end)."""

    def __init__(self, path: Path, offsets_path: Path) -> None:
        self.fh = open(path, "wb")
        self.offsets_path = offsets_path
        self.offsets = array("q", [0])

    def add(self, value: Any) -> None:
        line = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        self.fh.write(line)
        self.offsets.append(self.offsets[-1] + len(line))

    def finish(self) -> None:
        self.fh.close()
        np.save(self.offsets_path, np.frombuffer(self.offsets, dtype=np.int64), allow_pickle=False)

    def close(self) -> None:
        self.fh.close()


class IndexWriter:
    """Writes one index into a fresh directory piece by piece, so a build never holds it whole.

    The tree arrives a document at a time (``add_nodes``, after ``add_root``), in pre-order; chunks
    arrive leaf by leaf in that order with their vectors, leaf vectors likewise (the two may lag
    the nodes by a block). What is kept until ``finish`` is per row and small: 12 bytes of node
    table, 4 of TOC tokens and 16 of record offsets per node; 8 (chunk count) per leaf; 8 (offset)
    and 16 (text key) per chunk and 16 (text key) per leaf. ``finish`` writes those tables, BM25
    and, last, metadata.json with the manifest. Each file is forced to disk and listed in the
    manifest, so the caller's swap never exposes a file a crash could still empty, and a reader can
    tell every file of this build from any other.
    """

    def __init__(self, directory: Path, dim: int, first_node: int = 1) -> None:
        self.directory = Path(directory)
        self.first_node = first_node
        """Id of the node at row 1 (a delta segment's nodes continue the ids of the index it extends)."""
        self._pending_leaves: dict[str, int] = {}
        """Leaves (id -> position) whose chunks may still come: later than the last chunk's leaf."""
        self._leaf_counts = array("q")
        self._last_leaf = -1
        self._chunks = open(self.directory / CHUNKS, "wb")
        self._offsets = array("q", [0])
        self.vectors = {EMBEDDINGS: _RowsFile(self.directory / EMBEDDINGS, dim),
                        LEAF_EMBEDDINGS: _RowsFile(self.directory / LEAF_EMBEDDINGS, dim)}
        self.keys: dict[str, bytearray] = {CHUNK_KEYS: bytearray(), LEAF_KEYS: bytearray()}
        self._nodes = _LinesFile(self.directory / NODES, self.directory / NODE_OFFSETS)
        self._contents = _LinesFile(self.directory / NODE_CONTENTS, self.directory / NODE_CONTENT_OFFSETS)
        self._table = array("i")
        self._toc = array("i")
        self._toc_depth: dict[int, int] = {}
        """Serialisation depth of the rows a later node may name as parent (this document's)."""

    @property
    def n_chunks(self) -> int:
        return len(self._offsets) - 1

    @property
    def n_nodes(self) -> int:
        """Nodes written, the root included."""
        return len(self._toc)

    @property
    def n_leaves(self) -> int:
        return len(self._leaf_counts)

    def add_root(self, root: TreeNode) -> None:
        """The synthetic root, row 0, before any document's nodes."""
        if self.n_nodes:
            raise ValueError("the root must be the first node")
        self._add_node(root, -1, -1, -1)

    def add_nodes(self, nodes: Sequence[TreeNode], doc_number: int) -> list[TreeNode]:
        """One document's nodes (below the root) in pre-order, numbered from the next row; its leaves."""
        if nodes and (nodes[0].parent is None or nodes[0].parent.kind != "root"):
            raise ValueError(f"node {nodes[0].node_id!r} must hang under the root")
        rows = {id(n.parent): 0 for n in nodes[:1]}
        self._toc_depth = {}
        leaves = []
        for n in nodes:
            parent = rows.get(id(n.parent))
            if parent is None:
                raise ValueError(f"node {n.node_id!r} comes before its parent")
            rows[id(n)] = self.n_nodes
            self._add_node(n, parent, doc_number, 0 if parent == 0 else self._toc_depth[parent] + 1)
            if n.is_leaf:
                self._pending_leaves[n.node_id] = len(self._leaf_counts)
                self._leaf_counts.append(0)
                leaves.append(n)
        return leaves

    def _add_node(self, node: TreeNode, parent: int, doc_number: int, depth: int) -> None:
        row = self.n_nodes
        if node.node_id != node_id_of(row if row == 0 else row - 1 + self.first_node):
            raise ValueError(f"node {node.node_id!r} is at pre-order row {row}: ids must be pre-order rows")
        self._table.extend((parent, doc_number, KINDS.index(node.kind)))
        self._toc.append(0 if parent < 0 else estimate_tokens(node_block(node, depth)) + 2)
        self._toc_depth[row] = depth
        self._nodes.add(node_record(node))
        self._contents.add(node.content)

    def add_chunks(self, chunks: Sequence[Chunk], vectors: np.ndarray, texts: Sequence[str]) -> None:
        """Chunks (leaf by leaf, in order), their vectors and the texts those vectors embed."""
        pending = self._pending_leaves
        for c in chunks:
            i = pending.get(c.source_node_id)
            if i is None or i < self._last_leaf:
                raise ValueError(f"chunk {c.chunk_id} is out of leaf order")
            self._leaf_counts[i] += 1
            if i != self._last_leaf:
                self._last_leaf = i
                while pending and next(iter(pending.values())) < i:  # no chunk may name them now
                    del pending[next(iter(pending))]
            line = json.dumps(chunk_record(c), ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
            self._chunks.write(line)
            self._offsets.append(self._offsets[-1] + len(line))
        self.vectors[EMBEDDINGS].append(vectors)
        self._add_keys(CHUNK_KEYS, texts)

    def add_leaf_vectors(self, vectors: np.ndarray, texts: Sequence[str]) -> None:
        self.vectors[LEAF_EMBEDDINGS].append(vectors)
        self._add_keys(LEAF_KEYS, texts)

    def _add_keys(self, name: str, texts: Sequence[str]) -> None:
        for t in texts:
            self.keys[name] += text_key(t)

    def close(self) -> None:
        """Release the open files (after a failure; the caller removes the directory)."""
        self._chunks.close()
        self._nodes.close()
        self._contents.close()
        for f in self.vectors.values():
            f.close()

    def finish(self, metadata: dict[str, Any], bm25: BM25Index, leaf_terms: BM25Index,
               derived: Callable[[Path], dict[str, Any]] | None = None,
               impacts: tuple[float, float] | None = None) -> None:
        """``derived``: writes files computed from the finished vectors (the ANN index) and returns
        the metadata fields that describe them; called before the manifest, so they are listed.
        ``impacts``: (k1, b) to store the chunk postings' collection-scope weights for."""
        directory = self.directory
        self._chunks.close()
        n_leaves = len(self._leaf_counts)
        if self.vectors[EMBEDDINGS].rows != self.n_chunks or self.vectors[LEAF_EMBEDDINGS].rows != n_leaves:
            raise ValueError("vectors and chunks (or leaves) differ in number")
        for f in self.vectors.values():
            f.finish()
        for name, raw in self.keys.items():
            keys = np.frombuffer(raw, dtype=np.uint8).reshape(-1, KEY_BYTES)  # a view: no second copy
            if len(keys) != (self.n_chunks if name == CHUNK_KEYS else n_leaves):
                raise ValueError(f"{name}: one key per vector was not given")
            np.save(directory / name, keys, allow_pickle=False)
        np.save(directory / CHUNK_OFFSETS, np.frombuffer(self._offsets, dtype=np.int64), allow_pickle=False)
        counts = np.frombuffer(self._leaf_counts, dtype=np.int64)
        np.save(directory / LEAF_CHUNKS, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                allow_pickle=False)
        np.save(directory / NODE_TABLE, np.frombuffer(self._table, dtype=np.int32).reshape(-1, 3),
                allow_pickle=False)
        np.save(directory / NODE_TOC_TOKENS, np.frombuffer(self._toc, dtype=np.int32), allow_pickle=False)
        self._nodes.finish()
        self._contents.finish()
        bm25.save(directory, impacts=impacts)
        leaf_terms.save(directory, LEAF_TERMS_PREFIX)
        meta = dict(metadata)
        if derived is not None:
            meta.update(derived(directory))
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


def add_tree(writer: IndexWriter, root: TreeNode, doc_number: Mapping[str, int]) -> list[TreeNode]:
    """A whole tree into ``writer`` (the root, then each document's nodes); its leaves in order."""
    writer.add_root(root)
    leaves: list[TreeNode] = []
    batch: list[TreeNode] = []
    for n in list(root.iter_preorder())[1:]:
        if batch and n.doc_path != batch[-1].doc_path:
            leaves += writer.add_nodes(batch, doc_number[batch[-1].doc_path])
            batch = []
        batch.append(n)
    if batch:
        leaves += writer.add_nodes(batch, doc_number[batch[-1].doc_path])
    return leaves


def write_index_files(
    directory: Path,
    metadata: dict[str, Any],
    root: TreeNode,
    chunks: list[Chunk],
    embeddings: np.ndarray,
    leaf_embeddings: np.ndarray,
    bm25: BM25Index,
    chunk_texts: Sequence[str],
    leaf_texts: Sequence[str],
) -> None:
    """Everything at once (tools and benchmarks that hold a whole index); see IndexWriter."""
    writer = IndexWriter(Path(directory), int(embeddings.shape[1]))
    try:
        leaves = add_tree(writer, root, {d["path"]: i for i, d in enumerate(metadata["documents"])})
        writer.add_chunks(chunks, embeddings, chunk_texts)
        writer.add_leaf_vectors(leaf_embeddings, leaf_texts)
        writer.finish(metadata, bm25, build_leaf_terms(leaves))
    except BaseException:
        writer.close()
        raise
