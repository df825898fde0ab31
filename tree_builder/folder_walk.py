"""Walk an input folder: which files to read, which to skip and why.

Policy (a demanding user's expectations, and what keeps a build from hanging):
- hidden files and folders (``.git``) are not input and are passed over silently;
- a symlink, to a file or a folder alike, is followed only when its target is
  inside the input folder, unless ``follow_links`` allows leaving it; a folder
  or file reached twice (links, loops) is read once;
- FIFOs, sockets and devices are skipped (reading a FIFO would block forever);
- a folder that cannot be listed is skipped, the rest of the walk goes on;
- names are kept as text that can always be printed and written to JSON: an
  invalid UTF-8 byte or a control character (a newline) in a file name becomes
  ``\\xNN``, so a citation stays on one line;
- two files whose names print the same (``caf\\xe9.md`` holding the byte 0xE9
  beside a file literally named so) cannot both be documents, which are known
  by that name: the second is skipped with a warning saying to rename one.
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tree_builder.readers import kind_of, skip_reason


@dataclass(frozen=True)
class FoundFile:
    rel: str
    """Printable POSIX path relative to the input folder (the document's path in the index)."""
    path: Path
    kind: str


@dataclass(frozen=True)
class Skipped:
    rel: str
    reason: str


@dataclass
class FolderWalk:
    files: list[FoundFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable_name(name: str) -> str:
    """A file-system name as valid, one-line Unicode: undecodable bytes (surrogate escapes) and
    control characters as ``\\xNN``."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        name = os.fsencode(name).decode("utf-8", "backslashreplace")
    return _NAME_CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", name)


def _inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def walk_folder(folder: Path, follow_links: bool = False) -> FolderWalk:
    """Every readable file under ``folder`` by its format, in sorted order, and every skip."""
    root_real = os.path.realpath(folder)
    out = FolderWalk()
    seen: dict[tuple[int, int], str] = {}
    names: set[str] = set()

    def visit_dir(path: str, prefix: str) -> None:
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.skipped.append(Skipped(prefix or ".", f"cannot list folder ({exc.strerror or exc})"))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{prefix}/{printable_name(entry.name)}" if prefix else printable_name(entry.name)
            try:
                if entry.is_symlink():
                    if not follow_links and not _inside(os.path.realpath(entry.path), root_real):
                        out.skipped.append(Skipped(rel, "symlink leaves the input folder; --follow-links allows it"))
                        continue
                    try:
                        st = os.stat(entry.path)
                    except OSError:
                        out.skipped.append(Skipped(rel, "broken symlink"))
                        continue
                else:
                    st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                out.skipped.append(Skipped(rel, f"cannot read ({exc.strerror or exc})"))
                continue
            key = (st.st_dev, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                if key in seen:
                    out.skipped.append(Skipped(rel, f"same folder as {seen[key] or '.'}"))
                    continue
                seen[key] = rel
                visit_dir(entry.path, rel)
            elif stat.S_ISREG(st.st_mode):
                kind = kind_of(entry.name)
                if kind is None:
                    out.skipped.append(Skipped(rel, skip_reason(entry.name)))
                elif key in seen:
                    out.skipped.append(Skipped(rel, f"same file as {seen[key]}"))
                elif rel in names:
                    out.skipped.append(Skipped(rel, "its name prints the same as another file's (an undecodable "
                                                    "byte or control character shown as \\xNN); rename one"))
                else:
                    seen[key] = rel
                    names.add(rel)
                    out.files.append(FoundFile(rel, Path(entry.path), kind))
            else:
                out.skipped.append(Skipped(rel, "special file (FIFO, socket or device)"))

    try:
        top = os.stat(folder)
        seen[(top.st_dev, top.st_ino)] = ""
    except OSError:
        pass
    visit_dir(os.fspath(folder), "")
    out.files.sort(key=lambda f: f.rel)
    return out
