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
