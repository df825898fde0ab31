"""An index of a base and delta segments, read as the one index a full build would have written.

Why segments: rewriting every file of the index for one changed document costs what a full build
writes (more than the free disk at 100,000 documents: docs/scale.md). An update writes the changed documents as a small
**delta segment** (the same files under a ``deltaN.`` prefix, node ids after the last ones) and
marks the replaced documents of earlier segments **deleted**; one rename of ``metadata.json``
publishes it (indexing/delta_update.py). Nothing already written is touched.

How it is read: the segments' rows are numbered one after another (physical rows: the base, then
each delta, the ids the records carry); the rows of deleted documents are cut out, and what is
left is numbered again from 0 (logical rows). The logical index is exactly the index a full
build of the changed folder writes with its documents in this order (the base's live documents,
then each delta's): the same tree, leaves, chunks and vectors, BM25 with the statistics of the
live rows. Retrieval sees logical rows only; every read maps them to a segment's file through
``Runs`` (maximal stretches of live rows inside one segment: a handful after a few updates).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from indexing.node_columns import DOC, KIND, PARENT
from utils.errors import IndexFormatError
from indexing import index_files

SEGMENTS = "segments"
"""metadata.json key of a segmented index (absent in a fully built one)."""


def delta_prefix(k: int) -> str:
    """File name prefix of delta segment ``k`` (1, 2, ...)."""
    return f"delta{k}."


def true_spans(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of True in ``mask``: the live (or deleted) rows as ranges."""
    edges = np.flatnonzero(np.diff(np.r_[False, np.asarray(mask, dtype=bool), False].astype(np.int8)))
    return edges[0::2], edges[1::2]


@dataclass(frozen=True, eq=False)
class Runs:
    """Logical rows -> (segment, local row) for one kind of row (nodes, leaves or chunks).

    ``log_start``/``phys_start``/``length``: stretches of rows contiguous in both numberings, in
    logical order (a document's rows are one stretch; neighbours in both merge); ``by_phys`` the
    stretches sorted by physical row; ``seg_start``: each segment's first physical row (plus the
    end); ``local0``: the local row of a segment's first physical row (1 for a delta's nodes, whose
    local row 0 is a placeholder root).
    """

    log_start: np.ndarray
    phys_start: np.ndarray
    length: np.ndarray
    seg_start: np.ndarray
    local0: np.ndarray
    by_phys: np.ndarray

    @classmethod
    def from_ranges(cls, starts: np.ndarray, lengths: np.ndarray, seg_start: Sequence[int],
                    local0: Sequence[int] | None = None) -> "Runs":
        """Runs of the physical ranges ``[starts[i], starts[i] + lengths[i])`` taken in this order."""
        seg = np.asarray(seg_start, dtype=np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        keep = lengths > 0
        starts, lengths = starts[keep], lengths[keep]
        if len(starts):  # a range continuing the previous one in the same segment joins it
            same_seg = np.searchsorted(seg, starts, side="right") == np.searchsorted(seg, np.r_[starts[:1], starts[:-1]],
                                                                                   side="right")
            joins = np.r_[False, (starts[1:] == starts[:-1] + lengths[:-1]) & same_seg[1:]]
            group = np.cumsum(~joins) - 1
            first = np.flatnonzero(~joins)
            starts = starts[first]
            lengths = np.bincount(group, weights=lengths).astype(np.int64)
        log = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64) if len(lengths) else np.zeros(0, dtype=np.int64)
        return cls(log, starts, lengths, seg,
                   np.zeros(len(seg) - 1, dtype=np.int64) if local0 is None else np.asarray(local0, dtype=np.int64),
                   np.argsort(starts, kind="stable"))

    @property
    def n(self) -> int:
        return int(self.length.sum()) if len(self.length) else 0

    @property
    def monotone(self) -> bool:
        """Whether logical order is physical order (no document moved)."""
        return bool(np.all(np.diff(self.phys_start) > 0)) if len(self.phys_start) > 1 else True

    def to_phys(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        r = np.searchsorted(self.log_start, rows, side="right") - 1
        return self.phys_start[r] + (rows - self.log_start[r])

    def to_log(self, phys: np.ndarray) -> np.ndarray:
        """Logical row of each physical row; -1 for a deleted one."""
        phys = np.asarray(phys, dtype=np.int64)
        if not len(self.length):
            return np.full(len(phys), -1, dtype=np.int64)
        sorted_starts = self.phys_start[self.by_phys]
        k = np.searchsorted(sorted_starts, phys, side="right") - 1
        r = self.by_phys[np.maximum(k, 0)]
        ok = (k >= 0) & (phys < self.phys_start[r] + self.length[r])
        return np.where(ok, self.log_start[r] + (phys - self.phys_start[r]), -1)

    def segment_of(self, phys: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.seg_start, np.asarray(phys, dtype=np.int64), side="right") - 1

    def local(self, phys: np.ndarray, seg: np.ndarray) -> np.ndarray:
        return phys - self.seg_start[seg] + self.local0[seg]

    def spans(self, a: int, b: int) -> list[tuple[int, int, int]]:
        """(segment, local start, local end) covering logical rows [a, b), in order."""
        out: list[tuple[int, int, int]] = []
        if b <= a:
            return out
        r = int(np.searchsorted(self.log_start, a, side="right")) - 1
        while a < b:
            ls, ps, ln = int(self.log_start[r]), int(self.phys_start[r]), int(self.length[r])
            take = min(b, ls + ln) - a
            p = ps + (a - ls)
            s = int(np.searchsorted(self.seg_start, p, side="right")) - 1
            lo = p - int(self.seg_start[s]) + int(self.local0[s])
            out.append((s, lo, lo + take))
            a += take
            r += 1
        return out

    def locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(segment, local row) of logical ``rows``."""
        phys = self.to_phys(rows)
        seg = self.segment_of(phys)
        return seg, self.local(phys, seg)


class PiecewiseRows:
    """Rows of several arrays (one per segment) read as one array in logical order.

    Why not concatenated: the base's arrays are memory-mapped gigabytes; a read maps its logical
    rows to the segments' files, so a leaf's or document's rows (one run) are a view of one file.
    """

    def __init__(self, parts: Sequence[Any], runs: Runs) -> None:
        self.parts = list(parts)
        self.runs = runs
        first = self.parts[0]
        self.dtype = first.dtype
        self.shape = (runs.n, *first.shape[1:])
        self.ndim = first.ndim

    def __len__(self) -> int:
        return self.shape[0]

    def _span_arrays(self, a: int, b: int) -> list[np.ndarray]:
        return [self.parts[s][lo:hi] for s, lo, hi in self.runs.spans(a, b)]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, tuple):  # rows, then columns
            return self[key[0]][(slice(None), *key[1:])] if not np.isscalar(key[0]) else self[key[0]][key[1:]]
        if isinstance(key, (int, np.integer)):
            k = int(key) + (len(self) if int(key) < 0 else 0)
            if not 0 <= k < len(self):
                raise IndexError(key)
            seg, loc = self.runs.locate(np.array([k]))
            return self.parts[int(seg[0])][int(loc[0])]
        if isinstance(key, slice):
            a, b, step = key.indices(len(self))
            if step != 1:
                return self[np.arange(a, b, step)]
            parts = self._span_arrays(a, b)
            if len(parts) == 1:
                return parts[0]
            if not parts:
                return np.zeros((0, *self.shape[1:]), dtype=self.dtype)
            return np.concatenate(parts)
        rows = np.asarray(key)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64)
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= len(self)):
            raise IndexError("row outside the index")
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype)
        if not len(rows):
            return out
        seg, loc = self.runs.locate(rows)
        for s in np.unique(seg).tolist():
            m = seg == s
            out[m] = self.parts[s][loc[m]]
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self[0:len(self)]
        return np.asarray(arr, dtype=dtype)

    def __matmul__(self, q: np.ndarray) -> np.ndarray:
        parts = [p @ q for p in self._span_arrays(0, len(self))]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.result_type(self.dtype, q))

    def touch_rows(self, rows: np.ndarray) -> None:
        """Read in the pages of ``rows`` in each segment's file (index_files.touch_rows)."""
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[(rows >= 0) & (rows < len(self))]
        if not len(rows):
            return
        seg, loc = self.runs.locate(rows)
        for s in np.unique(seg).tolist():
            index_files.touch_rows(self.parts[s], loc[seg == s])


class PieceRecords:
    """JSON-lines records of several segments read as one table in logical order (records.Records)."""

    def __init__(self, parts: Sequence[Any], runs: Runs) -> None:
        self.parts = list(parts)
        self.runs = runs
        self.name = parts[0].name

    @property
    def data(self) -> list[Any]:
        return [p.data for p in self.parts]

    def __len__(self) -> int:
        return self.runs.n

    def _at(self, i: int) -> tuple[Any, int]:
        seg, loc = self.runs.locate(np.array([int(i)]))
        return self.parts[int(seg[0])], int(loc[0])

    def raw(self, i: int) -> Any:
        part, loc = self._at(i)
        return part.raw(loc)

    def where(self, i: int) -> str:
        part, loc = self._at(i)
        return part.where(loc)


@dataclass(frozen=True)
class SegmentInfo:
    """One segment as metadata.json's ``segments`` lists it: its file prefix and row counts (local:
    a delta's node count includes its placeholder root row 0) and its documents' paths."""

    prefix: str
    nodes: int
    leaves: int
    chunks: int
    documents: tuple[str, ...]


@dataclass(frozen=True)
class SegmentsMeta:
    """metadata.json's ``segments``: the base and the deltas in order, and the deleted documents
    (numbers over every segment's documents, base first)."""

    segments: tuple[SegmentInfo, ...]
    deleted: frozenset[int]
    order: tuple[int, ...]
    """The live documents (numbers over every segment's documents) in the order a full build of the
    folder would hold them: the folder's walk order."""

    @property
    def deltas(self) -> int:
        return len(self.segments) - 1

    def to_dict(self) -> dict[str, Any]:
        return {"segments": [{"prefix": s.prefix, "nodes": s.nodes, "leaves": s.leaves, "chunks": s.chunks,
                              "documents": list(s.documents)} for s in self.segments],
                "deleted": sorted(self.deleted), "order": list(self.order)}

    @classmethod
    def parse(cls, raw: Any) -> "SegmentsMeta":
        where = f"metadata.json {SEGMENTS}"
        if not isinstance(raw, dict) or not isinstance(raw.get("segments"), list) or not raw["segments"] \
                or not isinstance(raw.get("deleted"), list):
            raise IndexFormatError(f"{where}: expected segments and deleted lists")
        segs = []
        for k, s in enumerate(raw["segments"]):
            if not isinstance(s, dict) or s.get("prefix") != ("" if k == 0 else delta_prefix(k)):
                raise IndexFormatError(f"{where}: segment {k} has no valid prefix")
            counts = [s.get(f) for f in ("nodes", "leaves", "chunks")]
            if not all(type(c) is int and c >= 0 for c in counts) or counts[0] < 1:  # noqa: E721
                raise IndexFormatError(f"{where}: segment {k} has invalid counts")
            docs = s.get("documents")
            if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
                raise IndexFormatError(f"{where}: segment {k} lists invalid documents")
            segs.append(SegmentInfo(s["prefix"], counts[0], counts[1], counts[2], tuple(docs)))
        total = sum(len(s.documents) for s in segs)
        deleted = raw["deleted"]
        if not all(type(d) is int and 0 <= d < total for d in deleted):  # noqa: E721
            raise IndexFormatError(f"{where}: a deleted document number is out of range")
        order = raw.get("order")
        if not isinstance(order, list) or not all(type(d) is int for d in order) \
                or sorted(order) != sorted(set(range(total)) - set(deleted)):  # noqa: E721
            raise IndexFormatError(f"{where}: order must list every live document once")
        return cls(tuple(segs), frozenset(deleted), tuple(order))

    def physical_documents(self) -> list[str]:
        return [p for s in self.segments for p in s.documents]

    def node_starts(self) -> list[int]:
        """First physical node row of each segment (a delta's placeholder root is not a row), + the end."""
        out = [0]
        for k, s in enumerate(self.segments):
            out.append(out[-1] + s.nodes - (1 if k else 0))
        return out

    def starts(self, kind: str) -> list[int]:
        out = [0]
        for s in self.segments:
            out.append(out[-1] + getattr(s, kind))
        return out


@dataclass(frozen=True, eq=False)
class Composed:
    """The logical tree of a segmented index and the maps from its rows to the segments' rows."""

    table: np.ndarray
    """int32 (nodes, 3): the node table in logical rows and logical document numbers."""
    toc: np.ndarray
    node_ids: np.ndarray
    """The id (physical row) of every logical node row."""
    leaf_ptr: np.ndarray
    doc_paths: list[str]
    live_docs: np.ndarray
    """Physical document numbers of the logical documents, in order."""
    nodes: Runs
    leaves: Runs
    chunks: Runs


def compose(meta: SegmentsMeta, tables: Sequence[np.ndarray], tocs: Sequence[np.ndarray],
            leaf_ptrs: Sequence[np.ndarray]) -> Composed:
    """The logical tree from each segment's node table, TOC costs and leaf -> chunk rows (all local):
    the root, then each live document's nodes in ``meta.order``."""
    node_start = meta.node_starts()
    doc_start = np.cumsum([0] + [len(s.documents) for s in meta.segments])
    n_docs = int(doc_start[-1])
    parent, doc, kind, toc, counts, leaf_doc = [], [], [], [], [], []
    for k, (t, c, lp) in enumerate(zip(tables, tocs, leaf_ptrs)):
        t = np.asarray(t, dtype=np.int64)
        if len(t) < 1 or int(t[0, KIND]) != 0 or int(t[0, PARENT]) != -1:
            raise IndexFormatError(f"segment {k}'s node table does not start with a root")
        skip = 1 if k else 0
        p = t[skip:, PARENT]
        if k:
            p = np.where(p <= 0, p, p + node_start[k] - 1)
        d = t[skip:, DOC]
        if len(d) - (0 if k else 1) and (int(d[1 - skip:].min()) < 0 or int(d.max()) >= len(meta.segments[k].documents)):
            raise IndexFormatError(f"segment {k}'s node table names a document it does not list")
        parent.append(p)
        doc.append(np.where(d >= 0, d + doc_start[k], -1))
        kind.append(t[skip:, KIND])
        toc.append(np.asarray(c[skip:], dtype=np.int32))
        n = len(t)
        ch = np.bincount(t[1:, PARENT], minlength=n) if n > 1 else np.zeros(n, dtype=np.int64)
        is_leaf = ch == 0
        is_leaf[0] = False
        if int(is_leaf.sum()) != len(lp) - 1:
            raise IndexFormatError(f"segment {k}: its leaf table does not match its node table")
        leaf_doc.append(t[is_leaf, DOC] + doc_start[k])
        counts.append(np.diff(np.asarray(lp, dtype=np.int64)))
    parent_a, doc_a, kind_a = np.concatenate(parent), np.concatenate(doc), np.concatenate(kind)
    leaf_doc_a, count_a = np.concatenate(leaf_doc), np.concatenate(counts)
    body = doc_a[1:]
    if len(body) and (np.any(np.diff(body) < 0) or np.any(np.diff(leaf_doc_a) < 0)):
        raise IndexFormatError("a document's nodes are not contiguous in the segments")
    order = np.asarray(meta.order, dtype=np.int64)
    # each document's physical nodes, leaves and chunks are one range (documents in number order)
    docs = np.arange(n_docs)
    n_lo = np.searchsorted(body, docs, side="left") + 1
    n_hi = np.searchsorted(body, docs, side="right") + 1
    l_lo = np.searchsorted(leaf_doc_a, docs, side="left")
    l_hi = np.searchsorted(leaf_doc_a, docs, side="right")
    chunk_ptr = np.r_[0, np.cumsum(count_a)].astype(np.int64)
    c_lo, c_hi = chunk_ptr[l_lo], chunk_ptr[l_hi]
    local0 = [0] + [1] * (len(tables) - 1)
    nodes = Runs.from_ranges(np.r_[0, n_lo[order]], np.r_[1, (n_hi - n_lo)[order]], node_start, local0)
    leaves = Runs.from_ranges(l_lo[order], (l_hi - l_lo)[order], meta.starts("leaves"))
    chunks = Runs.from_ranges(c_lo[order], (c_hi - c_lo)[order], meta.starts("chunks"))
    rows = nodes.to_phys(np.arange(nodes.n))
    node_log = np.full(len(parent_a), -1, dtype=np.int64)
    node_log[rows] = np.arange(len(rows))
    doc_map = np.full(n_docs, -1, dtype=np.int64)
    doc_map[order] = np.arange(len(order))
    p = parent_a[rows]
    lp = np.where(p < 0, -1, node_log[np.maximum(p, 0)])
    if np.any(lp[1:] < 0):
        raise IndexFormatError("a live node's parent is deleted or missing in the segments")
    table = np.stack([lp, np.where(doc_a[rows] < 0, -1, doc_map[np.maximum(doc_a[rows], 0)]), kind_a[rows]],
                     axis=1).astype(np.int32)
    leaf_rows = leaves.to_phys(np.arange(leaves.n))
    leaf_ptr = np.r_[0, np.cumsum(count_a[leaf_rows])].astype(np.int64)
    physical = meta.physical_documents()
    return Composed(table=table, toc=np.concatenate(toc)[rows], node_ids=rows, leaf_ptr=leaf_ptr,
                    doc_paths=[physical[i] for i in order.tolist()], live_docs=order,
                    nodes=nodes, leaves=leaves, chunks=chunks)
