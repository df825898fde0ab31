"""Approximate nearest neighbours for whole-collection dense search: IVF-PQ (faiss).

Why: an exact whole-collection scan reads every float vector. At 10,000 generated
documents that is 1.05M chunk rows of 384 float32 (1.6 GB) per query process, and
at 100,000 documents 16 GB, more than fits beside anything else. An IVF-PQ index
keeps each vector as 48 bytes (product quantisation of its residual to one of
~4*sqrt(n) k-means centroids); a query scans ``ann_probe`` of the lists, takes its
``ann_candidates`` best rows (more as the lists multiply: ``AnnIndex.proposals``) and
the caller re-scores only those on their float vectors. Leaf and document scopes never come here: they are scored exactly.

Why faiss IVF-PQ (measured on this project's generated corpus, hash embeddings,
98k rows, one thread; docs/scale.md): HNSW (faiss or usearch, int8) reached a
higher recall per query, but its build took ~28 s per 100k rows and holds the
whole graph in memory (~5.5 GB at 10.5M rows, past the build budget), while
IVF-PQ trains once on a sample, encodes ~35k rows/s and stays ~56 bytes a row.

On disk: ``ann_chunks.faiss`` / ``ann_leaves.faiss`` in faiss's own binary format
(plain numbers and arrays, read by C++ code that parses them: nothing in the file
is executed, unlike a pickle). The file is listed in the manifest like every
other file (size + sampled digest at load, full sha256 in ``verify``), read with
``IO_FLAG_MMAP`` so a query pages in only the lists it scans, and its shape is
checked against metadata.json before use. ``verify`` re-encodes every vector and
compares it with the stored entry.

The coarse quantizer: up to a million rows the lists follow 4*sqrt(rows) (~250 rows a list at a
million) and a flat quantizer files each row under its exact nearest centroid. Past that the lists
stay ~250 rows long (42,000 at the 10.5M rows of 100,000 documents: longer lists cost recall), and
from ``TWO_LEVEL_MIN_LISTS`` lists the centroids come from a two-level k-means. The quantizer can
also be an HNSW graph over the centroids (``HNSW_MIN_LISTS``; measured and off by default: on hash
embeddings its cheaper filing costs the recall goal): filing a row then costs ~``HNSW_EF_SEARCH``
graph steps instead of one product per centroid, a question still picks its lists exactly, and
``verify`` accepts a row filed under a list at least as good as the one the graph finds now (its
exact nearest, say) and flags one filed under a worse list.

Updates: an index update re-uses the previous ANN's centroids and codebooks; the
rows whose vectors were re-used keep their stored list and code, only newly
embedded rows are encoded. The result is what encoding every vector with that
quantizer gives (``verify`` checks exactly this). The quantizer is retrained when
the collection has grown or shrunk past what it was trained for.

This module holds the loaded index (open, check, search), the files a build writes and their
verification; training, encoding and assembling an index are in indexing/ann_build.py.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from indexing.ann_build import (BLOCK_ROWS, QUANTIZERS, RETRAIN_FACTOR, TIE_SLACK, AnnShape, RowReader, _blocks,
                                _faiss, _take, assemble, by_row, empty_copy, encode, plan, quantizer_kind, train,
                                wanted)
from utils.errors import IndexFormatError
from utils.similarity import top_order
from utils import mapped_pages

if TYPE_CHECKING:
    from indexing.index_files import IndexDir

KINDS: dict[str, tuple[str, str]] = {"chunks": ("embeddings.npy", "ann_chunks.faiss"),
                                     "leaves": ("leaf_embeddings.npy", "ann_leaves.faiss")}
"""kind -> (the float vectors it indexes, its file)."""
FILES = tuple(f for _, f in KINDS.values())

# --------------------------------------------------------------------------- the query side

GROWTH_LISTS = 4096
"""The list count from which the ANN's proposals grow (``AnnIndex.proposals``): ~1M rows at ~4 sqrt(n)
lists, a little above the 10,000-document index's 3,959, where ``ann_candidates`` reaches recall@100 0.958."""


class AnnIndex:
    """One loaded IVF-PQ index over a vector set (chunks or leaves)."""

    def __init__(self, index: Any, rows: int, name: str) -> None:
        self.index = index
        self.rows = rows
        self.name = name
        self.quantizer = quantizer_kind(index)
        self._centroids: np.ndarray | None = None
        """The centroids (a view of the quantizer's store): a question's lists are chosen from one product."""
        self._spans = mapped_list_spans(index)
        """(lists, 4) addresses of each list's codes and ids in the file faiss maps, or None (lists in
        memory): the lists a question scans are requested from the disk together before the scan."""
        if self._spans is not None:
            lists = _faiss().downcast_InvertedLists(index.invlists)
            mapped_pages.advise_random_range(int(lists.ptr), int(lists.totsize))  # no read-ahead: the lists come by will_need

    @property
    def mapped_bytes(self) -> int:
        """Bytes of the file faiss maps for this index's lists (``IO_FLAG_MMAP``); 0 for lists in memory."""
        if self._spans is None:
            return 0
        return int(_faiss().downcast_InvertedLists(self.index.invlists).totsize)

    @property
    def shape(self) -> AnnShape:
        return AnnShape(int(self.index.nlist), int(self.index.pq.M), int(self.index.pq.nbits), self.quantizer)

    @classmethod
    def build(cls, vectors: Any, rows: int, dim: int, name: str, shape: AnnShape | None = None) -> "AnnIndex":
        """Trained and filled from ``vectors`` (an array or a RowReader); ``shape``: another plan than
        ``plan``'s (benchmarks compare list counts)."""
        trained = train(vectors, rows, dim, shape or plan(rows, dim))
        lists = np.empty(rows, dtype=np.int64)
        codes = np.empty((rows, trained.code_size), dtype=np.uint8)
        for start, x in _blocks(vectors, rows):
            lists[start:start + len(x)], codes[start:start + len(x)] = encode(trained, x)
        return cls(assemble(trained, lists, codes), rows, name)

    @classmethod
    def open(cls, files: "IndexDir", name: str, rows: int, dim: int, shape: Mapping[str, Any]) -> "AnnIndex":
        """Read ``name`` memory-mapped from the index directory, after the manifest's checks."""
        faiss = _faiss()
        fh, size, entry = files.open(name)
        with fh:
            files._check_file(name, entry, fh, size)  # noqa: SLF001 - the manifest check every file gets
            path = f"/proc/self/fd/{fh.fileno()}"
            if not os.path.exists(path):  # pragma: no cover - Linux has /proc
                path = str(files.path / name)
            try:
                index = faiss.read_index(path, faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
            except RuntimeError as exc:
                first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                raise IndexFormatError(f"{name} is not a readable ANN index ({first[:160]}); rebuild the index") \
                    from None
        ann = cls(index, rows, name)
        ann.check(dim, shape)
        return ann

    def check(self, dim: int, shape: Mapping[str, Any]) -> None:
        """The index is what metadata.json says: IVF-PQ, inner product, the same shape and row count."""
        faiss = _faiss()
        index = self.index
        want = (dim, self.rows, shape.get("nlist"), shape.get("m"), shape.get("nbits"), shape.get("quantizer", "flat"))
        if not isinstance(index, faiss.IndexIVFPQ) or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise IndexFormatError(f"{self.name} is not an inner-product IVF-PQ index; rebuild the index")
        got = (index.d, index.ntotal, index.nlist, index.pq.M, index.pq.nbits, self.quantizer)
        q = faiss.downcast_index(index.quantizer)
        if self.quantizer == "hnsw":
            storage = faiss.downcast_index(q.storage)
            well_formed = (isinstance(storage, faiss.IndexFlatIP) and storage.ntotal == index.nlist
                           and q.metric_type == faiss.METRIC_INNER_PRODUCT and q.d == index.d)
        else:
            well_formed = isinstance(q, faiss.IndexFlatIP) and q.d == index.d
        if got != want or index.quantizer.ntotal != index.nlist or not well_formed:
            raise IndexFormatError(f"{self.name} has (dim, rows, lists, m, bits, quantizer) {got}, metadata.json says "
                                   f"{want}; rebuild the index")
        if int(index.invlists.compute_ntotal()) != index.ntotal:  # one C++ loop (55,000 Python calls at 100,000 documents)
            raise IndexFormatError(f"{self.name}: its lists do not hold its {index.ntotal} rows; rebuild the index")

    def proposals(self, base: int, growth: float) -> int:
        """How many rows to propose for re-scoring: ``base`` x (lists / GROWTH_LISTS) ** ``growth``, at
        least ``base`` (see config ``ann_candidates_growth``)."""
        return max(int(base), math.ceil(base * (self.index.nlist / GROWTH_LISTS) ** growth))

    def search(self, qvec: np.ndarray, k: int, probe: float, max_lists: int | None = None,
               scores: CentroidScores | None = None, far: bool = False) -> np.ndarray:
        """Row numbers of (up to) the ``k`` best rows by approximate inner product, best first, from the
        ``probe`` share of the lists closest to ``qvec`` (at most ``max_lists`` of them).

        ``far``: the rows least similar to ``qvec`` instead (the best rows for ``-qvec``, from the lists
        least similar to it). ``scores``: the question's product with the centroids, when the caller
        shares one between several searches of this index (``centroid_scores``)."""
        k = max(1, min(int(k), self.rows))
        nprobe = max(1, math.ceil(probe * self.index.nlist))
        if max_lists is not None:
            nprobe = max(1, min(nprobe, int(max_lists)))
        x = np.ascontiguousarray(-qvec if far else qvec, dtype=np.float32).reshape(1, -1)
        dist, lists = self._choose(self.centroid_scores(qvec) if scores is None else scores, nprobe, far)
        self._will_need(lists[0])  # the lists to scan requested from the disk together, then scanned
        ids = self._scan(x, k, dist, lists)[1]
        return ids[(ids >= 0) & (ids < self.rows)].astype(np.int64)

    def search_parts(self, qvec: np.ndarray, k: int, probe: float, parts: int,
                     scores: CentroidScores | None = None) -> list[Callable[[], tuple[np.ndarray, np.ndarray]]]:
        """``search`` split into ``parts`` scans of disjoint shares of the same lists, each a call that
        returns its own best ``k`` (scores, rows); ``merge_parts`` of their results is ``search``'s answer
        (up to the order of rows whose approximate scores tie at the ``k``-th).

        Why: at 100,000 documents the chunks' scan is the longest piece of a whole-collection question
        (~150 ms of CPU); split, the question's two threads take its halves in turn instead of one
        waiting for the other. The lists are dealt in turn in their order of closeness, so each part
        gets a like share of near and far lists. The lists are chosen by the first part that runs (on
        whichever thread takes it), not by the caller."""
        k = max(1, min(int(k), self.rows))
        nprobe = max(1, math.ceil(probe * self.index.nlist))
        x = np.ascontiguousarray(qvec, dtype=np.float32).reshape(1, -1)
        parts = max(1, min(int(parts), nprobe))
        product = self.centroid_scores(qvec) if scores is None else scores
        lock = threading.Lock()
        chosen: list[tuple[np.ndarray, np.ndarray]] = []

        def share(i: int) -> tuple[np.ndarray, np.ndarray]:
            with lock:  # the first part to run chooses the lists (and requests them) for all
                if not chosen:
                    dist, lists = self._choose(product, nprobe)
                    self._will_need(lists[0])
                    chosen.append((dist, lists))
            dist, lists = chosen[0]
            return self._scan(x, k, np.ascontiguousarray(dist[:, i::parts]), np.ascontiguousarray(lists[:, i::parts]))

        return [functools.partial(share, i) for i in range(parts)]

    def merge_parts(self, found: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
        """The ``k`` best rows of the parts' results (``search_parts``), best first."""
        k = max(1, min(int(k), self.rows))
        scores = np.concatenate([f[0] for f in found])
        ids = np.concatenate([f[1] for f in found])
        keep = (ids >= 0) & (ids < self.rows)
        scores, ids = scores[keep], ids[keep]
        order = np.argsort(-scores, kind="stable")[:k]
        return ids[order].astype(np.int64)

    def centroids(self) -> np.ndarray:
        """The (lists, dim) float32 centroids: a view of the quantizer's own store, not a copy (the flat
        quantizer's, or the flat store under an HNSW graph)."""
        if self._centroids is None:
            faiss = _faiss()
            q = faiss.downcast_index(self.index.quantizer)
            store = faiss.downcast_index(q.storage) if self.quantizer == "hnsw" else q
            nlist, d = int(self.index.nlist), int(self.index.d)
            view = faiss.rev_swig_ptr(store.get_xb(), nlist * d).reshape(nlist, d)
            # the view reads faiss's memory: it lives as long as this object holds the index
            self._centroids = view
        return self._centroids

    def centroid_scores(self, qvec: np.ndarray) -> CentroidScores:
        """The question's product with every centroid, computed on first use (``CentroidScores``)."""
        return CentroidScores(self.centroids(), qvec)

    def _choose(self, scores: CentroidScores, nprobe: int, far: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The ``nprobe`` lists closest to the question (least similar with ``far``) as (scores, lists),
        each (1, nprobe), best first, ties by list number.

        Why our own product, not faiss's quantizer search: faiss picks the nearest of its kernels per call
        and its last bits differed between runs on the same index (docs/scale.md), so the lists and the
        coarse scores the scan adds to every code could differ between two askings of one question; one
        numpy product (single-threaded BLAS, as every entry point runs) gives the same bits every time,
        costs a third of faiss's search with ``k`` in the thousands, and serves the least similar lists
        too. The scores of the least similar lists are the negated product, what faiss computes for the
        negated question (negation is exact)."""
        s = scores.values()
        top = top_order(-s if far else s, min(int(nprobe), len(s)))
        dist = (-s[top] if far else s[top]).astype(np.float32)
        return np.ascontiguousarray(dist.reshape(1, -1)), np.ascontiguousarray(top.astype(np.int64).reshape(1, -1))

    def _scan(self, x: np.ndarray, k: int, dist: np.ndarray, lists: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` (scores, rows) of the given lists; faiss releases the GIL while it scans."""
        faiss = _faiss()
        found = np.empty((1, k), dtype=np.float32)
        ids = np.empty((1, k), dtype=np.int64)
        # the C entry point: the Python wrapper reads nprobe from the index, not from the parameters
        self.index.search_preassigned_c(1, faiss.swig_ptr(x), k, faiss.swig_ptr(lists), faiss.swig_ptr(dist),
                                        faiss.swig_ptr(found), faiss.swig_ptr(ids), False,
                                        faiss.SearchParametersIVF(nprobe=int(lists.shape[1])))
        return found[0], ids[0]

    def _will_need(self, lists: np.ndarray) -> None:
        """Request the codes and ids of ``lists`` from the disk at once (utils.mapped_pages.will_need)."""
        if self._spans is None:
            return
        lists = lists[(lists >= 0) & (lists < len(self._spans))]
        spans = self._spans[lists]
        mapped_pages.will_need(np.concatenate([spans[:, 0], spans[:, 2]]), np.concatenate([spans[:, 1], spans[:, 3]]))


class CentroidScores:
    """One question's inner product with every centroid of one ANN index, computed once, on first use,
    by whichever thread asks first (the nearest lists and the least similar lists of a question both
    come from it).

    Why lazily: the question's second thread starts on a scan at once and needs the product first;
    computed by the caller it would sit on the question's thread before the threads split."""

    def __init__(self, centroids: np.ndarray, qvec: np.ndarray) -> None:
        self._centroids = centroids
        self._q = np.ascontiguousarray(qvec, dtype=np.float32).reshape(-1)
        self._lock = threading.Lock()
        self._values: np.ndarray | None = None

    def values(self) -> np.ndarray:
        """(lists,) float32 scores, the same bits for the same question and index every time."""
        with self._lock:
            if self._values is None:
                if self._q.shape != (self._centroids.shape[1],):
                    raise ValueError(f"a question of {self._q.size} dimensions for centroids of "
                                     f"{self._centroids.shape[1]}")
                self._values = np.asarray(self._centroids @ self._q, dtype=np.float32)
            return self._values


SPAN_CHECKS = 16
"""Lists whose span ``mapped_list_spans`` compares with faiss's own answers."""


def mapped_list_spans(index: Any) -> np.ndarray | None:
    """(lists, 4) int64 addresses [codes start, codes end, ids start, ids end] of every list of an
    IVF index whose lists faiss maps from its file (``IO_FLAG_MMAP``: ``OnDiskInvertedLists``); None
    for lists held in memory, or when the table cannot be read as expected.

    Why the table is read from faiss's memory: asking faiss for each probed list's pointers costs three
    Python calls a list (12,600 lists at 100,000 documents: ~35 ms a question); the table of list
    sizes, capacities and offsets is one array of ``OnDiskOneList`` (three size_t each), copied once.
    Its layout is checked against faiss's answers (``list_size``, ``get_codes``, ``get_ids``) for a
    spread of lists and its sizes against the row count; anything else and the lists are not advised
    (only read ahead of time: nothing read here decides a result).
    """
    faiss = _faiss()
    try:
        il = faiss.downcast_InvertedLists(index.invlists)
    except (AttributeError, RuntimeError, TypeError):
        return None
    nlist = int(getattr(index, "nlist", 0))
    if not isinstance(il, faiss.OnDiskInvertedLists) or nlist <= 0 or int(il.lists.size()) != nlist:
        return None
    try:
        base, total = int(il.ptr), int(il.totsize)
        table = np.array((ctypes.c_uint64 * (3 * nlist)).from_address(int(il.lists.data().this)),
                         dtype=np.int64).reshape(nlist, 3)
    except (AttributeError, TypeError, ValueError):
        return None
    size, cap, off = table[:, 0], table[:, 1], table[:, 2]
    cs = int(index.code_size)
    if (int(size.sum()) != int(index.ntotal) or bool(np.any(size > cap)) or bool(np.any(off < 0))
            or bool(np.any(off + cap * (cs + 8) > total))):
        return None
    for lst in np.unique(np.linspace(0, nlist - 1, min(SPAN_CHECKS, nlist)).astype(np.int64)).tolist():
        if int(il.list_size(lst)) != int(size[lst]):
            return None
        if size[lst] and (int(il.get_codes(lst)) != base + int(off[lst])
                          or int(il.get_ids(lst)) != base + int(off[lst] + cap[lst] * cs)):
            return None
    codes = base + off
    ids = codes + cap * cs
    return np.stack([codes, codes + size * cs, ids, ids + size * 8], axis=1)


# --------------------------------------------------------------------------- build, update, verify

def write(directory: Path, kind: str, rows: int, dim: int, previous: AnnIndex | None,
          old_rows: np.ndarray | None) -> dict[str, Any]:
    """Write ``kind``'s ANN file into a fresh index directory; its metadata.json entry.

    ``previous`` and ``old_rows`` (for each new row, the previous index's row its vector was
    copied from, or -1): the update path, which encodes only the rows that were embedded anew.
    """
    vec_name, file_name = KINDS[kind]
    reader = RowReader(Path(directory) / vec_name, rows, dim)
    shape = plan(rows, dim)
    reused = 0
    if previous is not None and old_rows is not None and _keeps(previous.shape, shape) and len(old_rows) == rows:
        old_lists, old_codes = by_row(previous.index, previous.rows, previous.name)
        trained = empty_copy(previous.index)
        src = np.asarray(old_rows, dtype=np.int64)
        take = (src >= 0) & (src < previous.rows)
        lists = np.empty(rows, dtype=np.int64)
        codes = np.empty((rows, trained.code_size), dtype=np.uint8)
        lists[take], codes[take] = old_lists[src[take]], old_codes[src[take]]
        del old_lists, old_codes
        todo = np.flatnonzero(~take)
        for i in range(0, len(todo), BLOCK_ROWS):
            part = todo[i:i + BLOCK_ROWS]
            lists[part], codes[part] = encode(trained, _take(reader, part))
        reused = int(take.sum())
        index = assemble(trained, lists, codes)
        shape = previous.shape
    else:
        index = AnnIndex.build(reader, rows, dim, file_name).index
    _faiss().write_index(index, str(Path(directory) / file_name))
    return {"file": file_name, "rows": rows, **shape.to_dict(), "reused_rows": reused}


def _keeps(old: AnnShape, new: AnnShape) -> bool:
    """Whether an update keeps the old quantizer (else the ANN is retrained on the new vectors)."""
    return (old.m == new.m and old.nbits == new.nbits and old.quantizer == new.quantizer
            and new.nlist / RETRAIN_FACTOR <= old.nlist <= new.nlist * RETRAIN_FACTOR)


def write_all(directory: Path, counts: Mapping[str, int], dim: int, mode: str, min_rows: int,
              previous: Mapping[str, AnnIndex] | None, old_rows: Mapping[str, np.ndarray] | None) -> dict[str, Any]:
    """The ANN files a build wants (config ``ann``/``ann_min_rows``); metadata.json's "ann" (may be empty)."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        if wanted(mode, min_rows, int(counts[kind])):
            out[kind] = write(directory, kind, int(counts[kind]), dim, (previous or {}).get(kind),
                              (old_rows or {}).get(kind))
    return out


HNSW_NODE_BYTES = 512
"""An HNSW quantizer's graph per centroid, about (M 32: 64 level-0 neighbours and the levels above)."""


def head_bytes(entry: Mapping[str, Any], dim: int) -> int:
    """About how many bytes at the start of an ANN file opening it reads (the quantizer's centroids,
    and graph, the PQ codebooks, the list sizes; 1 MiB over); the lists after them are mapped. For
    read-ahead only (IndexDir.will_need), so an estimate; -1 (all) when ``entry`` is not one."""
    nlist, m, nbits = (entry.get(k) for k in ("nlist", "m", "nbits"))
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 40 for v in (nlist, m, nbits, dim)):
        return -1
    per_list = dim * 4 + 8 + (HNSW_NODE_BYTES if entry.get("quantizer") == "hnsw" else 0)
    return nlist * per_list + dim * 4 * (1 << min(nbits, 16)) + (1 << 20)


def parse_meta(meta: Any, counts: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """metadata.json's "ann", checked: kind -> {file, rows, nlist, m, nbits}."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise IndexFormatError("metadata.json: ann must be an object")
    out = {}
    for kind, entry in meta.items():
        if kind not in KINDS or not isinstance(entry, dict) or entry.get("file") != KINDS[kind][1]:
            raise IndexFormatError(f"metadata.json: ann entry {str(kind)[:40]!r} is not one TreeRAG writes")
        for key in ("rows", "nlist", "m", "nbits"):
            v = entry.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise IndexFormatError(f"metadata.json: ann {kind} {key} must be a positive integer")
        if entry.get("quantizer", "flat") not in QUANTIZERS:  # an index written before the HNSW quantizer: flat
            raise IndexFormatError(f"metadata.json: ann {kind} quantizer must be one of {', '.join(QUANTIZERS)}")
        if entry["rows"] != counts[kind]:
            raise IndexFormatError(f"metadata.json: ann {kind} covers {entry['rows']} rows, the index has "
                                   f"{counts[kind]}; rebuild the index")
        out[kind] = entry
    return out


def verify(ann: AnnIndex, vectors: np.ndarray) -> None:
    """Every row is filed under the list and code its vector encodes to (ties within float slack)."""
    lists, codes = by_row(ann.index, ann.rows, ann.name)
    index = ann.index
    centroids = index.quantizer.reconstruct_n(0, index.nlist)
    pq_centroids = _faiss().vector_to_array(index.pq.centroids).reshape(index.pq.M, -1, index.pq.dsub)
    bad = 0
    first = -1
    for start, x in _blocks(vectors, ann.rows):
        want_lists, want_codes = encode(index, x)
        stop = start + len(x)
        differ = np.flatnonzero((want_lists != lists[start:stop]) | (want_codes != codes[start:stop]).any(axis=1))
        for i in differ:
            if not _tie(x[i], centroids, lists[start + i], want_lists[i], codes[start + i], pq_centroids,
                        index.pq.nbits):
                bad += 1
                first = start + int(i) if first < 0 else first
    if bad:
        raise IndexFormatError(f"{ann.name} does not match the vectors: {bad} of {ann.rows} rows are filed "
                               f"under another list or code (first: row {first}); rebuild the index")


def _tie(x: np.ndarray, centroids: np.ndarray, stored: int, best: int, code: np.ndarray, pq: np.ndarray,
         nbits: int) -> bool:
    """A stored list and code as good as the fresh ones within float slack (another summation order)."""
    if float(x @ centroids[best]) - float(x @ centroids[stored]) > TIE_SLACK:
        return False
    resid = (x - centroids[stored]).reshape(pq.shape[0], -1)
    dist = ((resid[:, None, :] - pq) ** 2).sum(axis=2)  # (m, 2**nbits)
    ids = _unpack(code, pq.shape[0], nbits)
    return bool(np.all(dist[np.arange(len(ids)), ids] - dist.min(axis=1) <= TIE_SLACK))


def _unpack(code: np.ndarray, m: int, nbits: int) -> np.ndarray:
    """The m sub-quantizer ids packed little-endian, nbits each, into ``code``."""
    bits = np.unpackbits(np.asarray(code, dtype=np.uint8), bitorder="little")[:m * nbits].reshape(m, nbits)
    return (bits.astype(np.int64) << np.arange(nbits)).sum(axis=1)
