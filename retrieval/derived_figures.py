"""A measure the question asks that no row prints, computed from the two rows that define it.

"Does Corning have positive working capital?" Working capital is total current assets less total
current liabilities: a balance sheet prints both rows and no "working capital" row, so the
extractive answer quoted the balance sheet's column header. Here the two rows are read from one
table of the context (the same statement, the same columns) and the measure is said per period,
marked as computed, with the rows it came from beside it so a reader can check it:

    Working capital (computed: Total current assets less Total current liabilities), 2022: 2,278
    (8,xxx less 6,xxx)

The definitions are textbook ones (GAAP line items), not any filer's wording, and a measure is
computed only from rows whose labels say them whole: a margin from a printed gross profit row, never
from a guess at which cost rows make up the cost of sales. A row that prints the measure itself
("Working capital 2,278" in a liquidity table) is read as printed, before any computation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Sequence

from retrieval.asked_figure import YEAR, asked_period_kind, asked_periods
from retrieval.figure_change import asks_change, cell_value, decimals, describe_change
from retrieval.figure_rows import Figure, figures_in
from retrieval.named_sections import SectionKind, named_kinds
from utils.tokenizer import tokenize

MIN_PART_SCORE = 0.8
"""A row read as a part of a measure must say that part whole ("Total current assets"): a row that
shares two of its three words ("Total current liabilities") is another row."""


@dataclass(frozen=True)
class Measure:
    """A measure and the two quantities it is computed from (``first`` less, or over, ``second``)."""

    name: str
    asked: re.Pattern[str]
    first: str
    second: str
    ratio: bool
    """``first`` / ``second`` (else ``first`` less the size of ``second``: a cash flow statement
    prints capital expenditure as an outflow, a balance sheet its liabilities as positive)."""
    percent: bool = False
    """A ratio said as a percentage (a margin)."""

    @property
    def kinds(self) -> list[SectionKind]:
        """The statement the two rows are read from, the one ``named_sections`` reads the measure from
        (a note or a segment table may print rows of the same names for a part of the company)."""
        return named_kinds(self.name)

    @property
    def sign(self) -> str:
        return "÷" if self.ratio else "less"


def _asked(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w&])(?:{pattern})(?![\w&])", re.I)


MEASURES: tuple[Measure, ...] = (
    Measure("Current ratio", _asked(r"current ratio|working capital ratio"), "total current assets",
            "total current liabilities", ratio=True),
    Measure("Working capital", _asked(r"(?:net )?working capital(?! ratio)"), "total current assets",
            "total current liabilities", ratio=False),
    Measure("Gross margin", _asked(r"gross (?:profit )?margins?"), "gross profit", "revenue", ratio=True, percent=True),
    Measure("Operating margin", _asked(r"operating (?:profit |income )?margins?"), "operating income", "revenue",
            ratio=True, percent=True),
    Measure("Free cash flow", _asked(r"free cash ?flows?|fcf"), "operating cash flow", "capital expenditure",
            ratio=False),
)
"""The measures, most specific first ("working capital ratio" is the current ratio)."""


def asked_measure(question: str) -> Measure | None:
    """The measure the question asks, if it is one of ``MEASURES``."""
    return next((m for m in MEASURES if m.asked.search(question)), None)


def read_periods(question: str) -> list[str] | None:
    """The years to read: those the question names, and the year before when it names one and asks a
    change ("improving"); None when it names a quarter or half (the columns of a year-to-date table
    would be mixed up with the quarter's) or no year."""
    kind = asked_period_kind(question)
    years = asked_periods(question)
    if not years or kind not in (None, YEAR):
        return None
    if len(years) == 1 and asks_change(question):
        years = [years[0], str(int(years[0]) - 1)]
    return years


def prints_measure(label: str | None, measure: Measure) -> bool:
    """Whether the label of a row read for the question names the measure itself ("Working capital")."""
    return label is not None and set(tokenize(measure.name)) <= set(tokenize(label))


def part_row(text: str, spans: Sequence[tuple[int, int]], quantity: str, periods: list[str],
             names: Collection[str] = ()) -> Figure | None:
    """The row of ``text``, inside one of ``spans``, that states ``quantity`` whole for every period
    asked (a row's label is matched with the quantity's words, every word weighing the same)."""
    if not spans:
        return None
    asked = f"What was the {quantity} in " + " and ".join(f"FY{p}" for p in periods) + "?"
    lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
    rows = [f for f in figures_in(text, asked, None, (lo, hi), names)
            if f.fits and len(f.columns) == len(periods) and f.score >= MIN_PART_SCORE
            and any(a <= f.start and f.end <= b for a, b in spans)]
    return rows[0] if rows else None


@dataclass(frozen=True)
class Derived:
    """A measure computed from two rows of one table."""

    measure: Measure
    first: Figure
    second: Figure
    values: tuple[str, ...]
    """The measure per column read (``first.columns``), as said."""
    start: int
    end: int
    """[start, end) in the document of the text the two rows span."""
    change: str = ""

    @property
    def text(self) -> str:
        """The measure per column with the two cells it came from, and its change when asked."""
        m = self.measure
        cells = "; ".join(f"{c}: {v} ({a} {m.sign} {b})" for c, v, a, b in
                          zip(self.first.columns, self.values, self.first.values, self.second.values))
        said = f"{m.name} (computed: {self.first.label} {m.sign} {self.second.label}), {cells}"
        return f"{said}; {self.change}" if self.change else said

    @property
    def read(self) -> str:
        """Which rows and column(s) were read, and the scale of an amount."""
        cols = ", ".join(f"'{c}'" for c in self.first.columns)
        plural = "s" if len(self.first.columns) > 1 else ""
        scale = f", in {self.first.scale}s" if self.first.scale and not self.measure.ratio else ""
        return f"rows '{self.first.label}' and '{self.second.label}', column{plural} {cols}{scale}"


Texts = Sequence[tuple[str, int, Sequence[tuple[int, int]]]]
"""Where the rows may be read: (text, its offset in the document, the spans of it the answer may quote)."""


def derive(measure: Measure, question: str, texts: Texts, names: Collection[str] = ()) -> Derived | None:
    """``measure`` computed from the two rows that define it, for the periods the question asks, each
    read from the first of ``texts`` that holds it inside a span (a statement and the sections that
    continue it on its next pages). None unless both rows are there, for the same columns, in one table
    (the same header) when read from one text, and every cell read is a number. ``start``/``end`` of the
    result are document offsets (a text's offset plus the row's)."""
    periods = read_periods(question)
    if periods is None:
        return None
    found = [next(((i, f) for i, (text, _, spans) in enumerate(texts)
                   if (f := part_row(text, spans, quantity, periods, names)) is not None), None)
             for quantity in (measure.first, measure.second)]
    if found[0] is None or found[1] is None:
        return None
    (i, first), (j, second) = found
    if first.columns != second.columns or (i == j and first.header != second.header):
        return None
    raw: list[float] = []
    for a_cell, b_cell in zip(first.values, second.values):
        a, b = cell_value(a_cell), cell_value(b_cell)
        if a is None or b is None or a[1] or b[1] or (measure.ratio and b[0] == 0):
            return None
        raw.append(a[0] / b[0] if measure.ratio else a[0] - abs(b[0]))
    places = max(decimals(c) for c in first.values + second.values)
    values = tuple(_said(x, measure, places) for x in raw)
    starts = (texts[i][1] + first.start, texts[j][1] + second.start)
    ends = (texts[i][1] + first.end, texts[j][1] + second.end)
    return Derived(measure, first, second, values, min(starts), max(ends),
                   _change(question, measure, first.columns, raw, values))


def _said(x: float, measure: Measure, places: int) -> str:
    if not measure.ratio:
        return f"{x:,.{places}f}"
    return f"{x * 100:.1f}%" if measure.percent else f"{x:.2f}"


def _change(question: str, measure: Measure, columns: tuple[str, ...], raw: list[float],
            values: tuple[str, ...]) -> str:
    """The change between the earliest and the latest column read, when the question asks one: of a
    ratio computed from the unrounded values (a margin in points), of an amount as any row's."""
    if not measure.ratio:
        return describe_change(question, columns, columns, values)
    if not asks_change(question) or len(columns) < 2 or len(set(columns)) < 2:
        return ""
    (c0, a), (c1, b) = sorted(zip(columns, raw))[0], sorted(zip(columns, raw))[-1]
    diff = f"{(b - a) * 100:+.1f} points" if measure.percent else f"{b - a:+.2f}"
    return f"change from {c0} to {c1}: {diff} (computed)"
