"""Lines of a table: rows of figures and column headers, which are never section headings.

A financial statement set in bold ("Total revenues 66,608 62,286 58,158") or a
column header ("2022 2021", "December 31, 2022 2021") looks like a heading to
font rules. A line is a table line when it ends in two or more figures, or is
made of figures and date words only.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from tree_builder.readers.pdf_lines import Line

_FIGURE = re.compile(r"^[(\[]?[-–—+]?[$€£¥%]?[(\[]?[-–—+]?\d[\d,]*(?:\.\d+)?[%)\]]*\*?$|^[-–—]+$|^\$$|^n/?m$",
                     re.IGNORECASE)
_DATE_WORDS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov",
    "dec", "fiscal", "year", "years", "quarter", "quarters", "month", "months", "week", "weeks", "ended",
    "ending", "as", "of", "at", "and", "q1", "q2", "q3", "q4", "fy", "h1", "h2", "change", "%", "in",
    "millions", "thousands", "billions", "the", "one", "two", "three", "four", "five", "six", "nine",
    "twelve", "fifty-two", "fifty-three", "period", "periods", "dollars", "except", "per", "share", "amounts",
    "data", "unaudited", "usd", "$", "vs", "versus", "to",
}
_PERIOD_MARKS = {"ended", "ending"}


def is_figure(token: str) -> bool:
    """A number as a table prints it: 1,234  (8)  $2  12.5%  —  2022."""
    return bool(_FIGURE.match(token.strip(",;:")))


def is_table_line(text: str) -> bool:
    """A table row (a label followed by figures) or a column header (years, dates, periods)."""
    tokens = text.split()
    if not tokens or not any(ch.isdigit() for ch in text) and not _PERIOD_MARKS & set(text.casefold().split()):
        return False
    flags = [is_figure(t) for t in tokens]
    if len(flags) >= 2 and (flags[-1] and flags[-2] or flags[0] and flags[1]):
        return True  # figures at the end, or at the start of a row the extraction ran together
    figures_share = sum(1 for t, f in zip(tokens, flags) if f or not any(ch.isalpha() for ch in t)) / len(tokens)
    if len(tokens) >= 3 and figures_share >= 0.6:
        return True  # a header of figure-like column names: "737 747 767 777X 787 Total"
    figures = sum(flags)
    words = [t.casefold().strip(",.():") for t in tokens]
    if all(is_figure(t) or w in _DATE_WORDS for t, w in zip(tokens, words)) \
            and (figures or _PERIOD_MARKS & set(words)):
        return True
    return False


_YEAR = re.compile(r"^(?:19|20)\d\d$")


def is_column_header(text: str) -> bool:
    """A table's column header: periods and years only ("2022 2021", "December 31, 2022 2021",
    "Three Months Ended"), never a row with a label."""
    tokens = text.split()
    if not tokens:
        return False
    words = [t.casefold().strip(",.():") for t in tokens]
    if not all(is_figure(t) or w in _DATE_WORDS for t, w in zip(tokens, words)):
        return False
    return any(_YEAR.match(w) for w in words) or bool(_PERIOD_MARKS & set(words))


def is_period_words(text: str) -> bool:
    """Period words and nothing else ("Fiscal Year", "Change", "Three Months Ended"): printed above a
    table's columns, such a line is a cell that spans them, not the table's title."""
    words = [t.casefold().strip(",.():") for t in text.split()]
    return bool(words) and all(w in _DATE_WORDS for w in words)


def is_table_row(text: str) -> bool:
    """A label followed by two or more figures ("Total revenues 66,608 62,286")."""
    return is_table_line(text) and not is_column_header(text)


TABLE_PAGE_SHARE = 0.4
"""Share of a page's lines that are table rows or column headers on a page that is mostly table."""


def mostly_table(lines: Sequence["Line"]) -> bool:
    """A page whose lines are ``TABLE_PAGE_SHARE`` or more table rows and column headers (a
    statement): its bold lines are row-group labels and column names more often than titles."""
    return bool(lines) and sum(1 for ln in lines if is_table_line(ln.text)) >= TABLE_PAGE_SHARE * len(lines)
