"""An input path (file or folder) -> Documents of every supported format, plus what was skipped.

One unreadable, encrypted, scanned or empty file inside a folder is skipped
with a warning and the build goes on; a file given directly that cannot be
read is a one-line error (the user asked for exactly that file).
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from tree_builder.folder_walk import FoundFile, Skipped, printable_name, walk_folder
from tree_builder.readers import KIND_ORDER, SUFFIX_KINDS, read_document
from tree_builder.readers.limits import DEFAULT_LIMITS, ReadLimits
from tree_builder.document import Document, DocumentInfo, EmptyDocumentError
from utils.errors import InputError

MAX_NAMED_SKIPS = 10


@dataclass
class LoadedInput:
    documents: Sequence[Document | DocumentInfo]
    """The documents read (a streaming build keeps only their ``DocumentInfo``)."""
    warnings: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def kind_counts(self) -> str:
        """``2 pdf, 1 docx, 1 md`` in a fixed order."""
        counts = Counter(d.kind for d in self.documents)
        order = [k for k in KIND_ORDER if counts[k]] + sorted(k for k in counts if k not in KIND_ORDER)
        return ", ".join(f"{counts[k]} {k}" for k in order)

    def skipped_text(self) -> str:
        """``skipped 2: logo.png (image), data.xlsx (unsupported)`` or empty."""
        if not self.skipped:
            return ""
        named = ", ".join(f"{s.rel} ({s.reason})" for s in self.skipped[:MAX_NAMED_SKIPS])
        more = len(self.skipped) - MAX_NAMED_SKIPS
        return f"skipped {len(self.skipped)}: {named}" + (f" and {more} more" if more > 0 else "")


def _reason(exc: InputError, rel: str) -> str:
    msg = str(exc)
    return msg[len(rel) + 2:] if msg.startswith(f"{rel}: ") else msg


def walk_warnings(skipped: list[Skipped]) -> list[str]:
    """The walk's skips worth a warning: images and unsupported formats are expected in a folder."""
    return [f"skipped {s.rel}: {s.reason}" for s in skipped
            if s.reason not in ("image", "unsupported") and not s.reason.startswith("old Word")]


def read_or_skip(f: FoundFile, limits: ReadLimits, inside: Path | None,
                 skipped: list[Skipped], warnings: list[str]) -> Document | None:
    """One walked file read, or None with why it was skipped recorded: one bad file never stops a folder."""
    try:
        return read_document(f.path, f.rel, limits, inside)
    except EmptyDocumentError:
        skipped.append(Skipped(f.rel, "empty"))
        warnings.append(f"skipped empty document: {f.rel}")
    except InputError as exc:
        reason = _reason(exc, f.rel)
        skipped.append(Skipped(f.rel, reason))
        warnings.append(f"skipped {f.rel}: {reason}")
    return None


def load_input(input_path: Path, follow_links: bool = False, limits: ReadLimits = DEFAULT_LIMITS) -> LoadedInput:
    """Read a file or every supported file of a folder (every document held: see ``read_input``)."""
    loaded = LoadedInput([])
    loaded.documents.extend(read_input(input_path, loaded, follow_links, limits))
    return loaded


def read_input(input_path: Path, loaded: LoadedInput, follow_links: bool = False,
               limits: ReadLimits = DEFAULT_LIMITS) -> Iterator[Document]:
    """Each document of a file or a folder in order, one at a time; skips and warnings go to ``loaded``.

    Why a generator: a build of 100,000 documents cannot hold their texts; it keeps what it needs
    of each (``DocumentInfo``) and lets the text go. Raises InputError after the walk when nothing
    was readable.

    Each file is checked again when it is opened (the walk listed it earlier, and a file can be
    swapped for a FIFO or a symlink meanwhile): a regular file within ``limits``, and, unless
    ``follow_links``, one that really lies inside the input folder.
    """
    input_path = Path(input_path)
    shown = printable_name(os.fspath(input_path))
    if not input_path.exists():
        raise InputError(f"input not found: {shown}")
    if input_path.is_file():
        yield read_document(input_path, printable_name(input_path.name), limits)
        return
    if not input_path.is_dir():
        raise InputError(f"input is neither a file nor a folder (a FIFO or device?): {shown}")
    walk = walk_folder(input_path, follow_links)
    loaded.skipped.extend(walk.skipped)
    inside = None if follow_links else input_path
    loaded.warnings.extend(walk_warnings(walk.skipped))
    read = 0
    for f in walk.files:
        doc = read_or_skip(f, limits, inside, loaded.skipped, loaded.warnings)
        if doc is None:
            continue
        read += 1
        yield doc
    if not read:
        kinds = ", ".join(sorted(set(SUFFIX_KINDS)))
        what = "no readable documents" if walk.files else f"no supported documents ({kinds})"
        extra = f"; {loaded.skipped_text()}" if loaded.skipped else ""
        raise InputError(f"{what} under {shown}{extra}")


def load_document(path: Path, rel_path: str) -> Document:
    """Read one file of any supported format; raises InputError (one line, naming the file) if unusable."""
    return read_document(Path(path), rel_path)


def load_documents(input_path: Path, follow_links: bool = False,
                   limits: ReadLimits = DEFAULT_LIMITS) -> tuple[list[Document], list[str]]:
    """A file or a folder -> (documents in deterministic order, warnings)."""
    loaded = load_input(Path(input_path), follow_links=follow_links, limits=limits)
    return loaded.documents, loaded.warnings
