"""Titles written as sentences: a bold paragraph of its own that a paragraph in the body font follows.

A filing's risk factors are its longest Item (10-15 pages), and each risk is headed by one bold
sentence ("We may not realize the anticipated benefits of past or future investments or
acquisitions, and integration of these acquisitions may disrupt our business and management."),
then explained in regular type. Those sentences are how a reader finds a risk; as ordinary text the
Item was one leaf of 60,000-90,000 characters. The layout rules refuse a sentence as a heading
(pdf_structure: "The following table shows ...:" in bold is no section), so these titles are found
by their own pattern: a whole paragraph in bold at the body's size, opening in a capital and ending a
sentence, between body text above and a paragraph in the body font below, recurring in that font
(a document that heads its parts this way does it many times; one bold sentence is emphasis).
They head the lowest level: nothing in a filing nests under a risk.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Sequence

from tree_builder.readers.pdf_lines import at_line_spacing
from tree_builder.readers.pdf_tables import is_table_line

if TYPE_CHECKING:
    from tree_builder.readers.pdf_lines import Line

_MAX_CHARS = 500
"""A title sentence runs to four or five lines; a longer bold paragraph is emphasised text."""
_MIN_CHARS = 40
_MIN_WORDS = 6
"""Shorter bold lines ("Overview", "Risks Related to Our Business") are the layout rules' titles."""
_MIN_TITLES = 5
"""Sentence titles a document (or exhibit) must set in one font before any is taken as one."""
_ENDS = (".", "?")
_SIZE_TOLERANCE = 0.75


def _bold_at_body(ln: "Line", body: tuple[float, bool]) -> bool:
    size, bold = body
    return ln.bold and not bold and abs(ln.size - size) < _SIZE_TOLERANCE and not ln.heading


def _body_text(ln: "Line | None", body: tuple[float, bool]) -> bool:
    """A line of running text: the body's size, regular weight, no table row."""
    size, bold = body
    return ln is not None and ln.bold == bold and abs(ln.size - size) < _SIZE_TOLERANCE and not ln.heading \
        and not is_table_line(ln.text)


def _paragraph(lines: Sequence["Line"], i: int, body: tuple[float, bool]) -> int | None:
    """Index of the last line of the bold paragraph opening at ``i``, or None when line ``i`` opens
    none (it is not bold at the body's size, or the line above it is part of the same bold text)."""
    ln = lines[i]
    if not _bold_at_body(ln, body) or i and lines[i - 1].font == ln.font and at_line_spacing(lines[i - 1], ln, ln.size):
        return None
    j = i
    while j + 1 < len(lines) and lines[j + 1].font == ln.font and _bold_at_body(lines[j + 1], body) \
            and at_line_spacing(lines[j], lines[j + 1], ln.size):
        j += 1
    return j


def _reads_as_title(text: str) -> bool:
    words = text.split()
    letters = [ch for ch in text if ch.isalpha()]
    return _MIN_CHARS <= len(text) <= _MAX_CHARS and len(words) >= _MIN_WORDS \
        and text[:1].isupper() and text.endswith(_ENDS) and not text.endswith("...") \
        and not all(ch.isupper() for ch in letters) and not is_table_line(text)


def sentence_titles(pages: Sequence[Sequence["Line"]], page_styles: Sequence[tuple[float, bool]],
                    parts: Sequence[Sequence[int]], skip: set[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(page, first, last) of each sentence title: a bold paragraph at the body's size (``page_styles``
    gives each page's body) whose text reads as a title sentence, not on a line in ``skip`` (taken by
    the other rules), followed by running text on its page or atop the next, in a font that each part
    (the report, each exhibit: ``parts``) sets ``_MIN_TITLES`` such paragraphs in."""
    found: list[tuple[int, int, int]] = []
    for part in parts:
        candidates: list[tuple[int, int, int]] = []
        for p in part:
            lines = pages[p]
            body = page_styles[p]
            i = 0
            while i < len(lines):
                j = _paragraph(lines, i, body)
                if j is None:
                    i += 1
                    continue
                below = lines[j + 1] if j + 1 < len(lines) else \
                    next(iter(pages[p + 1]), None) if p + 1 < len(pages) else None
                text = " ".join(lines[k].text.strip() for k in range(i, j + 1))
                if _body_text(below, body) and _reads_as_title(text) \
                        and not any((p, k) in skip for k in range(i, j + 1)):
                    candidates.append((p, i, j))
                i = j + 1
        fonts = Counter(pages[p][i].font for p, i, _ in candidates)
        found += [c for c in candidates if fonts[pages[c[0]][c[1]].font] >= _MIN_TITLES]
    return sorted(found)
