"""A PDF's text lines, outline and title through PDFium (pypdfium2): the reading layer of pdf_reader.

PDFium lays each page's characters out into lines itself (in C++), so a line is read as one
slice of the page text; only a few of its characters are asked for their font, size and origin.
Every native object is closed as soon as it has been read (documents and pages hold native
memory), and PDFium is entered by one thread at a time: the library is not thread-safe.
"""
from __future__ import annotations

import ctypes
import math
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tree_builder.readers.pdf_lines import Line
from utils.errors import InputError

if TYPE_CHECKING:  # pypdfium2 is imported only to read a PDF
    import pypdfium2 as pdfium

_PDFIUM_LOCK = threading.Lock()
"""PDFium is one library state per process and not thread-safe: one document is read at a time."""
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_FORCE_BOLD = 1 << 18
"""The ForceBold bit of a font descriptor's /Flags."""
_ITALIC_NAME = re.compile(r"italic|oblique", re.IGNORECASE)
_ITALIC_FLAG = 1 << 6
"""The Italic bit of a font descriptor's /Flags (PDF 32000-1, table 123)."""
_SAMPLES = 8
"""Characters of a line whose style is read; the line's dominant style is the most common among them."""
_LINE_BREAK = "\r\n"
"""The line break PDFium generates. A lone "\n" or "\r" is the PDF's own text: some generators map
the space between words to it ("TABLE\nOF\nCONTENTS" on one baseline), so it reads as a space."""
_SOFT_HYPHEN = "\ufffe"
"""PDFium's mark for a hyphen it judged to be a soft (line-break) hyphen; the page prints a hyphen."""
_FONT_NAME_BYTES = 256


@dataclass
class OutlineEntry:
    level: int
    title: str
    page: int
    """0-based page index."""
    top: float | None
    """The y the entry points to on its page, where it names one."""


@dataclass
class PdfContent:
    pages: list[list[Line]]
    outline: list[OutlineEntry]
    title: str


class _Styles:
    """Reads the style (size, bold) and origin of single characters of one text page."""

    def __init__(self, text_page: pdfium.PdfTextPage) -> None:
        import pypdfium2.raw as raw

        self._raw = raw
        self._tp = text_page.raw  # the handle itself: no wrapper conversion per call
        self._x = ctypes.c_double()
        self._y = ctypes.c_double()
        self._matrix = raw.FS_MATRIX()
        self._name = ctypes.create_string_buffer(_FONT_NAME_BYTES)
        self._flags = ctypes.c_int()
        self._font_names: dict[bytes, tuple[bool, bool]] = {}

    def char_index(self, text_index: int) -> int:
        return self._raw.FPDFText_GetCharIndexFromTextIndex(self._tp, text_index)

    def origin(self, char: int) -> tuple[float, float] | None:
        if not self._raw.FPDFText_GetCharOrigin(self._tp, char, self._x, self._y):
            return None
        return self._x.value, self._y.value

    def style(self, char: int) -> tuple[float, bool, bool]:
        """(size, bold, italic) of one character."""
        raw = self._raw
        size = raw.FPDFText_GetFontSize(self._tp, char)
        if raw.FPDFText_GetMatrix(self._tp, char, self._matrix):  # the size as drawn, after scaling
            size *= math.hypot(self._matrix.c, self._matrix.d) or 1.0
        # Not FPDFText_GetFontWeight: PDFium derives it from the descriptor's /StemV, which
        # browser-printed filings fill arbitrarily (their italic font 610, their bold one 415).
        bold = italic = False
        if raw.FPDFText_GetFontInfo(self._tp, char, self._name, _FONT_NAME_BYTES, self._flags):
            name = self._name.value
            if name not in self._font_names:
                decoded = name.decode("latin-1")
                self._font_names[name] = (bool(_BOLD_NAME.search(decoded)), bool(_ITALIC_NAME.search(decoded)))
            named_bold, named_italic = self._font_names[name]
            bold = named_bold or bool(self._flags.value & _FORCE_BOLD)
            italic = named_italic or bool(self._flags.value & _ITALIC_FLAG)
        return round(size * 2) / 2, bold, italic


def _sample_offsets(segment: str) -> list[int]:
    """Offsets of up to _SAMPLES non-space characters spread evenly over the segment, its first
    included (each the first non-space at or after an even step)."""
    n = len(segment)
    out: list[int] = []
    for k in range(_SAMPLES):
        i = k * n // _SAMPLES
        while i < n and segment[i].isspace():
            i += 1
        if i < n and (not out or i > out[-1]):
            out.append(i)
    return out


def _run_in_ends(styles: _Styles, segment: str, start: int,
                 first: tuple[float, bool, bool] | None) -> tuple[int, int]:
    """(bold, italic): characters of the segment's normalised text set in bold (or else in italic) before
    the line turns plain for good (its first character so marked, its last in neither; the turn found
    by bisection over the characters between, each read once): a title run into its paragraph
    ("Income taxes – We ...", "Equity investments. Fair value ..."). (0, 0) for any other line.
    ``first`` is the style of the segment's first non-space character, which ``_line`` has read
    already (None when PDFium has no character there)."""
    flag = 0 if first is None else 1 if first[1] else 2 if first[2] else 0
    if not flag:  # most lines: nothing more to read
        return 0, 0
    marks = [k for k, ch in enumerate(segment) if not ch.isspace()]

    def style(k: int) -> tuple[float, bool, bool]:
        char = styles.char_index(start + marks[k])
        return styles.style(char) if char >= 0 else (0.0, False, False)

    if len(marks) < 2:
        return 0, 0
    last = style(len(marks) - 1)
    if last[1] or last[2]:
        return 0, 0
    lo, hi = 0, len(marks) - 1  # marked at lo, plain at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if style(mid)[flag] else (lo, mid)
    end = len(" ".join(segment[:marks[hi]].replace(_SOFT_HYPHEN, "-").split()))
    return (end, 0) if flag == 1 else (0, end)


def _line(styles: _Styles, segment: str, start: int, page_no: int) -> Line | None:
    """One line of the page text (``segment``, from text index ``start``); its style is the most
    common among characters sampled evenly over it (each stands for an equal share of the line)."""
    text = " ".join(segment.replace(_SOFT_HYPHEN, "-").split())
    if not text:
        return None
    votes: Counter = Counter()
    slanted = 0
    where: tuple[float, float] | None = None
    first: tuple[float, bool, bool] | None = None  # the first sample is the first non-space character
    for n, offset in enumerate(_sample_offsets(segment)):
        char = styles.char_index(start + offset)
        if char < 0:
            continue
        size, bold, italic = styles.style(char)
        if not n:
            first = (size, bold, italic)
        votes[(size, bold)] += 1
        slanted += italic
        if where is None:
            where = styles.origin(char)
    (size, bold), _ = votes.most_common(1)[0] if votes else ((0.0, False), 0)
    x, y = where if where is not None else (0.0, 0.0)
    last = styles.char_index(start + len(segment.rstrip()) - 1)
    end = styles.origin(last) if last >= 0 else None
    x_end = end[0] + size / 2 if end is not None else x
    bold_end, italic_end = _run_in_ends(styles, segment, start, first)
    return Line(text, size, bold, y, page_no, x=x, x_end=max(x, x_end),
                italic=bool(votes) and 2 * slanted > sum(votes.values()), bold_end=bold_end, italic_end=italic_end)


def page_lines(text_page: pdfium.PdfTextPage, page_no: int) -> list[Line]:
    """The page's text lines in PDFium's reading order, each with its dominant font size, weight,
    baseline y and left x (PDF user space: a larger y is higher on the page)."""
    import pypdfium2.raw as raw

    count = raw.FPDFText_CountChars(text_page)
    if count <= 0:
        return []
    text = text_page.get_text_range(0, count)
    styles = _Styles(text_page)
    lines: list[Line] = []
    start = 0
    for segment in text.split(_LINE_BREAK):
        line = _line(styles, segment, start, page_no)
        if line is not None:
            lines.append(line)
        start += len(segment) + len(_LINE_BREAK)
    return lines


def _destination(pdf: pdfium.PdfDocument, mark: pdfium.PdfBookmark) -> pdfium.PdfDest | None:
    """The bookmark's destination: its /Dest, or the target of its GoTo action."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    dest = mark.get_dest()
    if dest is not None:
        return dest
    action = raw.FPDFBookmark_GetAction(mark)
    if not action or raw.FPDFAction_GetType(action) != raw.PDFACTION_GOTO:
        return None
    target = raw.FPDFAction_GetDest(pdf, action)
    return pdfium.PdfDest(target, pdf=pdf) if target else None


def _outline(pdf: pdfium.PdfDocument) -> list[OutlineEntry]:
    import pypdfium2.raw as raw

    out: list[OutlineEntry] = []
    for mark in pdf.get_toc():
        title = " ".join((mark.get_title() or "").split())
        dest = _destination(pdf, mark)
        page = dest.get_index() if dest is not None else None
        if page is None or not title:
            continue  # a dangling destination: the entry is unusable
        mode, pos = dest.get_view()
        top = None
        if mode == raw.PDFDEST_VIEW_XYZ and len(pos) >= 2 and math.isfinite(pos[1]) and pos[1]:
            top = float(pos[1])
        elif mode in (raw.PDFDEST_VIEW_FITH, raw.PDFDEST_VIEW_FITBH) and pos and math.isfinite(pos[0]):
            top = float(pos[0])
        out.append(OutlineEntry(mark.level + 1, title, page, top))
    return out


@contextmanager
def _opened(data: bytes, rel_path: str) -> Iterator[pdfium.PdfDocument]:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code == raw.FPDF_ERR_PASSWORD:
            raise InputError(f"{rel_path}: encrypted PDF (password protected); decrypt it first") from None
        if exc.err_code == raw.FPDF_ERR_SECURITY:
            raise InputError(f"{rel_path}: encrypted PDF (unsupported security handler); decrypt it first") from None
        raise InputError(f"{rel_path}: not a readable PDF (damaged or not a PDF)") from None
    try:
        yield pdf
    finally:
        pdf.close()


def read_pdf_content(data: bytes, rel_path: str) -> PdfContent:
    """Every page's lines, the outline and the title of a PDF; InputError where PDFium cannot read it."""
    import pypdfium2 as pdfium

    with _PDFIUM_LOCK, _opened(data, rel_path) as pdf:
        try:
            pages: list[list[Line]] = []
            for n in range(len(pdf)):
                page = pdf[n]
                try:
                    text_page = page.get_textpage()
                    try:
                        pages.append(page_lines(text_page, n + 1))
                    finally:
                        text_page.close()
                finally:
                    page.close()
            outline = _outline(pdf)
            title = " ".join((pdf.get_metadata_value("Title") or "").split())
        except (pdfium.PdfiumError, AssertionError):  # pypdfium2's checks of PDFium's answers
            raise InputError(f"{rel_path}: not a readable PDF (damaged page)") from None
    return PdfContent(pages, outline, title)
