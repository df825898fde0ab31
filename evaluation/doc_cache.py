"""A set's documents read once: every read kept as JSON in the evaluation cache, keyed by the file.

Reading 30 long filings takes minutes, and an evaluation needs their text twice (to place the
evidence, then to build the index), and again on every rerun. A document is a function of the
file's bytes, its path, the read limits and the reading code (with the libraries it reads through),
so a read kept under a digest of those is the read a fresh read would make: a changed file, limit,
reader (any source file of tree_builder/) or reading library (pypdfium2 ...) is read again. JSON, never pickle: the cache is a data file like any other.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from tree_builder.document import Document, Heading
from tree_builder.folder_walk import walk_folder
from tree_builder.loader import read_or_skip, walk_warnings
from tree_builder.readers.limits import ReadLimits
from utils.atomic import atomic_write_text
from utils.errors import InputError

CACHE_FORMAT = 1
READER_PACKAGE = "tree_builder"
"""Every source file under it keys the cache: readers, heading parsers and normalisation."""
ROOT = Path(__file__).resolve().parent.parent
READING_LIBRARIES = ("pypdfium2", "python-docx", "beautifulsoup4", "markdown-it-py", "PyYAML")
"""Installed libraries the readers parse through: another version may extract other text."""
CACHE_SUBDIR = ("eval", "documents")
"""Where, under the evaluation cache root, the documents are kept."""


def reader_digest(root: Path) -> str:
    """A digest of the reading code (``root``/tree_builder/**/*.py) and of the Document's fields."""
    h = hashlib.sha256(f"{CACHE_FORMAT}".encode())
    for f in sorted((root / READER_PACKAGE).rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    h.update(repr([f.name for f in dataclasses.fields(Document)] + [f.name for f in dataclasses.fields(Heading)])
             .encode())
    h.update(repr(library_versions()).encode())
    return h.hexdigest()[:20]


def library_versions() -> list[tuple[str, str | None]]:
    from importlib.metadata import PackageNotFoundError, version

    out: list[tuple[str, str | None]] = []
    for name in READING_LIBRARIES:
        try:
            out.append((name, version(name)))
        except PackageNotFoundError:
            out.append((name, None))
    return out


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def document_to_dict(doc: Document) -> dict[str, Any]:
    d = dataclasses.asdict(doc)
    d["headings"] = None if doc.headings is None else [dataclasses.asdict(h) for h in doc.headings]
    return d


def document_from_dict(d: dict[str, Any]) -> Document:
    """The Document ``document_to_dict`` wrote; KeyError/TypeError/ValueError for anything else."""
    d = dict(d)
    if d.get("headings") is not None:
        d["headings"] = tuple(Heading(**h) for h in d["headings"])
    doc = Document(**d)
    if not isinstance(doc.text, str) or not isinstance(doc.page_starts, list):
        raise ValueError("not a document")
    return doc


@dataclasses.dataclass
class DocumentCache:
    """Reads a set's docs/ folder as ``tree_builder.loader.load_documents`` does, each file's read
    kept under ``folder`` (None: no cache, every file read)."""

    folder: Path | None
    limits: ReadLimits
    code: str
    notice: Callable[[str], None] = lambda _msg: None
    hits: int = 0
    reads: int = 0

    def _key(self, rel: str, digest: str) -> str:
        limits = json.dumps(dataclasses.asdict(self.limits), sort_keys=True, default=str)
        return hashlib.sha256(json.dumps([rel, digest, limits, self.code]).encode()).hexdigest()[:32]

    def _get(self, key: str) -> Document | None:
        if self.folder is None:
            return None
        path = self.folder / f"{key}.json"
        try:
            return document_from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None  # a damaged entry is read again and overwritten

    def _put(self, key: str, doc: Document) -> None:
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / f"{key}.json", json.dumps(document_to_dict(doc), ensure_ascii=False))

    def read(self, docs_dir: Path, done: Callable[[int], None] | None = None) -> tuple[list[Document], list[str]]:
        """(documents in the loader's order, warnings); an unreadable file is skipped with a warning,
        as a build skips it. ``done(1)`` after each file (progress: a long PDF takes seconds)."""
        walk = walk_folder(Path(docs_dir))
        warnings = walk_warnings(walk.skipped)
        skipped = list(walk.skipped)
        out: list[Document] = []
        for f in walk.files:
            key = self._key(f.rel, file_digest(f.path))
            doc = self._get(key)
            if doc is not None and doc.path == f.rel:
                self.hits += 1
            else:
                doc = read_or_skip(f, self.limits, Path(docs_dir), skipped, warnings)
                if doc is None:
                    continue
                self.reads += 1
                self._put(key, doc)
            out.append(doc)
            if done is not None:
                done(1)
        if not out:
            raise InputError(f"no readable documents under {os.fspath(docs_dir)}")
        return out, warnings


def document_cache(cache_root: Path | None, limits: ReadLimits) -> DocumentCache:
    """The cache every tool reading an evaluation set shares (None: read every file, keep nothing)."""
    folder = None if cache_root is None else Path(cache_root).joinpath(*CACHE_SUBDIR)
    return DocumentCache(folder, limits, reader_digest(ROOT))
