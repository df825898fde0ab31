"""bench_cold_query.py process's cold case without dropping the whole page cache: the files a command opens are
listed from strace, evicted one by one, and what stays cached is counted."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_benchmark


def test_opened_files_are_read_from_strace_lines(tmp_path: Path) -> None:
    """Successful opens name the descriptor's resolved path (``-y``), relative opens included; execve
    names the program; pseudo files and directories are left out."""
    pc = load_benchmark("page_cache")
    data = tmp_path / "data.npy"
    data.write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    log = "\n".join([
        f'12 openat(3<{tmp_path}>, "data.npy", O_RDONLY|O_CLOEXEC) = 5<{data}>',
        f'12 openat(AT_FDCWD</work>, "{tmp_path}/sub", O_RDONLY|O_DIRECTORY) = 4<{tmp_path}/sub>',
        '12 openat(AT_FDCWD</work>, "/proc/self/statm", O_RDONLY) = 6</proc/12/statm>',
        f'12 execve("{sys.executable}", ["python"], 0x7ffd /* 20 vars */) = 0',
        '13 openat(AT_FDCWD</work>, "/nonexistent", O_RDONLY) = -1 ENOENT (No such file or directory)',
    ])
    files = pc.regular_files(pc._names(log, tmp_path))
    assert data.resolve() in files and Path(sys.executable).resolve() in files
    assert all(not str(f).startswith("/proc") for f in files) and (tmp_path / "sub").resolve() not in files
    assert len(files) == 2


@pytest.mark.skipif(shutil.which("strace") is None or not hasattr(os, "posix_fadvise"), reason="needs strace, Linux")
def test_a_traced_command_lists_its_files_which_are_then_evicted(tmp_path: Path) -> None:
    pc = load_benchmark("page_cache")
    target = tmp_path / "read.bin"
    target.write_bytes(os.urandom(1 << 20))
    cmd = [sys.executable, "-c", f"open({str(target)!r}, 'rb').read()"]
    try:
        files = pc.traced_files(cmd, tmp_path)
    except RuntimeError as exc:  # ptrace refused (a container without the capability)
        pytest.skip(str(exc))
    assert target.resolve() in files
    subprocess.run(cmd, check=True)
    assert pc.evict([target]) == 1
    got = pc.resident([target])
    assert got.files == 1 and got.bytes_total == 1 << 20
    # tmpfs keeps its pages (they are the file); a disk-backed file system drops them
    assert 0 <= got.bytes_resident <= got.bytes_total and 0.0 <= got.share <= 1.0
