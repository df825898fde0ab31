"""Releasing an index directory's mapped pages: the pages leave the process, the data stays readable,
and writable mappings or files elsewhere are never touched."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from utils.mapped_pages import read_only_mappings, release_mappings

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc")


def _resident_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (from /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def test_read_only_mapping_released_and_still_readable(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    data = np.arange(2_000_000, dtype=np.int32)  # 8 MB
    np.save(index_dir / "rows.npy", data)
    mapped = np.load(index_dir / "rows.npy", mmap_mode="r")
    assert int(mapped.sum(dtype=np.int64)) == int(data.sum(dtype=np.int64))  # every page read in
    path = (index_dir / "rows.npy").resolve()
    assert [p for _, _, p in read_only_mappings(index_dir)] == [str(path)]
    assert _resident_kb(path) > 6000
    assert release_mappings(index_dir) >= data.nbytes
    assert _resident_kb(path) < 1000
    assert np.array_equal(mapped, data)  # read again from the page cache


def test_files_kept_stay_resident_and_the_others_are_released(tmp_path: Path) -> None:
    """``keep`` names files (real paths) whose pages a release leaves mapped: the ANN lists the next
    question scans again."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    data = np.arange(1_000_000, dtype=np.int32)  # 4 MB each
    np.save(index_dir / "lists.npy", data)
    np.save(index_dir / "rows.npy", data)
    lists = np.load(index_dir / "lists.npy", mmap_mode="r")
    rows = np.load(index_dir / "rows.npy", mmap_mode="r")
    assert int(lists.sum(dtype=np.int64)) == int(rows.sum(dtype=np.int64))  # every page of both read in
    kept, other = (index_dir / "lists.npy").resolve(), (index_dir / "rows.npy").resolve()
    assert release_mappings(index_dir, frozenset({str(kept)})) >= data.nbytes
    assert _resident_kb(kept) > 3000 and _resident_kb(other) < 500
    assert release_mappings(index_dir) >= 2 * data.nbytes  # nothing kept: both released
    assert _resident_kb(kept) < 500
    assert np.array_equal(lists, data) and np.array_equal(rows, data)


def test_writable_and_other_mappings_left_alone(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    (tmp_path / "other").mkdir()
    np.save(tmp_path / "other" / "a.npy", np.ones(1_000_000, dtype=np.float32))
    elsewhere = np.load(tmp_path / "other" / "a.npy", mmap_mode="r")
    writable = np.lib.format.open_memmap(tmp_path / "index" / "w.npy", mode="w+", dtype=np.float32, shape=(1_000_000,))
    writable[:] = 2.0  # dirty pages a release would lose
    float(elsewhere.sum())
    assert read_only_mappings(tmp_path / "index") == []
    assert release_mappings(tmp_path / "index") == 0
    assert _resident_kb((tmp_path / "other" / "a.npy").resolve()) > 3000
    assert float(writable[123]) == 2.0


def test_page_spans_cover_exactly_the_pages_of_the_ranges_merged() -> None:
    """The fewest page-aligned ranges that cover every page any range touches, and no other page."""
    import mmap

    from utils.mapped_pages import page_spans

    page = mmap.PAGESIZE
    rng = np.random.default_rng(4)
    for _ in range(50):
        n = int(rng.integers(0, 40))
        starts = rng.integers(0, 60 * page, n)
        ends = starts + rng.integers(-page, 4 * page, n)  # some empty or reversed: nothing to read
        a, b = page_spans(starts, ends)
        assert np.all(a % page == 0) and np.all(b % page == 0) and np.all(b > a)
        assert np.all(a[1:] > b[:-1])  # sorted, neither overlapping nor touching
        want = {p for s, e in zip(starts.tolist(), ends.tolist()) if e > s for p in range(s // page, (e - 1) // page + 1)}
        got = {p for s, e in zip(a.tolist(), b.tolist()) for p in range(s // page, e // page)}
        assert got == want


def test_will_need_requests_uncached_pages_and_skips_cached_ones(tmp_path: Path) -> None:
    """The rows read afterwards are the file's; a batch already cached costs no advice."""
    from utils.mapped_pages import cached, will_need

    data = np.arange(4_000_000, dtype=np.int32)  # 16 MB
    np.save(tmp_path / "rows.npy", data)
    with open(tmp_path / "rows.npy", "rb") as fh:
        os.fsync(fh.fileno())
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    mapped = np.load(tmp_path / "rows.npy", mmap_mode="r")
    picks = np.sort(np.random.default_rng(1).choice(len(data), 300, replace=False))
    starts = mapped.ctypes.data + picks * 4
    if not cached(starts):  # a file system whose pages can be dropped (not tmpfs)
        assert will_need(starts, starts + 4) > 0
    assert np.array_equal(mapped[picks], data[picks])
    assert cached(starts)
    assert will_need(starts, starts + 4) == 0
    assert will_need(starts[:0], starts[:0]) == 0
