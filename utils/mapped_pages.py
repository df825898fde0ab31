"""The pages of this process's file mappings: released after a question, requested before one.

Released: the resident pages of every read-only file mapping under one directory leave the process.

Why by directory, not by array: a query maps index files through numpy (vectors, postings), Python's
``mmap`` (records) and faiss (the ANN lists, ``IO_FLAG_MMAP``), and faiss's mapping is not reachable
from Python. At 100,000 documents the ANN files are 0.86 GB and a question scans 30% of their lists:
kept, those pages alone pushed a warm query process past 2 GB. ``/proc/self/maps`` names every
mapping; ``madvise(MADV_DONTNEED)`` on a read-only file mapping drops it from the process only (the
page cache keeps the data, a later read maps it again), so no data can be lost.

Requested: ``will_need`` asks the kernel for the scattered pages a question is about to read, all at
once (see there), so a cold start waits for one round of parallel disk reads instead of one per page.
"""
from __future__ import annotations

import ctypes
import functools
import mmap
import os
from pathlib import Path

import numpy as np

_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", 4)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        libc.madvise.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None


def read_only_mappings(directory: Path) -> list[tuple[int, int, str]]:
    """(start, end, path) of this process's mappings of files under ``directory`` without write
    permission; empty where ``/proc/self/maps`` cannot be read."""
    prefix = os.path.realpath(directory) + os.sep
    out: list[tuple[int, int, str]] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or "w" in parts[1]:
                    continue
                path = parts[5].rstrip("\n")
                if path.endswith(" (deleted)"):
                    path = path[:-len(" (deleted)")]
                if not path.startswith(prefix):
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end, path))
    except (OSError, ValueError):
        return []
    return out


def release_mappings(directory: Path, keep: frozenset[str] = frozenset()) -> int:
    """Drop the resident pages of the read-only mappings under ``directory``, except those of the files
    in ``keep`` (real paths); bytes advised."""
    libc = _libc()
    if libc is None:
        return 0
    done = 0
    for start, end, path in read_only_mappings(directory):
        if path in keep:
            continue
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED) == 0:
            done += end - start
    return done


# --------------------------------------------------------------------------- reading ahead of a question

_MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", 3)
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", 1)
SAMPLE_PAGES = 8
"""Pages of a batch looked up (``mincore``) before it is advised: all cached, the batch is not advised."""


@functools.lru_cache(maxsize=1)
def _libc_calls() -> ctypes.CDLL | None:
    libc = _libc()
    if libc is None:
        return None
    try:
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        libc.mincore.restype = ctypes.c_int
    except AttributeError:
        return None
    return libc


def page_spans(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte ranges [starts, ends) of this process's memory widened to whole pages, sorted, and
    overlapping or touching ones merged: the fewest ``madvise`` calls that cover them."""
    page = mmap.PAGESIZE
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts
    a = starts[keep] // page * page
    b = -(-ends[keep] // page) * page
    if not len(a):
        return a, b
    order = np.argsort(a, kind="stable")
    a, b = a[order], np.maximum.accumulate(b[order])
    new = np.r_[True, a[1:] > b[:-1]]
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(a) - 1]
    return a[new], b[last]


def cached(addresses: np.ndarray) -> bool:
    """Whether the pages at every one of ``addresses`` (this process's, mapped) are in the page cache,
    one ``mincore`` per page; False where it cannot be told."""
    libc = _libc_calls()
    if libc is None:
        return False
    page = mmap.PAGESIZE
    flag = ctypes.c_ubyte(0)
    for addr in np.asarray(addresses, dtype=np.int64).tolist():
        if libc.mincore(ctypes.c_void_p(addr // page * page), ctypes.c_size_t(page), ctypes.byref(flag)) != 0 \
                or not flag.value & 1:
            return False
    return True


def will_need(starts: np.ndarray, ends: np.ndarray) -> int:
    """Ask the kernel to read the pages of the mapped byte ranges [starts, ends) now, all of them at once
    (``MADV_WILLNEED``); the number of ranges advised (0 when a sample of them is already cached).

    Why: the rows a question reads (vectors, postings, the ANN lists it scans) are scattered. Read by
    page faults, each waits for the disk in turn (after the page cache is dropped: 2,000 vector rows
    0.69 s here); requested together, the disk serves them in parallel (26 ms). Why the sample: a
    warm process would pay a system call per range (~1.6 us) for nothing, so when ``SAMPLE_PAGES``
    pages spread over the batch are all cached the batch is taken as cached. An advice only: a range
    that is not mapped is refused by the kernel and read, as before, when touched.
    """
    starts = np.asarray(starts, dtype=np.int64)
    if not len(starts) or _libc_calls() is None:
        return 0
    if cached(starts[::-(-len(starts) // SAMPLE_PAGES)]):  # before any sorting: a warm process stops here
        return 0
    libc = _libc_calls()
    a, b = page_spans(starts, ends)
    for start, end in zip(a.tolist(), b.tolist()):
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_WILLNEED)
    return len(a)


def advise_random_range(start: int, length: int) -> bool:
    """``MADV_RANDOM`` on a mapping Python does not own (faiss's): no read-ahead around its faults."""
    libc = _libc_calls()
    if libc is None or length <= 0:
        return False
    page = mmap.PAGESIZE
    a = start // page * page
    return libc.madvise(ctypes.c_void_p(a), ctypes.c_size_t(start + length - a), _MADV_RANDOM) == 0
