"""The figure a question asks for, read from a table row of the evidence: row, column and value.

A financial statement extracted from a PDF is lines of a label followed by numbers, under a
header line that names the columns by period::

    Years ended December 31, 2022 2021 2020
    Total revenues 66,608 62,286 58,158

Sentence scoring reads such a table as one long "sentence" of numbers, so the extractive answer
quoted whichever block of figures shared a word with the question. Here each row is read as a
person reads it: the question's quantity words are matched to the row labels, its period
(``2022``, ``FY2022``, ``FY22``) to the header's columns, and the answer states the value with
the row and column it came from (``Total revenues, 2022: 66,608``), so a reader can check it.
Labels are matched with the question's own words (its asking clause), weighted by the caller (the
index's IDF), less the words that name the document (its card's issuer and title), and with the few
names statements give the quantities analysts ask about most (``quantity_names``); the columns are
whatever periods the header names, of the kind of period asked (``table_rows.Header``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping

from retrieval.asked_figure import (ASKING_WORDS, YEAR, asked_period_kind, asked_periods, asked_scale, asking_clause,
                                    asks_person_or_reason, asks_quantity, quantity_text)
from retrieval.figure_change import describe_change, in_scale
from retrieval.named_sections import KINDS, titled_as
from retrieval.quantity_names import quantity_variants
from retrieval.table_rows import EMPTY_CELL, Header, header_above, header_periods, lines_of, parse_row, table_rows
from utils.tokenizer import tokenize

__all__ = ["asked_periods", "asks_quantity", "figures_in", "header_periods", "parse_row", "states_figure_for"]

_ASKING_TOKENS = frozenset(t for w in ASKING_WORDS for t in tokenize(w))
MIN_LABEL_SCORE = 0.3
"""A row whose label covers less of the question's words than this is not what was asked."""


@dataclass(frozen=True)
class Figure:
    """The value(s) a question asks for, read from one row of a table."""

    label: str
    columns: tuple[str, ...]
    values: tuple[str, ...]
    start: int
    end: int
    """[start, end) of the row in the text it was read from."""
    score: float
    header: str = ""
    under: str = ""
    """The section the table stands in, when the row's label alone does not say what it counts
    (a "Total" row of the "Revenues" table)."""
    scale: str = ""
    """``million`` when the table says its amounts are in millions (not said of rates and per-share rows)."""
    change: str = ""
    """The change between the periods read, when the question asks it (``figure_change``)."""
    asked_scale: str = ""
    """The scale the question wants (``million``) when it is not the table's: each value is said in both."""
    fits: bool = True
    """False when a column read is of another kind of period than the asked one, or the row has
    several cells a period: the figure is evidence, not the answer."""

    @property
    def text(self) -> str:
        """``Total revenues, 2022: 66,608; 2021: 62,286``: the answer as a person would say it (and the
        change between them, marked as computed, when that is what was asked)."""
        label = f"{self.label} ({self.under})" if self.under else self.label
        said = f"{label}, " + "; ".join(f"{c}: {self._value(v)}" for c, v in zip(self.columns, self.values))
        return f"{said}; {self.change}" if self.change else said

    def _value(self, cell: str) -> str:
        """The cell as printed, and in the asked scale when the question asks another than the table's."""
        other = in_scale(cell, self.scale, self.asked_scale)
        return f"{cell} {self.scale} = {other} {self.asked_scale}" if other else cell

    @property
    def read(self) -> str:
        """Which row and column(s) the figure was read from, and the scale the table states."""
        cols = ", ".join(f"'{c}'" for c in self.columns)
        under = f" of the table under '{self.under}'" if self.under else ""
        scale = f", in {self.scale}s" if self.scale else ""
        return f"row '{self.label}'{under}, column{'s' if len(self.columns) > 1 else ''} {cols}{scale}"


_FIGURE = re.compile(r"(?<![\w.])\$?\(?\d[\d,]*(?:\.\d+)?\)?\s?(?:%|percent|million|billion|thousand)?")


def states_figure_for(sentence: str, periods: Collection[str]) -> bool:
    """Whether a sentence states a figure (a number that is not a year) and names one of ``periods``:
    "Revenues increased by $4,322 million in 2022 compared with 2021" for a question about 2022."""
    if not periods or not any(p in sentence for p in periods):
        return False
    for m in _FIGURE.finditer(sentence):
        bare = m.group(0).strip("$() ").replace(",", "")
        if bare and not (bare.isdigit() and len(bare) == 4 and bare[:2] in ("19", "20")):
            return True
    return False


@dataclass
class _Terms:
    """The question's quantity words (periods and figures left out) and their weights."""

    words: set[str]
    weights: Mapping[str, float] = field(default_factory=dict)

    def weight(self, t: str) -> float:
        """The word's weight; without weights every word weighs 1, with them a word the document
        does not hold weighs 0 (no row of it can state that word)."""
        return self.weights.get(t, 0.0) if self.weights else 1.0


def question_terms(question: str, weights: Mapping[str, float] | None = None,
                   names: Collection[str] = (), tokens: Iterable[str] | None = None) -> _Terms:
    """The question's words that may name a quantity: no figures or years, and not ``names`` (the
    words that name the document itself, its issuer and title: "Boeing" in a Boeing filing names
    the filing, not a row; nor the words of how it asks, ``ASKING_WORDS``). ``tokens``: the
    question already tokenised (the pipeline's query carries them, so a question is tokenised once
    however many passages are read)."""
    words = {t for t in (tokenize(question) if tokens is None else tokens)
             if not any(ch.isdigit() for ch in t) and t not in names and t not in _ASKING_TOKENS}
    return _Terms(words, weights or {})


def _named_terms(variant: str, phrase: str, base: _Terms, weights: Mapping[str, float] | None,
                 names: Collection[str]) -> _Terms:
    """The terms of the question read with another name of its quantity (``quantity_names``). The
    name's own words weigh what the phrase it replaces weighs in the document (the mean weight of the
    question's words when the document never uses the phrase); the other words keep their weight."""
    terms = question_terms(variant, weights, names)
    if not weights:
        return terms
    held = [w for w in weights.values() if w > 0]
    own = max((weights.get(t, 0.0) for t in tokenize(phrase)), default=0.0)
    value = own or (sum(held) / len(held) if held else 1.0)
    terms.weights = {**weights, **{t: value for t in terms.words - base.words}}
    return terms


def label_score(label: str, terms: _Terms) -> float:
    """How well a row label states what the question asks: the weighted share of the question's
    words the label holds, times the root of the share of the label's words the question holds
    (``Total`` alone matches one word of many; ``Total revenues`` two of two)."""
    lab = {t for t in tokenize(label) if not any(ch.isdigit() for ch in t)}
    if not lab or not terms.words:
        return 0.0
    matched = lab & terms.words
    if not matched:
        return 0.0
    total = sum(terms.weight(t) for t in terms.words)
    cover = sum(terms.weight(t) for t in matched) / total if total > 0 else 0.0
    return cover * (len(matched) / len(lab)) ** 0.5


SECTION_DISCOUNT = 0.9
"""A label matched only with its section's heading counts this much of a label that says it alone."""


KIND_MISMATCH = 0.5
"""A column of another kind of period than the asked one (the fourth quarter's 2023 for "FY2023")
counts this much: read only when no column of the asked kind states the quantity, and then named."""
GROUPED_CELLS = 0.8
"""A row of three or more cells for each column of its header (sub-columns such as "EBITDA EBIT Net
income EPS" under each year) counts this much: the cell read by position may be another sub-column's.
Two cells a column are not taken for sub-columns: two years and their change in $ and % print so."""


def _grouped(cells: int, columns: int) -> bool:
    return columns > 0 and cells >= 3 * columns and cells % columns == 0
_NO_SCALE = re.compile(r"\bper\b|\brates?\b|\bratios?\b|\bmargins?\b|\bpercent|%|\bshares\b|\bdays\b|"
                       r"\bnumber of\b|\btimes\b|\bemployees\b", re.I)
"""A row that states a rate, ratio, count or per-share amount, not an amount in the table's scale."""


def _column(header: Header, period: str, kind: str | None) -> tuple[int, bool] | None:
    """The column of ``period`` (its index) and whether its kind of period fits ``kind``: a column
    of the asked kind first, then one whose header does not say, then another kind."""
    idx = [k for k, p in enumerate(header.periods) if p == period]
    if not idx:
        return None
    rank = {kind: 0, None: 1}
    k = min(idx, key=lambda j: (rank.get(header.kinds[j], 2), j))
    return k, rank.get(header.kinds[k], 2) < 2 or kind is None


def _column_name(header: Header, k: int) -> str:
    kind = header.kinds[k]
    return header.periods[k] if kind in (None, YEAR) else f"{header.periods[k]} ({kind})"


def figures_in(text: str, question: str, weights: Mapping[str, float] | None = None,
               span: tuple[int, int] | None = None, names: Collection[str] = (),
               section: str = "", tokens: Iterable[str] | None = None) -> list[Figure]:
    """Every row of ``text`` (inside ``span`` when given: the part the answer may quote) whose label
    matches the question and whose header names the asked period, best first.

    The question's words are those of its asking clause without its asides (``asking_clause``,
    ``quantity_text``: the instructions around it name other rows), its quantity also read under
    its statement names (``quantity_names``). The header may lie above ``span``: it is read, never
    quoted. Without a period in the question the row's first column (a statement's latest period)
    is read; of two columns of the asked year, the one of the asked kind of period (a year, a
    quarter: ``Header.kinds``). ``section`` is the heading of the section the text belongs to: a
    row whose label alone says little ("Total") is read with it; ``tokens``: the question's tokens
    when the caller has them (``question_terms``)."""
    if not asks_quantity(question):
        return []
    clause = asking_clause(question)
    if asks_person_or_reason(clause):
        return []
    asked = quantity_text(clause)
    base = question_terms(asked, weights, names, tokens if asked == question else None)
    term_sets = [base] + [_named_terms(variant, phrase, base, weights, names)
                          for variant, phrase in quantity_variants(asked)]
    periods = asked_periods(clause) or asked_periods(question)
    kind = asked_period_kind(clause) if asked_periods(clause) else asked_period_kind(question)
    wanted_scale = asked_scale(question)
    lines = lines_of(text)
    lo, hi = span if span is not None else (0, len(text))
    out: list[Figure] = []
    for row in table_rows(text, (lo, hi), lines):
        if row.end <= lo or row.start >= hi:
            continue
        score = max(label_score(row.label, terms) for terms in term_sets)
        under = ""
        # the heading explains a label that says too little ("Total" of "Revenues"); a statement's title
        # names the table, not what its "Other, net" counts
        if section and score < MIN_LABEL_SCORE and not titled_as(KINDS, section):
            within = SECTION_DISCOUNT * label_score(f"{row.label} {section}", term_sets[0])
            if within > score:
                score, under = within, section
        if score < MIN_LABEL_SCORE:
            continue
        header = header_above(lines, row.line)
        if header is None or len(row.cells) < header.period_count:  # change columns may be left blank
            continue
        columns = [_column(header, p, kind) for p in periods] if periods else [(0, True)]
        read = [c for c in columns if c is not None and c[0] < len(row.cells)]
        if not read:
            continue
        values = tuple(row.cells[k] for k, _ in read)
        if all(v in EMPTY_CELL for v in values):
            continue
        fit = KIND_MISMATCH if not all(ok for _, ok in read) else 1.0
        if _grouped(len(row.cells), len(header.periods)):
            fit *= GROUPED_CELLS  # several cells a period: which one is the asked quantity is a guess
        scale = header.scale if not _NO_SCALE.search(row.label + " " + " ".join(values)) else ""
        names_read = tuple(_column_name(header, k) for k, _ in read)
        change = describe_change(clause, names_read, tuple(header.periods[k] for k, _ in read), values)
        out.append(Figure(row.label, names_read, values, row.start, row.end,
                          fit * score * len(read) / max(len(periods), 1), header.text, under, scale, change,
                          wanted_scale, fit == 1.0))
    out.sort(key=lambda f: -f.score)
    return out
