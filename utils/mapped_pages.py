"""Unmap the resident pages of every read-only file mapping under one directory from this process.

Why by directory, not by array: a query maps index files through numpy (vectors, postings), Python's
``mmap`` (records) and faiss (the ANN lists, ``IO_FLAG_MMAP``), and faiss's mapping is not reachable
from Python. At 100,000 documents the ANN files are 0.86 GB and a question scans 30% of their lists:
kept, those pages alone pushed a warm query process past 2 GB. ``/proc/self/maps`` names every
mapping; ``madvise(MADV_DONTNEED)`` on a read-only file mapping drops it from the process only (the
page cache keeps the data, a later read maps it again), so no data can be lost.
"""
from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

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


def release_mappings(directory: Path) -> int:
    """Drop the resident pages of the read-only mappings under ``directory``; bytes advised."""
    libc = _libc()
    if libc is None:
        return 0
    done = 0
    for start, end, _ in read_only_mappings(directory):
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED) == 0:
            done += end - start
    return done
