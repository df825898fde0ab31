"""Text PDFs -> Document with sections and pages (pypdf; BSD licence, pure Python).

pypdf was kept by measurement (benchmarks/bench_formats.py, README): its text
visitor yields every run of text with its font and matrix, which is all the
layout rules need, in 0.6x the CPU time of pdfminer.six without layout
analysis and 0.16x pdfplumber's; it also reads outlines and detects encryption.

Sections come from the outline (bookmarks) when the PDF has one; otherwise
from the document's own contents page, its division words (PART, Item, Note,
ARTICLE, 第一章 ...) and, below those, the layout: lines set larger than the
body text, or bold, ranked by size (pdf_structure). Running headers/footers (the same small text at
the top or bottom of most pages) and page numbers are dropped. The
text is what pypdf extracts, with runs of spaces collapsed, so a quoted chunk
reads as the PDF does.
"""
from __future__ import annotations

import io
import logging
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from tree_builder.document import Document
from tree_builder.documents import document_from_parts
from tree_builder.numbering import heading_numbering
from tree_builder.readers.builder import TextBuilder
from tree_builder.readers.limits import DEFAULT_LIMITS, ReadLimits, check_headings
from tree_builder.readers.pdf_lines import Line
from tree_builder.readers.pdf_structure import body_style, mark_structure_headings, relevel_flat_outline
from tree_builder.readers.pdf_toc import is_contents_link
from utils.cjk import is_wide
from utils.errors import InputError

_PAGE_NUMBER = re.compile(r"^[\s\-–—]*(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,6})(?:\s*(?:/|of)\s*\d{1,4})?[\s\-–—]*$",
                          re.IGNORECASE)
_TINY_SCALE = 0.2
"""A text-placement matrix that scales text down by more than this breaks pypdf's line-break test."""
_BASELINE_SHIFT = 0.5
"""Text placed this many font sizes above or below a line's baseline is on another line (less: a
superscript or subscript of that line)."""
_WORD_GAP = 0.15
"""A next object on a line that starts this many font sizes past where the last one's text ends is
a next word or column (a space is about a quarter of the size): a space joins them."""
_CLOSING = (".", ",", ";", ":", "!", "?", ")", "]", "%")
"""An object opening with these continues the last word however far apart (justified text)."""
_ESTIMATED_WORD_GAP = 1.0
"""The same where the last object's width is only estimated (its font's widths unknown)."""
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_MIN_TEXT_CHARS = 10


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def join_wrapped(a: str, b: str) -> str:
    """Two lines of one wrapped heading: CJK text wraps without a space, other text at one."""
    if a and b and is_wide(a[-1]) and is_wide(b[0]):
        return a + b
    return f"{a} {b}" if a and b else a or b


# --------------------------------------------------------------------------- lines of a page

def _font_is_bold(font: Any) -> bool:
    if not font:
        return False
    try:
        if _BOLD_NAME.search(str(font.get("/BaseFont", ""))):
            return True
        desc = font.get("/FontDescriptor")
        desc = desc.get_object() if desc is not None else None
        return bool(desc) and float(desc.get("/FontWeight", 400)) >= 600
    except Exception:  # a malformed font dictionary only costs the bold hint
        return False


def estimated_width(text: str, size: float) -> float:
    """Width of ``text`` set at ``size`` by average glyph widths of a Latin text face (capitals wider
    than lower case, spaces and punctuation narrower): the fallback where a font's widths are unknown."""
    em = 0.0
    for ch in text:
        em += 0.25 if ch.isspace() else 0.68 if ch.isupper() else 0.48 if ch.islower() \
            else 0.5 if ch.isdigit() else 1.0 if is_wide(ch) else 0.33
    return em * size


def _width_table(font: Any) -> tuple[dict[str, float], dict[str, str]] | None:
    """The font's glyph widths (1/1000 em, keyed by character code) and its text -> code map, as
    pypdf reads them; None where pypdf cannot (then widths are estimated)."""
    try:
        from pypdf.generic._font import Font  # pypdf's own reading of /Widths, /W and /ToUnicode

        parsed = Font.from_font_resource(font)
        codes = {u: c for c, u in parsed.character_map.items() if isinstance(u, str) and len(u) == 1}
        return dict(parsed.character_widths), codes
    except Exception:  # an unusual or damaged font dictionary, or another pypdf: estimate instead
        return None


def text_width(text: str, size: float, table: tuple[dict[str, float], dict[str, str]] | None) -> float:
    """How far ``text`` advances at ``size``: by the font's widths where known, else estimated."""
    if table is None:
        return estimated_width(text, size)
    widths, codes = table
    default = widths.get("default", 500.0)
    return sum(widths.get(codes.get(ch, ch), default) for ch in text) / 1000 * size


def page_lines(page: Any, page_no: int, font_widths: dict[Any, Any] | None = None) -> list[Line]:
    """The page's text lines in reading order, each with its dominant font size, weight and height.

    Some generators place every text object by a matrix that scales text space down (a font of
    "416 pt" drawn at 9 pt, the position only in the matrix's translation): pypdf's line-break test,
    made in unscaled units, then breaks such an object at every word or kerning step and a visual
    line arrives in pieces ("PART" / "I", "results of operat" / "ions"), and an object on the next
    line may arrive with no break at all ("...flows.ITEM 4. MINE SAFETY"). The matrix's translation
    is that text's true baseline, so such objects are laid into lines by their baselines alone: one
    on the baseline of the line being built continues it, one on another baseline starts a line.
    A next object set well apart on the line (a contents page's page number column) is joined with a
    space, one set right after the last ("Company" in bold, then "'s") without. ``font_widths``
    keeps the fonts' width tables across pages (a document's pages share their fonts).
    """
    runs: list[tuple[str, float, bool, float | None, float, bool, Any]] = []
    bold_cache: dict[int, bool] = {}
    shared = font_widths if font_widths is not None else {}
    widths_cache: dict[int, tuple[dict[str, float], dict[str, str]] | None] = {}

    def visit(text: str, cm: list[float], tm: list[float], font: Any, font_size: float) -> None:
        if not text:
            return
        scale_tm = math.hypot(tm[2], tm[3]) or 1.0
        scale_cm = math.hypot(cm[2], cm[3]) or 1.0
        size = round(float(font_size) * scale_tm * scale_cm * 2) / 2
        key = id(font)
        if key not in bold_cache:
            bold_cache[key] = _font_is_bold(font)
        degenerate = not any(tm[4:6]) and 0 < math.hypot(cm[2], cm[3]) < _TINY_SCALE
        table = None
        if degenerate:
            y: float | None = cm[5]
            x = cm[4]
            if key not in widths_cache:
                ref = getattr(font, "indirect_reference", None)
                ref_key = (ref.idnum, ref.generation) if ref is not None else None
                if ref_key is None or ref_key not in shared:
                    table = _width_table(font) if font else None
                    if ref_key is not None:
                        shared[ref_key] = table
                widths_cache[key] = shared[ref_key] if ref_key is not None else table
            table = widths_cache[key]
        else:
            y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5] if any(tm[4:6]) else None
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
        runs.append((text, size, bold_cache[key], y, x, degenerate, table))

    page.extract_text(visitor_text=visit)
    lines: list[Line] = []
    parts: list[str] = []
    weights: Counter = Counter()
    y_line: float | None = None
    x_line = 0.0
    placed: tuple[float, float | None] | None = None  # where the last down-scaled object sits (its pieces share it)
    object_text, object_size = "", 0.0  # ... its text so far and font size
    object_table: Any = None

    def flush() -> None:
        nonlocal y_line
        text = " ".join("".join(parts).split())
        if text:
            (size, bold), _ = weights.most_common(1)[0]
            lines.append(Line(text, size, bold, y_line if y_line is not None else 0.0, page_no, x=x_line))
        parts.clear()
        weights.clear()
        y_line = None

    for text, size, bold, y, x, degenerate, table in runs:
        other_baseline = y is None or y_line is None or abs(y - y_line) > _BASELINE_SHIFT * max(size, 1.0)
        if degenerate:
            text = " ".join(text.rstrip("\n").split("\n"))  # breaks inside an object are pypdf's, not lines
            new_object = (x, y) != placed
            if new_object and not text.strip():
                continue  # a blank object: the gap to the next one tells whether it spaces words
            if parts and other_baseline:
                flush()  # another line (a superscript stays on its line)
            elif parts and new_object and placed is not None:
                # pypdf's spaces between such objects are guesses: the geometry decides
                parts[-1] = parts[-1].rstrip()
                end = placed[0] + text_width(object_text.rstrip(), object_size, object_table)
                if x - end > (_WORD_GAP if object_table is not None else _ESTIMATED_WORD_GAP) * object_size \
                        and not text.startswith(_CLOSING) and not parts[-1].endswith("-"):
                    parts.append(" ")  # set apart from the last object: a next word, a table cell
            if new_object:
                object_text, object_size, object_table = "", size, table
            object_text += text
            placed = (x, y)
        elif placed is not None:
            if parts and y is not None and other_baseline:
                flush()
            placed = None
        pieces = text.split("\n")
        for k, piece in enumerate(pieces):
            if k:
                flush()
            if piece:
                parts.append(piece)
                if piece.strip():
                    weights[(size, bold)] += len(piece.strip())
                    if y_line is None and y is not None:
                        y_line, x_line = y, x
    flush()
    return lines


# --------------------------------------------------------------------------- furniture

def strip_furniture(pages: list[list[Line]]) -> list[list[Line]]:
    """Drop running headers/footers and page numbers (lines at a page's top or bottom edge).

    A running header is text repeated at the same edge of at least half the
    pages, in a font no larger than the body; text that repeats only once
    digits are ignored ("Page 3 of 9", "Report 2024 · 7") must also be short.
    A heading that happens to open every page is larger than the body, so it stays,
    except a link back to the contents ("Table of Contents" atop every page of a
    filing), which is navigation in whatever font it is set.
    """
    body_size, _ = body_style(pages)

    def small(line: Line) -> bool:
        return line.size <= body_size + 0.5

    def edges(lines: list[Line]) -> set[int]:
        order = sorted(range(len(lines)), key=lambda i: lines[i].y)
        return {i for i in set(order[:2]) | set(order[-2:]) if small(lines[i]) or is_contents_link(lines[i].text)}

    def keys(line: Line) -> set[str]:
        exact = _norm(line.text)
        out = {"=" + exact}
        if len(exact) <= 60:
            out.add("#" + re.sub(r"\d+", "#", exact))
        return out

    counts: Counter = Counter()
    for lines in pages:
        counts.update(set().union(*[keys(lines[i]) for i in edges(lines)]) if lines else set())
    need = max(2, math.ceil(0.5 * len(pages)))
    repeated = {k for k, c in counts.items() if c >= need} if len(pages) >= 2 else set()
    out: list[list[Line]] = []
    for lines in pages:
        drop = {i for i in edges(lines) if keys(lines[i]) & repeated or _PAGE_NUMBER.match(lines[i].text)}
        out.append([ln for i, ln in enumerate(lines) if i not in drop])
    return out


# --------------------------------------------------------------------------- headings

def _flatten_outline(reader: Any, items: list[Any], level: int, out: list[tuple[int, str, int, float | None]]) -> None:
    for item in items:
        if isinstance(item, list):
            _flatten_outline(reader, item, level + 1, out)
            continue
        try:
            page = reader.get_destination_page_number(item)
        except Exception:  # a dangling destination: the entry is unusable
            continue
        title = " ".join(str(item.get("/Title", "")).split())
        if page is None or page < 0 or not title:
            continue
        top = item.get("/Top")
        out.append((level, title, page, float(top) if isinstance(top, (int, float)) else None))


def outline_entries(reader: Any) -> list[tuple[int, str, int, float | None]]:
    """(level, title, 0-based page, top y) of every outline entry, in outline order."""
    try:
        outline = reader.outline
    except Exception:
        return []
    out: list[tuple[int, str, int, float | None]] = []
    _flatten_outline(reader, outline, 1, out)
    return out


def mark_outline_headings(pages: list[list[Line]], entries: list[tuple[int, str, int, float | None]]) -> None:
    """Each outline entry marks the line(s) it names on its page, or is inserted where it points.

    The printed heading may carry a number the outline leaves out ("2.1 ASN.1 syntax" for the
    entry "ASN.1 syntax"): the printed line, number included, is then the heading.
    """
    def unnumbered(text: str) -> str:
        parts = text.split(" ", 1)
        return parts[1] if len(parts) == 2 and heading_numbering(text) is not None else text

    cursor = [0] * len(pages)
    for level, title, page, top in entries:
        if page >= len(pages):
            continue
        lines = pages[page]
        want = _norm(title)
        found = False
        for i in range(cursor[page], len(lines)):
            got = _norm(lines[i].text)
            if got and not want.startswith(got) and want.startswith(unnumbered(got)):
                got = unnumbered(got)
            if not got or not want.startswith(got):
                continue
            j, acc = i, got
            while acc != want and j + 1 < len(lines) \
                    and want.startswith(join_wrapped(acc, _norm(lines[j + 1].text))):
                j += 1
                acc = join_wrapped(acc, _norm(lines[j].text))
            if acc != want:
                continue
            for k in range(i, j + 1):
                lines[k].heading = level
            cursor[page] = j + 1
            found = True
            break
        if not found:  # the title is not printed on the page: the outline still names a section
            at = cursor[page]
            if top is not None:
                while at < len(lines) and lines[at].y > top + 1:
                    at += 1
            lines.insert(at, Line(title, 0.0, False, top or 0.0, page, heading=level))
            cursor[page] = at + 1


# --------------------------------------------------------------------------- assembly

def _line_gap(pages: list[list[Line]]) -> float:
    gaps = [a.y - b.y for lines in pages for a, b in zip(lines, lines[1:])
            if not a.heading and not b.heading and 0 < a.y - b.y < 3 * max(a.size, 1)]
    gaps.sort()
    return gaps[len(gaps) // 2] if gaps else 0.0


_PARAGRAPH_END = (".", "!", "?", ":", ";", "。", "！", "？", "：", "；", "…", "\"", "”", ")")


def assemble(pages: list[list[Line]]) -> TextBuilder:
    """Pages of lines -> blocks. A paragraph cut by a page break (its last line does not end a
    sentence and the next page opens with body text) stays one paragraph; the page then begins
    inside it, at the first character the next page holds."""
    builder = TextBuilder()
    gap = _line_gap(pages)
    para: list[str] = []
    breaks: list[int] = []  # indices of para lines that open a new page

    def flush() -> None:
        builder.paragraph_lines(para, breaks)
        para.clear()
        breaks.clear()

    for lines in pages:
        if para and lines and not lines[0].heading and not para[-1].endswith(_PARAGRAPH_END):
            breaks.append(len(para))
        else:
            flush()
            builder.new_page()
        prev: Line | None = None
        i = 0
        while i < len(lines):
            ln = lines[i]
            if ln.heading:
                flush()
                text = ln.text
                while (i + 1 < len(lines) and lines[i + 1].heading == ln.heading
                       and lines[i + 1].size == ln.size and ln.size > 0
                       and 0 < lines[i].y - lines[i + 1].y < 1.6 * ln.size):
                    i += 1
                    text = join_wrapped(text, lines[i].text)
                builder.heading(text, ln.heading)
                prev = None
            else:
                if prev is not None and gap and (prev.y - ln.y > 1.5 * gap or prev.y - ln.y < 0):
                    flush()
                para.append(ln.text)
                prev = ln
            i += 1
    flush()
    return builder


def read_pdf(path: Path, rel_path: str, data: bytes, limits: ReadLimits = DEFAULT_LIMITS) -> Document:
    import pypdf  # pypdf only for a PDF file

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable files are common
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception:
                opened = 0
            if not opened:
                raise InputError(f"{rel_path}: encrypted PDF (password protected); decrypt it first")
        font_widths: dict[Any, Any] = {}
        pages = [page_lines(page, n, font_widths) for n, page in enumerate(reader.pages, 1)]
        entries = outline_entries(reader)
        title = ""
        try:
            meta = reader.metadata
            title = str(meta.title or "") if meta else ""
        except Exception:
            title = ""
    except InputError:
        raise
    except Exception as exc:  # pypdf raises many types for damaged files
        raise InputError(f"{rel_path}: not a readable PDF ({exc.__class__.__name__})") from None
    if sum(len(ln.text) for lines in pages for ln in lines) < _MIN_TEXT_CHARS:
        raise InputError(f"{rel_path}: PDF has no text layer (scanned?); run OCR on it first")
    pages = strip_furniture(pages)
    if len(entries) >= 2:
        mark_outline_headings(pages, relevel_flat_outline(entries))
    else:
        mark_structure_headings(pages)
    built = assemble(pages)
    check_headings(len(built.headings), rel_path, limits)
    return document_from_parts(built.text(), rel_path, "pdf", built.headings, built.page_starts, title)
