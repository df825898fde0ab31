"""One reader per format; every one returns the same Document the Markdown path builds.

``kind_of`` decides a file's format from its name (what a folder walk uses to
index or skip); ``read_document`` also sniffs the bytes of a file given
directly, so ``report`` without an extension, or a PDF named ``.txt``, is read
by what it is rather than indexed as raw bytes.
"""
from __future__ import annotations

import os
from pathlib import Path

from tree_builder.document import Document
from tree_builder.documents import text_document_from_bytes
from tree_builder.readers.limits import DEFAULT_LIMITS, ReadLimits, check_output
from utils.bounded_read import read_bounded
from utils.errors import InputError

SUFFIX_KINDS = {
    ".md": "md", ".markdown": "md", ".txt": "txt", ".text": "txt",
    ".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html", ".xhtml": "html",
}
IMAGE_SUFFIXES = frozenset(".png .jpg .jpeg .gif .bmp .tif .tiff .webp .svg .ico .heic".split())
KIND_ORDER = ("md", "txt", "pdf", "docx", "html")


def kind_of(name: str) -> str | None:
    """md | txt | pdf | docx | html, or None for a format this tool does not read."""
    return SUFFIX_KINDS.get(Path(name).suffix.lower())


def skip_reason(name: str) -> str:
    """Why a file of an unread format is skipped: ``image`` or ``unsupported``."""
    suffix = Path(name).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix == ".doc":
        return "old Word .doc, save as .docx"
    return "unsupported"


def sniff(data: bytes, name: str) -> str:
    """The format of bytes: magic numbers first, then the name, else Markdown/text."""
    if data.startswith(b"%PDF-") or data[:1024].lstrip().startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04") and (kind_of(name) == "docx" or b"word/" in data[:4096]):
        return "docx"
    head = data[:512].lstrip().lower()
    if kind_of(name) == "html" or head.startswith((b"<!doctype html", b"<html")):
        return "html"
    return kind_of(name) if kind_of(name) in ("md", "txt") else "md"


def read_document(path: Path, rel_path: str, limits: ReadLimits = DEFAULT_LIMITS,
                  inside: "os.PathLike[str] | str | None" = None) -> Document:
    """Read one file by its format; InputError (one line naming the file) if unusable.

    The file is checked when it is opened, not when it was listed (utils/bounded_read.py): a
    regular file of at most ``limits.max_input_bytes``, under ``inside`` when that is given. What
    the reader made of it is held to the limits relative to the file's size (``check_output``).
    """
    data = read_bounded(path, limit=limits.max_input_bytes, what=rel_path, inside=inside)
    doc = _read_kind(path, rel_path, data, limits)
    headings = len(doc.headings) if doc.headings is not None else 0  # Markdown's: counted before parsing
    check_output(len(doc.text), headings, rel_path, limits, len(data))
    return doc


def _read_kind(path: Path, rel_path: str, data: bytes, limits: ReadLimits) -> Document:
    """The reader of the format the bytes are (``sniff``)."""
    kind = sniff(data, rel_path)
    named = kind_of(rel_path)
    if named in ("pdf", "docx") and kind != named and data.strip():
        # a text file named .pdf would otherwise be indexed as Markdown without a word: what the
        # person believes is a PDF is not, and its "pages" would never be cited
        what = "a PDF (no %PDF- header)" if named == "pdf" else "a Word document (not a .docx zip)"
        raise InputError(f"{rel_path}: named .{named} but not {what}; rename it to .md or .txt to index it as text")
    if kind == "pdf":
        from tree_builder.readers.pdf_reader import read_pdf  # each format's library only for a file of that format

        return read_pdf(path, rel_path, data, limits)
    if kind == "docx":
        from tree_builder.readers.docx_reader import read_docx

        return read_docx(path, rel_path, data, limits)
    if kind == "html":
        from tree_builder.readers.html_reader import read_html

        return read_html(path, rel_path, data, limits)
    if data.startswith(b"PK\x03\x04"):
        raise InputError(f"{rel_path}: a zip archive (not a Word .docx), not a readable document")
    return text_document_from_bytes(data, rel_path, kind, limits)
