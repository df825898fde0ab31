"""One way to read a file the program did not write: checked at open time, never read whole blindly.

Why every read goes through here: a path that was a regular file when a folder
was walked (or when a setting named it) may be a FIFO, a device, a symlink out
of the input, or a 3 GB sparse file by the time it is opened. Checking the path
first and opening it later (``Path.read_bytes``) races against that; checking
the *open descriptor* does not:

- ``O_NONBLOCK`` so opening a FIFO returns at once instead of blocking forever;
- ``O_NOFOLLOW`` where a symlink is never wanted;
- ``fstat`` of the descriptor: a regular file only (no FIFO, device, socket, folder);
- a size limit checked on the descriptor before a byte is read, and enforced
  while reading (a file that grows meanwhile is still cut at ``limit + 1``);
- ``inside``: the file actually opened (resolved through ``/proc/self/fd``, not
  the name) must lie under that folder, so a file swapped for a symlink after
  the walk cannot pull ``/etc/passwd`` into an index.

Every refusal is a ``ReadRefused`` (an ``InputError``): one line naming the file.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from utils.errors import InputError

_CHUNK = 1 << 20


class ReadRefused(InputError):
    """The file is not something to read: wrong type, too large, outside the allowed folder."""


class TooLarge(ReadRefused):
    """The file is larger than the limit it is read under."""


def kind_name(mode: int) -> str:
    """What a non-regular file is, in words for an error message."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def size_text(n: int) -> str:
    """Bytes as a short human figure (``128 MiB``) for messages that name a limit."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _inside(target: str, root: str) -> bool:
    root = root.rstrip(os.sep) or os.sep
    return target == root or target.startswith(root if root == os.sep else root + os.sep)


def _opened_path(fd: int, fallback: str) -> str:
    """The real path of the file behind ``fd`` (what was opened, whatever the name says now)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(fallback)


def open_regular(path: os.PathLike[str] | str, *, limit: int, what: str | None = None,
                 follow: bool = True, inside: os.PathLike[str] | str | None = None) -> tuple[int, int]:
    """Open ``path`` for reading and check the descriptor; returns (fd, size). The caller closes fd.

    ``what`` names the file in messages (default: the path). ``follow`` False refuses a symlink
    as the last component. ``inside``: the opened file must lie under that folder.
    """
    name = what if what is not None else os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ReadRefused(f"{name}: not found") from None
    except IsADirectoryError:
        raise ReadRefused(f"{name}: is a directory, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReadRefused(f"{name}: is a symbolic link (refused: it could lead anywhere)") from None
        raise ReadRefused(f"{name}: cannot read file ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadRefused(f"{name}: is {kind_name(st.st_mode)}, not a regular file")
        if inside is not None:
            real = _opened_path(fd, os.fspath(path))
            if not _inside(real, os.path.realpath(inside)):
                raise ReadRefused(f"{name}: now leads out of the input folder (changed after the folder "
                                  "was listed); not read")
        if st.st_size > limit:
            raise TooLarge(f"{name}: {size_text(st.st_size)}, more than the {size_text(limit)} limit")
    except BaseException:
        os.close(fd)
        raise
    return fd, int(st.st_size)


def read_bounded(path: os.PathLike[str] | str, *, limit: int, what: str | None = None, follow: bool = True,
                 inside: os.PathLike[str] | str | None = None, setting: str = "max_input_bytes") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or ``ReadRefused`` (one line).

    ``setting`` is the name a message tells the person to raise when the file is too large.
    """
    name = what if what is not None else os.fspath(path)
    try:
        fd, size = open_regular(path, limit=limit, what=name, follow=follow, inside=inside)
    except TooLarge as exc:
        raise TooLarge(f"{exc} ({setting})") from None
    try:
        parts: list[bytes] = []
        got = 0
        while got <= limit:
            try:
                # the size fstat promised in one read (one buffer, no join copy), then small reads
                # until EOF: a file that grows is still cut one byte past the limit
                part = os.read(fd, min(limit + 1 - got, max(_CHUNK, size + 1 - got)))
            except BlockingIOError:  # cannot happen for a regular file; never spin on it
                break
            except OSError as exc:
                raise ReadRefused(f"{name}: cannot read file ({exc.strerror or exc})") from None
            if not part:
                break
            parts.append(part)
            got += len(part)
        if got > limit:
            raise TooLarge(f"{name}: grew past the {size_text(limit)} limit while being read ({setting})")
        return b"".join(parts)
    finally:
        os.close(fd)


def read_text_bounded(path: os.PathLike[str] | str, *, limit: int, what: str | None = None,
                      setting: str = "max_input_bytes") -> str:
    """A UTF-8 text file read with ``read_bounded`` (a small settings or weights file)."""
    name = what if what is not None else os.fspath(path)
    data = read_bounded(Path(path), limit=limit, what=name, setting=setting)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReadRefused(f"{name}: is not UTF-8 text") from None
