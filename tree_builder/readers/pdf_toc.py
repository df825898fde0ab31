"""A PDF's own table of contents as its outline: detect -> parse -> map -> verify, offline.

Many long PDFs (filings, reports, manuals) have no bookmarks but print a
contents page: "Item 1A. Risk Factors .... 6". That page states the
document's structure better than any font rule, so it is read first:

- detect: a page near the front whose rows mostly end in a page number (or dot
  leaders), or that is headed "Contents" / "Table of Contents" / "Index to ...",
  and the pages right after it that continue the list;
- parse: rows rebuilt from lines on one baseline (a page number set in its own
  column is a separate text run), dot leaders dropped, a title wrapped over two
  rows joined, group rows without a number ("PART I") kept;
- map: printed page numbers differ from physical pages by an offset (cover,
  contents, roman-numbered front matter); the offset is the one most entries'
  titles agree on, and may change along the document (a new offset is taken
  only where a title confirms it);
- verify: an entry becomes a section only where its title is printed at the
  start of a line on its mapped page; an entry that cannot be found is dropped,
  never guessed.

The contents pages themselves stay body text; none of their rows is a heading.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

from tree_builder.heading_schemes import scheme_of, split_divisions
from tree_builder.readers.pdf_lines import SIZE_STEP
from tree_builder.readers.pdf_tables import is_table_line

_CONTENTS_TITLE = re.compile(r"^(?:table\s+of\s+contents|contents|index(?:\s+to\b.*)?|目\s*录|目\s*次)$",
                             re.IGNORECASE)
_LEADERS = re.compile(r"(?:\s*[.·…_]){3,}\s*")
_TRAILING_PAGE = re.compile(r"^(?P<title>.*?\S)\s+(?:page\s+)?(?P<page>\d{1,4})$", re.IGNORECASE)
_PAGE_WORD = re.compile(r"\s+(?:page(?:\s+no\.?)?|pages|页码?)$", re.IGNORECASE)
_DIVISION_COLUMN = re.compile(r"^(?P<word>item|note|article|chapter|section)s?"
                              r"(?:\s+(?:number|no\.?|#))?(?:\s+(?:page|pages|page\s+no\.?))?$", re.IGNORECASE)
"""A column header naming the division word its rows leave out ("Item Number   Page", then "1A. Risk Factors 22")."""
_BARE_NUMBER = re.compile(r"^\d{1,3}[A-Z]?\.\s+\S")
_TAIL_NUMBER = re.compile(r"(?<![\d,.()$])(\d{1,4})$")
_KEY_DROP = re.compile(r"[^0-9a-z\u3400-\u9fff]+")
_MAX_SCAN_PAGES = 30
_MIN_ENTRIES = 4
_WRAP_MIN_CHARS = 40
_PREFIX = 4
_MAX_OFFSET_SHIFT = 12
"""Unnumbered inserts (a divider, a report page) shift printed numbers by a few pages, not more."""


class PageLine(Protocol):
    text: str
    size: float
    bold: bool
    y: float
    x: float


@dataclass
class TocEntry:
    title: str
    printed: int | None
    """The page number printed beside the title; None for a group row ("PART I")."""
    indent: float
    scheme: str | None


@dataclass
class TocAnchor:
    """A verified entry: lines ``first..last`` of physical page ``page`` (0-based) print its title."""
    title: str
    page: int
    first: int
    last: int
    indent: float
    scheme: str | None


@dataclass
class Contents:
    pages: list[int]
    """0-based physical pages of the contents list the anchors come from."""
    entries: list[TocEntry]
    anchors: list[TocAnchor]
    list_pages: set[int]
    """Every page that is a contents list (also an exhibit's or an index of statements further
    on): their rows never become headings."""


_BACK_LINK = re.compile(r"^(?:(?:back|return)\s+to\s+(?:the\s+)?)?(?:table\s+of\s+contents|contents|index)$",
                        re.IGNORECASE)


def is_contents_link(text: str) -> bool:
    """A line that names the contents ("Table of Contents", "Back to Contents"): repeated at the top
    of every page it is a link back to the contents list, not a heading."""
    return bool(_BACK_LINK.match(" ".join(text.split())))


def title_key(text: str) -> str:
    """A title as compared across contents and body: case, punctuation and spacing ignored."""
    return _KEY_DROP.sub("", text.casefold().replace("&", "and"))


# --------------------------------------------------------------------------- detect + parse

def page_rows(lines: Sequence[PageLine]) -> list[tuple[str, float]]:
    """(text, left x) of each row: lines on one baseline joined left to right, top to bottom."""
    rows: list[list[PageLine]] = []
    for ln in sorted(lines, key=lambda ln: -ln.y):
        if rows and abs(rows[-1][0].y - ln.y) <= 1.5:
            rows[-1].append(ln)
        else:
            rows.append([ln])
    out: list[tuple[str, float]] = []
    for row in rows:
        row.sort(key=lambda ln: ln.x)
        out.append((" ".join(ln.text for ln in row), row[0].x))
    return out


def parse_rows(rows: list[tuple[str, float]]) -> list[TocEntry]:
    """Contents rows -> entries (titles with printed page numbers, group rows without). Below a
    column header that names the division word ("Item Number"), a row that opens with a bare
    number ("1A. Risk Factors") is that division's entry and gets the word ("Item 1A. Risk Factors")."""
    entries: list[TocEntry] = []
    pending: tuple[str, float] | None = None
    division = ""
    for raw, x in rows:
        text = _LEADERS.sub(" ", raw).strip()
        column = _DIVISION_COLUMN.match(text)
        if column:
            division, pending = column.group("word").capitalize(), None
            continue
        text = _PAGE_WORD.sub("", text).strip()
        if not text or _CONTENTS_TITLE.match(text):
            pending = None
            continue
        if division and _BARE_NUMBER.match(text):
            text = f"{division} {text}"
        m = _TRAILING_PAGE.match(text)
        if m and any(ch.isalpha() for ch in m.group("title")) and not is_table_line(text):
            title = m.group("title").strip()
            if pending is not None and scheme_of(title) is None and len(pending[0]) >= _WRAP_MIN_CHARS \
                    and x >= pending[1] - 1:
                title, x = f"{pending[0]} {title}", pending[1]  # a title wrapped onto a second row
            elif pending is not None and scheme_of(pending[0]) is not None:
                entries.append(TocEntry(pending[0], None, pending[1], scheme_of(pending[0]).name))
            joined = split_divisions(title)
            if joined is not None:  # "Part I Item 1 Business  4": the PART's group row and the Item
                entries.append(TocEntry(joined[0], None, x, scheme_of(joined[0]).name))
                title = joined[1]
            entries.append(TocEntry(title, int(m.group("page")), x,
                                    (scheme_of(title) or (None, 0))[0]))
            pending = None
            continue
        if pending is not None and scheme_of(pending[0]) is not None:
            entries.append(TocEntry(pending[0], None, pending[1], scheme_of(pending[0]).name))
        pending = (text, x) if any(ch.isalpha() for ch in text) else None
    if pending is not None and scheme_of(pending[0]) is not None:
        entries.append(TocEntry(pending[0], None, pending[1], scheme_of(pending[0]).name))
    return entries


def _ordered_share(numbers: list[int]) -> float:
    """Share of consecutive printed numbers that do not go backwards."""
    if len(numbers) < 2:
        return 1.0
    return sum(1 for a, b in zip(numbers, numbers[1:]) if b >= a) / (len(numbers) - 1)


def _is_contents(rows: list[tuple[str, float]], entries: list[TocEntry], n_pages: int,
                 continuing: bool) -> bool:
    numbers = [e.printed for e in entries if e.printed is not None]
    if not numbers or _ordered_share(numbers) < 0.8 or max(numbers) > 3 * n_pages + 10:
        return False
    titled = any(_CONTENTS_TITLE.match(_LEADERS.sub(" ", t).strip()) for t, _ in rows[:8])
    share = len(numbers) / max(1, len(rows))
    if continuing:
        return len(numbers) >= 3 and share >= 0.5
    return (titled and len(numbers) >= 3) or (len(numbers) >= _MIN_ENTRIES * 2 and share >= 0.5)


def find_contents(pages: Sequence[Sequence[PageLine]]) -> tuple[list[int], list[TocEntry]]:
    """The first run of contents pages near the front and their entries ([] when there is none)."""
    limit = min(len(pages), max(3, min(_MAX_SCAN_PAGES, len(pages) // 3)))
    found: list[int] = []
    entries: list[TocEntry] = []
    for p in range(len(pages)):
        if p >= limit and not (found and found[-1] == p - 1):
            break
        rows = page_rows(pages[p])
        page_entries = parse_rows(rows)
        if _is_contents(rows, page_entries, len(pages), continuing=bool(found) and found[-1] == p - 1):
            found.append(p)
            entries.extend(page_entries)
        elif found:
            break
    if sum(1 for e in entries if e.printed is not None) < _MIN_ENTRIES:
        return [], []
    return found, entries


# --------------------------------------------------------------------------- map + verify

def _match_at(keys: list[str], styled: list[bool], i: int, want: str) -> int | None:
    """Last line index when lines i.. print the title ``want`` (wrapped over up to 4 lines)."""
    acc = keys[i]
    if not acc or not (want.startswith(acc) or acc.startswith(want)):
        return None
    j = i
    while len(acc) < len(want) and want.startswith(acc) and j + 1 < len(keys) and j - i < 3:
        j += 1
        acc += keys[j]
    if acc == want:
        return j
    if acc.startswith(want) and styled[i] and len(acc) - len(want) <= max(8, len(want) // 3):
        return j  # "ITEM 7. MD&A (CONTINUED)"-like tails on a styled line
    return None


def _find_title(keys: list[str], styled: list[bool], want: str, start: int = 0, stop: int | None = None
                ) -> tuple[int, int] | None:
    """First line range printing ``want``, preferring a heading-styled line over a plain one."""
    plain: tuple[int, int] | None = None
    for i in range(start, len(keys) if stop is None else min(stop, len(keys))):
        j = _match_at(keys, styled, i, want)
        if j is None:
            continue
        if styled[i]:
            return i, j
        if plain is None:
            plain = (i, j)
    return plain


def anchor_entries(pages: Sequence[Sequence[PageLine]], contents_pages: list[int], entries: list[TocEntry],
                   body_size: float) -> list[TocAnchor]:
    """Map printed pages to physical ones and keep each entry whose title is on its page."""
    skip = set(contents_pages)
    keys = [[title_key(ln.text) for ln in lines] for lines in pages]
    styled = [[ln.bold or ln.size >= body_size + SIZE_STEP for ln in lines] for lines in pages]
    wants = [title_key(e.title) for e in entries]

    # map: the offsets (physical - printed) that titles found on some page support
    by_prefix: dict[str, set[int]] = {}  # pages by their lines' first key characters
    for p, page_keys in enumerate(keys):
        for k in page_keys:
            if k:
                by_prefix.setdefault(k[:_PREFIX], set()).add(p)
    votes: Counter = Counter()
    seen: list[list[int]] = []  # per entry, the offsets at which its title is printed
    for e, want in zip(entries, wants):
        seen.append([])
        if e.printed is None or not want:
            continue
        near = set(by_prefix.get(want[:_PREFIX], ()))
        for n in range(1, min(_PREFIX, len(want) + 1)):
            near |= by_prefix.get(want[:n], set())  # lines shorter than the prefix
        for p in sorted(near):
            if p not in skip and _find_title(keys[p], styled[p], want) is not None:
                votes[p - e.printed] += 1
                seen[-1].append(p - e.printed)
    if not votes:
        return []
    default = votes.most_common(1)[0][0]

    def contradicted(k: int, p: int, offset: int) -> bool:
        """The next entry is printed before page ``p`` at the current offset: entry ``k``'s title on
        ``p`` is a namesake further on (a risk titled as a Business subsection the text layer lacks)."""
        nxt = next((n for n in range(k + 1, len(entries)) if entries[n].printed is not None and wants[n]), None)
        if nxt is None:
            return False
        q = entries[nxt].printed + offset
        return 0 <= q < p and q not in skip and _find_title(keys[q], styled[q], wants[nxt]) is not None

    anchors: list[TocAnchor] = []
    offset = default
    pos = (max(skip) + 1 if skip else 0, 0)  # anchors go forward through the document
    for k, (e, want) in enumerate(zip(entries, wants)):
        if e.printed is None or not want:
            continue
        hit = None
        local = sorted((o for o in seen[k] if abs(o - offset) <= _MAX_OFFSET_SHIFT), key=lambda o: abs(o - offset))
        for off in dict.fromkeys((offset, default, *local)):
            p = e.printed + off
            if not (0 <= p < len(pages)) or p in skip or (p, 0) < (pos[0], 0):
                continue
            start = pos[1] if p == pos[0] else 0
            found = _find_title(keys[p], styled[p], want, start)
            if found is not None and (off == offset or not contradicted(k, p, offset)):
                hit, offset = (p, found), off
                break
        if hit is None:
            continue
        (p, (i, j)) = hit
        # group rows just before this entry ("PART II" above "Item 5.") are searched up to it
        g = k - 1
        groups: list[TocEntry] = []
        while g >= 0 and entries[g].printed is None:
            groups.insert(0, entries[g])
            g -= 1
        for ge in groups:
            gw = title_key(ge.title)
            for gp in range(pos[0], p + 1):
                stop = i if gp == p else None
                found = _find_title(keys[gp], styled[gp], gw, pos[1] if gp == pos[0] else 0, stop)
                if found is not None:
                    anchors.append(TocAnchor(ge.title, gp, found[0], found[1], ge.indent, ge.scheme))
                    pos = (gp, found[1] + 1)
                    break
        anchors.append(TocAnchor(e.title, p, i, j, e.indent, e.scheme))
        pos = (p, j + 1)
    return anchors


def list_opening(lines: Sequence[PageLine]) -> int:
    """Index of a list page's first line that ends in a page number: the lines above it are the
    page's own (an Item's heading over its index of statements), not the list's rows."""
    return next((i for i, ln in enumerate(lines) if _TAIL_NUMBER.search(ln.text.strip())), len(lines))


def list_pages(pages: Sequence[Sequence[PageLine]]) -> set[int]:
    """Every page anywhere in the document that reads as a contents list by itself."""
    out: set[int] = set()
    for p, lines in enumerate(pages):
        rows = page_rows(lines)
        tails = [int(m.group(1)) for t, _ in rows if (m := _TAIL_NUMBER.search(t))]
        if len(tails) < 3 or _ordered_share(tails) < 0.8:
            continue  # cheap test first: most pages are not lists of page numbers
        if _is_contents(rows, parse_rows(rows), len(pages), continuing=False):
            out.add(p)
    return out


def read_contents(pages: Sequence[Sequence[PageLine]], body_size: float) -> Contents:
    """The document's contents list with its verified anchors (none when it prints none)."""
    contents_pages, entries = find_contents(pages)
    anchors = anchor_entries(pages, contents_pages, entries, body_size) if contents_pages else []
    return Contents(contents_pages, entries, anchors, list_pages(pages) | set(contents_pages))
