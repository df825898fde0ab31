"""Documents from decoded text (Markdown, plain text) or from a reader's own text and headings.

Both paths end the same way: a normalised Document whose headings are either
the format's own (Markdown headings, a PDF's font sizes, Word styles, HTML tags)
or, when the format marks none, detected from numbering and layout.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from tree_builder.decoding import mostly_control, normalise_text, text_from_bytes
from tree_builder.document import Document, EmptyDocumentError, Heading
from tree_builder.doc_card import cover_title, identifier_like
from tree_builder.markdown_headings import document_title, heading_line_count, markdown_headings
from tree_builder.text_headings import detect_headings
from utils.errors import InputError

if TYPE_CHECKING:  # the readers package imports this module: its limits are imported where checked
    from tree_builder.readers.limits import ReadLimits

_FENCE_CLOSE = re.compile(r"^(---|\.\.\.)[ \t]*$", re.MULTILINE)
_WS = re.compile(r"\s+")


def _json_safe(value: Any) -> Any:
    """YAML may yield dates and other objects; the index stores front matter as JSON."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def split_front_matter(text: str) -> tuple[dict, int]:
    """YAML front matter at the very top is metadata: returns (mapping, body offset).

    Only a closed ``---`` block whose YAML is a mapping counts; anything else is
    left as content (``title: x`` over ``---`` is otherwise a setext heading).
    """
    if not text.startswith("---\n"):
        return {}, 0
    m = _FENCE_CLOSE.search(text, 4)
    if m is None:
        return {}, 0
    raw = text[4:m.start()]
    try:
        import yaml  # PyYAML only for a document with front matter

        data = yaml.safe_load(raw) if raw.strip() else {}
    except Exception:  # any YAML error: not front matter after all
        return {}, 0
    if not isinstance(data, dict):
        return {}, 0
    end = m.end()
    if end < len(text) and text[end] == "\n":
        end += 1
    return _json_safe(data), end


def content_hash(text: str) -> str:
    """A document's content hash: sha256 of its normalised text. One definition, because an update
    compares it with the digest of a Markdown or text file it has not parsed (``text_content_hash``)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_content_hash(data: bytes, rel_path: str) -> str:
    """The content hash ``text_document_from_bytes`` would give ``data``, without parsing it."""
    return content_hash(normalise_text(text_from_bytes(data, rel_path)))


def text_document_from_bytes(data: bytes, rel_path: str, kind: str = "md",
                             limits: "ReadLimits | None" = None) -> Document:
    """Markdown or plain text bytes -> Document (held to ``limits`` when given)."""
    return document_from_text(text_from_bytes(data, rel_path), rel_path, kind, limits, len(data))


def document_from_text(raw_text: str, rel_path: str, kind: str = "md", limits: "ReadLimits | None" = None,
                       size: int | None = None) -> Document:
    """Decoded text -> Document (normalised, front matter split off, titled).

    Text without a single Markdown heading gets its headings detected from
    numbering and layout (tree_builder.text_headings); text with real
    headings is never second-guessed. With ``limits``, a text of more heading
    lines than they allow its ``size`` bytes is refused before it is parsed.
    """
    text = normalise_text(raw_text)
    if mostly_control(text):
        raise InputError(f"{rel_path}: binary file, not Markdown text")
    front_matter, body_start = split_front_matter(text)
    if not text[body_start:].strip():
        raise EmptyDocumentError(f"{rel_path}: empty or whitespace-only document")
    candidates = heading_line_count(text, body_start)
    if limits is not None:
        from tree_builder.readers.limits import check_headings  # noqa: PLC0415 - see the import note

        check_headings(candidates, rel_path, limits, size)
    doc = Document(path=rel_path, text=text, title="", content_hash=content_hash(text),
                   front_matter=front_matter, body_start=body_start, kind=kind)
    # no heading line at all: nothing for the Markdown parser to find (a text of 200,000 numbered
    # lines, each a list to it, cost it minutes and a gigabyte to say so)
    if not candidates or not markdown_headings(text, body_start):
        found = detect_headings(text, body_start)
        if limits is not None:
            check_headings(len(found), rel_path, limits, size)
        doc.headings = tuple(found)
    doc.title = document_title(doc, PurePosixPath(rel_path).stem or rel_path)
    return doc


def document_from_parts(text: str, rel_path: str, kind: str, headings: list[Heading],
                        page_starts: list[int] | None = None, title: str = "") -> Document:
    """A reader's normalised text and headings -> Document (PDF, Word, HTML).

    ``title`` (the file's own metadata title) is used only when the headings do
    not name the document: metadata is often stale ("Microsoft Word - draft3").
    Where they do not, what the document states comes first: a filing's cover
    (registrant, form, period); then the metadata title, unless it is an
    identifier ("0000012927-23-000007") rather than a title; then the file name.
    A file whose format marks no heading at all (a Word file styled by hand,
    a PDF in one font size) gets the plain-text detection (numbering, layout).
    """
    if not text.strip():
        raise EmptyDocumentError(f"{rel_path}: no text found in the document")
    if not headings:
        headings = detect_headings(text, 0)
    doc = Document(path=rel_path, text=text, title="",
                   content_hash=content_hash(text),
                   kind=kind, headings=tuple(headings), page_starts=list(page_starts or []))
    meta = _WS.sub(" ", title).strip()
    fallback = cover_title(text, doc.page_starts) or (meta if not identifier_like(meta) else "") \
        or PurePosixPath(rel_path).stem or rel_path
    doc.title = document_title(doc, fallback)
    return doc
