"""Loading a segmented index (a base and delta segments, indexing/segments.py) as one ``Index``.

Each segment's files are read and checked as a full build's are (shapes, offset tables, pointer
tables, BM25 vocabularies); the logical tree is composed from their node tables and checked as one
tree; every other read goes through the segments' runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from indexing.bm25_builder import BM25Index
from indexing.file_search import FileSearch
from indexing.index_files import (CHUNK_KEYS, CHUNK_OFFSETS, CHUNKS, EMBEDDINGS, KEY_BYTES, LEAF_CHUNKS, LEAF_EMBEDDINGS,
                                  LEAF_KEYS, IndexDir)
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from indexing.node_table import (NODE_CONTENT_OFFSETS, NODE_CONTENTS, NODE_OFFSETS, NODE_TABLE, NODE_TOC_TOKENS,
                                 NODES, NodeTable, doc_rows)
from indexing.records import load_records
from indexing.search import ChunkRows
from indexing.segment_bm25 import SegmentBM25
from indexing.segments import SEGMENTS, PiecewiseRows, PieceRecords, Runs, SegmentsMeta, compose
from utils.errors import IndexFormatError
from indexing import ann_index


@dataclass(frozen=True)
class SegmentedParts:
    """What a segmented index directory holds, composed into one logical index: ``index_store`` builds
    its ``Index`` from these (so this module, which it calls, does not import it back)."""

    tree: NodeTable
    records: PieceRecords
    embeddings: PiecewiseRows
    leaf_embeddings: PiecewiseRows
    leaf_ptr: np.ndarray
    search: FileSearch
    text_keys: dict[str, PiecewiseRows]
    segments: SegmentsMeta


def load_segmented(files: IndexDir, path: Path, meta: dict[str, Any], mmap: bool) -> SegmentedParts:
    """The parts of a segmented index directory (index_store.load_index builds the ``Index``)."""
    seg = SegmentsMeta.parse(meta.get(SEGMENTS))
    if "kg" in meta and isinstance(meta["kg"], dict) and meta["kg"].get("mode", "off") != "off":
        raise IndexFormatError("metadata.json: an index with long-leaf graphs cannot have delta segments")
    dim = meta["embedder"]["dim"]
    tables, tocs, ptrs, nodes, contents, chunks, embs, leaf_embs, bm25s, terms = ([] for _ in range(10))
    keys: dict[str, list[np.ndarray]] = {CHUNK_KEYS: [], LEAF_KEYS: []}
    for k, s in enumerate(seg.segments):
        p = s.prefix
        table = files.read_array(p + NODE_TABLE, mmap=False)
        if table.dtype != np.int32 or table.shape != (s.nodes, 3):
            raise IndexFormatError(f"{p}{NODE_TABLE} has shape {table.shape} {table.dtype}, expected ({s.nodes}, 3) int32")
        toc = files.read_array(p + NODE_TOC_TOKENS, mmap=False)
        if toc.dtype != np.int32 or toc.shape != (s.nodes,) or (s.nodes and int(toc.min()) < 0):
            raise IndexFormatError(f"{p}{NODE_TOC_TOKENS} has shape {toc.shape} {toc.dtype}, expected ({s.nodes},)")
        ptr = files.read_array(p + LEAF_CHUNKS, mmap=False)
        if (ptr.dtype != np.int64 or ptr.shape != (s.leaves + 1,) or ptr[0] != 0 or ptr[-1] != s.chunks
                or bool(np.any(np.diff(ptr) < 0))):
            raise IndexFormatError(f"{p}{LEAF_CHUNKS} does not split the {s.chunks} chunks among {s.leaves} leaves")
        tables.append(table)
        tocs.append(toc)
        ptrs.append(ptr)
        nodes.append(load_records(files, p + NODES, p + NODE_OFFSETS, s.nodes))
        contents.append(load_records(files, p + NODE_CONTENTS, p + NODE_CONTENT_OFFSETS, s.nodes))
        chunks.append(load_records(files, p + CHUNKS, p + CHUNK_OFFSETS, s.chunks))
        for name, rows, out in ((EMBEDDINGS, s.chunks, embs), (LEAF_EMBEDDINGS, s.leaves, leaf_embs)):
            a = files.read_array(p + name, mmap)
            if a.dtype != np.float32 or a.shape != (rows, dim):
                raise IndexFormatError(f"{p}{name} has shape {a.shape} {a.dtype}, expected ({rows}, {dim}) float32")
            out.append(a)
        for name, rows in ((CHUNK_KEYS, s.chunks), (LEAF_KEYS, s.leaves)):
            a = files.read_array(p + name, mmap)
            if a.dtype != np.uint8 or a.shape != (rows, KEY_BYTES):
                raise IndexFormatError(f"{p}{name} has shape {a.shape} {a.dtype}, expected ({rows}, {KEY_BYTES}) uint8")
            keys[name].append(a)
        b = BM25Index.load(path, mmap=mmap, files=files, prefix=p + "bm25_")
        t = BM25Index.load(path, mmap=mmap, files=files, prefix=p + LEAF_TERMS_PREFIX)
        if b.n_rows != s.chunks or t.n_rows != s.leaves:
            raise IndexFormatError(f"segment {k}: its BM25 files cover {b.n_rows} chunks and {t.n_rows} leaves, "
                                   f"metadata.json says {s.chunks} and {s.leaves}")
        bm25s.append(b)
        terms.append(t)
    c = compose(seg, tables, tocs, ptrs)
    tree = NodeTable(c.table, PieceRecords(nodes, c.nodes), PieceRecords(contents, c.nodes), c.doc_paths, c.nodes)
    tree.check(NODE_TABLE)
    tree.toc_tokens = c.toc
    counts = meta["counts"]
    if (len(tree) - 1, len(tree.leaf_rows), c.chunks.n, len(c.doc_paths)) != \
            (counts["nodes"], counts["leaves"], counts["chunks"], counts["documents"]):
        raise IndexFormatError("metadata.json counts differ from what its segments hold")
    if [d["path"] for d in meta["documents"]] != c.doc_paths:
        raise IndexFormatError("metadata.json documents differ from its segments' live documents")
    emb = PiecewiseRows(embs, c.chunks)
    leaf_emb = PiecewiseRows(leaf_embs, c.leaves)
    ann = _segment_ann(files, meta, seg, c, emb, leaf_emb, dim)
    by_document = doc_rows(tree, c.leaf_ptr)
    search = FileSearch(emb, leaf_emb, SegmentBM25(bm25s, c.chunks), SegmentBM25(terms, c.leaves),  # type: ignore[arg-type]
                        ChunkRows(c.leaf_ptr, by_document), ann, directory=path)
    text_keys = {name: PiecewiseRows(parts, c.chunks if name == CHUNK_KEYS else c.leaves)
                 for name, parts in keys.items()}
    return SegmentedParts(tree, PieceRecords(chunks, c.chunks), emb, leaf_emb, c.leaf_ptr, search, text_keys, seg)


def _segment_ann(files: IndexDir, meta: dict[str, Any], seg: SegmentsMeta, c: Any, emb: PiecewiseRows,
                 leaf_emb: PiecewiseRows, dim: int) -> dict[str, Any]:
    """The base's ANN files, their rows mapped to logical ones; the deltas' rows are scanned exactly."""
    if "ann" not in meta:
        return {}
    base = seg.segments[0]
    entries = ann_index.parse_meta(meta["ann"], {"chunks": base.chunks, "leaves": base.leaves})
    out = {}
    for kind, e in entries.items():
        ann = ann_index.AnnIndex.open(files, e["file"], e["rows"], dim, e)
        runs, vecs = (c.chunks, emb) if kind == "chunks" else (c.leaves, leaf_emb)
        out[kind] = SegmentAnn(ann, runs, vecs)
    return out


class SegmentAnn:
    """``AnnIndex.search`` over a segmented index: the base's ANN (its deleted rows dropped, as many
    more asked for, up to twice the rows wanted) and every delta row scored exactly, the best kept."""

    def __init__(self, base: Any, runs: Runs, vectors: PiecewiseRows) -> None:
        self.base = base
        self.runs = runs
        self.vectors = vectors
        self.name = base.name
        self.rows = runs.n
        base_rows = int(runs.seg_start[1])
        in_base = runs.phys_start < base_rows
        self.deleted = base_rows - int(runs.length[in_base].sum())
        self.extra = np.concatenate([np.arange(ls, ls + ln) for ls, ln, b in
                                     zip(runs.log_start.tolist(), runs.length.tolist(), in_base.tolist()) if not b]
                                    or [np.zeros(0, dtype=np.int64)]).astype(np.int64)

    @property
    def index(self) -> Any:
        return self.base.index

    @property
    def mapped_bytes(self) -> int:
        """The base ANN's mapped file (``AnnIndex.mapped_bytes``): the deltas have none."""
        return int(self.base.mapped_bytes)

    def proposals(self, base: int, growth: float) -> int:
        """As the base's ANN proposes (``AnnIndex.proposals``)."""
        return int(self.base.proposals(base, growth))

    def centroid_scores(self, qvec: np.ndarray) -> Any:
        """The base ANN's product with its centroids (``AnnIndex.centroid_scores``)."""
        return self.base.centroid_scores(qvec)

    def search(self, qvec: np.ndarray, k: int, probe: float, max_lists: int | None = None, scores: Any = None,
               far: bool = False) -> np.ndarray:
        """``AnnIndex.search``: ``far`` the least similar rows, ``scores`` the base's shared product."""
        ids = self.base.search(qvec, int(k) + min(self.deleted, int(k)), probe, max_lists, scores=scores, far=far)
        log = self.runs.to_log(ids)
        log = log[log >= 0][:int(k)]
        if not len(self.extra):
            return log
        q = np.asarray(qvec, dtype=np.float32)
        dots = np.asarray(self.vectors[self.extra] @ (-q if far else q))
        best = self.extra[np.argsort(-dots, kind="stable")[:int(k)]]
        return np.concatenate([log, best])

    def search_parts(self, qvec: np.ndarray, k: int, probe: float, parts: int,
                     scores: Any = None) -> list[Callable[[], tuple[np.ndarray, np.ndarray]]]:
        """``AnnIndex.search_parts`` in one part: the base's proposals with its deleted rows dropped are
        known only after the whole scan, so a segmented index's scan is not split."""
        return [lambda: (np.zeros(0, dtype=np.float32), self.search(qvec, k, probe, scores=scores))]

    def merge_parts(self, found: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
        """The one part's rows (``search_parts``), as ``search`` returns them."""
        return found[0][1]
