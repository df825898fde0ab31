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
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.chunker import Chunk
from indexing.index_files import fsync_directory, write_manifest_entry
from indexing.index_store import (CHUNK_FIELDS, CHUNK_KEYS, CHUNK_OFFSETS, CHUNKS, EMBEDDINGS, FORMAT_NAME,
                                  FORMAT_VERSION, KEY_BYTES, LEAF_CHUNKS, LEAF_EMBEDDINGS, LEAF_KEYS, METADATA, text_key)
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from indexing.leaf_terms import build_leaf_terms
from indexing.node_table import (NODE_CONTENT_OFFSETS, NODE_CONTENTS, NODE_OFFSETS, NODE_TABLE, NODE_TOC_TOKENS, NODES,
                                 node_record, node_table, toc_tokens)
from tree_builder.tree import TreeNode
from utils.errors import BackendError


def write_lines(path: Path, values: Iterable[Any], offsets_path: Path) -> None:
    """One JSON value per line, and the byte offset of every line (plus the end) beside it."""
    offsets = array("q", [0])
    with open(path, "wb") as fh:
        for v in values:
            line = json.dumps(v, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
            fh.write(line)
            offsets.append(offsets[-1] + len(line))
    np.save(offsets_path, np.frombuffer(offsets, dtype=np.int64), allow_pickle=False)


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


class IndexWriter:
    """Writes one index into a fresh directory piece by piece, so a build never holds it whole.

    Chunks arrive leaf by leaf in the tree's order (with their vectors), leaf
    vectors after them; ``finish`` writes the tree, the offset tables, BM25 and,
    last, metadata.json with the manifest. Each file is forced to disk and listed
    in the manifest, so the caller's swap never exposes a file a crash could still
    empty, and a reader can tell every file of this build from any other.
    """

    def __init__(self, directory: Path, leaves: Sequence[TreeNode], dim: int) -> None:
        self.directory = Path(directory)
        self._leaf_pos = {n.node_id: i for i, n in enumerate(leaves)}
        self._leaf_counts = np.zeros(len(leaves), dtype=np.int64)
        self._last_leaf = -1
        self._chunks = open(self.directory / CHUNKS, "wb")
        self._offsets = array("q", [0])
        self.vectors = {EMBEDDINGS: _RowsFile(self.directory / EMBEDDINGS, dim),
                        LEAF_EMBEDDINGS: _RowsFile(self.directory / LEAF_EMBEDDINGS, dim)}
        self.keys: dict[str, bytearray] = {CHUNK_KEYS: bytearray(), LEAF_KEYS: bytearray()}

    @property
    def n_chunks(self) -> int:
        return len(self._offsets) - 1

    def add_chunks(self, chunks: Sequence[Chunk], vectors: np.ndarray, texts: Sequence[str]) -> None:
        """Chunks (leaf by leaf, in order), their vectors and the texts those vectors embed."""
        for c in chunks:
            i = self._leaf_pos.get(c.source_node_id)
            if i is None or i < self._last_leaf:
                raise ValueError(f"chunk {c.chunk_id} is out of leaf order")
            self._leaf_counts[i] += 1
            self._last_leaf = i
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
        for f in self.vectors.values():
            f.close()

    def finish(self, metadata: dict[str, Any], root: TreeNode, bm25: BM25Index, leaf_terms: BM25Index,
               derived: Callable[[Path], dict[str, Any]] | None = None) -> None:
        """``derived``: writes files computed from the finished vectors (the ANN index) and returns
        the metadata fields that describe them; called before the manifest, so they are listed."""
        directory = self.directory
        self._chunks.close()
        n_leaves = len(self._leaf_counts)
        if self.vectors[EMBEDDINGS].rows != self.n_chunks or self.vectors[LEAF_EMBEDDINGS].rows != n_leaves:
            raise ValueError("vectors and chunks (or leaves) differ in number")
        for f in self.vectors.values():
            f.finish()
        for name, raw in self.keys.items():
            keys = np.frombuffer(bytes(raw), dtype=np.uint8).reshape(-1, KEY_BYTES)
            if len(keys) != (self.n_chunks if name == CHUNK_KEYS else n_leaves):
                raise ValueError(f"{name}: one key per vector was not given")
            np.save(directory / name, keys, allow_pickle=False)
        np.save(directory / CHUNK_OFFSETS, np.frombuffer(self._offsets, dtype=np.int64), allow_pickle=False)
        np.save(directory / LEAF_CHUNKS, np.concatenate([[0], np.cumsum(self._leaf_counts)]).astype(np.int64),
                allow_pickle=False)
        doc_number = {d["path"]: i for i, d in enumerate(metadata["documents"])}
        nodes, table = node_table(root, doc_number)
        np.save(directory / NODE_TABLE, table, allow_pickle=False)
        np.save(directory / NODE_TOC_TOKENS, toc_tokens(nodes, table), allow_pickle=False)
        write_lines(directory / NODES, (node_record(n) for n in nodes), directory / NODE_OFFSETS)
        write_lines(directory / NODE_CONTENTS, (n.content for n in nodes), directory / NODE_CONTENT_OFFSETS)
        bm25.save(directory)
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
    writer = IndexWriter(Path(directory), root.leaves(), int(embeddings.shape[1]))
    try:
        writer.add_chunks(chunks, embeddings, chunk_texts)
        writer.add_leaf_vectors(leaf_embeddings, leaf_texts)
        writer.finish(metadata, root, bm25, build_leaf_terms(root.leaves()))
    except BaseException:
        writer.close()
        raise
