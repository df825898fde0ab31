"""Text PDFs -> Document with sections and pages (PDFium through pypdfium2; BSD/Apache licence).

PDFium was chosen by measurement (docs/formats.md): pypdf's pure-Python
content-stream parser spent nearly all of a 10-K's read time, about a sixth of
the filing's whole build, where PDFium (C++) lays the same pages out into lines
in about a tenth of that CPU time; its lines also break where the page does,
where pypdf ran words and headings together ("individualtransactions",
"Business4Item 1A."). pdf_text reads the lines, outline and title; everything
below works on its Line records.

Sections come from the outline (bookmarks) when the PDF has one that is no
poorer than its contents page (a filing bound from its parts, bookmarked only
"10-K", "Exhibit 21", "Exhibit 23", or bookmarked by its Items and nothing
below them, is read by its contents page); otherwise
from the document's own contents page, its division words (PART, Item, Note,
ARTICLE, 第一章 ...) and, below those, the layout: lines set larger than the
body text, or bold or italic, ranked by size and weight (pdf_structure), and titles in bold or italic body type
that the font rules refuse, a risk's sentence or a policy or topic run into its paragraph (pdf_body_titles; also below
bookmarks). Running headers/footers (the same small text at
the top or bottom of most pages) and page numbers are dropped. The
text is what PDFium extracts, with runs of spaces collapsed, so a quoted chunk
reads as the PDF does.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

from tree_builder.document import Document
from tree_builder.documents import document_from_parts
from tree_builder.heading_schemes import run_in_split, scheme_of
from tree_builder.numbering import heading_numbering
from tree_builder.readers.builder import TextBuilder
from tree_builder.readers.limits import DEFAULT_LIMITS, ReadLimits, check_headings
from tree_builder.readers.pdf_body_titles import SEPARATORS, body_titles, mark_title
from tree_builder.readers.pdf_ligatures import mend_ligatures
from tree_builder.readers.pdf_lines import PARAGRAPH_END, RUNNING_TOPS, Line, at_line_spacing
from tree_builder.readers.pdf_structure import (body_style, mark_structure_headings, outline_poorer,
                                                 relevel_flat_outline)
from tree_builder.readers.pdf_text import read_pdf_content
from tree_builder.readers.pdf_toc import is_contents_link
from utils.cjk import is_wide
from utils.errors import InputError

_PAGE_NUMBER = re.compile(r"^[\s\-–—]*(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,6})(?:\s*(?:/|of)\s*\d{1,4})?[\s\-–—]*$",
                          re.IGNORECASE)
_MIN_TEXT_CHARS = 10


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def join_wrapped(a: str, b: str) -> str:
    """Two lines of one wrapped heading: CJK text wraps without a space, other text at one."""
    if a and b and is_wide(a[-1]) and is_wide(b[0]):
        return a + b
    return f"{a} {b}" if a and b else a or b


# --------------------------------------------------------------------------- furniture

_ROMAN_END = re.compile(r"(?<=\s)[ivxlc]{1,6}$")
"""A page numbered in roman figures ("Form 10-K ii" on the pages before the first)."""
_NUMBERED_SIZE = 1.25
"""A line numbered with its page may be this many times the body's size and still be furniture."""


def strip_furniture(pages: list[list[Line]]) -> list[list[Line]]:
    """Drop running headers/footers and page numbers (lines at a page's top or bottom edge).

    A running header is text repeated at the same edge of at least half the
    pages, in a font no larger than the body; text that repeats only once
    digits are ignored ("Page 3 of 9", "Report 2024 · 7") must also be short.
    A heading that happens to open every page is larger than the body, so it stays,
    except a link back to the contents ("Table of Contents" atop every page of a
    filing), which is navigation in whatever font it is set. A line that carries
    the page's own number ("Pfizer Inc. 2021 Form 10-K 15", a number that differs
    from page to page) is furniture even a little larger than the body, as a filing
    set in 7 pt may print it in bold 8 pt: no heading repeats on every other page.
    A roman page number counts only where no division word precedes it: "PART I"
    and "PART II" are two lines.
    """
    body_size, _ = body_style(pages)

    def edges(lines: list[Line]) -> set[int]:
        order = sorted(range(len(lines)), key=lambda i: lines[i].y)
        return {i for i in set(order[:2]) | set(order[-2:])
                if lines[i].size <= body_size * _NUMBERED_SIZE or is_contents_link(lines[i].text)}

    def small(line: Line) -> bool:
        return line.size <= body_size + 0.5 or is_contents_link(line.text)

    def keys(line: Line) -> set[str]:
        exact = _norm(line.text)
        out = {"=" + exact}
        if len(exact) <= 60:
            digits = re.sub(r"\d+", "#", exact)
            out.add("#" + (digits if scheme_of(line.text) else _ROMAN_END.sub("#", digits)))
        return out

    edge_keys = [{i: keys(lines[i]) for i in edges(lines)} for lines in pages]  # line -> its keys, per page
    counts: Counter = Counter()
    variants: dict[str, set[str]] = {}  # a digit-blanked key -> the texts it stands for
    for lines, at_edge in zip(pages, edge_keys):
        on_page: set[str] = set()
        for i, line_keys in at_edge.items():
            on_page |= line_keys
            for key in line_keys:
                if key.startswith("#"):
                    variants.setdefault(key, set()).add(_norm(lines[i].text))
        counts.update(on_page)
    need = max(2, math.ceil(0.5 * len(pages)))
    repeated = {k for k, c in counts.items() if c >= need} if len(pages) >= 2 else set()
    numbered = {k for k in repeated if len(variants.get(k, ())) >= 2}

    def furniture(line: Line, line_keys: set[str]) -> bool:
        return bool(line_keys & numbered) or small(line) and bool(
            line_keys & repeated or _PAGE_NUMBER.match(line.text))

    return [[ln for i, ln in enumerate(lines) if not (i in at_edge and furniture(ln, at_edge[i]))]
            for lines, at_edge in zip(pages, edge_keys)]


def unmark_running_titles(pages: list[list[Line]]) -> None:
    """A heading printed again atop each page of its section ("Notes to Consolidated Financial Statements"
    over each of 49 pages of notes) is a running header there: where it opens ``RUNNING_TOPS`` or
    more pages in a row, it heads its section on the first and is text on the rest. Left headings, the
    notes' lettered subsections would nest under each repeat. A title on two pages in a row (a
    statement continued, two auditors' reports) or returning after other pages ("ARTICLE V" of the
    next plan) stays a heading. The line below it repeats the same way where the title above it is
    text ("Exhibit 99.3" over "CITYCENTER HOLDINGS, LLC" on each page of an exhibit); a title wrapped
    onto it in the same font goes with its first line. Only the heading marks change: the lines stay,
    so no other line comes to open its page."""
    tops = [sorted(lines, key=lambda ln: -ln.y)[:2] for lines in pages]
    for pos in (0, 1):
        keys = [_norm(t[pos].text) if len(t) > pos and t[pos].heading else "" for t in tops]
        p = 0
        while p < len(keys):
            end = p + 1
            while end < len(keys) and keys[end] == keys[p]:
                end += 1
            if keys[p] and end - p >= RUNNING_TOPS:
                for q in range(p + 1, end):
                    title = tops[q][pos]
                    if pos == 1 and tops[q][0].heading:
                        continue  # below a title of its own page: a section's first heading
                    if pos == 0 and len(tops[q]) > 1 and tops[q][1].heading == title.heading:
                        tops[q][1].heading = 0  # the title's wrapped second line
                    title.heading = 0
            p = end


# --------------------------------------------------------------------------- headings

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


def mark_body_titles(pages: list[list[Line]], level: int) -> None:
    """Below a bookmarked outline, the titles in bold or italic body type that divide its longest
    sections (a filing's risks: the bookmarks stop at "Item 1A. Risk Factors") as headings at ``level``."""
    body = body_style(pages)
    for title in body_titles(pages, [body] * len(pages), [list(range(len(pages)))], set(), short=True):
        mark_title(pages, title, level)


# --------------------------------------------------------------------------- assembly

def _line_gap(pages: list[list[Line]]) -> float:
    gaps = [a.y - b.y for lines in pages for a, b in zip(lines, lines[1:])
            if not a.heading and not b.heading and 0 < a.y - b.y < 3 * max(a.size, 1)]
    gaps.sort()
    return gaps[len(gaps) // 2] if gaps else 0.0


def _title_part(ln: Line) -> str:
    return ln.text[:ln.title_end] if ln.title_end else ln.text


def assemble(pages: list[list[Line]]) -> TextBuilder:
    """Pages of lines -> blocks. A paragraph cut by a page break (its last line does not end a
    sentence and the next page opens with body text) stays one paragraph; the page then begins
    inside it, at the first character the next page holds. A division line whose paragraph runs in
    after its title ("Section 2.2 Qualified Plan Definitions. Capitalized terms ...") is cut there."""
    builder = TextBuilder()
    gap = _line_gap(pages)
    para: list[str] = []
    breaks: list[int] = []  # indices of para lines that open a new page

    def flush() -> None:
        builder.paragraph_lines(para, breaks)
        para.clear()
        breaks.clear()

    for lines in pages:
        if para and lines and not lines[0].heading and not para[-1].endswith(PARAGRAPH_END):
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
                text = _title_part(ln)
                while (not lines[i].title_end and i + 1 < len(lines) and lines[i + 1].heading == ln.heading
                       and lines[i + 1].size == ln.size and ln.size > 0
                       and at_line_spacing(lines[i], lines[i + 1], ln.size)):
                    i += 1
                    text = join_wrapped(text, _title_part(lines[i]))
                cut = lines[i].title_end
                run_in = (text, lines[i].text[cut:].lstrip(SEPARATORS)) if cut else run_in_split(text)
                builder.heading(run_in[0] if run_in else text, ln.heading)
                prev = None
                if run_in:  # the paragraph that runs in after the title opens the section's text
                    para.append(run_in[1])
                    prev = lines[i]
            else:
                if prev is not None and gap and (prev.y - ln.y > 1.5 * gap or prev.y - ln.y < 0):
                    flush()
                para.append(ln.text)
                prev = ln
            i += 1
    flush()
    return builder


SIGNALS = ("outline", "contents")
"""The two signals a PDF's outline is taken from before its division words and fonts: what
``read_pdf(without=...)`` can ignore, to see the tree a file lacking them would get."""


def read_pdf(path: Path, rel_path: str, data: bytes, limits: ReadLimits = DEFAULT_LIMITS,
             without: frozenset[str] = frozenset()) -> Document:
    """``without``: signals of ``SIGNALS`` to ignore ("outline": the bookmarks; "contents": the
    contents page's entries, its pages still no sections), so ``tree_check --without`` measures the
    fallbacks on files that have the signals, as a file lacking them would be read."""
    content = read_pdf_content(data, rel_path)
    pages = content.pages
    if sum(len(ln.text) for lines in pages for ln in lines) < _MIN_TEXT_CHARS:
        raise InputError(f"{rel_path}: PDF has no text layer (scanned?); run OCR on it first")
    pages = strip_furniture(pages)
    mend_ligatures(pages)
    entries = [(e.level, e.title, e.page, e.top) for e in content.outline if "outline" not in without]
    if len(entries) >= 2:
        entries = relevel_flat_outline(entries)
    if len(entries) >= 2 and not outline_poorer(pages, entries):
        mark_outline_headings(pages, entries)
        mark_body_titles(pages, 1 + max(level for level, *_ in entries))
    else:
        mark_structure_headings(pages, anchored="contents" not in without)
        unmark_running_titles(pages)
    built = assemble(pages)
    check_headings(len(built.headings), rel_path, limits)
    return document_from_parts(built.text(), rel_path, "pdf", built.headings, built.page_starts, content.title)
