"""Sections a question names by their common name, found by the title the document gives them.

"Using the balance sheet and the P&L statement, what is ...": a reader turns to the statements the
question names, and so does an LLM locator reading the table of contents. The offline locators match
words, and a question's words for a financial statement are seldom its title's: "balance sheet" for
"Consolidated Statements of Financial Position", "P&L" or "income statement" for "Consolidated
Statements of Operations" or "of Earnings". The statement then scores below the notes and MD&A
paragraphs that repeat the question's words: on the filings of the FinanceBench dev set, 29 questions
name a statement (43 in all), and the hybrid locator left 22 of the 43 unlocated.

Each kind below pairs the phrases a question uses with the titles a document gives the section, and
with the measures read from its lines alone: "Does Boeing have an improving gross margin profile?"
names no statement, and an analyst opens the income statement (gross profit over revenue); working
capital and the current ratio are read from the balance sheet, capital expenditure and free cash flow
from the cash flow statement. A measure names its statement only where the question names none: a
statement named by name decides. Retrieval reads the pairing five ways (docs/pipeline.md, "Named
sections"): every arm searches the titles beside the question (``searched_text``); the hybrid locator
places the leaf so titled in the document of its best leaf (``node_locator.with_named_sections``); a
card-led flat ranking puts the named document's statement first (``candidates.named_lead``); the union
model reads ``u_named``; the context reads each named statement from its top (``pool_lead``). And the
relevance floor takes the named statement ranked first as evidence found (``relevance.named_section_found``).
Only these three statements: every filing prints them under titles this small grammar covers, in
English and Chinese; a kind whose titles vary more freely would need an LLM locator, which reads the
titles itself.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from retrieval.quantity_names import spelled_out

_PREFIX = r"^(?:[A-Z]-\d+\s*[-–—]\s*)?(?:gaap\s+)?(?:(?:condensed\s+)?consolidated\s+|合并)?"
"""What may stand before a statement's title: a schedule label ("A-1 - "), "GAAP", "(Condensed)
Consolidated", 合并."""
_OF = r"statements?\s+of\s+(?:consolidated\s+)?"


@dataclass(frozen=True)
class SectionKind:
    name: str
    asked: re.Pattern[str]
    """A question naming the section."""
    titled: re.Pattern[str]
    """A heading that is the section's title (matched at its start, after ``_PREFIX``)."""
    title_words: str
    """The words of the titles a document gives it, searched with the question (``searched_text``)."""
    implied: re.Pattern[str]
    """A measure read from the section's lines alone (the gross margin from the income statement,
    working capital from the balance sheet): a question asking it and naming no section names this one."""


KINDS: tuple[SectionKind, ...] = (
    SectionKind("balance sheet",
                re.compile(r"(?<!off-)(?<!off )\bbalance\s+sheets?\b"
                           r"|\bstatements?\s+of\s+financial\s+(?:position|condition)\b|资产负债表", re.IGNORECASE),
                re.compile(_PREFIX + r"(?:balance\s+sheets?|" + _OF + r"financial\s+(?:position|condition)"
                           r"|资产负债表)(?!\s+(?:data|components|arrangements))\b", re.IGNORECASE),
                "consolidated balance sheets statements of financial position",
                re.compile(r"\bworking\s+capital\b|\bcurrent\s+ratio\b|\bquick\s+ratio\b|\bacid[- ]test\b"
                           r"|\bdebt[- ]to[- ](?:equity|assets|capital)\b|\bbook\s+value\s+per\s+share\b"
                           r"|营运资本|营运资金|流动比率|速动比率|资产负债率", re.IGNORECASE)),
    SectionKind("income statement",
                re.compile(r"\bincome\s+statements?\b|\bstatements?\s+of\s+(?:income|operations|earnings)\b"
                           r"|\bp\s*&\s*l\b|\bprofit\s+(?:and|&)\s+loss\b|利润表|损益表", re.IGNORECASE),
                re.compile(_PREFIX + r"(?:" + _OF + r"(?:income|operations|earnings)|利润表|损益表)"
                           r"(?!\s+data)\b", re.IGNORECASE),
                "consolidated statements of income operations earnings",
                re.compile(r"\bgross\s+(?:profit|margins?)\b|\boperating\s+margins?\b|\bnet\s+(?:profit\s+)?margins?\b"
                           r"|\b(?:pre-?tax|ebitda?)\s+margins?\b|\bprofit\s+margins?\b|\bcost\s+of\s+goods\s+sold\b"
                           r"|\bCOGS\b|毛利率|营业利润率|净利润率|销售净利率", re.IGNORECASE)),
    SectionKind("cash flow statement",
                re.compile(r"\bcash\s+flows?\s+statements?\b|\bstatements?\s+of\s+cash\s+flows?\b|现金流量表",
                           re.IGNORECASE),
                re.compile(_PREFIX + r"(?:" + _OF + r"cash\s+flows?|现金流量表)\b", re.IGNORECASE),
                "consolidated statements of cash flows",
                re.compile(r"\bcapex\b|\bcapital\s+expenditures?\b|\bfree\s+cash\s+flows?\b"
                           r"|\bcash\s+(?:flows?\s+)?from\s+operations\b|\boperating\s+cash\s+flows?\b"
                           r"|\bcash\s+flows?\s+from\s+operating\s+activities\b|资本支出|自由现金流|经营活动现金流",
                           re.IGNORECASE)),
)
_FORMAL = re.compile(r"^(?:[A-Z]-\d+\s*[-–—]\s*)?(?:gaap\s+)?(?:(?:condensed\s+)?consolidated\b|合并)",
                     re.IGNORECASE)
"""A title that names the consolidated statement itself."""


def _naming(question: str) -> list[tuple[SectionKind, list[str]]]:
    """Each kind the question names with the phrases that name it: the sections it names by name, or,
    when it names none, those whose measures it asks ("Does Boeing have an improving gross margin
    profile?" is read from the income statement, as an analyst reads it). A section named by name
    decides: "using the balance sheet, what is the inventory turnover (COGS / inventory)" keeps to it."""
    named = [(k, [m.group() for m in k.asked.finditer(question)]) for k in KINDS]
    if not any(phrases for _, phrases in named):
        named = [(k, [m.group() for m in k.implied.finditer(question)]) for k in KINDS]
    return [(k, phrases) for k, phrases in named if phrases]


def named_kinds(question: str) -> list[SectionKind]:
    """The kinds of section the question names, in the order of the table (``_naming``)."""
    return [k for k, _ in _naming(question)]


def searched_text(question: str) -> str:
    """What retrieval searches for a question: the question, the title words of each section it
    names in English ("balance sheet" also searches "statements of financial position"), so BM25 and
    the vector meet the statement as the document titles it, and the spelled-out name of each
    analyst's abbreviation it uses ("PPNE": "property, plant and equipment"). Every arm searches
    this, flat or tree: it is not the tree's. A Chinese question searches as asked (its words for a
    statement are the title's own words)."""
    extra = [k.title_words for k, phrases in _naming(question) if any(p.isascii() for p in phrases)]
    extra += spelled_out(question)
    return " ".join([question, *extra]) if extra else question


def titled_as(kinds: Sequence[SectionKind], heading: str) -> bool:
    """The heading is the title of one of ``kinds``."""
    return any(k.titled.match(heading.strip()) for k in kinds)


def titled_leaf(kind: SectionKind, headings: Sequence[tuple[int, str, float]]) -> int | None:
    """Of (leaf, heading, score), the leaf titled as ``kind``: a title that says "Consolidated" (the
    statement itself, not a schedule or an MD&A subsection of the same name) first, then the best
    score; None when no heading is so titled."""
    found = [(not _FORMAL.match(h.strip()), -score, leaf) for leaf, h, score in headings
             if kind.titled.match(h.strip())]
    return min(found)[2] if found else None

