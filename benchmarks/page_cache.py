"""The page cache of chosen files: which files a command reads, evict them, count what stays cached.

Dropping the whole page cache (``echo 3 > /proc/sys/vm/drop_caches``) makes a cold start honest but
costs every other process on the machine its cache, and their timings with it. Evicting only the
files one command reads (``posix_fadvise(POSIX_FADV_DONTNEED)`` on each) gives that command the
same cold start without disturbing the others. Two limits, the same as for ``drop_caches``: pages
that another live process maps (the interpreter and shared libraries a concurrent Python uses)
stay cached, and dirty pages are written back first. ``resident`` says how much really left. This
module imports no numpy: a benchmark that mapped numpy's libraries would keep them cached itself.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

_OPENED = re.compile(r'^\d+\s+(?:openat|open)\(.*\)\s+=\s+\d+<(.+)>$')
"""An open that succeeded, as ``strace -y`` prints it: the descriptor's resolved path after the result."""
_EXECUTED = re.compile(r'^\d+\s+execve\("([^"]+)"')


@dataclass(frozen=True)
class Residency:
    files: int
    bytes_total: int
    bytes_resident: int

    @property
    def share(self) -> float:
        return self.bytes_resident / self.bytes_total if self.bytes_total else 0.0


def traced_files(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> list[Path]:
    """Every regular file ``cmd`` (and its children) opened or executed, from one run under strace.

    ``strace -y`` prints the path each new descriptor resolves to, so an open relative to an opened
    directory (how an index is read) is named in full. Raises RuntimeError without strace: an eviction
    that guessed the list would leave files cached and call the start cold.
    """
    strace = shutil.which("strace")
    if strace is None:
        raise RuntimeError("--evict-files needs strace (apt-get install strace) to list the files a query reads")
    fd, log = tempfile.mkstemp(suffix=".strace")
    os.close(fd)
    try:
        r = subprocess.run([strace, "-f", "-qq", "-y", "-e", "trace=open,openat,execve", "-e", "status=successful",
                            "-o", log, *map(str, cmd)], cwd=str(cwd), env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"traced command failed ({r.returncode}): {r.stderr.strip()[-300:]}")
        text = Path(log).read_text(errors="replace")
    finally:
        os.unlink(log)
    return regular_files(_names(text, Path(cwd)))


def _names(strace_log: str, cwd: Path) -> Iterable[Path]:
    for line in strace_log.splitlines():
        m = _OPENED.match(line) or _EXECUTED.match(line)
        if m:
            p = Path(m.group(1))
            yield p if p.is_absolute() else cwd / p


def regular_files(paths: Iterable[Path]) -> list[Path]:
    """The distinct regular files among ``paths`` (resolved), in a stable order; not the kernel's
    pseudo files (/proc, /sys, /dev), which have no page cache."""
    out: dict[Path, None] = {}
    for p in paths:
        try:
            rp = p.resolve()
            if rp.parts[1:2] not in (("proc",), ("sys",), ("dev",)) and rp.is_file():
                out[rp] = None
        except OSError:
            continue
    return sorted(out)


def files_under(directory: Path) -> list[Path]:
    return regular_files(p for p in directory.rglob("*"))


def evict(paths: Iterable[Path]) -> int:
    """Ask the kernel to drop the cached pages of ``paths``; returns the files advised."""
    n = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                os.fdatasync(fd)  # a file just written (a fresh bytecode cache) has dirty pages, which stay
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        finally:
            os.close(fd)
    return n


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value
_CHUNK = 1 << 30


def resident_bytes(path: Path) -> tuple[int, int]:
    """(bytes cached, file size) of one file, from ``mincore`` over a mapping that touches no page."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0, 0
    try:
        size = os.fstat(fd).st_size
        page = mmap.PAGESIZE
        cached = 0
        for start in range(0, size, _CHUNK):
            length = min(_CHUNK, size - start)
            addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
            if addr == _MAP_FAILED or addr is None:
                raise OSError(ctypes.get_errno(), f"mmap {path}")
            try:
                pages = (length + page - 1) // page
                vec = (ctypes.c_ubyte * pages)()
                if _libc.mincore(addr, length, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {path}")
                flags = bytes(vec)  # bit 0: resident; the others are reserved (0)
                cached += (len(flags) - flags.count(0)) * page
            finally:
                _libc.munmap(addr, length)
        return min(cached, size), size
    finally:
        os.close(fd)


def resident(paths: Iterable[Path]) -> Residency:
    n = total = cached = 0
    for p in paths:
        c, s = resident_bytes(p)
        n += 1
        total += s
        cached += c
    return Residency(n, total, cached)
