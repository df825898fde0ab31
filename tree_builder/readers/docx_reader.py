"""Word .docx -> Document (python-docx; MIT licence).

Sections come from paragraph styles: the built-in Heading 1-9 (and Title),
and any custom style, or paragraph, with an outline level (what Word's
navigation pane shows). Tables become one text row per table row, cells
separated by `` | ``. Body order is kept by walking the XML body directly,
since python-docx lists paragraphs and tables separately.
"""
from __future__ import annotations

import zipfile
import io
import re
from pathlib import Path
from typing import Any

from tree_builder.document import Document
from tree_builder.documents import document_from_parts
from tree_builder.readers.builder import TextBuilder
from tree_builder.readers.limits import DEFAULT_LIMITS, ReadLimits, check_headings
from utils.bounded_read import size_text
from utils.errors import InputError

MAX_PARTS = 10_000
"""Entries in one .docx zip: a real document has tens; a million empty entries is a bomb of its own."""

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _outline_level(ppr: Any) -> int | None:
    """0-based outline level in a w:pPr element, None when absent or body text (9)."""
    if ppr is None:
        return None
    el = ppr.find(f"{_W}outlineLvl")
    if el is None:
        return None
    try:
        value = int(el.get(f"{_W}val"))
    except (TypeError, ValueError):
        return None
    return value if 0 <= value < 9 else None


def heading_level(paragraph: Any, cache: dict[Any, int | None] | None = None) -> int | None:
    """1-based heading level of a paragraph, 0 for a Title, None for body text.

    ``cache`` maps style ids to levels: resolving a style is most of the
    reader's time on long documents.
    """
    own = _outline_level(paragraph._p.pPr)
    if own is not None:
        return own + 1
    if cache is None:
        return _style_level(paragraph.style)
    key = paragraph._p.style
    if key not in cache:
        cache[key] = _style_level(paragraph.style)
    return cache[key]


def _style_level(style: Any) -> int | None:
    seen = 0
    while style is not None and seen < 10:  # follow "based on" a few steps (cycles are possible)
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 0
        m = _HEADING_STYLE.match(name)
        if m:
            return int(m.group(1))
        lvl = _outline_level(style.element.pPr)
        if lvl is not None:
            return lvl + 1
        style = style.base_style
        seen += 1
    return None


def _table_rows(table: Any) -> list[str]:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or cells[-1] != text:  # merged cells repeat their text
                cells.append(text)
        line = " | ".join(cells).strip(" |")
        if line:
            rows.append(line)
    return rows


def check_unpacked_size(data: bytes, rel_path: str, limits: ReadLimits) -> None:
    """Refuse a .docx whose parts unpack to more than ``limits.max_unpacked_bytes`` before any is unpacked.

    python-docx reads every part whole (and parses the XML ones into trees), so a 3 MB file whose
    document.xml declares 600 MB would cost gigabytes. The declared sizes are binding: Python's zip
    reader stops a part at its declared size (and a part that holds more fails its CRC check).
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise InputError(f"{rel_path}: not a readable Word .docx file (BadZipFile)") from None
    if len(infos) > MAX_PARTS:
        raise InputError(f"{rel_path}: a .docx of {len(infos):,} parts (more than {MAX_PARTS:,}); not read")
    total = sum(max(0, i.file_size) for i in infos)
    if total > limits.max_unpacked_bytes:
        raise InputError(f"{rel_path}: unpacks to {size_text(total)}, more than the "
                         f"{size_text(limits.max_unpacked_bytes)} limit (max_unpacked_bytes); not read")


def read_docx(path: Path, rel_path: str, data: bytes, limits: ReadLimits = DEFAULT_LIMITS) -> Document:
    import docx  # python-docx only for a .docx file
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    check_unpacked_size(data, rel_path, limits)
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # a damaged zip or missing part
        raise InputError(f"{rel_path}: not a readable Word .docx file ({exc.__class__.__name__})") from None
    blocks: list[tuple[str, Any]] = []
    for el in document.element.body.iterchildren():
        if el.tag == f"{_W}p":
            blocks.append(("p", Paragraph(el, document)))
        elif el.tag == f"{_W}tbl":
            blocks.append(("t", Table(el, document)))
    cache: dict[Any, int | None] = {}
    levels = [heading_level(b, cache) if kind == "p" else None for kind, b in blocks]
    has_title = any(lvl == 0 for lvl in levels)
    builder = TextBuilder()
    for (kind, block), level in zip(blocks, levels):
        if kind == "t":
            builder.paragraph("\n".join(_table_rows(block)))
        elif level is not None and block.text.strip():
            # with a Title paragraph, Heading 1 sits below it; without one, Heading 1 is the top
            builder.heading(block.text, level + 1 if has_title else max(level, 1))
        else:
            builder.paragraph(block.text)
    check_headings(len(builder.headings), rel_path, limits)
    title = document.core_properties.title or ""
    return document_from_parts(builder.text(), rel_path, "docx", builder.headings, None, title)
