"""Postings of a large BM25 build, spilled to disk in sorted runs and merged term by term.

Why: a build keeps one posting per (chunk, distinct term) pair: 21M at 10,000 generated documents,
~210M at 100,000. Held in memory and sorted by term at the end (``argsort`` of every posting, the
row numbers repeated, the tf gathered) that is ~24 bytes a posting at the peak: ~5 GB at 100,000
documents, most of the 6 GB build budget. Here the postings are added to a small buffer; a full
buffer is sorted by term (one "run", rows ascending within a term because runs cover ascending row
ranges) and written out, and its term ids go straight to the row-ordered ``row_terms`` file. The
merge then writes the term-ordered ``rows`` and ``tf`` files block by block: for a block of terms
it reads each run's contiguous slice of those terms (``np.fromfile``, not a memory map, so the
pages are not counted in the process's memory), places every posting at its final offset (term
start + the postings of that term in earlier runs), and appends the block. Memory: the buffer, one
merge block and one count (4 bytes) per term and run, whatever the corpus size.

The files are plain ``.npy`` (a header written once the length is known); ``BM25Index.save``
moves them into the index directory instead of copying them through memory.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

NPY_HEADER_BYTES = 128
MERGE_BLOCK_POSTINGS = 1 << 22
"""Postings placed per merge step (4M: ~100 MB of temporaries)."""


class NpyAppender:
    """A 1-D ``.npy`` file written front to back; the header (its length) is filled in by ``finish``."""

    def __init__(self, path: Path, dtype: type) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.count = 0
        self.fh: BinaryIO = open(path, "wb")
        self.fh.write(b"\0" * NPY_HEADER_BYTES)

    def append(self, values: np.ndarray) -> None:
        np.ascontiguousarray(values, dtype=self.dtype).tofile(self.fh)
        self.count += len(values)

    def finish(self) -> Path:
        header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (self.dtype.str, self.count)
        pad = NPY_HEADER_BYTES - 10 - len(header) - 1
        raw = b"\x93NUMPY\x01\x00" + (NPY_HEADER_BYTES - 10).to_bytes(2, "little") + header.encode("ascii") \
            + b" " * pad + b"\n"
        self.fh.seek(0)
        self.fh.write(raw)
        self.fh.close()
        return self.path

    def close(self) -> None:
        self.fh.close()


@dataclass
class Run:
    """One spilled buffer: its postings sorted by term (rows ascending within a term)."""
    path: Path
    counts: np.ndarray
    """Postings per term id (the vocabulary as it was when the run was written)."""


@dataclass
class SpilledPostings:
    """The finished files (``.npy``) and the directory holding them (removed with the last user)."""
    indptr: np.ndarray
    rows: Path
    tf: Path
    row_terms: Path
    spill: "PostingSpill"
    """Kept by whoever uses the files: the directory is removed when the spill is garbage."""


class PostingSpill:
    """Sorted runs of (row, tf) postings on disk, and the row-ordered term ids beside them."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="treerag-bm25-", dir=directory))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, True)
        self.runs: list[Run] = []
        self.row_terms = NpyAppender(self.directory / "row_terms.npy", np.int32)
        self.postings = 0

    def add_run(self, row_start: int, row_ptr: np.ndarray, terms: np.ndarray, tf: np.ndarray, n_terms: int) -> None:
        """Rows ``row_start + i`` own postings ``[row_ptr[i], row_ptr[i+1])`` of ``terms``/``tf``."""
        self.row_terms.append(terms)
        order = np.argsort(terms, kind="stable")
        rows = np.repeat(np.arange(row_start, row_start + len(row_ptr) - 1, dtype=np.int32), np.diff(row_ptr))
        path = self.directory / f"run-{len(self.runs):04d}.bin"
        with open(path, "wb") as fh:
            rows[order].tofile(fh)
            tf[order].astype(np.int32, copy=False).tofile(fh)
        self.runs.append(Run(path, np.bincount(terms, minlength=n_terms).astype(np.int32)))
        self.postings += len(terms)

    def finish(self, n_terms: int) -> SpilledPostings:
        """Merge the runs into term-ordered ``rows``/``tf`` files; returns them with the pointer table."""
        row_terms = self.row_terms.finish()
        total = np.zeros(n_terms, dtype=np.int64)
        for r in self.runs:
            total[:len(r.counts)] += r.counts
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(total, out=indptr[1:])
        del total
        sizes = [int(r.counts.sum()) for r in self.runs]
        read_at = [0] * len(self.runs)  # each run's next unread posting: blocks go in term order
        rows_out = NpyAppender(self.directory / "rows.npy", np.int32)
        tf_out = NpyAppender(self.directory / "tf.npy", np.int32)
        t0 = 0
        while t0 < n_terms:
            t1 = int(np.searchsorted(indptr, indptr[t0] + MERGE_BLOCK_POSTINGS, side="right")) - 1
            t1 = min(max(t1, t0 + 1), n_terms)
            base = int(indptr[t0])
            rows_block = np.empty(int(indptr[t1]) - base, dtype=np.int32)
            tf_block = np.empty_like(rows_block)
            placed = indptr[t0:t1] - base  # where each term's next posting of this block goes
            for k, run in enumerate(self.runs):
                c = np.zeros(t1 - t0, dtype=np.int64)
                have = run.counts[t0:t1]
                c[:len(have)] = have
                n = int(c.sum())
                if n == 0:
                    continue
                a = read_at[k]
                r = np.fromfile(run.path, dtype=np.int32, count=n, offset=4 * a)
                f = np.fromfile(run.path, dtype=np.int32, count=n, offset=4 * (sizes[k] + a))
                term = np.repeat(np.arange(t1 - t0), c)
                first = np.cumsum(c) - c  # each term's first posting within this slice
                dest = placed[term] + (np.arange(n) - first[term])
                rows_block[dest] = r
                tf_block[dest] = f
                placed = placed + c
                read_at[k] = a + n
            rows_out.append(rows_block)
            tf_out.append(tf_block)
            t0 = t1
        for run in self.runs:
            run.path.unlink()
        return SpilledPostings(indptr, rows_out.finish(), tf_out.finish(), row_terms, self)


def place_file(src: Path, dst: Path) -> Path:
    """Move a finished file into the index directory (a copy across file systems, never via memory);
    returns where it now is."""
    try:
        os.replace(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    return dst
