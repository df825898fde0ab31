"""One updater per index at a time: an exclusive ``flock`` on a lock file beside the index.

Why: an update computes what changed against the index now in place, builds the new version
beside it and swaps it in. Two updaters at once would each compute against the same old version
and the second swap would silently drop the first one's work. The lock makes the second refuse,
with a message saying why, before it reads anything. ``flock`` is released by the kernel when the
holder exits, even on ``kill -9``, so a crashed build never leaves a stale lock.
"""
from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from utils.errors import InputError


def lock_path(target: Path) -> Path:
    """``.<name>.lock`` beside ``target`` (inside it would be replaced with the directory)."""
    return target.with_name(f".{target.name}.lock")


@contextmanager
def exclusive(target: Path, what: str = "index") -> Iterator[None]:
    """Hold the lock of ``target`` for the block, or raise InputError at once if another holds it."""
    path = lock_path(Path(target))
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except PermissionError:  # a lock file another user created: flock works on a read-only descriptor
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            raise InputError(f"cannot open the lock file {path} ({exc.strerror or exc})") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"the lock file {path} is a symbolic link; remove it") from None
        raise InputError(f"cannot open the lock file {path} ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"another build is updating the {what} at {target} right now (it holds {path}); "
                             "run this one again when it has finished") from None
        yield
    finally:
        os.close(fd)
