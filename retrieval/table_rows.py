"""The rows and column headers of a table as a PDF extraction lays it out in text.

A statement page reads as lines of a label followed by its numbers, under a header line that
names the columns by period::

    Years ended December 31, 2022 2021 2020
    Total revenues 66,608 62,286 58,158

Extractions do not always keep a row on one line. A label too long for its column wraps onto a
second line ("Purchase of property, plant and equipment and" / "other intangible assets (527)
(526)"); some readers emit each row's numbers at the start of the line that follows its label,
before the next row's label::

    Customer financing, net
    2,418 2,756 Property, plant and equipment, net
    12,645 12,672 Goodwill

or glue the cells to each other and to the labels ("Accounts payable$302,578$255,028Construction
payable"); a header's years may stand on lines of their own ("2020" / "2019 2018"), or be followed
by change columns ("2022 vs. 2021"). Each row is read back here as a person reads it: a label and
its cells. A header says more than its years: the
kind of period of each column ("Three Months Ended June 30, 2023" is a quarter, "Twelve Months
Ended" a year) and the scale the table is printed in ("(Dollars in millions)").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from retrieval.asked_figure import period_kinds

_CELL = re.compile(r"^\(?-?\$?\(?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\)?%?\)?$")
"""One numeric cell: 66,608 | $55,893 | (4,187) | ($4,935) | 12.5% | 0.40."""
EMPTY_CELL = frozenset({"—", "–", "-", "--", "n/a", "N/A", "nm", "NM", "*", "#"})
"""A cell a table leaves without a value (or marks "not meaningful"): it holds a column's place."""
_YEAR = re.compile(r"^(?:FY)?((?:19|20)\d{2})[,.:;)]*$", re.I)
_DOT_LEADER = re.compile(r"(?:\s*\.){2,}\s*$|[\s.:]+$")
_SCALE = re.compile(r"(?:\(|^|\$\s*|\bin\s+)\s*(?:\$|dollars|amounts|u\.s\.\s+dollars)?\s*(?:in\s+)?"
                    r"(thousand|million|billion)s?\b", re.I | re.M)
"""The scale a table is printed in: "(In millions)", "($ million)", "(Dollars in millions, ...)", "$ in thousands"."""

HEADER_LOOKBACK_LINES = 80
"""How far above a row its column header is looked for (a statement page holds ~60 lines)."""
PREAMBLE_LINES = 6
"""Lines above a header that may still name its periods' kind or its scale ("Three Months Ended" /
"(In millions)" printed above a line of years)."""
MAX_LABEL_CHARS = 160
LABEL_LOOKBACK_LINES = 3
"""Lines above a span read for the label of a row whose numbers open the span (blank lines between)."""


@dataclass(frozen=True)
class TableRow:
    """A label and its numbers: its cells as printed, and its place in the text."""

    label: str
    cells: tuple[str, ...]
    start: int
    end: int
    """[start, end) of the row in the text it was read from (two lines when the extraction split it)."""
    line: int = 0
    """Index of the line the label starts on (a header is looked for above it)."""


@dataclass(frozen=True)
class Header:
    """A table's column header: the period of each column, its kind, and the table's scale."""

    periods: tuple[str, ...]
    """Each column's period (``2022``), or the two it compares (``2022 vs 2021``)."""
    kinds: tuple[str | None, ...]
    """The kind of period of each column (``retrieval.asked_figure.period_kinds``); None: not said."""
    text: str
    scale: str = ""
    """``thousand``, ``million`` or ``billion`` when the table says it is printed in one."""

    @property
    def period_count(self) -> int:
        """How many columns are periods (the others compare two: "2022 vs 2021")."""
        return sum(_is_period(c) for c in self.periods)


def lines_of(text: str) -> list[tuple[int, str]]:
    """(offset, line) of every line of ``text``."""
    out: list[tuple[int, str]] = []
    pos = 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


_GLUED_NUMBER = re.compile(r"\$?\(?\$?-?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?")


def _words(line: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of the whitespace-separated words of a line, with the cells an extraction
    glued to each other or to a label taken apart ("payable$302,578$255,028Construction" -> "payable",
    "$302,578", "$255,028", "Construction"; "20182017ASSETS" -> "2018", "2017", "ASSETS")."""
    out: list[tuple[int, int, str]] = []
    for m in re.finditer(r"\S+", line):
        t, at = m.group(0), m.start()
        cuts = [(n.start(), n.end()) for n in _GLUED_NUMBER.finditer(t)]
        if not _CELL.match(t) and cuts:
            pass
        elif re.fullmatch(r"(?:(?:19|20)\d{2}){2,4}[A-Za-z]*", t):
            digits = len(t) - len(t.lstrip("0123456789"))
            cuts = [(k, k + 4) for k in range(0, digits, 4)]
        else:
            out.append((at, m.end(), t))
            continue
        pos = 0
        for a, b in cuts:
            if a > pos:
                out.append((at + pos, at + a, t[pos:a]))
            out.append((at + a, at + b, t[a:b]))
            pos = b
        if pos < len(t):
            out.append((at + pos, m.end(), t[pos:]))
    return out


def _tokens(line: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of the words of a line, a cell's "$", "(", ")" or "%" printed apart joined
    to its number ("$ 709" -> "$709", "21.6 %" -> "21.6%")."""
    out: list[tuple[int, int, str]] = []
    glue = ""
    glue_at = -1
    for start, end, t in _words(line):
        if t in ("$", "(", "$(", "($"):
            glue, glue_at = glue + t, (glue_at if glue else start)
            continue
        if t in ("%", ")", "%)") and out and (_CELL.match(out[-1][2] + t) or out[-1][2] in EMPTY_CELL):
            a, _, prev = out[-1]
            out[-1] = (a, end, prev if prev in EMPTY_CELL else prev + t)
            continue
        if glue:
            if _CELL.match(glue + t) or t in EMPTY_CELL:
                out.append((glue_at, end, t if t in EMPTY_CELL else glue + t))
                glue = ""
                continue
            out.append((glue_at, glue_at + len(glue), glue))
            glue = ""
        out.append((start, end, t))
    if glue:
        out.append((glue_at, glue_at + len(glue), glue))
    return out


def _is_cell(t: str) -> bool:
    return bool(_CELL.match(t)) or t in EMPTY_CELL


def _cells_from_right(tokens: list[str]) -> tuple[list[str], int]:
    """The numeric cells at the end of a line's tokens, and where the label ends (token index)."""
    cells: list[str] = []
    i = len(tokens)
    while i > 0 and _is_cell(tokens[i - 1]):
        cells.append(tokens[i - 1])
        i -= 1
    return cells[::-1], i


def _cells_from_left(tokens: list[str]) -> tuple[list[str], int]:
    """The numeric cells a line's tokens start with, and where the text after them starts (token index)."""
    cells: list[str] = []
    i = 0
    while i < len(tokens) and _is_cell(tokens[i]):
        cells.append(tokens[i])
        i += 1
    return cells, i


def _clean_label(text: str) -> str:
    return _DOT_LEADER.sub("", text).strip(" .:$")


def _all_years(cells: Iterable[str]) -> bool:
    return all(_YEAR.match(c) for c in cells if c not in EMPTY_CELL)


def parse_row(line: str, start: int = 0) -> TableRow | None:
    """A label followed by at least two numeric cells, else None (prose, a header of years)."""
    tokens = [t for _, _, t in _tokens(line)]
    if len(tokens) < 3:
        return None
    cells, cut = _cells_from_right(tokens)
    if len(cells) < 2 or cut == 0:
        return None
    label = _clean_label(" ".join(tokens[:cut]))
    if not any(ch.isalpha() for ch in label) or len(label) > MAX_LABEL_CHARS:
        return None
    if _all_years(cells):
        return None  # "Years ended December 31, 2022 2021 2020" is a header, not a row
    return TableRow(label, tuple(cells), start, start + len(line))


def table_rows(text: str, span: tuple[int, int] | None = None,
               lines: list[tuple[int, str]] | None = None) -> list[TableRow]:
    """Every row of ``text`` (that overlaps ``span``, when given): label-then-numbers lines, labels
    wrapped onto a second line, and rows whose numbers open the line after their label (see the
    module docstring), in text order. ``lines``: ``lines_of(text)`` when the caller has it."""
    rows: list[TableRow] = []
    lines = lines_of(text) if lines is None else lines
    lo, hi = span if span is not None else (0, len(text))
    first = next((i for i, (pos, line) in enumerate(lines) if pos + len(line) > lo), len(lines))
    pending: tuple[str, int, int, bool] | None = None
    """(label, line, offset, whole line) of text whose figures a following line may start with."""
    for i in range(max(0, first - LABEL_LOOKBACK_LINES), len(lines)):
        pos, line = lines[i]
        if pos >= hi:
            break
        if not line.strip():
            continue  # a blank line between a label and its numbers keeps the label
        spans = _tokens(line)
        tokens = [t for _, _, t in spans]
        row = parse_row(line, pos)
        if row is not None:
            if pending is not None and pending[3] and row.label[:1].islower():  # a wrapped label
                row = TableRow(f"{pending[0]} {row.label}", row.cells, pending[2], row.end, pending[1])
            else:
                row = TableRow(row.label, row.cells, row.start, row.end, i)
            rows.append(row)
            pending = None
            continue
        lead, cut = _cells_from_left(tokens)
        if len(lead) >= 2:
            if pending is not None and not _all_years(lead):
                end = pos + spans[cut - 1][1]
                rows.append(TableRow(pending[0], tuple(lead), pending[2], end, pending[1]))
            rest = _clean_label(" ".join(tokens[cut:]))
            pending = (rest, i, pos + spans[cut][0], False) if cut < len(tokens) and _labelish(rest) else None
            continue
        mid = _cells_within(tokens)
        if mid is not None:  # "Accounts payable $302,578 $255,028 Construction payable": a row, then a label
            a, b = mid
            label = _clean_label(" ".join(tokens[:a]))
            if _labelish(label) and not _all_years(tokens[a:b]):
                rows.append(TableRow(label, tuple(tokens[a:b]), pos + spans[0][0], pos + spans[b - 1][1], i))
                rest = _clean_label(" ".join(tokens[b:]))
                pending = (rest, i, pos + spans[b][0], False) if _labelish(rest) else None
                continue
        stripped = _clean_label(line.strip())
        pending = (stripped, i, pos + len(line) - len(line.lstrip()), True) if _labelish(stripped) else None
    return rows


def _cells_within(tokens: list[str]) -> tuple[int, int] | None:
    """[a, b) of the first run of two or more cells with words on both sides, or None."""
    a = 0
    while a < len(tokens):
        if _is_cell(tokens[a]):
            b = a
            while b < len(tokens) and _is_cell(tokens[b]):
                b += 1
            if b - a >= 2 and 0 < a and b < len(tokens):
                return a, b
            a = b
        else:
            a += 1
    return None


def _labelish(text: str) -> bool:
    return 0 < len(text) <= MAX_LABEL_CHARS and any(ch.isalpha() for ch in text)


def header_periods(line: str) -> list[str]:
    """The columns a column-header line names, left to right (``['2022', '2021', '2020']``; a change
    column "2022 vs. 2021" as ``'2022 vs 2021'``), or [] when the line is not a header: at least two
    years and no figure other than a day of the month."""
    cols = _columns(line)
    return [c for c, _, _ in cols] if cols and sum(_is_period(c) for c, _, _ in cols) >= 2 else []


_CHANGE_WORDS = frozenset({"vs", "vs.", "versus", "to", "over", "compared", "-", "–"})


def _columns(text: str) -> list[tuple[str, int, int]] | None:
    """(column, start, end) of each year of a header's text, a year compared with another ("2022 vs.
    2021") one change column; None when the text states a figure (a row, not a header)."""
    tokens = [(t, a, b) for a, b, t in _words(text)]
    out: list[tuple[str, int, int]] = []
    k = 0
    while k < len(tokens):
        t, a, b = tokens[k]
        m = _YEAR.match(t)
        if m:
            if k + 2 < len(tokens) and tokens[k + 1][0].lower() in _CHANGE_WORDS and _YEAR.match(tokens[k + 2][0]):
                out.append((f"{m.group(1)} vs {_YEAR.match(tokens[k + 2][0]).group(1)}", a, tokens[k + 2][2]))
                k += 3
                continue
            out.append((m.group(1), a, b))
        else:
            bare = t.strip(",.;:()")
            if bare.replace(",", "").replace(".", "").isdigit() and not (bare.isdigit() and int(bare) <= 31):
                return None
        k += 1
    return out


def _header_only(line: str) -> bool:
    """Whether a line holds nothing but columns ("2020" / "2019 2018" / "2022 vs. 2021")."""
    cols = _columns(line)
    if not cols:
        return False
    rest = line
    for _, a, b in reversed(cols):
        rest = rest[:a] + rest[b:]
    return not rest.strip()


_DATE_PIECE = re.compile(r"^\s*(?:(?:fiscal\s+)?years?\s+ended|(?:three|six|nine|twelve)\s+months\s+ended|"
                         r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?)\s*$",
                         re.IGNORECASE)
"""A piece of a column header stacked one piece a line ("Years Ended" / "December 2," / "2022" /
"December 3," / "2021"): part of the header run, though it names no year itself."""


def _stacked_piece(line: str) -> bool:
    """A line of a header stacked one piece a line: its columns or a piece of a date."""
    return _header_only(line) or bool(_DATE_PIECE.match(line))


def _is_period(column: str) -> bool:
    return len(column) == 4 and column.isdigit()


def _column_kinds(header: str, columns: list[tuple[str, int, int]], preamble: str) -> tuple[str | None, ...]:
    """The kind of period of each column: the words before each column in the header ("Three Months
    Ended June 30, 2022 ..."), a column without words of its own taking its left neighbour's; when
    the header names none, the preamble's kinds, spread over the period columns in equal groups."""
    kinds: list[str | None] = []
    last: str | None = None
    seg_start = 0
    for _, a, b in columns:
        named = period_kinds(header[seg_start:b])  # the column's own word too: "FY2023", "Q4 2023"
        if len(named) == 1:
            last = named[0]
        kinds.append(last)
        seg_start = b
    if any(kinds):
        return tuple(kinds)
    periods = [j for j, (c, _, _) in enumerate(columns) if _is_period(c)]
    seq = _kind_sequence(preamble)
    if seq and periods and len(periods) % len(seq) == 0:
        size = len(periods) // len(seq)
        for n, j in enumerate(periods):
            kinds[j] = seq[n // size]
    return tuple(kinds)


def _kind_sequence(text: str) -> list[str]:
    """The kinds of period ``text`` names, in the order it names them."""
    found: list[tuple[int, str]] = []
    for m in re.finditer(r"[^,;()]+", text):
        for kind in period_kinds(m.group(0)):
            found.append((m.start(), kind))
    return [k for _, k in sorted(found)]


def header_above(lines: list[tuple[int, str]], i: int) -> Header | None:
    """The column header above line ``i``: the nearest run of header lines, each a line naming two or
    more years (words allowed: "Years ended December 31, 2022 2021") or a line of columns alone
    ("2020" / "2019 2018" / "2022 vs. 2021"), with two or more columns in all."""
    j = i - 1
    floor = max(-1, i - 1 - HEADER_LOOKBACK_LINES)
    while j > floor:
        if not (header_periods(lines[j][1]) or _header_only(lines[j][1])):
            j -= 1
            continue
        bottom = top = j
        while top - 1 > floor and (_stacked_piece(lines[top - 1][1]) or header_periods(lines[top - 1][1])
                                   or (not lines[top - 1][1].strip() and top - 2 > floor
                                       and _stacked_piece(lines[top - 2][1]))):
            top -= 1
        text = " ".join(lines[k][1].strip() for k in range(top, bottom + 1))
        columns = _columns(text) or []
        if sum(_is_period(c) for c, _, _ in columns) < 2:
            j = top - 1
            continue
        preamble = "\n".join(lines[k][1] for k in range(max(0, top - PREAMBLE_LINES), top))
        scale = _SCALE.search(text) or _SCALE.search(preamble)
        return Header(tuple(c for c, _, _ in columns), _column_kinds(text, columns, preamble), text,
                      scale.group(1).lower() if scale else "")
    return None
