"""Training, encoding and assembling an IVF-PQ index (faiss): the build side of the ANN.

Why a module of its own: the loaded index that answers questions (indexing/ann_index.py) needs
only the finished quantizer and lists; everything here makes them: the shape a vector set gets
(``plan``), the training sample read from the vectors (``RowReader``), the coarse quantizer (flat,
two-level k-means or an HNSW graph over the centroids), each row's list and PQ code (``encode``),
and an index holding given lists and codes (``assemble``) or read back row by row (``by_row``).
The reasons for the shape and the quantizer are in indexing/ann_index.py's docstring.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from utils.errors import BackendError, IndexFormatError

BLOCK_ROWS = 32768
"""Rows read, encoded and compared together (memory per block, not per index)."""
LISTS_PER_SQRT = 4
"""IVF lists = 4 * sqrt(rows) up to a million rows (~250 rows a list there: ~4,000 lists)."""
ROWS_PER_LIST = 250
"""Past a million rows the lists stay ~250 rows long (10.5M rows: 42,000 lists): longer lists cost recall
at the same ``ann_probe`` (docs/scale.md, "The coarse quantizer")."""
TWO_LEVEL_MIN_LISTS = 8192
"""From this many lists the centroids come from a two-level k-means (``two_level_centroids``): one
k-means over 42,000 centroids would cost ~5 * 10^14 flops for its 1.7M training rows."""
HNSW_MIN_LISTS = 1 << 62
"""From this many lists the coarse quantizer is an HNSW graph over the centroids (``quantizer`` "hnsw");
by default never. Why: the graph files rows faster than the flat filing, but files too many rows away
from their nearest list, which leaves part of a question's exact top rows outside the lists it scans
and costs the recall goal (docs/scale.md, "The coarse quantizer"). An embedder that clusters (lower it
here) can take the graph; everything else (file, load, verify, update) supports it."""
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 64
"""Candidates the graph keeps while filing a row: more files more rows under their exact nearest
centroid, at a lower rate."""
QUANTIZERS = ("flat", "hnsw")
MIN_PER_CENTROID = 39
"""k-means needs this many training rows per centroid (fewer: faiss warns and clusters poorly)."""
TRAIN_PER_LIST = 40
"""Training sample per list (at least MIN_PER_CENTROID; and 256 rows per PQ centroid)."""
TRAIN_ITERATIONS = 10
PQ_TRAIN_PER_CENTROID = 64
RETRAIN_FACTOR = 2.0
"""An update keeps the old quantizer while its list count is within this factor of the ideal one."""
TIE_SLACK = 1e-4
"""``verify``: a stored list or code whose score is within this of the best is a float tie, not damage."""


@dataclass(frozen=True)
class AnnShape:
    """The build parameters of one IVF-PQ index (metadata.json "ann")."""

    nlist: int
    m: int
    nbits: int
    quantizer: str = "flat"
    """"flat" (every centroid compared) or "hnsw" (a graph over the centroids: approximate filing)."""

    def to_dict(self) -> dict[str, Any]:
        return {"nlist": self.nlist, "m": self.m, "nbits": self.nbits, "quantizer": self.quantizer}


def plan(rows: int, dim: int) -> AnnShape:
    """Lists, sub-quantizers (one byte per 8 dimensions) and bits per code for ``rows`` vectors.

    A small vector set (tests, ``ann=on`` on a small index) gets fewer lists and bits so that
    k-means always has enough rows per centroid.
    """
    wanted_lists = max(int(round(LISTS_PER_SQRT * math.sqrt(rows))), int(round(rows / ROWS_PER_LIST)))
    nlist = max(1, min(wanted_lists, rows // MIN_PER_CENTROID))
    m = max(d for d in range(1, max(1, dim // 8) + 1) if dim % d == 0)
    per = rows // MIN_PER_CENTROID
    nbits = 8 if per >= 256 else max(1, min(8, int(math.log2(max(2, per)))))
    return AnnShape(nlist, m, nbits, "hnsw" if nlist >= HNSW_MIN_LISTS else "flat")


def _two_level(shape: AnnShape) -> bool:
    return shape.quantizer == "hnsw" or shape.nlist >= TWO_LEVEL_MIN_LISTS


def wanted(mode: str, min_rows: int, rows: int) -> bool:
    """Whether a build adds the ANN to a vector set of ``rows`` rows (config ``ann``, ``ann_min_rows``)."""
    return rows > 0 and (mode == "on" or (mode == "auto" and rows >= min_rows))


def _faiss() -> Any:
    try:
        import faiss  # noqa: PLC0415 - loaded only by an index that has (or wants) an ANN
    except ImportError:  # pragma: no cover - faiss-cpu is in requirements.txt
        raise BackendError("the ANN index needs faiss-cpu (pip install -r requirements.txt), or set ann=off") \
            from None
    return faiss


# --------------------------------------------------------------------------- vectors in blocks

class RowReader:
    """Rows of a float32 .npy file read with ``pread``: a build streams the vectors it just wrote
    without mapping them (mapped pages would count in the build's peak memory)."""

    def __init__(self, path: Path, rows: int, dim: int) -> None:
        self.path, self.rows, self.dim = Path(path), rows, dim
        with open(self.path, "rb") as fh:
            fmt = np.lib.format
            read = fmt.read_array_header_1_0 if fmt.read_magic(fh) == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = read(fh)
            self.offset = fh.tell()
        if tuple(shape) != (rows, dim) or dtype != np.float32:
            raise ValueError(f"{self.path.name} has shape {shape} {dtype}, expected ({rows}, {dim}) float32")

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(self.rows)
        n = max(0, stop - start)
        row_bytes = 4 * self.dim
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, n * row_bytes, self.offset + start * row_bytes)
        finally:
            os.close(fd)
        return np.frombuffer(data, dtype=np.float32).reshape(n, self.dim)


    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows (any order), one ``pread`` each."""
        row_bytes = 4 * self.dim
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for i, r in enumerate(np.asarray(rows, dtype=np.int64).tolist()):
                if not 0 <= r < self.rows:
                    raise IndexError(r)
                data = os.pread(fd, row_bytes, self.offset + r * row_bytes)
                if len(data) != row_bytes:
                    raise ValueError(f"{self.path.name} ends before row {r}")
                out[i] = np.frombuffer(data, dtype=np.float32)
        finally:
            os.close(fd)
        return out


def _blocks(vectors: Any, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, rows, BLOCK_ROWS):
        yield start, np.ascontiguousarray(vectors[start:start + BLOCK_ROWS], dtype=np.float32)


def _take(vectors: Any, rows: np.ndarray) -> np.ndarray:
    """The given rows (ascending), block by block; a sparse sample from a RowReader row by row.

    Why row by row there: training takes ~40 rows per list (164k of the 10.5M chunk rows of
    100,000 documents); reading every block to pick 1.6% of it read the whole 16 GB vector file.
    """
    if isinstance(vectors, RowReader) and len(rows) * 8 < vectors.rows:
        return vectors.take(rows)
    out = np.empty((len(rows), vectors.shape[1] if hasattr(vectors, "shape") else vectors.dim), dtype=np.float32)
    n = vectors.shape[0] if hasattr(vectors, "shape") else vectors.rows
    for start in range(0, n, BLOCK_ROWS):
        lo, hi = np.searchsorted(rows, [start, start + BLOCK_ROWS])
        if hi > lo:
            block = np.asarray(vectors[start:start + BLOCK_ROWS], dtype=np.float32)
            out[lo:hi] = block[rows[lo:hi] - start]
    return out


# --------------------------------------------------------------------------- train, encode, assemble

def train(vectors: Any, rows: int, dim: int, shape: AnnShape, seed: int = 0) -> Any:
    """An empty IVF-PQ index trained on a fixed sample of the rows (the same rows give the same index)."""
    faiss = _faiss()
    want = min(rows, TRAIN_PER_LIST * max(shape.nlist, 1 << shape.nbits))
    sample = np.sort(np.random.default_rng(seed).choice(rows, size=want, replace=False))
    x = _take(vectors, sample)
    if shape.quantizer == "hnsw":  # centroids from a two-level k-means, then the graph over them
        quantizer = hnsw_quantizer(two_level_centroids(x, shape.nlist, seed))
    elif _two_level(shape):  # many lists: the two-level centroids, filed exactly
        quantizer = faiss.IndexFlatIP(dim)
        quantizer.add(two_level_centroids(x, shape.nlist, seed))  # full and trained: IndexIVF.train skips k-means
    else:  # IndexIVF.train runs the k-means with this flat index
        quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, shape.nlist, shape.m, shape.nbits, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = TRAIN_ITERATIONS
    index.cp.seed = seed
    index.cp.max_points_per_centroid = TRAIN_PER_LIST * 8
    index.pq.cp.seed = seed
    index.pq.cp.niter = TRAIN_ITERATIONS
    index.pq.cp.max_points_per_centroid = PQ_TRAIN_PER_CENTROID  # 16k rows: codebooks settle long before 65k
    index.train(x)
    return index


def two_level_centroids(x: np.ndarray, nlist: int, seed: int = 0) -> np.ndarray:
    """``nlist`` k-means centroids (inner product) of ``x`` in two levels: ~sqrt(nlist) groups, then
    each group's share of the lists within it.

    Why: one k-means over 42,000 centroids compares every training row with every centroid in each
    iteration (1.7M rows: ~5 * 10^14 flops); two levels compare each row with ~2 * sqrt(nlist).
    """
    n = len(x)
    groups = max(1, min(int(round(math.sqrt(nlist))), n // MIN_PER_CENTROID))
    top = _kmeans(x, groups, seed)
    assign = _nearest(top, x)
    sizes = np.bincount(assign, minlength=groups)
    share = np.cumsum(sizes) * nlist // max(1, n)  # the lists in proportion to the group's rows
    share[1:] -= share[:-1].copy()
    order = np.argsort(assign, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    out = []
    for g in np.flatnonzero(share > 0):
        part = x[order[bounds[g]:bounds[g + 1]]]
        k = int(share[g])
        # k-means needs more rows than centroids; a thinner group (rare) keeps its rows as centroids
        out.append(_kmeans(part, k, seed + 1 + int(g)) if len(part) > k else part[np.arange(k) % len(part)])
    return np.ascontiguousarray(np.vstack(out), dtype=np.float32)


def _kmeans(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """k centroids of x by inner product, as IndexIVF's own training clusters (same settings)."""
    faiss = _faiss()
    cp = faiss.ClusteringParameters()
    cp.niter = TRAIN_ITERATIONS
    cp.seed = seed
    cp.max_points_per_centroid = TRAIN_PER_LIST * 8
    cp.min_points_per_centroid = 1  # a group's small k-means: no warning for a thin group
    cp.spherical = True  # as IndexIVF sets it for an inner-product index
    clus = faiss.Clustering(x.shape[1], k, cp)
    clus.train(np.ascontiguousarray(x, dtype=np.float32), faiss.IndexFlatIP(x.shape[1]))
    return faiss.vector_to_array(clus.centroids).reshape(k, x.shape[1])


def _nearest(centroids: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.empty(len(x), dtype=np.int64)
    for start in range(0, len(x), BLOCK_ROWS):
        out[start:start + BLOCK_ROWS] = np.argmax(x[start:start + BLOCK_ROWS] @ centroids.T, axis=1)
    return out


def hnsw_quantizer(centroids: np.ndarray) -> Any:
    """An HNSW graph (inner product) over the centroids: files a row after ~HNSW_EF_SEARCH
    comparisons instead of one per centroid."""
    faiss = _faiss()
    q = faiss.IndexHNSWFlat(centroids.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
    q.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    q.hnsw.efSearch = HNSW_EF_SEARCH
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # threads insert in a racing order: one thread gives the same graph every build
    try:
        q.add(np.ascontiguousarray(centroids, dtype=np.float32))
    finally:
        faiss.omp_set_num_threads(threads)
    return q


def quantizer_kind(index: Any) -> str:
    """"hnsw" or "flat": what the IVF's coarse quantizer is (after ``read_index``, a base Index)."""
    faiss = _faiss()
    return "hnsw" if isinstance(faiss.downcast_index(index.quantizer), faiss.IndexHNSWFlat) else "flat"


def coarse(index: Any, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, lists) of the ``k`` nearest lists: the graph's search for filing (k = 1) with an HNSW
    quantizer, the flat quantizer's exact search otherwise."""
    faiss = _faiss()
    q = faiss.downcast_index(index.quantizer)
    if isinstance(q, faiss.IndexHNSWFlat):
        return q.search(x, k, params=faiss.SearchParametersHNSW(efSearch=max(HNSW_EF_SEARCH, k)))
    return q.search(x, k)


def encode(index: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(list of each row, its PQ code): what faiss's ``add`` would store, as arrays."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not len(x):
        return np.zeros(0, dtype=np.int64), np.zeros((0, index.code_size), dtype=np.uint8)
    _, lists = coarse(index, x, 1)
    lists = lists[:, 0].astype(np.int64)
    centroids = index.quantizer.reconstruct_batch(lists)  # only the rows' own centroids, not every one
    codes = index.pq.compute_codes(np.ascontiguousarray(x - centroids))
    return lists, codes


def empty_copy(index: Any) -> Any:
    """A new index with ``index``'s centroids and codebooks (and graph) and no entries."""
    faiss = _faiss()
    d = index.d
    if quantizer_kind(index) == "hnsw":
        quantizer = faiss.clone_index(faiss.downcast_index(index.quantizer))
    else:
        quantizer = faiss.IndexFlatIP(d)
        quantizer.add(index.quantizer.reconstruct_n(0, index.nlist))
    new = faiss.IndexIVFPQ(quantizer, d, index.nlist, index.pq.M, index.pq.nbits, faiss.METRIC_INNER_PRODUCT)
    faiss.copy_array_to_vector(faiss.vector_to_array(index.pq.centroids), new.pq.centroids)
    new.is_trained = True
    return new


def assemble(trained: Any, lists: np.ndarray, codes: np.ndarray) -> Any:
    """An index holding row ``i`` under ``lists[i]`` with ``codes[i]``; each list in row order."""
    faiss = _faiss()
    index = empty_copy(trained)
    order = np.argsort(lists, kind="stable")
    bounds = np.searchsorted(lists[order], np.arange(index.nlist + 1))
    il = index.invlists
    for lst in range(index.nlist):  # one list's codes gathered at a time: no sorted copy of every code
        a, b = int(bounds[lst]), int(bounds[lst + 1])
        if b > a:
            ids = np.ascontiguousarray(order[a:b], dtype=np.int64)
            part = np.ascontiguousarray(codes[ids])  # named: swig_ptr does not keep its array alive
            il.add_entries(lst, b - a, faiss.swig_ptr(ids), faiss.swig_ptr(part))
    index.ntotal = len(lists)
    return index


def entries(index: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(list, row id, code) of every stored entry, list by list."""
    faiss = _faiss()
    il = index.invlists
    cs = il.code_size
    sizes = np.array([il.list_size(lst) for lst in range(index.nlist)], dtype=np.int64)
    total = int(sizes.sum())
    ids = np.empty(total, dtype=np.int64)
    codes = np.empty((total, cs), dtype=np.uint8)
    pos = 0
    for lst in range(index.nlist):
        size = int(sizes[lst])
        if size:
            ids[pos:pos + size] = faiss.rev_swig_ptr(il.get_ids(lst), size)
            codes[pos:pos + size] = faiss.rev_swig_ptr(il.get_codes(lst), size * cs).reshape(size, cs)
            pos += size
    return np.repeat(np.arange(index.nlist, dtype=np.int64), sizes), ids, codes


def by_row(index: Any, rows: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(list, code) of rows 0..rows-1; refuses an index whose ids are not each row once."""
    lists, ids, codes = entries(index)
    if len(ids) != rows or (rows and (int(ids.min()) < 0 or int(ids.max()) >= rows)):
        raise IndexFormatError(f"{name} does not hold each of the {rows} rows once; rebuild the index")
    seen = np.zeros(rows, dtype=bool)
    seen[ids] = True
    if not seen.all():
        raise IndexFormatError(f"{name} does not hold each of the {rows} rows once; rebuild the index")
    out_lists = np.empty(rows, dtype=np.int64)
    out_codes = np.empty_like(codes)
    out_lists[ids] = lists
    out_codes[ids] = codes
    return out_lists, out_codes
