"""Titles set in the body's size and marked by weight or slant alone, which the layout rules refuse: a
bold sentence standing as its own paragraph, and a bold or italic title its paragraph runs in after.

A filing's risk factors are its longest Item (10-15 pages), and each risk is headed by one bold
sentence ("We may not realize the anticipated benefits of past or future investments or
acquisitions, and integration of acquisitions may disrupt our business and management."), then
explained in regular type, sometimes on the same line as the sentence's end ("... results of
operations and cash flows. The hotel, resort, entertainment ..."). The notes and regulatory sections
of filings head their topics the same way in a few bold words ("Income taxes – We calculate our
provision ...", "Medicare Payment Rates - In April 2022, CMS ..."), and their subtopics in italic
("Equity investments. Fair value is measured ..."). Those titles are how a reader finds
a risk or a policy; as text, risk factors were one leaf of 40,000-90,000 characters. The layout rules
refuse a sentence as a heading (pdf_structure: "The following table shows ...:" in bold is no
section) and read a line by the font most of it is set in, so these titles are found by their own
pattern, and only where a document uses it many times in one size: one bold sentence is emphasis.
They head the lowest levels, an italic title below a bold one: nothing nests under a risk or a topic.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from tree_builder.heading_schemes import scheme_of
from tree_builder.readers.pdf_lines import CONTINUED, NOT_TITLES, PARAGRAPH_END, SIZE_STEP, at_line_spacing
from tree_builder.readers.pdf_tables import is_table_line, mostly_table

if TYPE_CHECKING:
    from tree_builder.readers.pdf_lines import Line

_MAX_CHARS = 500
"""A title sentence runs to four or five lines; a longer bold paragraph is emphasised text."""
_MIN_CHARS = 40
_MIN_WORDS = 6
"""A title standing alone shorter than this ("Overview", "Risks Related to Our Business") is the layout
rules' to find; one run into its paragraph may be a few words ("Income taxes")."""
_RUN_IN_WORDS = 10
"""Most words of a run-in title that is no sentence ("Research and development and similar costs")."""
_SHORT_WORDS = 12
_SHORT_CHARS = 100
"""A title standing alone in bold or italic body type below a bookmarked outline ("Use of Estimates")."""
_MIN_TITLES = 5
"""Titles a document (or an exhibit) must set in one size before any is taken as one."""
_ENDS = (".", "?")
SEPARATORS = " -–—:"
"""What stands between a run-in title and its paragraph ("Income taxes – We ...", "Overview: ...")."""
_NUMBER_WORDS = frozenset("article clause section part one two three four five six seven eight nine ten eleven "
                          "twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())
"""Words of a clause's number ("One.", "Clause Two."): a run-in opening of these alone names no topic."""


@dataclass(frozen=True)
class BodyTitle:
    page: int
    first: int
    last: int
    title_end: int
    """Characters of the last line that are the title (its paragraph runs in after them); 0: all."""
    italic: bool = False
    """Set in italic: a level below the bold titles (a note's policy in bold, its topics in italic)."""


def _at_body(ln: "Line", body: tuple[float, bool]) -> bool:
    size, bold = body
    return not bold and abs(ln.size - size) < SIZE_STEP and not ln.heading and not is_table_line(ln.text)


def _body_text(ln: "Line | None", body: tuple[float, bool]) -> bool:
    """A line of running text: the body's size, regular weight, no table row."""
    return ln is not None and not ln.bold and not ln.bold_end and _at_body(ln, body)


def _opens_paragraph(lines: Sequence["Line"], i: int, headed: bool) -> bool:
    """Line ``i`` starts a paragraph: the line above it is no line of the same paragraph (a heading, a
    gap, or it ends a sentence), so its bold is no word emphasised inside a sentence."""
    if not i:
        return True
    above, ln = lines[i - 1], lines[i]
    return headed or bool(above.heading) or not at_line_spacing(above, ln, ln.size) \
        or not above.bold and above.text.rstrip().endswith(PARAGRAPH_END)


def _is_sentence(text: str) -> bool:
    letters = [ch for ch in text if ch.isalpha()]
    return _MIN_CHARS <= len(text) <= _MAX_CHARS and len(text.split()) >= _MIN_WORDS and text[:1].isupper() \
        and text.endswith(_ENDS) and not text.endswith("...") and not all(ch.isupper() for ch in letters)


def _run_in_title(bold: str, rest: str) -> bool:
    """``bold`` (the bold opening of a line, with any bold lines above it) is a title its paragraph
    ``rest`` runs in after: a sentence, or a few words set off by a dash, a colon or a full stop, and
    the paragraph opens as a sentence does."""
    head = bold.rstrip(SEPARATORS)
    body = rest.lstrip(SEPARATORS)
    if not head[:1].isupper() or not body[:1].isupper() and not body[:1].isdigit() and body[:1] not in "“\"(":
        return False
    if all(w.strip(".,;:()").casefold() in _NUMBER_WORDS for w in head.split()):
        return False  # a clause's number ("One.", "Article Two."): the division rules' or no title
    if head.endswith(_ENDS) and _is_sentence(head):
        return True
    set_off = bold.rstrip() != head or head.endswith(".") or rest.lstrip()[:1] in SEPARATORS.strip()
    return set_off and len(head.split()) <= _RUN_IN_WORDS and not head.endswith((",", ";"))


def _short_title(text: str) -> bool:
    """A title standing on its own line(s) as a layout heading is written: a few words, capital first,
    no sentence's or clause's end ("Use of Estimates", "Revenue Recognition")."""
    text = text.strip()
    return 0 < len(text) <= _SHORT_CHARS and len(text.split()) <= _SHORT_WORDS and text[:1].isupper() \
        and not text.endswith((".", ",", ";", ":")) and any(ch.islower() for ch in text) \
        and not CONTINUED.search(text) and text.casefold() not in NOT_TITLES


def _title_at(pages: Sequence[Sequence["Line"]], p: int, i: int, body: tuple[float, bool],
              skip: set[tuple[int, int]], short: bool = False) -> tuple[BodyTitle | None, int]:
    """The title opening at line ``i`` of page ``p``, if any, and the line to look at next: lines all in
    bold, then either running text below them or a line that turns regular after its bold opening. A
    line in ``skip`` is another rule's heading: no part of a title, and a title may follow it at once.
    ``short``: a few words in bold or italic on their own line over running text are a title too
    (below a bookmarked outline, where no layout rule looks for them)."""
    lines = pages[p]
    ln = lines[i]
    if (p, i) in skip or not _at_body(ln, body) \
            or not (ln.bold or ln.bold_end or ln.italic_end or short and ln.italic) \
            or not _opens_paragraph(lines, i, (p, i - 1) in skip) or scheme_of(ln.text) is not None:
        return None, i + 1
    if short and ln.italic and not ln.bold and not ln.italic_end:
        below = _next_line(pages, p, i)
        ok = _short_title(ln.text) and _body_text(below, body) and not below.italic
        return (BodyTitle(p, i, i, 0, italic=True) if ok else None), i + 1
    if ln.italic_end:  # an italic title runs in on its one line, a few words (an italic sentence leads a text)
        cut = ln.italic_end
        ok = _run_in_title(ln.text[:cut], ln.text[cut:]) and len(ln.text[:cut].split()) <= _RUN_IN_WORDS
        return (BodyTitle(p, i, i, len(ln.text[:cut].rstrip(SEPARATORS)), italic=True) if ok else None), i + 1
    j = i
    while ln.bold and not lines[j].bold_end and j + 1 < len(lines) and (p, j + 1) not in skip \
            and _at_body(lines[j + 1], body) \
            and (lines[j + 1].bold or lines[j + 1].bold_end) and abs(lines[j + 1].size - ln.size) < SIZE_STEP \
            and at_line_spacing(lines[j], lines[j + 1], ln.size):
        j += 1
    last = lines[j]
    if last.bold_end:  # the paragraph runs in after the title's last bold words
        cut = last.bold_end
        bold = " ".join([*(lines[k].text.strip() for k in range(i, j)), last.text[:cut]])
        ok = _run_in_title(bold, last.text[cut:]) and (j == i or bold.rstrip(SEPARATORS).endswith(_ENDS))
        return (BodyTitle(p, i, j, len(last.text[:cut].rstrip(SEPARATORS))) if ok else None), j + 1
    below = _next_line(pages, p, j)
    text = " ".join(lines[k].text.strip() for k in range(i, j + 1))
    ok = ln.bold and _body_text(below, body) and (_is_sentence(text) or short and _short_title(text))
    return (BodyTitle(p, i, j, 0) if ok else None), j + 1


def _next_line(pages: Sequence[Sequence["Line"]], p: int, i: int) -> "Line | None":
    """The line after line ``i`` of page ``p``, on the next page when ``i`` ends its page."""
    lines = pages[p]
    return lines[i + 1] if i + 1 < len(lines) else next(iter(pages[p + 1]), None) if p + 1 < len(pages) else None


def body_titles(pages: Sequence[Sequence["Line"]], page_styles: Sequence[tuple[float, bool]],
                parts: Sequence[Sequence[int]], skip: set[tuple[int, int]], short: bool = False) -> list[BodyTitle]:
    """Each title set in bold at the body's size (``page_styles`` gives each page's body) that stands as
    a sentence over running text or runs into its paragraph, none of whose lines is in ``skip`` (taken
    by the other rules), in a size that each part (the report, each exhibit: ``parts``) sets
    ``_MIN_TITLES`` such titles in; with ``short``, also a few words in bold or italic standing alone
    over running text (``_title_at``)."""
    found: list[BodyTitle] = []
    for part in parts:
        candidates: list[BodyTitle] = []
        for p in part:
            # on a statement's page bold lines are row groups and column names ("Earnings per share")
            short_here = short and not mostly_table(pages[p])
            i = 0
            while i < len(pages[p]):
                title, i = _title_at(pages, p, i, page_styles[p], skip, short_here)
                if title is not None:
                    candidates.append(title)
        fonts = Counter((pages[t.page][t.first].size, t.italic) for t in candidates)
        found += [t for t in candidates if fonts[(pages[t.page][t.first].size, t.italic)] >= _MIN_TITLES]
    return sorted(found, key=lambda t: (t.page, t.first))


def mark_title(pages: Sequence[Sequence["Line"]], title: BodyTitle, level: int) -> None:
    """Mark ``title``'s lines as a heading at ``level`` (the bold titles' level; an italic one's is the
    next)."""
    for i in range(title.first, title.last + 1):
        pages[title.page][i].heading = level + title.italic
    pages[title.page][title.last].title_end = title.title_end
