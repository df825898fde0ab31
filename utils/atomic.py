"""Crash-safe file and directory replacement.

Readers must only ever see the old version or the new one, never a half
written file: an index or a cache may be read while it is being rebuilt, and a
build can be killed at any instant.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable

_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directory entries with renameat2(RENAME_EXCHANGE).

    Returns False where the kernel, libc or filesystem cannot do it, so the
    caller falls back to a two-step rename.
    """
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def backup_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.previous")


def replace_directory(new_dir: Path, target: Path) -> "str | None":
    """Put ``new_dir`` at ``target``; the old ``target`` (if any) is removed.

    Returns None, or why the replaced directory could not be removed (it stays beside the target
    under ``new_dir``'s name, and the caller says so instead of leaving it silently).

    With renameat2 the swap is a single atomic step. Without it there is a
    window between two renames; the old directory then survives as
    ``.<name>.previous`` and ``recover_directory`` restores it, so a kill at
    any point still leaves a loadable index.
    """
    new_dir, target = Path(new_dir), Path(target)
    if not target.exists():
        os.rename(new_dir, target)
        return None
    if _exchange(new_dir, target):
        return _remove_tree(new_dir)  # now holds the old index
    backup = backup_path(target)
    if backup.exists():
        shutil.rmtree(backup)
    os.rename(target, backup)
    os.rename(new_dir, target)
    return _remove_tree(backup)


def _remove_tree(path: Path) -> "str | None":
    """Remove a directory tree; None, or the first error met (as text) when something stayed."""
    errors: list[str] = []
    shutil.rmtree(path, onerror=lambda _f, p, exc: errors.append(f"{p}: {exc[1]}"))
    return errors[0] if errors and os.path.lexists(path) else None


def process_umask() -> int:
    """The process's umask, read without changing it (``/proc``), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def keep_mode(new_dir: Path, target: Path) -> None:
    """Give ``new_dir`` the permissions of the ``target`` it will replace, or, for a first build, what
    ``mkdir`` would give under the umask: ``mkdtemp`` makes it 0700, and an update must not make an
    index other users or services read private."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o777 & ~process_umask()
    os.chmod(new_dir, mode | stat.S_IRWXU)  # the owner keeps full access: it must manage it


def recover_directory(target: Path, is_valid: "Callable[[Path], bool] | None" = None) -> None:
    """Undo a two-step swap interrupted between its renames.

    ``is_valid`` must accept the backup first: anyone who can write beside the target can leave a
    ``.<name>.previous`` there, and a reader must not move an arbitrary directory into place.
    """
    target = Path(target)
    backup = backup_path(target)
    if not os.path.lexists(target) and backup.is_dir() and not backup.is_symlink():
        if is_valid is not None and not is_valid(backup):
            return
        os.rename(backup, target)
