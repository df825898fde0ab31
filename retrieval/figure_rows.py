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
Nothing here knows a statement's vocabulary: labels are matched with the question's own words,
weighted by the caller (the index's IDF), less the words that name the document (its card's issuer
and title), and the columns are whatever periods the header names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping

from utils.tokenizer import tokenize

_CELL = re.compile(r"^\(?-?\$?\(?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\)?%?\)?$")
"""One numeric cell: 66,608 | $55,893 | (4,187) | ($4,935) | 12.5% | 0.40."""
_EMPTY_CELL = frozenset({"—", "–", "-", "--", "n/a", "N/A", "nm", "NM", "*"})
"""A cell a table leaves without a value: it holds a column's place."""
_YEAR = re.compile(r"^(?:FY)?((?:19|20)\d{2})[,.:;)]*$", re.I)
_QUESTION_PERIOD = re.compile(r"\b(?:FY\s?|fiscal\s+(?:year\s+)?)?((?:19|20)\d{2})\b|\bFY\s?'?(\d{2})\b", re.I)
_DOT_LEADER = re.compile(r"(?:\s*\.){2,}\s*$|[\s.:]+$")
_ASKS_QUANTITY = re.compile(
    r"\b(how much|how many|amount|value|total|number of|what (?:is|was|were|are) (?:the |its |their )?\S+)", re.I)
"""A question that asks for a quantity (a period alone also counts: "revenue in 2022")."""

HEADER_LOOKBACK_LINES = 80
"""How far above a row its column header is looked for (a statement page holds ~60 lines)."""
MIN_LABEL_SCORE = 0.3
"""A row whose label covers less of the question's words than this is not what was asked."""


@dataclass(frozen=True)
class TableRow:
    """A line of a label and numbers: its cells as printed, and its place in the text."""

    label: str
    cells: tuple[str, ...]
    start: int
    end: int
    """[start, end) of the line in the text it was read from."""


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

    @property
    def text(self) -> str:
        """``Total revenues, 2022: 66,608; 2021: 62,286``: the answer as a person would say it."""
        label = f"{self.label} ({self.under})" if self.under else self.label
        return f"{label}, " + "; ".join(f"{c}: {v}" for c, v in zip(self.columns, self.values))

    @property
    def read(self) -> str:
        """Which row and column(s) the figure was read from."""
        cols = ", ".join(f"'{c}'" for c in self.columns)
        under = f" of the table under '{self.under}'" if self.under else ""
        return f"row '{self.label}'{under}, column{'s' if len(self.columns) > 1 else ''} {cols}"


def _cells_from_right(tokens: list[str]) -> tuple[list[str], int]:
    """The numeric cells at the end of a line's tokens, and where the label ends (token index)."""
    cells: list[str] = []
    i = len(tokens)
    while i > 0:
        t = tokens[i - 1]
        if _CELL.match(t) or t in _EMPTY_CELL:
            cells.append(t)
            i -= 1
        elif t in ("$", "(", ")", "%") and cells:  # "$ 1,234" / "1,234 %" split by the extraction
            i -= 1
        else:
            break
    return cells[::-1], i


def parse_row(line: str, start: int = 0) -> TableRow | None:
    """A label followed by at least two numeric cells, else None (prose, a header of years)."""
    tokens = line.split()
    if len(tokens) < 3:
        return None
    cells, cut = _cells_from_right(tokens)
    if len(cells) < 2 or cut == 0:
        return None
    label = _DOT_LEADER.sub("", " ".join(tokens[:cut])).strip(" .:$")
    if not any(ch.isalpha() for ch in label) or len(label) > 160:
        return None
    if all(_YEAR.match(c) for c in cells if c not in _EMPTY_CELL):
        return None  # "Years ended December 31, 2022 2021 2020" is a header, not a row
    return TableRow(label, tuple(cells), start, start + len(line))


def header_periods(line: str) -> list[str]:
    """The periods a column-header line names, left to right (``['2022', '2021', '2020']``), or []
    when the line is not a header: at least two years and no figure other than a day of the month."""
    years: list[str] = []
    for t in line.split():
        m = _YEAR.match(t)
        if m:
            years.append(m.group(1))
            continue
        bare = t.strip(",.;:()")
        if bare.replace(",", "").replace(".", "").isdigit() and not (bare.isdigit() and int(bare) <= 31):
            return []  # a figure: a row, not a header
    return years if len(years) >= 2 else []


def asked_periods(question: str) -> list[str]:
    """The years a question names, in its order, once each (``FY2018`` and ``FY18`` -> ``2018``)."""
    out: list[str] = []
    for m in _QUESTION_PERIOD.finditer(question):
        y = m.group(1) or f"20{m.group(2)}"
        if y not in out:
            out.append(y)
    return out


def asks_quantity(question: str) -> bool:
    return bool(_ASKS_QUANTITY.search(question) or asked_periods(question))


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


def _lines(text: str) -> Iterable[tuple[int, str]]:
    pos = 0
    for line in text.split("\n"):
        yield pos, line
        pos += len(line) + 1


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
    the filing, not a row). ``tokens``: the question already tokenised (the pipeline's query
    carries them, so a question is tokenised once however many passages are read)."""
    words = {t for t in (tokenize(question) if tokens is None else tokens)
             if not any(ch.isdigit() for ch in t) and t not in names}
    return _Terms(words, weights or {})


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


def _header_above(lines: list[tuple[int, str]], i: int) -> tuple[list[str], str]:
    for j in range(i - 1, max(-1, i - 1 - HEADER_LOOKBACK_LINES), -1):
        periods = header_periods(lines[j][1])
        if periods:
            return periods, lines[j][1].strip()
    return [], ""


SECTION_DISCOUNT = 0.9
"""A label matched only with its section's heading counts this much of a label that says it alone."""


def figures_in(text: str, question: str, weights: Mapping[str, float] | None = None,
               span: tuple[int, int] | None = None, names: Collection[str] = (),
               section: str = "", tokens: Iterable[str] | None = None) -> list[Figure]:
    """Every row of ``text`` (inside ``span`` when given: the part the answer may quote) whose label
    matches the question and whose header names the asked period, best first.

    The header may lie above ``span``: it is read, never quoted. Without a period in the question
    the row's first column (a statement's latest period) is read. ``section`` is the heading of the
    section the text belongs to: a row whose label alone says little ("Total") is read with it;
    ``tokens``: the question's tokens when the caller has them (``question_terms``)."""
    if not asks_quantity(question):
        return []
    terms = question_terms(question, weights, names, tokens)
    periods = asked_periods(question)
    lines = list(_lines(text))
    lo, hi = span if span is not None else (0, len(text))
    out: list[Figure] = []
    for i, (pos, line) in enumerate(lines):
        if pos + len(line) <= lo or pos >= hi:
            continue
        row = parse_row(line, pos)
        if row is None:
            continue
        score = label_score(row.label, terms)
        under = ""
        if section:
            within = SECTION_DISCOUNT * label_score(f"{row.label} {section}", terms)
            if within > score:
                score, under = within, section
        if score < MIN_LABEL_SCORE:
            continue
        header, header_text = _header_above(lines, i)
        if not header or len(row.cells) < len(header):
            continue
        wanted = [p for p in periods if p in header] if periods else [header[0]]
        if not wanted:
            continue
        values = tuple(row.cells[header.index(p)] for p in wanted)
        if all(v in _EMPTY_CELL for v in values):
            continue
        out.append(Figure(row.label, tuple(wanted), values, row.start, row.end,
                          score * len(wanted) / max(len(periods), 1), header_text, under))
    out.sort(key=lambda f: -f.score)
    return out
