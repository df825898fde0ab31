"""A prebuilt llama.cpp for the local-model benchmarks, without a 10-40 minute source build.

Why: ``llama-cpp-python`` ships no wheel for this platform and compiles llama.cpp at install.
``llama-cpp-py-sync`` (pinned below) ships llama.cpp built for linux x86_64 (CPU) inside its
wheel and downloads nothing at run time, but its libraries were linked against glibc 2.38 for
five C23 parsing functions only (``__isoc23_strtol`` & co.), so on an older glibc (Debian 12 has
2.36) they refuse to load. ``prepare`` copies the package into the cache and, only when the
running glibc is older, patches the copy: those symbols lose their version (ELF ``.gnu.version``
entry set to global), the need of ``GLIBC_2.38`` is marked weak, and a four-line C shim
(compiled with the system ``cc``) provides the functions through ``LD_PRELOAD``. The C11
functions it forwards to parse decimal and hex exactly as the C23 ones do; only ``0b`` binary
literals differ, which llama.cpp does not parse here. The installed package is never modified.
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path

PYSYNC_DIST = "llama-cpp-py-sync"
PYSYNC_VERSION = "0.11739"
GLIBC_NEEDED = (2, 38)
C23_SYMBOLS = ("__isoc23_strtol", "__isoc23_strtoul", "__isoc23_strtoll", "__isoc23_strtoull",
               "__isoc23_sscanf")
SHIM_C = r"""
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
long __isoc23_strtol(const char *s, char **e, int b) { return strtol(s, e, b); }
unsigned long __isoc23_strtoul(const char *s, char **e, int b) { return strtoul(s, e, b); }
long long __isoc23_strtoll(const char *s, char **e, int b) { return strtoll(s, e, b); }
unsigned long long __isoc23_strtoull(const char *s, char **e, int b) { return strtoull(s, e, b); }
int __isoc23_sscanf(const char *s, const char *f, ...) {
    va_list ap; va_start(ap, f); int r = vsscanf(s, f, ap); va_end(ap); return r; }
"""
SHT_DYNSYM, SHT_GNU_VERSYM, SHT_GNU_VERNEED = 11, 0x6FFFFFFF, 0x6FFFFFFE
VER_FLG_WEAK = 0x2


class RuntimeSetupError(RuntimeError):
    """The runtime could not be prepared; the message says which step and what to do."""


def glibc_version() -> tuple[int, int]:
    name, ver = platform.libc_ver()
    if name != "glibc" or not ver:
        return (0, 0)
    major, minor = ver.split(".")[:2]
    return int(major), int(minor)


def _sections(data: bytes) -> list[tuple[int, ...]]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise RuntimeSetupError("not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    return [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]


def _cstr(data: bytes, at: int) -> bytes:
    return data[at:data.index(b"\0", at)]


def patch_elf(path: Path, version: bytes, symbols: tuple[str, ...]) -> tuple[int, int]:
    """Make ``symbols`` unversioned and the need of ``version`` weak; returns (symbols, needs) changed."""
    data = bytearray(path.read_bytes())
    secs = _sections(bytes(data))
    dynsym = next((s for s in secs if s[1] == SHT_DYNSYM), None)
    versym = next((s for s in secs if s[1] == SHT_GNU_VERSYM), None)
    verneed = next((s for s in secs if s[1] == SHT_GNU_VERNEED), None)
    n_sym = n_need = 0
    if dynsym is not None and versym is not None:
        strtab = secs[dynsym[6]][4]
        wanted = {s.encode() for s in symbols}
        for i in range(dynsym[5] // 24):
            name_off = struct.unpack_from("<I", data, dynsym[4] + i * 24)[0]
            if _cstr(bytes(data), strtab + name_off) in wanted:
                struct.pack_into("<H", data, versym[4] + 2 * i, 1)  # VER_NDX_GLOBAL
                n_sym += 1
    if verneed is not None:
        strtab = secs[verneed[6]][4]
        off = verneed[4]
        for _ in range(verneed[7]):
            _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", data, off)
            a = off + aux
            for _ in range(cnt):
                _, flags, _, name, anext = struct.unpack_from("<IHHII", data, a)
                if _cstr(bytes(data), strtab + name) == version and not flags & VER_FLG_WEAK:
                    struct.pack_into("<H", data, a + 4, flags | VER_FLG_WEAK)
                    n_need += 1
                a += anext
            if not nxt:
                break
            off += nxt
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(bytes(data))
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return n_sym, n_need


def ensure_installed(skip_install: bool) -> Path:
    """The installed package's folder, pip-installing the pinned version when it is missing."""
    try:
        have = importlib.metadata.version(PYSYNC_DIST)
    except importlib.metadata.PackageNotFoundError:
        have = None
    if have != PYSYNC_VERSION:
        if skip_install:
            raise RuntimeSetupError(f"--skip-install but {PYSYNC_DIST}=={PYSYNC_VERSION} is not installed "
                                    f"(found {have})")
        rc = subprocess.call([sys.executable, "-m", "pip", "install", f"{PYSYNC_DIST}=={PYSYNC_VERSION}"])
        if rc != 0:
            raise RuntimeSetupError(f"pip install {PYSYNC_DIST}=={PYSYNC_VERSION} failed (exit {rc})")
        importlib.invalidate_caches()
    files = importlib.metadata.files(PYSYNC_DIST) or []
    init = next((f for f in files if str(f).replace("\\", "/") == "llama_cpp_py_sync/__init__.py"), None)
    if init is None:
        raise RuntimeSetupError(f"{PYSYNC_DIST} is installed but has no llama_cpp_py_sync package")
    return Path(str(init.locate())).parent


def prepare(cache_dir: Path, skip_install: bool = False) -> tuple[Path, dict[str, str]]:
    """(folder to put on PYTHONPATH, extra environment) for a process that imports llama_cpp_py_sync."""
    pkg = ensure_installed(skip_install)
    if glibc_version() >= GLIBC_NEEDED:
        return pkg.parent, {}
    root = cache_dir / f"llama-cpp-py-sync-{PYSYNC_VERSION}-glibc{'.'.join(map(str, glibc_version()))}"
    shim = root / "libisoc23shim.so"
    if not (root / "llama_cpp_py_sync" / "__init__.py").exists() or not shim.exists():
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeSetupError("glibc is older than 2.38 and no C compiler (cc) is there to build the "
                                    "shim: apt-get install gcc")
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        shutil.copytree(pkg, tmp / "llama_cpp_py_sync", symlinks=True)
        for lib in sorted((tmp / "llama_cpp_py_sync").glob("*.so*")):
            if not lib.is_symlink():
                patch_elf(lib, b"GLIBC_2.38", C23_SYMBOLS)
        (tmp / "isoc23shim.c").write_text(SHIM_C)
        rc = subprocess.call([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp / shim.name), str(tmp / "isoc23shim.c")])
        if rc != 0:
            raise RuntimeSetupError(f"compiling the glibc shim failed (exit {rc})")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    return root, {"LD_PRELOAD": str(shim)}
