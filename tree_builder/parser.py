"""Markdown/text -> normalised Documents, and Documents -> heading positions.

Other formats (PDF, Word, HTML) have their own reader in tree_builder/readers/
that produces the same Document (text plus explicit headings and pages).

Headings come from a real CommonMark parser (markdown-it-py) rather than a
regex, because "a line starting with #" is wrong inside fenced/indented code,
HTML blocks, comments, block quotes and list items. We only read the parser's
token line maps and slice the original normalised text: nothing is re-rendered,
so every character of a tree node can be traced back to the file.
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tree_builder.tree import Document
from utils.errors import InputError

_FENCE_CLOSE = re.compile(r"^(---|\.\.\.)[ \t]*$", re.MULTILINE)
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")  # Cc minus \t\n\v\f\r


class EmptyDocumentError(InputError):
    """A document with no non-blank body text (skipped inside a folder, fatal alone)."""


@dataclass(frozen=True)
class Heading:
    text: str
    """Heading text with inline Markdown removed and whitespace collapsed."""
    marker_level: int
    """Number of ``#`` for ATX; 1 for a ``===`` and 2 for a ``---`` setext underline."""
    line: int
    """1-based line of the heading's first line in the normalised document."""
    start_char: int
    end_char: int
    """[start, end) of the heading line(s) including the final newline (setext: both lines)."""
    end_line: int = 0
    """1-based last line of the heading (differs from ``line`` for setext headings)."""


# --------------------------------------------------------------------------- reading

def _looks_binary(data: bytes) -> bool:
    return b"\x00" in data


def _decode(data: bytes, rel_path: str) -> str:
    """UTF-8 (with or without BOM) first, then GB18030 (common for Chinese files)."""
    if data.startswith(b"\xef\xbb\xbf"):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
    for encoding in ("utf-8", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise InputError(f"{rel_path}: cannot decode as UTF-8 or GB18030 text")


def _mostly_control(text: str) -> bool:
    """Binary data that happens to decode (no NUL bytes) is full of control characters."""
    sample = text[:8192]
    return len(_CONTROL.findall(sample)) > max(8, len(sample) // 100)


def normalise_text(text: str) -> str:
    """BOM and CR/CRLF are normalised before anything else so offsets mean one thing."""
    text = text.lstrip("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n")


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
        import yaml

        data = yaml.safe_load(raw) if raw.strip() else {}
    except Exception:  # any YAML error: not front matter after all
        return {}, 0
    if not isinstance(data, dict):
        return {}, 0
    end = m.end()
    if end < len(text) and text[end] == "\n":
        end += 1
    return _json_safe(data), end


def read_bytes(path: Path, rel_path: str) -> bytes:
    """The file's bytes (a regular file within the default size limit), or InputError naming it."""
    from tree_builder.readers.limits import DEFAULT_LIMITS
    from utils.bounded_read import read_bounded

    return read_bounded(path, limit=DEFAULT_LIMITS.max_input_bytes, what=rel_path)


def load_document(path: Path, rel_path: str) -> Document:
    """Read one file of any supported format; raises InputError (one line, naming the file) if unusable."""
    from tree_builder.readers import read_document

    return read_document(Path(path), rel_path)


def text_document_from_bytes(data: bytes, rel_path: str, kind: str = "md") -> Document:
    """Markdown or plain text bytes -> Document."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{rel_path}: UTF-16 text is not supported; save it as UTF-8")
    if _looks_binary(data):
        raise InputError(f"{rel_path}: binary file, not Markdown text")
    return document_from_text(_decode(data, rel_path), rel_path, kind)


def document_from_text(raw_text: str, rel_path: str, kind: str = "md") -> Document:
    """Decoded text -> Document (normalised, front matter split off, titled).

    Text without a single Markdown heading gets its headings detected from
    numbering and layout (tree_builder.text_headings); text with real
    headings is never second-guessed.
    """
    text = normalise_text(raw_text)
    if _mostly_control(text):
        raise InputError(f"{rel_path}: binary file, not Markdown text")
    front_matter, body_start = split_front_matter(text)
    if not text[body_start:].strip():
        raise EmptyDocumentError(f"{rel_path}: empty or whitespace-only document")
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    doc = Document(path=rel_path, text=text, title="", content_hash=content_hash,
                   front_matter=front_matter, body_start=body_start, kind=kind)
    if not _parse_headings_cached(text, body_start):
        from tree_builder.text_headings import detect_headings

        found = detect_headings(text, body_start)
        if found:
            doc.headings = tuple(found)
    doc.title = document_title(doc, PurePosixPath(rel_path).stem or rel_path)
    return doc


def document_from_parts(text: str, rel_path: str, kind: str, headings: list[Heading],
                        page_starts: list[int] | None = None, title: str = "") -> Document:
    """A reader's normalised text and headings -> Document (PDF, Word, HTML).

    ``title`` (the file's own metadata title) is used only when the headings do
    not name the document: metadata is often stale ("Microsoft Word - draft3").
    A file whose format marks no heading at all (a Word file styled by hand,
    a PDF in one font size) gets the plain-text detection (numbering, layout).
    """
    if not text.strip():
        raise EmptyDocumentError(f"{rel_path}: no text found in the document")
    if not headings:
        from tree_builder.text_headings import detect_headings

        headings = detect_headings(text, 0)
    doc = Document(path=rel_path, text=text, title="",
                   content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                   kind=kind, headings=tuple(headings), page_starts=list(page_starts or []))
    fallback = _WS.sub(" ", title).strip() or PurePosixPath(rel_path).stem or rel_path
    doc.title = document_title(doc, fallback)
    return doc


def load_documents(input_path: Path, follow_links: bool = False,
                   limits: Any = None) -> tuple[list[Document], list[str]]:
    """A file or a folder -> (documents in deterministic order, warnings); ``limits``: ReadLimits."""
    from tree_builder.loader import load_input
    from tree_builder.readers.limits import DEFAULT_LIMITS

    loaded = load_input(Path(input_path), follow_links=follow_links, limits=limits or DEFAULT_LIMITS)
    return loaded.documents, loaded.warnings


# --------------------------------------------------------------------------- headings

@functools.lru_cache(maxsize=1)
def _block_parser() -> Any:
    """Block structure only: inline parsing is most of markdown-it's cost and we need none."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


@functools.lru_cache(maxsize=1)
def _inline_parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _inline_plain_text(source: str, env: dict) -> str:
    """Heading inline Markdown -> plain text (emphasis, links, code spans unwrapped)."""
    if not any(ch in source for ch in "*_`[]<>!\\&~"):
        return _WS.sub(" ", source).strip()
    tokens = _inline_parser().parseInline(source, env)
    parts: list[str] = []

    def walk(children: list[Any]) -> None:
        for tok in children:
            if tok.type in ("text", "code_inline"):
                parts.append(tok.content)
            elif tok.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            elif tok.type == "image":
                walk(tok.children or [])
            elif tok.children:
                walk(tok.children)

    for tok in tokens:
        walk(tok.children or [])
    return _WS.sub(" ", "".join(parts)).strip()


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins; computed once per document, reused for every node and chunk."""
    starts = [0]
    find = text.find
    pos = find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


@functools.lru_cache(maxsize=2048)
def _parse_headings_cached(text: str, body_start: int) -> tuple[Heading, ...]:
    """Memoised because titles need headings at load time and the tree needs them again."""
    starts = line_starts(text)
    line_offset = text.count("\n", 0, body_start)
    env: dict = {}
    tokens = _block_parser().parse(text[body_start:], env)
    out: list[Heading] = []
    for i, tok in enumerate(tokens):
        # level 0 = not nested in a block quote or list item: a quoted "# x" is content.
        if tok.type != "heading_open" or tok.level != 0 or tok.map is None:
            continue
        first, last = tok.map[0] + line_offset, tok.map[1] + line_offset  # 0-based, [first, last)
        inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
        marker = len(tok.markup) if tok.markup.startswith("#") else (1 if tok.markup == "=" else 2)
        start_char = starts[first]
        end_char = starts[last] if last < len(starts) else len(text)
        out.append(Heading(text=_inline_plain_text(inline, env), marker_level=marker,
                           line=first + 1, start_char=start_char, end_char=end_char,
                           end_line=last))
    return tuple(out)


def parse_headings(doc: Document) -> list[Heading]:
    """All section headings of the body (ATX and setext, or a reader's own), in document order."""
    if doc.headings is not None:
        return list(doc.headings)
    return list(_parse_headings_cached(doc.text, doc.body_start))


# --------------------------------------------------------------------------- titles

def title_block(doc: Document, headings: list[Heading] | None = None) -> list[Heading]:
    """The heading(s) that name the document rather than open a section.

    Either the single H1 when it is the first thing in the body, or a run of
    H1s at the very top with nothing between them and no H1 later (statute
    files start ``# 中华人民共和国民法典`` / ``# 总则``). Everything else in
    the document is then below them, so they can become the document node
    without any section losing its parent. Empty list when there is none.
    """
    hs = parse_headings(doc) if headings is None else headings
    if not hs or hs[0].marker_level != 1:
        return []
    text = doc.text
    if text[doc.body_start:hs[0].start_char].strip():
        return []
    block = [hs[0]]
    for prev, h in zip(hs, hs[1:]):
        if h.marker_level != 1 or text[prev.end_char:h.start_char].strip():
            break
        block.append(h)
    if any(h.marker_level == 1 for h in hs[len(block):]):
        return []
    return block


def document_title(doc: Document, fallback: str) -> str:
    """Front matter ``title``, else the single H1, else a top title block, else ``fallback``."""
    fm_title = doc.front_matter.get("title") if doc.front_matter else None
    if fm_title is not None and str(fm_title).strip():
        return _WS.sub(" ", str(fm_title)).strip()
    headings = parse_headings(doc)
    h1s = [h for h in headings if h.marker_level == 1]
    if len(h1s) == 1 and h1s[0].text:
        return h1s[0].text
    title = " ".join(h.text for h in title_block(doc, headings) if h.text).strip()
    return title or fallback
