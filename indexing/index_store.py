"""The on-disk index, read side: plain JSON, JSONL and .npy — never pickle.

An index may come from someone else, so loading trusts nothing: every file is
parsed with a data-only parser (json, ``np.load(allow_pickle=False)``), and
counts, shapes, dtypes and offset tables are checked against ``metadata.json``
before use. Any inconsistency is one line naming the broken file.

Every file is read through one opened directory and checked against the
manifest in ``metadata.json`` (size, sampled digest, build id), so a query
running while the index is rebuilt sees exactly one version (see index_files.py).

Layout (format 3; written by index_writer.py):

    metadata.json                 counts, documents, settings, the manifest
    node_table.npy, nodes.jsonl, node_contents.jsonl (+ offsets)   the tree (node_table.py)
    chunks.jsonl + chunk_offsets.npy                                chunk records, one per line
    leaf_chunks.npy               int64 (leaves+1): leaf i owns chunk rows [p[i], p[i+1])
    embeddings.npy, leaf_embeddings.npy                              float32 vectors (memory-mapped)
    ann_chunks.faiss, ann_leaves.faiss   optional IVF-PQ indexes for whole-collection search (ann_index.py)
    bm25_*, leafterms_*           postings of the chunks, and of each leaf's heading + summary words

Why loading reads so little: at 10,000 documents the chunk records, section
texts and tree are gigabytes and half a million objects. They stay on disk,
memory-mapped; a record is parsed and validated when it is read, so a query
pays for the chunks and nodes it touches, not for the corpus. ``load_index``
checks every count, shape, offset table and the tree's structure;
``verify_index`` also reads every record and every vector (``python main.py verify``).
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, overload

import numpy as np

from indexing.bm25_builder import BM25Index, file_names
from indexing.chunker import Chunk
from indexing.index_files import (CHUNK_KEYS, CHUNK_OFFSETS, CHUNKS, EMBEDDINGS, KEY_BYTES, LEAF_CHUNKS, LEAF_EMBEDDINGS,
                                  LEAF_KEYS, METADATA, METADATA_MAX_BYTES, IndexChanged, IndexDir, IndexFileMissing,
                                  advise_random, parse_manifest)
from indexing.kg_store import attach as attach_graphs
from indexing.kg_store import attach_records, verify_graphs
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from indexing.node_table import (NODE_CONTENT_OFFSETS, NODE_CONTENTS, NODE_OFFSETS, NODE_TABLE, NODE_TOC_TOKENS, NODES,
                                 LeafList, LeafRows, NodeMap, NodeTable, doc_rows)
from indexing.row_layout import RowLayout, row_layout
from indexing.records import Records, check_spans, load_records, require, typed_fields
from indexing.file_search import FileSearch
from indexing.search import ChunkRows, Search, leaves_of_rows
from indexing.segment_load import load_segmented
from indexing.segments import SEGMENTS
from tree_builder.doc_card import CardSet, cards_of
from tree_builder.tree import TreeNode
from utils.atomic import recover_directory
from utils.errors import IndexFormatError
from utils.paths import index_dir_path
from indexing import ann_index
from indexing.ann_index import head_bytes

FORMAT_NAME = "treerag-index"
FORMAT_VERSION = 3
"""2: metadata.json carries build_id and a manifest (size + sha256 of every other file).
3: flat tree and records read lazily through byte-offset tables; leaf -> chunk rows and leaf-word postings
   stored; the manifest adds a sampled digest; metadata records the build settings (incremental updates)."""
LOAD_ATTEMPTS = 5
"""A load that raced a rebuild's swap starts over on the new version at most this often."""

FILES = (METADATA, NODE_TABLE, NODE_TOC_TOKENS, NODES, NODE_OFFSETS, NODE_CONTENTS, NODE_CONTENT_OFFSETS, CHUNKS,
         CHUNK_OFFSETS, LEAF_CHUNKS, EMBEDDINGS, LEAF_EMBEDDINGS, CHUNK_KEYS, LEAF_KEYS)
"""Every file of an index but the postings' (bm25_builder.file_names)."""
LEGACY_FILES = ("tree.json",)
"""Written by older formats: still TreeRAG's own when an old index is replaced."""
RECORD_CACHE = 4096
"""Parsed chunk records kept per index (a query reads tens; the cache is dropped when full)."""

CHUNK_FIELDS = (
    "chunk_id", "source_node_id", "heading_path", "doc_path",
    "start_char", "end_char", "start_line", "end_line", "text", "page_start", "page_end",
)
_CHUNK_INTS = ("start_char", "end_char", "start_line", "end_line")
_CHUNK_TYPES = tuple((f, int if f in _CHUNK_INTS or f.startswith("page_") else str) for f in CHUNK_FIELDS)


class ChunkTable(Sequence[Chunk]):
    """Chunk records of an index, parsed and validated when read (row = position in chunks.jsonl)."""

    def __init__(self, records: Records, leaf_ptr: np.ndarray, leaves: Sequence[TreeNode]) -> None:
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

    def prefetch(self, rows: Iterable[int]) -> None:
        """Read the records of ``rows`` not yet kept in one batch, when the store reads in batches
        (an engine: one statement instead of one per record); files: their lines requested from the
        disk together (``Records.will_need``), read when used."""
        many = getattr(self.records, "raw_many", None)
        ahead = getattr(self.records, "will_need", None)
        if many is None and ahead is None:
            return
        n = len(self)
        want = sorted({int(r) for r in rows if 0 <= int(r) < n and int(r) not in self._cache})
        if not want:
            return
        if many is None:  # files: the lines requested from the disk together, read when used
            ahead(want)
            return
        if len(self._cache) + len(want) > RECORD_CACHE:
            self._cache.clear()
        for row, raw in many(want[:RECORD_CACHE]).items():
            self._cache[row] = self._read(row, raw)

    def _read(self, row: int, raw: Any = None) -> Chunk:
        where = f"{CHUNKS} line {row + 1}"
        kw = typed_fields(self.records.raw(row) if raw is None else raw, _CHUNK_TYPES, where)
        check_spans(kw, _CHUNK_INTS, where)
        leaf_pos = int(np.searchsorted(self.leaf_ptr, row, side="right")) - 1
        leaf = self.leaves[leaf_pos]
        k = row - int(self.leaf_ptr[leaf_pos])
        if kw["source_node_id"] != leaf.node_id or kw["doc_path"] != leaf.doc_path \
                or kw["chunk_id"] != f"{leaf.node_id}_chunk_{k:02d}":
            raise IndexFormatError(f"{where}: chunk {kw['chunk_id']!r} is not chunk {k} of leaf {leaf.node_id} "
                                   f"as {LEAF_CHUNKS} says")
        return Chunk(**kw)


class Index:
    """A loaded index: what retrieval asks of a store.

    Rows: chunk ``i`` is line ``i`` of chunks.jsonl, row ``i`` of ``embeddings`` and of the BM25
    index; leaf ``j`` (pre-order) is row ``j`` of ``leaf_embeddings`` and of ``leaf_terms``; a
    leaf's (and a document's) chunks are contiguous rows. Nodes, chunks and texts are read from
    disk when used; ``root``, ``nodes``, ``leaves`` and ``leaf_rows`` behave as the in-memory tree did.
    """

    def __init__(self, path: Path, metadata: dict[str, Any], tree: NodeTable, records: Records,
                 embeddings: np.ndarray, leaf_embeddings: np.ndarray, leaf_ptr: np.ndarray, search: Search) -> None:
        self.path = path
        self.metadata = metadata
        self.tree = tree
        self.embeddings = embeddings
        self.leaf_embeddings = leaf_embeddings
        """Vectors by row (memory-mapped files, or fetched from an engine): for updates and ``verify``;
        retrieval scores through ``search``."""
        self.leaf_ptr = leaf_ptr
        """leaves[i] (pre-order) owns chunk rows [leaf_ptr[i], leaf_ptr[i+1])."""
        self.search = search
        """How retrieval scores chunks and leaves (indexing/search.py): the files' arrays or an engine."""
        self.nodes: Mapping[str, TreeNode] = NodeMap(tree)
        self.leaves: Sequence[TreeNode] = LeafList(tree)
        self.leaf_rows: Mapping[str, tuple[int, int]] = LeafRows(tree, leaf_ptr)
        self._chunk_table = ChunkTable(records, leaf_ptr, self.leaves)
        self.chunks: Sequence[Chunk] = self._chunk_table
        self.doc_rows = search.rows.doc_rows if isinstance(getattr(search, "rows", None), ChunkRows) \
            else doc_rows(tree, leaf_ptr)  # the search's own table when it has one (100,000 documents: ~0.15 s)
        self.text_keys: dict[str, np.ndarray] = {}
        """CHUNK_KEYS / LEAF_KEYS -> (rows, KEY_BYTES) digests of the texts the vectors embed (for updates)."""
        self.kg: Any = None
        """The long-leaf graphs (indexing/kg_store.GraphTable), when the build made them."""
        self.segments: Any = None
        """A segmented index's ``segments.SegmentsMeta`` (a base and deltas), None for a fully built one."""

    @property
    def root(self) -> TreeNode:
        return self.tree.node(0)

    @property
    def embedder_identity(self) -> dict[str, Any]:
        return dict(self.metadata["embedder"])

    def prefetch_chunks(self, rows: Iterable[int]) -> None:
        """The chunk records of ``rows`` read together before they are used one by one: on an engine
        one statement instead of one per record (a question reads tens); on files their lines are
        requested from the disk together.
        Their leaves' node records too: a chunk is checked against its leaf when read."""
        want = np.fromiter((int(r) for r in rows), dtype=np.int64)
        want = want[(want >= 0) & (want < len(self._chunk_table))]
        if not len(want):
            return
        self.prefetch_leaves(np.unique(leaves_of_rows(self.leaf_ptr, want)).tolist())
        self._chunk_table.prefetch(want.tolist())

    def prefetch_leaves(self, positions: Iterable[int]) -> None:
        """The node records of leaves ``positions`` (pre-order leaf numbers) read together, as
        ``prefetch_chunks``."""
        pos = np.fromiter((int(p) for p in positions), dtype=np.int64)
        self.tree.prefetch(self.tree.leaf_rows[pos[(pos >= 0) & (pos < len(self.tree.leaf_rows))]].tolist())

    def prefetch_contents(self, node_ids: Iterable[str]) -> None:
        """The section texts of ``node_ids`` read together before they are used one by one (an
        engine: one statement instead of one per text); on files nothing to do."""
        rows = (self.tree.row_of_id(i) for i in dict.fromkeys(node_ids))
        self.tree.prefetch_contents(r for r in rows if r is not None)

    def get_node(self, node_id: str) -> TreeNode | None:
        return self.nodes.get(node_id)

    def leaf_positions(self, doc_paths: set[str] | None) -> np.ndarray:
        """Leaf numbers (ascending) of the documents in ``doc_paths`` (all leaves for None)."""
        n = len(self.tree.leaf_rows)
        if doc_paths is None:
            return np.arange(n)
        ranges = self._doc_leaf_ranges
        parts = [np.arange(*ranges[d]) for d in sorted(doc_paths) if d in ranges]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    @cached_property
    def _doc_leaf_ranges(self) -> dict[str, tuple[int, int]]:
        """Document path -> its leaf numbers [a, b). Computed once (two threads racing compute the
        same immutable value; either wins)."""
        n = len(self.tree.leaf_rows)
        docs = self.tree.doc[self.tree.leaf_rows]
        starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if n else np.zeros(0, dtype=np.int64)
        ends = np.r_[starts[1:], n]
        return {self.tree.doc_paths[int(docs[a])]: (int(a), int(b)) for a, b in zip(starts, ends)}

    @cached_property
    def card_terms(self) -> CardSet:
        """The documents' cards as questions are matched with them (tree_builder.doc_card), read once
        from the metadata; empty for an index built before cards."""
        return cards_of(self.metadata.get("documents"))

    @cached_property
    def layout(self) -> RowLayout:
        """Row -> leaf / section / document positions (the section ranker's groups), computed once."""
        return row_layout(self.tree, self.leaf_ptr, self.doc_rows)


def text_key(text: str) -> bytes:
    """Digest of the exact text a vector embeds (chunk_text_keys.npy): how an update finds reusable vectors."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


# --------------------------------------------------------------------------- read

def _check_metadata(meta: Any, path: Path) -> dict[str, Any]:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise IndexFormatError(f"{METADATA} at {path} is not a TreeRAG index")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{METADATA}: index format version {version!r} is not supported (this TreeRAG reads "
            f"version {FORMAT_VERSION}); rebuild the index")
    require(meta, "build_id", str, METADATA)
    counts = require(meta, "counts", dict, METADATA)
    for key in ("documents", "nodes", "leaves", "chunks"):
        if require(counts, key, int, f"{METADATA} counts") < 0:
            raise IndexFormatError(f"{METADATA} counts: {key} is negative")
    emb = require(meta, "embedder", dict, METADATA)
    require(emb, "name", str, f"{METADATA} embedder")
    require(emb, "model_id", str, f"{METADATA} embedder")
    if require(emb, "dim", int, f"{METADATA} embedder") <= 0:
        raise IndexFormatError(f"{METADATA} embedder: dim must be positive")
    docs = require(meta, "documents", list, METADATA)
    if len(docs) != counts["documents"]:
        raise IndexFormatError(f"{METADATA} lists {len(docs)} documents but counts {counts['documents']}")
    if not all(type(d) is dict and type(d.get("path")) is str and type(d.get("title")) is str  # noqa: E721
               and type(d.get("content_hash")) is str for d in docs):  # fast path; the loop names the fault
        for d in docs:
            require(d, "path", str, f"{METADATA} documents")
            require(d, "title", str, f"{METADATA} documents")
            require(d, "content_hash", str, f"{METADATA} documents")
    parse_manifest(meta.get("files"), METADATA)
    return meta


def looks_like_index(directory: Path) -> bool:
    """A directory whose metadata.json (a regular file, bounded read) says it is a TreeRAG index:
    what a leftover ``.<name>.previous`` must be before anything renames it into place."""
    try:
        with IndexDir(directory) as files:
            meta = files.read_json(METADATA, METADATA_MAX_BYTES)
    except (IndexFormatError, OSError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT_NAME


def _open_index_dir(path: Path, verify: bool = False) -> IndexDir:
    recover_directory(path, looks_like_index)
    try:
        files = IndexDir(path, verify)
    except IndexFileMissing:
        raise IndexFormatError(
            f"no index at {path} (build one with: python main.py index --input DOCS --output {path})") from None
    try:
        os.stat(METADATA, dir_fd=files.fd, follow_symlinks=False)
    except FileNotFoundError:
        if files.replaced():  # a rebuild swapped the directory (the old one is being removed): retry
            return files
        files.close()
        raise IndexFormatError(not_an_index_message(path)) from None
    except OSError:
        pass  # reading it says what is wrong
    return files


DOCUMENT_SCAN_ENTRIES = 1000
"""Directory entries looked at to tell a folder of documents from an empty or foreign folder."""


def not_an_index_message(path: Path) -> str:
    """A directory without metadata.json: most often the documents themselves were named as the
    index, and the fix is to index them first, so the message says which command to run."""
    from tree_builder.readers import SUFFIX_KINDS  # the readers only for this message: a query never imports them

    has_docs = False
    try:
        with os.scandir(path) as entries:
            for n, entry in enumerate(entries):
                if n >= DOCUMENT_SCAN_ENTRIES or has_docs:
                    break
                has_docs = Path(entry.name).suffix.lower() in SUFFIX_KINDS
    except OSError:
        pass
    if has_docs:
        return (f"{path} is a folder of documents, not an index (it has no {METADATA}): index it first with "
                f"python main.py index --input {path} --output INDEX_DIR, then query --index INDEX_DIR")
    return (f"{path} is not a TreeRAG index (it has no {METADATA}); build one with: "
            f"python main.py index --input DOCS --output {path}")


def read_metadata(path: Path) -> dict[str, Any]:
    path = index_dir_path(path)
    with _open_index_dir(path) as files:
        return _check_metadata(files.read_json(METADATA, METADATA_MAX_BYTES), path)


def load_index(path: Path, mmap: bool = True, verify: bool = False) -> Index:
    """Load one consistent version of the index at ``path``.

    A rebuild that swaps the directory while this runs makes a file vanish or
    mismatch the manifest; then the load starts over on the new directory.
    ``verify``: full sha256 of every file (see ``verify_index`` for the rest).
    """
    path = index_dir_path(path)
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


def _load_from(files: IndexDir, path: Path, mmap: bool) -> Index:
    meta = _check_metadata(files.read_json(METADATA, METADATA_MAX_BYTES), path)
    files.hold_all(parse_manifest(meta["files"], METADATA))
    if "store" in meta:  # an engine holds the records, vectors and full text; this directory the structure
        return _load_engine(files, path, meta)
    if SEGMENTS in meta:  # a base and delta segments (indexing/segments.py)
        parts = load_segmented(files, path, meta, mmap)
        index = Index(path, meta, parts.tree, parts.records, parts.embeddings,  # type: ignore[arg-type]
                      parts.leaf_embeddings, parts.leaf_ptr, parts.search)
        index.text_keys.update(parts.text_keys)  # type: ignore[arg-type]
        index.segments = parts.segments
        if not files.verify:
            _advise_scattered(index, index.chunks.records, index.tree)
        return index
    counts = meta["counts"]
    dim = meta["embedder"]["dim"]
    if not files.verify:
        files.will_need(_read_at_load(meta, dim))
    tree, leaf_ptr = _tree_structure(files, meta, lambda n: load_records(files, NODES, NODE_OFFSETS, n),
                                     lambda n: load_records(files, NODE_CONTENTS, NODE_CONTENT_OFFSETS, n))
    n_leaves, n_chunks = len(tree.leaf_rows), counts["chunks"]
    records = load_records(files, CHUNKS, CHUNK_OFFSETS, n_chunks)
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
        raise IndexFormatError(f"{LEAF_TERMS_PREFIX}* covers {leaf_terms.n_rows} leaves but {NODE_TABLE} has {n_leaves}")
    search = FileSearch(emb, leaf_emb, bm25, leaf_terms, ChunkRows(leaf_ptr, doc_rows(tree, leaf_ptr)),
                        _load_ann(files, meta, n_chunks, n_leaves, dim), directory=path)
    index = Index(path, meta, tree, records, emb, leaf_emb, leaf_ptr, search)
    if not files.verify:
        _advise_scattered(index, records, tree)
    for name, rows in ((CHUNK_KEYS, n_chunks), (LEAF_KEYS, n_leaves)):
        keys = files.read_array(name, mmap)
        if keys.dtype != np.uint8 or keys.shape != (rows, KEY_BYTES):
            raise IndexFormatError(f"{name} has shape {keys.shape} {keys.dtype}, expected ({rows}, {KEY_BYTES}) uint8")
        index.text_keys[name] = keys
    attach_graphs(index, files)
    return index


def _read_at_load(meta: dict[str, Any], dim: int) -> dict[str, int]:
    """File name -> the bytes ``_load_from`` reads of it (-1: all), requested together beforehand
    (IndexDir.will_need). The ANN files: their head (centroids, codebooks, list sizes); their lists
    are mapped and read by the questions that scan them."""
    whole = [NODE_TABLE, NODE_TOC_TOKENS, LEAF_CHUNKS]
    for names in (file_names(), file_names(LEAF_TERMS_PREFIX)):
        vocab, indptr, _, _, doc_len, _, _ = names
        whole += [vocab, indptr, doc_len]
    out = dict.fromkeys(whole, -1)
    if isinstance(meta.get("ann"), dict):
        for entry in meta["ann"].values():
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                out[entry["file"]] = head_bytes(entry, dim)
    return out


def _advise_scattered(index: Index, records: Records, tree: NodeTable) -> None:
    """A question reads scattered records, and scattered vectors when an ANN picks them (not the
    exact path, which scans a range): no read-ahead around each (index_files.advise_random). The
    postings too: a question reads its terms' postings, which it requests together beforehand
    (BM25Index.will_need), and a scope's few rows of term ids and their row pointers; the disk's
    read-ahead (8 MB on this machine) around each of those reads made a first question read most of
    bm25_row_terms.npy."""
    ann = getattr(index.search, "ann", {})
    postings = [(bm.rows, bm.tf, bm.row_terms, bm.row_indptr) for bm in (getattr(index.search, "bm25", None),
                                                          getattr(index.search, "leaf_terms", None))
                if isinstance(bm, BM25Index)]
    advise_random(records.data, tree.records.data, tree.contents.data, *postings,
                  *(v for kind, v in (("chunks", index.embeddings), ("leaves", index.leaf_embeddings)) if kind in ann))


def _load_ann(files: IndexDir, meta: dict[str, Any], n_chunks: int, n_leaves: int, dim: int) -> dict[str, Any]:
    """The index's ANN files (indexing/ann_index.py), memory-mapped; none when it was built without."""
    if "ann" not in meta:
        return {}
    entries = ann_index.parse_meta(meta["ann"], {"chunks": n_chunks, "leaves": n_leaves})
    return {kind: ann_index.AnnIndex.open(files, e["file"], e["rows"], dim, e) for kind, e in entries.items()}


def _tree_structure(files: IndexDir, meta: dict[str, Any], nodes: Any, contents: Any) -> tuple[NodeTable, np.ndarray]:
    """The node table (checked), its TOC costs and the leaf -> chunk row table, as every store keeps them."""
    counts = meta["counts"]
    n_rows = counts["nodes"] + 1  # + the root
    table = files.read_array(NODE_TABLE, mmap=False)
    if table.dtype != np.int32 or table.shape != (n_rows, 3):
        raise IndexFormatError(f"{NODE_TABLE} has shape {table.shape} {table.dtype}, expected ({n_rows}, 3) int32")
    tree = NodeTable(table, nodes(n_rows), contents(n_rows), [d["path"] for d in meta["documents"]])
    tree.check(NODE_TABLE)
    toc = files.read_array(NODE_TOC_TOKENS, mmap=False)
    if toc.dtype != np.int32 or toc.shape != (n_rows,) or (n_rows and int(toc.min()) < 0):
        raise IndexFormatError(f"{NODE_TOC_TOKENS} has shape {toc.shape} {toc.dtype}, expected ({n_rows},) "
                               "non-negative int32")
    tree.toc_tokens = toc
    n_leaves = len(tree.leaf_rows)
    if n_leaves != counts["leaves"]:
        raise IndexFormatError(f"{NODE_TABLE} has {n_leaves} leaves but {METADATA} says {counts['leaves']}")
    n_chunks = counts["chunks"]
    leaf_ptr = files.read_array(LEAF_CHUNKS, mmap=False)
    if (leaf_ptr.dtype != np.int64 or leaf_ptr.shape != (n_leaves + 1,) or leaf_ptr[0] != 0
            or leaf_ptr[-1] != n_chunks or bool(np.any(np.diff(leaf_ptr) < 0))):
        raise IndexFormatError(f"{LEAF_CHUNKS} does not split the {n_chunks} chunks among the {n_leaves} leaves")
    return tree, leaf_ptr


def _load_engine(files: IndexDir, path: Path, meta: dict[str, Any]) -> Index:
    """An index whose records, vectors and full text live in seekdb/OceanBase (indexing/seekdb/)."""
    from indexing.seekdb.engine import Engine  # noqa: PLC0415 - the engine loads only when used
    from indexing.seekdb.rows import EngineRecords, EngineRows
    from indexing.seekdb.schema import ensure_memory_budget, memory_budget_needed, table_names
    from indexing.seekdb.search import SeekdbSearch
    from indexing.seekdb.uri import store_uri_of

    uri = store_uri_of(meta)
    prefix = meta["store"]["prefix"]
    scripts = meta["store"].get("scripts", [])
    engine = Engine(uri)
    names = table_names(prefix)
    counts, dim = meta["counts"], meta["embedder"]["dim"]
    tree, leaf_ptr = _tree_structure(
        files, meta, lambda n: EngineRecords(engine, names["nodes"], "record", n),
        lambda n: EngineRecords(engine, names["nodes"], "content", n))
    n_chunks, n_leaves = counts["chunks"], len(tree.leaf_rows)
    emb = EngineRows(engine, names["chunks"], "row_id", "emb", n_chunks, dim, "vector")
    leaf_emb = EngineRows(engine, names["leaves"], "leaf", "emb", n_leaves, dim, "vector")
    records = EngineRecords(engine, names["chunks"], "record", n_chunks)
    doc_numbers = {d["path"]: i for i, d in enumerate(meta["documents"])}
    if uri.embedded:  # its vector indexes load into this process's engine: the budget must hold them
        kind = str(meta["store"].get("vector_index", "hnsw"))  # indexes built before the choice: hnsw
        ensure_memory_budget(engine, memory_budget_needed(counts["chunks"] + len(tree.leaf_rows), dim, kind))
    search = SeekdbSearch(engine, prefix, dim, ChunkRows(leaf_ptr, doc_rows(tree, leaf_ptr)), doc_numbers,
                          frozenset(s for s in scripts if isinstance(s, str)))
    index = Index(path, meta, tree, records, emb, leaf_emb, leaf_ptr, search)  # type: ignore[arg-type]
    index.text_keys[CHUNK_KEYS] = EngineRows(engine, names["chunks"], "row_id", "tkey", n_chunks, dim,
                                                 "key")  # type: ignore[assignment]
    index.text_keys[LEAF_KEYS] = EngineRows(engine, names["leaves"], "leaf", "tkey", n_leaves, dim,
                                                "key")  # type: ignore[assignment]
    kg = meta.get("kg")
    if isinstance(kg, dict) and kg.get("mode", "off") != "off":
        n_graphs = kg.get("graphs")
        if not isinstance(n_graphs, int) or n_graphs < 0:
            raise IndexFormatError(f"{METADATA}: kg.graphs must be a count")
        attach_records(index, files, EngineRecords(engine, names["kg"], "record", n_graphs))
    return index


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
    ann_rows: int = 0
    graphs: Any = None
    """kg_graph.GraphStats recomputed from every stored graph, when the index has graphs."""

    def line(self, path: Path) -> str:
        ann = f", the ANN files hold the codes of their {self.ann_rows} vectors" if self.ann_rows else ""
        kg = ""
        if self.graphs is not None:
            g = self.graphs
            kg = (f"; {g.graphs} long-leaf graphs are valid ({g.nodes} nodes, {g.edges} edges, "
                  f"max degree {g.max_degree}" + (f" in {g.max_degree_leaf}" if g.max_degree_leaf else "") + ")")
        return (f"index at {path} is intact: {self.files} files match their sha256, {self.chunks} chunk records "
                f"and {self.nodes} node contents are valid, every vector is finite{ann}" + kg)


def verify_index(path: Path) -> Verified:
    """Everything ``load_index`` leaves for later: full hashes, every record, every vector."""
    index = load_index(path, verify=True)
    for row in range(len(index.chunks)):
        index.chunks[row]
    for row in range(len(index.tree)):
        index.tree.node(row)
        index.tree.content(row)
    _require_finite(index.embeddings, EMBEDDINGS)
    _require_finite(index.leaf_embeddings, LEAF_EMBEDDINGS)
    ann = getattr(index.search, "ann", {})
    if ann:
        for kind, a in ann.items():
            vectors = index.embeddings if kind == "chunks" else index.leaf_embeddings
            if hasattr(a, "base"):  # a segmented index: the base's ANN files hold the base's vectors
                a, vectors = a.base, vectors.parts[0]
            ann_index.verify(a, vectors)
    return Verified(files=len(index.metadata["files"]), chunks=len(index.chunks), nodes=len(index.nodes),
                    ann_rows=sum(a.rows for a in ann.values()), graphs=verify_graphs(index))
