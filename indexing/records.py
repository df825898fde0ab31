"""JSON-lines files read one record at a time, and the field checks every record gets.

Why records are read lazily: at 10,000 documents the chunk records and section
texts are gigabytes; parsed whole they cost seconds and gigabytes per query
process. Each file has a byte-offset table beside it (``*_offsets.npy``), so
record ``i`` is one slice of a memory-mapped file, parsed and validated when a
query actually uses it.
"""
from __future__ import annotations

import mmap
from typing import Any

import numpy as np

from indexing.index_files import IndexDir, advise_random, loads_strict
from utils.errors import IndexFormatError
from utils import mapped_pages
from indexing import index_files


class Records:
    """JSON lines in a memory-mapped file, read one at a time through a byte-offset table."""

    def __init__(self, data: "mmap.mmap | bytes", offsets: np.ndarray, name: str) -> None:
        self.data = data
        self.offsets = offsets
        self.name = name

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, i: int) -> Any:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        if not 0 <= a <= b <= len(self.data):  # the table's order is checked here, where it is used
            raise IndexFormatError(f"{self.where(i)}: the offset table places it at bytes [{a}, {b}) of "
                                   f"{len(self.data)}; rebuild the index")
        return loads_strict(self.data[a:b], self.where(i))

    def where(self, i: int) -> str:
        return f"{self.name} line {i + 1}"

    def will_need(self, rows: Any) -> None:
        """Request the lines of ``rows`` from the disk together before they are read one by one: their
        two offsets first (one round of parallel reads, then read), then the lines' bytes. Why: the
        files are read without read-ahead (scattered lines), so after the page cache is dropped each
        record would wait for the disk twice in turn; a question reads tens. An advice only: the
        offsets are checked, as always, when a record is read."""
        if not isinstance(self.data, mmap.mmap) or not hasattr(mmap, "MADV_WILLNEED"):
            return
        r = np.unique(np.asarray([int(x) for x in rows], dtype=np.int64))
        r = r[(r >= 0) & (r < len(self))]
        if not len(r):
            return
        index_files.will_need_rows(self.offsets, np.concatenate([r, r + 1]))
        a, b = np.asarray(self.offsets[r], dtype=np.int64), np.asarray(self.offsets[r + 1], dtype=np.int64)
        ok = (a >= 0) & (a <= b) & (b <= len(self.data))
        a, b = a[ok], b[ok]
        view = np.frombuffer(self.data, dtype=np.uint8)  # the mapping's address
        base = view.ctypes.data
        del view  # no export left on the mapping (it could not be closed); the address stays valid
        mapped_pages.will_need(base + a, base + b)  # sampled first: a warm process gives no advice


def check_offsets(offsets: np.ndarray, count: int, size: int, name: str, table: str, whole: bool = True) -> None:
    """An offset table must start at 0, never go back, end at the file's size and have count+1 rows.

    ``whole=False`` leaves out "never go back", which reads the whole table: a cold query of a large
    index reads a few records, and ``Records.raw`` checks the two offsets of each record it reads.
    """
    if offsets.dtype != np.int64 or offsets.shape != (count + 1,):
        raise IndexFormatError(f"{table} has shape {offsets.shape} {offsets.dtype}, expected ({count + 1},) int64")
    if offsets[0] != 0 or offsets[-1] != size or (whole and count and bool(np.any(np.diff(offsets) < 0))):
        raise IndexFormatError(f"{table} does not describe the lines of {name}")


def require(obj: Any, key: str, typ: type, where: str) -> Any:
    """``obj[key]``, which must exist and be exactly of ``typ`` (a bool is not an int)."""
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], typ):
        raise IndexFormatError(f"{where}: field {key!r} missing or of the wrong type")
    if typ is int and isinstance(obj[key], bool):
        raise IndexFormatError(f"{where}: field {key!r} must be an integer, not {obj[key]!r}")
    return obj[key]


def typed_fields(d: Any, fields: tuple[tuple[str, type], ...], where: str) -> dict[str, Any]:
    """Every (name, type) of ``fields`` from one record, checked; a fast path for well-formed records."""
    if not isinstance(d, dict):
        raise IndexFormatError(f"{where}: a record is not an object")
    out: dict[str, Any] = {}
    for f, typ in fields:
        v = d.get(f)
        if type(v) is not typ:
            require(d, f, typ, where)  # raises the one-line error
        out[f] = v
    return out


SPAN_PAIRS = (("start_char", "end_char"), ("start_line", "end_line"), ("content_start", "content_end"))


def check_spans(d: dict[str, Any], ints: tuple[str, ...], where: str) -> None:
    for f in ints:
        if d[f] < 0:
            raise IndexFormatError(f"{where}: {f} is negative ({d[f]})")
    for a, b in SPAN_PAIRS:
        if a in d and b in d and d[b] < d[a]:
            raise IndexFormatError(f"{where}: {b} ({d[b]}) is before {a} ({d[a]})")


def load_records(files: IndexDir, name: str, offsets_name: str, count: int) -> Records:
    """The records file ``name`` through its offset table, checked against ``count`` (wholly when the
    directory is opened to verify)."""
    offsets = files.read_array(offsets_name, mmap=not files.verify)
    data = files.map_bytes(name)
    check_offsets(offsets, count, len(data), name, offsets_name, whole=files.verify)
    advise_random(offsets)
    return Records(data, offsets, name)
