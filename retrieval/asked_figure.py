"""What a figure question asks: the periods, the kind of period, and the clause that names the quantity.

A question about a filing is often wrapped in instructions ("Please answer the following question:
what is the FY2018 net property, plant, and equipment (in USD millions)? Respond by assuming the
perspective of an analyst who only uses the balance sheet"). Only the asking clause names the
quantity a table row must state; the instructions' words ("analyst", "statement", "cash") match
other rows. And "FY2023" asks for a year's figure, not the fourth quarter's column of a release
that prints both; "Q2" asks for the quarter. Clauses are told apart by their question words,
periods by the words every statement header uses; the only statement vocabulary here is the names
of the financial statements a question gives as where to look ("in the income statement"), which
name no row.
"""
from __future__ import annotations

import re

_QUESTION_PERIOD = re.compile(r"\b(?:FY\s?|fiscal\s+(?:year\s+)?|Q[1-4]\s?)?((?:19|20)\d{2})(?:Q[1-4])?\b|"
                              r"\bFY\s?'?(\d{2})(?:Q[1-4])?\b", re.I)
"""A year as a question names it: "2022", "FY2022", "FY22", and glued to a quarter ("Q22023", "FY2023Q1")."""
_ASKS_QUANTITY = re.compile(
    r"\b(how much|how many|amount|value|total|number of|what (?:is|was|were|are) (?:the |its |their )?\S+)", re.I)
"""A question that asks for a quantity (a period alone also counts: "revenue in 2022")."""

_CLAUSE_END = re.compile(r"(?<=[?!])\s+|(?<=[.:;])\s+(?=[A-Za-z])")
_ASKING = re.compile(r"^\W*(?:what|how|which|who|when|where|why|did|does|do|is|are|was|were|has|have|had|can|"
                     r"will|should)\b|\b(?:what|how much|how many|which)\b", re.I)

_LEADING_PHRASE = re.compile(r"^[^?]*?,\s*(?=(?:what|how|which)\b)", re.I)

#: Kinds of period, as a question and a column header name them.
QUARTER, HALF, NINE_MONTHS, YEAR = "quarter", "six months", "nine months", "year"
_PERIOD_KIND_WORDS = (
    (QUARTER, re.compile(r"\b(?:three|3)[- ]months?\b|\bquarter(?:s|ly)?\b|(?:\b|(?<=\d))Q[1-4](?:\b|(?='?\d{2}))|"
                         r"\b[1-4]Q\b|\b(?:thirteen|13)[- ]weeks?\b", re.I)),
    (HALF, re.compile(r"\b(?:six|6)[- ]months?\b|\bH[12]\b|\b(?:first|second) half\b|\bhalf[- ]year\b", re.I)),
    (NINE_MONTHS, re.compile(r"\b(?:nine|9)[- ]months?\b", re.I)),
    (YEAR, re.compile(r"\b(?:twelve|12)[- ]months?\b|\byears?\b|\bFY(?:\s?'?\d{2}|\b)|\bfiscal\b|\bannual\b|"
                      r"\bfull[- ]year\b|\b(?:52|53|fifty-two|fifty-three)[- ]weeks?\b", re.I)),
)


_ASIDE = re.compile(r"\s*\([^()]*\)")
ASKING_WORDS = frozenset(
    "fy much many usd dollar dollars million millions billion billions thousand thousands percent percentage "
    "percentages unit units round rounded decimal decimals place places quantity directly explicitly outlined "
    "amount year years end ended fiscal quarter annual".split())
"""Words of how a question asks (its period and its words: "year end FY2018"; "how much", "the amount
of"; the unit and rounding it wants), never of what a table row is called."""


_ASKED_SCALE = re.compile(r"\bin\s+(?:units\s+of\s+)?(?:USD|US\$|\$|U\.S\.\s*dollars|dollars)?\s*"
                          r"(thousand|million|billion)s?\b", re.I)


def asked_scale(question: str) -> str:
    """The scale a question wants its answer in ("Answer in USD millions" -> ``million``), or ""."""
    m = _ASKED_SCALE.search(question)
    return m.group(1).lower() if m else ""


_STATEMENT = re.compile(
    r"\b(?:(?:in|from|on|within|of|using|per)\s+)?(?:the\s+|its\s+|their\s+|\w+'s?\s+)?(?:consolidated\s+)?"
    r"(?:income\s+statements?|balance\s+sheets?|cash\s+flows?\s+statements?|statements?\s+of\s+"
    r"(?:cash\s+flows?|income|operations|earnings|financial\s+position|comprehensive\s+income)|p&l(?:\s+statements?)?)",
    re.I)
"""A financial statement named as where to look ("in Pepsico's income statements"): it names no row."""


def quantity_text(clause: str) -> str:
    """The asking clause without its asides in parentheses ("(formerly known as Square)", "(in USD
    millions)") and without the statement it names as where to look ("in the income statement"):
    what is left names the quantity."""
    return _STATEMENT.sub(" ", _ASIDE.sub("", clause))


def without_periods(text: str) -> str:
    """``text`` with the years and fiscal periods it names taken out ("revenue in FY2021" -> "revenue
    in "): what it says besides when."""
    return _QUESTION_PERIOD.sub(" ", text)


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


_ASKS_WHO_WHY = re.compile(r"^\W*(?:who|whom|why|where)\b", re.I)


def asks_person_or_reason(clause: str) -> bool:
    """Whether the asking clause asks who, why or where ("Who are the primary customers as of
    FY2022?"): a table row's figure is not its answer, though it names a period."""
    return bool(_ASKS_WHO_WHY.search(clause)) and not re.search(r"\bhow (?:much|many)\b", clause, re.I)


def period_kinds(text: str) -> list[str]:
    """The kinds of period ``text`` names (quarter, six months, nine months, year), in that order."""
    return [kind for kind, words in _PERIOD_KIND_WORDS if words.search(text)]


def asked_period_kind(question: str) -> str | None:
    """The kind of period a question asks about: a quarter, half or nine months when it names one
    (``Q2 of FY2022`` asks for the quarter), else a year when it names a year; None without a period."""
    kinds = period_kinds(question)
    for kind in (QUARTER, HALF, NINE_MONTHS):
        if kind in kinds:
            return kind
    return YEAR if kinds or asked_periods(question) else None


def asking_clause(question: str) -> str:
    """The clause of ``question`` that asks (the one a question word starts, or holding one, that names
    a period or a quantity), without the instructions around it; the whole question when no single
    clause does."""
    clauses = [c.strip() for c in _CLAUSE_END.split(question) if c.strip()]
    if len(clauses) < 2:
        return question
    asking = [c for c in clauses if _ASKING.search(c) and (asked_periods(c) or _ASKS_QUANTITY.search(c))]
    if not asking:
        return question
    ended = [c for c in asking if c.endswith("?")]
    clause = (ended or asking)[0]
    lead = _LEADING_PHRASE.search(clause)  # "Using the balance sheet, what is ..." asks from "what"
    return clause[lead.end():] if lead else clause
