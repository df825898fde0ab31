"""Precomputed BM25 impacts: each posting's saturated tf weight under the collection's statistics.

Why: a whole-collection question weighs every posting of its words by
``tf (k1+1) / (tf + k1 (1 - b + b dl/avgdl))``; for a word found in millions of rows that is a gather of
each row's length and a float64 formula per posting (~150 ms of a question at 100,000 documents). The
weight depends only on the posting and on (k1, b, the collection's average length), so a build stores it
once (as bm25s does) and a question multiplies by the word's IDF and adds. The per-word maximum of
those weights is stored too: a far tighter bound for MaxScore (``bm25_corpus.top_rows``) than
``k1 + 1``, so the best rows are found without reading the postings of the frequent words.

Exactness: the stored float32 is what ``saturated_weights`` returns for that posting, the
one formula every collection-scope weight goes through, so a score is bit-identical with or without
the file. The weights are used only when the question's (k1, b) and the collection's average length
equal the stored ones exactly; otherwise (other settings, or a segmented index whose live average
length moved with an update) the weights are computed as before.

Files (per BM25 prefix, listed in the manifest like every other file; an index without them loads and
is scored as before):
    bm25_impact.npy       float32 (nnz,)  weight of each posting, in the postings' order
    bm25_impact_max.npy   float32 (V,)    each word's largest weight (0 for a word without postings)
    bm25_impact.json      {"format_version", "k1", "b", "avgdl", "postings"}: what they were computed for
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np
from numpy.lib import format as npy_format

from utils.errors import IndexFormatError
from utils.atomic import process_umask
from indexing import index_files

if TYPE_CHECKING:
    from indexing.index_files import IndexDir

FORMAT_VERSION = 1
BLOCK = 1 << 22
"""Postings weighed at a time: the float64 temporaries of one block stay ~100 MB."""
PREFIX = "bm25_"


class Postings(Protocol):
    """What the impacts read of a BM25 index (``bm25_builder.BM25Index``): its postings, the rows'
    lengths and the file names it was loaded from. A protocol, so the format module that the index
    class reads its stored weights with does not import that class back."""

    terms: Sequence[str]
    names: Sequence[str]
    indptr: np.ndarray
    rows: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray


def impact_names(prefix: str = PREFIX) -> tuple[str, str, str]:
    """(weights, per-word maxima, parameters) file names of the BM25 index saved under ``prefix``."""
    return prefix + "impact.npy", prefix + "impact_max.npy", prefix + "impact.json"


@dataclass(frozen=True)
class Impacts:
    """Stored weights and what they were computed for (a posting's weight is valid only for these)."""

    k1: float
    b: float
    avgdl: float
    weights: Any
    """float32 (nnz,), usually memory-mapped."""
    maxima: np.ndarray
    """float32 (V,)."""

    def matches(self, k1: float, b: float, avgdl: float) -> bool:
        return self.k1 == k1 and self.b == b and self.avgdl == avgdl


def saturated_weights(tf: np.ndarray, doc_len: np.ndarray, k1: float, b: float, avgdl: float) -> np.ndarray:
    """BM25's saturated tf weight ``tf (k1+1) / (tf + k1 (1 - b + b dl/avgdl))`` in float64, stored
    float32: the one formula every collection-scope weight goes through, so that a weight computed for
    a few rows equals the one computed for a whole term's postings bit for bit."""
    f = np.asarray(tf, dtype=np.float64)
    dl = np.asarray(doc_len, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * dl / avgdl))).astype(np.float32)


def corpus_avgdl(doc_len: Any) -> float:
    """The average length of the rows ``doc_len`` (of the collection, or of a scope): the one
    computation ``BM25Index._scope_stats`` scores with too, so the value the stored weights are keyed
    on is the same float a question compares with."""
    n = int(doc_len.shape[0])
    return float(np.sum(doc_len, dtype=np.float64)) / n if n else 0.0


def _blocks(index: Postings, k1: float, b: float, avgdl: float):
    """(start, end, float32 weights) of consecutive blocks of the postings."""
    nnz = int(index.indptr[-1])
    for a in range(0, nnz, BLOCK):
        z = min(nnz, a + BLOCK)
        rows = np.asarray(index.rows[a:z])
        yield a, z, saturated_weights(index.tf[a:z], index.doc_len[rows], k1, b, avgdl)


def _block_maxima(indptr: np.ndarray, a: int, z: int, w: np.ndarray, out: np.ndarray) -> None:
    """Fold the maxima of the words whose postings fall in [a, z) into ``out``."""
    ptr = np.asarray(indptr)
    inner = ptr[(ptr > a) & (ptr < z)]
    starts = np.unique(np.concatenate(([a], inner)))
    word = np.searchsorted(ptr, starts, side="right") - 1  # the word (with postings) starting there
    np.maximum.at(out, word, np.maximum.reduceat(w, starts - a))


def compute(index: Postings, k1: float, b: float, weights_out: Any) -> tuple[float, np.ndarray]:
    """Fill ``weights_out`` (nnz float32, an array or a writable map) with every posting's weight;
    (avgdl, per-word maxima)."""
    avgdl = corpus_avgdl(index.doc_len)
    maxima = np.zeros(len(index.terms), dtype=np.float32)
    for a, z, w in _blocks(index, k1, b, avgdl):
        weights_out[a:z] = w
        if z > a:
            _block_maxima(index.indptr, a, z, w, maxima)
        if isinstance(weights_out, np.memmap):  # written pages leave the process (they stay in the page cache)
            weights_out.flush()
        index_files.release_pages(index.rows, index.tf, weights_out)  # a build's peak memory must not grow with the postings
    return avgdl, maxima


def write(index: Postings, directory: Path, prefix: str, k1: float, b: float, publish: bool = False) -> list[str]:
    """Write the three files of ``index``'s impacts into ``directory``; the names written.

    ``publish``: each file is written under a temporary name and renamed in (an existing index gains
    them, see ``upgrade``); a build writes into its staging directory directly.
    """
    directory = Path(directory)
    weights_name, max_name, params_name = impact_names(prefix)
    nnz = int(index.indptr[-1])

    def target(name: str) -> Path:
        if not publish:
            return directory / name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
        os.fchmod(fd, 0o644 & ~process_umask())  # as an ordinary file write would create it
        os.close(fd)
        return Path(tmp)

    paths = {name: target(name) for name in (weights_name, max_name, params_name)}
    try:
        out = npy_format.open_memmap(paths[weights_name], mode="w+", dtype=np.float32, shape=(nnz,))
        avgdl, maxima = compute(index, k1, b, out)
        out.flush()
        del out
        with open(paths[max_name], "wb") as fh:  # a file object: np.save would add ".npy" to a temporary name
            np.save(fh, maxima, allow_pickle=False)
        with open(paths[params_name], "w", encoding="utf-8") as fh:
            json.dump({"format_version": FORMAT_VERSION, "k1": float(k1), "b": float(b), "avgdl": avgdl,
                       "postings": nnz}, fh)
        if publish:
            for name, tmp in paths.items():
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
                os.replace(tmp, directory / name)
    except BaseException:
        if publish:
            for tmp in paths.values():
                tmp.unlink(missing_ok=True)
        raise
    return [weights_name, max_name, params_name]


def load(files: "IndexDir", prefix: str, n_terms: int, nnz: int, mmap: bool) -> Impacts | None:
    """The stored impacts when the manifest lists them (None for an index built before them)."""
    weights_name, max_name, params_name = impact_names(prefix)
    listed = files.manifest
    if listed is None or params_name not in listed:
        return None
    params = files.read_json(params_name)
    if not isinstance(params, dict) or params.get("format_version") != FORMAT_VERSION \
            or not all(isinstance(params.get(k), float) for k in ("k1", "b", "avgdl")) \
            or params.get("postings") != nnz:
        raise IndexFormatError(f"{params_name} does not describe the impacts of these {nnz} postings "
                               f"(format {FORMAT_VERSION}: k1, b, avgdl, postings); rebuild the index")
    weights = files.read_array(weights_name, mmap)
    if weights.dtype != np.float32 or weights.shape != (nnz,):
        raise IndexFormatError(f"{weights_name} has shape {weights.shape} {weights.dtype}, expected ({nnz},) float32")
    maxima = files.read_array(max_name, mmap=False)
    if maxima.dtype != np.float32 or maxima.shape != (n_terms,):
        raise IndexFormatError(f"{max_name} has shape {maxima.shape} {maxima.dtype}, expected ({n_terms},) float32")
    k1, b = params["k1"], params["b"]
    if not (np.all(np.isfinite(maxima)) and float(maxima.min(initial=0.0)) >= 0.0
            and float(maxima.max(initial=0.0)) <= k1 + 1.0):
        raise IndexFormatError(f"{max_name} holds weights outside [0, k1 + 1]; rebuild the index")
    return Impacts(k1, b, params["avgdl"], weights, maxima)


def check_term(index: Postings, impacts: Impacts, tid: int) -> None:
    """A word's stored weights are finite and within its stored maximum (checked on their first read,
    like its postings): a damaged file is a one-line error, never a wrong bound."""
    p0, p1 = int(index.indptr[tid]), int(index.indptr[tid + 1])
    if p1 <= p0:
        return
    w = np.asarray(impacts.weights[p0:p1])
    if not (bool(np.all(w >= 0)) and float(w.max()) <= float(impacts.maxima[tid])):
        name = impact_names(_prefix_of(index))[0]
        raise IndexFormatError(f"{name} holds a weight outside its word's maximum; "
                               "run python main.py verify, then rebuild the index")


def _prefix_of(index: Postings) -> str:
    return index.names[0][:-len("rows.npy")]


def verify(index: Postings, impacts: Impacts) -> None:
    """Every stored weight and maximum equals the one computed from the postings (``verify``)."""
    weights_name, max_name, params_name = impact_names(_prefix_of(index))
    if impacts.avgdl != corpus_avgdl(index.doc_len):
        raise IndexFormatError(f"{params_name}: the average row length differs from the rows' lengths")
    maxima = np.zeros(len(index.terms), dtype=np.float32)
    for a, z, w in _blocks(index, impacts.k1, impacts.b, impacts.avgdl):
        stored = np.asarray(impacts.weights[a:z])
        if not np.array_equal(stored.view(np.uint32), w.view(np.uint32)):
            bad = int(np.count_nonzero(stored.view(np.uint32) != w.view(np.uint32)))
            raise IndexFormatError(f"{weights_name} does not match the postings: {bad} weights differ "
                                   f"in postings {a}..{z - 1}; rebuild the index")
        if z > a:
            _block_maxima(index.indptr, a, z, w, maxima)
        index_files.release_pages(index.rows, index.tf, impacts.weights)
    if not np.array_equal(maxima.view(np.uint32), np.asarray(impacts.maxima).view(np.uint32)):
        raise IndexFormatError(f"{max_name} does not match the largest weight of each word; rebuild the index")
