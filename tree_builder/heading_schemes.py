"""Named division schemes (PART > Item > Note or Statement, ARTICLE > Section, Chapter,
第一编 > 第一章 > 第一节) and their rank.

Long documents divide themselves with words, not only with numbers: a filing
has "PART II" above "Item 7A." above "Note 12 -", a contract "ARTICLE IV"
above "Section 4.2", a Chinese code 编 above 章 above 节. A heading that opens
with such a word is a structural heading whatever its font, and the word says
how deep it sits. The table is generic (any document that uses these words),
never tied to one kind of filing.
"""
from __future__ import annotations

import re
from typing import NamedTuple

_ROMAN = r"(?:[IVXLC]{1,7})"
_SPELLED = (r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
            r"sixteen|seventeen|eighteen|nineteen|twenty)")
"""A division numbered in words ("ARTICLE ONE", "Chapter Twelve")."""
_CN_NUM = "零〇一二三四五六七八九十百千两"
# (name, rank, pattern). Lower rank = higher in the document. The pattern must match the
# whole division mark; what follows it must look like a title (see ``scheme_of``).
_SCHEMES: list[tuple[str, int, re.Pattern[str]]] = [
    ("part", 1, re.compile(rf"^part\s+(?:{_ROMAN}|\d{{1,2}}|{_SPELLED})\b", re.IGNORECASE)),
    ("exhibit", 1, re.compile(r"^exhibit\s+\d{1,3}(?:\.\d{1,3})?[A-Z]?\b", re.IGNORECASE)),
    ("cn_bian", 1, re.compile(rf"^第[{_CN_NUM}\d]+(?:编|部分)")),
    ("article", 2, re.compile(rf"^article\s+(?:{_ROMAN}|\d{{1,3}}|{_SPELLED})\b", re.IGNORECASE)),
    ("chapter", 2, re.compile(rf"^chapter\s+(?:{_ROMAN}|\d{{1,3}}|{_SPELLED})\b", re.IGNORECASE)),
    ("cn_zhang", 2, re.compile(rf"^第[{_CN_NUM}\d]+章")),
    ("item", 2, re.compile(r"^items?\s+\d{1,2}[A-Z]?\b(?:\s*(?:,|and|&|through|-|–)\s*\d{1,2}[A-Z]?\b)*",
                           re.IGNORECASE)),
    ("section", 3, re.compile(r"^section\s+\d{1,3}(?:\.\d{1,3})*\b", re.IGNORECASE)),
    ("cn_jie", 3, re.compile(rf"^第[{_CN_NUM}\d]+节")),
    ("note", 3, re.compile(r"^note\s*\d{1,3}[A-Z]?(?=\s*[.:\-–—)]|\s+[A-Z]|\s*$)", re.IGNORECASE)),
    ("statement", 3, re.compile(
        r"^(?:(?:condensed\s+)?consolidated\s+(?:balance\s+sheets?|statements?\s+of\s+(?:consolidated\s+)?"
        r"(?:comprehensive\s+)?(?:income|loss|earnings|operations|cash\s+flows?|financial\s+(?:position|condition)|"
        r"(?:changes\s+in\s+)?(?:(?:stockholders|shareholders|shareowners)[’']?\s+)?(?:total\s+)?equity))"
        r"|notes\s+to\s+(?:the\s+)?(?:condensed\s+)?(?:consolidated\s+)?financial\s+statements"
        r"|reports?\s+of\s+independent\s+(?:registered\s+public\s+accounting\s+firm|auditors?|accountants)"
        r"|independent\s+auditors?[’']?\s+reports?|reports?\s+of\s+management)\b",
        re.IGNORECASE)),
]
"""A financial statement's title ("Consolidated Statement of Cash Flows", "Condensed Consolidated
Balance Sheets") divides a filing's financial statements as a note number divides its notes: the
statements and the notes are the sections under the Item that holds them. The other titles of the
financial statements ("Notes to Consolidated Financial Statements", "Report of Independent
Registered Public Accounting Firm", "Report of Management") are the statements' siblings too. Set in
the statements' font, they nested under the statement or the note printed before them: a filing's
notes numbered "1.", "2." under its statement of equity, the auditors' report after the last note
under that note's last subsection. ("Management's Report on Internal Control" is no such title: in
Item 9A it stands among headings of its own font, "Changes in Internal Control", that would nest
under it.) An exhibit filed with a
report ("Exhibit 10.13" atop a plan's first page, "EXHIBIT 21") is a document of its own bound after
the report's last Item: a division beside the PARTs, its Articles inside it."""


class Scheme(NamedTuple):
    name: str
    rank: int


def scheme_of(text: str) -> Scheme | None:
    """The division scheme a heading line opens with, or None.

    "Item 1A. Risk Factors", "PART II", "PART I - FINANCIAL INFORMATION", "Note 12 - Debt",
    "第二章 总则" match; a sentence that merely starts with the word ("Part III incorporates
    information by reference ...", "Item 7 of this report discusses ...") does not: after the
    mark comes nothing, punctuation, or a capitalised title word.
    """
    opened = _opening(text.strip())
    return opened[0] if opened else None


def is_statement_title(text: str) -> bool:
    """The whole line is a financial statement's title ("Consolidated Balance Sheets"), nothing after it."""
    s = text.strip()
    opened = _opening(s)
    return opened is not None and opened[0].name == "statement" and not s[opened[1]:].strip(" .:")


def bare_mark(text: str) -> bool:
    """The line is a numbered division mark and nothing else ("NOTE 24", "ARTICLE I.", "Item 7",
    "第一章"): the division's title, if any, is printed on the line after. A statement title alone is
    a title, not a mark."""
    s = text.strip()
    opened = _opening(s)
    return opened is not None and opened[0].name != "statement" and not s[opened[1]:].strip(" .:-–—)")


_MARK_END = ".,:-–—) "
"""Punctuation between a division mark and its title ("Item 1A. Risk Factors", "Note 12 - Debt")."""
_SUB_MARKS = re.compile(r"(?:\([0-9A-Za-z]{1,4}\))+")
"""Sub-clause marks right after a division number: "(b)", "(a)(i)"."""


_OF = re.compile(r"of\s", re.IGNORECASE)
"""A division mark followed by "of" cites another text's division ("Section 302 of the ... Act")."""


def _reads_on(rest: str) -> bool:
    """What follows a cited clause continues a sentence: a comma or a word in lower case."""
    return bool(rest) and (rest[0] in ",;" or rest[0].islower())


def _opening(s: str) -> tuple[Scheme, int] | None:
    """``scheme_of`` of a stripped line, with where its division mark ends."""
    for name, rank, pattern in _SCHEMES:
        m = pattern.match(s)
        if m is None:
            continue
        rest = s[m.end():].lstrip()
        if name.startswith("cn_"):
            return Scheme(name, rank), m.end()
        if name == "statement" and s.endswith(":"):
            return None  # "Consolidated Statements of Income:" leads into a note's table of what changed
        sub = _SUB_MARKS.match(rest)
        if sub is not None and _reads_on(rest[sub.end():].lstrip()):
            return None  # "Section 8.1(b), payment of ...", "Section 3(a)(i) in the event of ...": a citation
        if _OF.match(rest):
            return None  # "SECTION 302 OF THE SARBANES-OXLEY ACT OF 2002": another text's division, cited
        rest = rest.lstrip(_MARK_END).lstrip()
        if not rest or rest[0].isupper() or rest[0].isdigit() or rest[0] in "[(\"“'":
            return Scheme(name, rank), m.end()
        return None
    return None


_TITLE_STOP = re.compile(r"(?<=[^\s.])\.\s+(?=[A-Z“\"(])")
"""A period that may end a run-in title: after a word, before a capitalised word, a quote or a bracket."""
_ABBREVIATIONS = frozenset({"inc", "co", "corp", "ltd", "llc", "no", "nos", "vs", "etc", "st", "mr", "ms", "mrs",
                            "dr", "jr", "sr", "u.s", "e.g", "i.e", "sec", "art", "para"})
"""Words a period follows inside a title ("Barclays Capital Inc. and ...", "U.S. Plan")."""
_RUN_IN_TITLE_WORDS = 12
"""Longest title read as a run-in heading's: a longer "title" is the sentence itself."""
_RUN_IN_REST_WORDS = 3
"""Fewest words after the title that make a run-in paragraph ("Item 1. Business. General" is all title)."""


def run_in_split(text: str) -> tuple[str, str] | None:
    """("Section 2.2 Qualified Plan Definitions.", "Capitalized terms not otherwise defined ...") for a
    division line whose paragraph runs in after its title, as a contract or a plan prints its sections;
    None for a line that is all heading ("Item 5.07. Submission of Matters to a Vote of Security
    Holders.", "ITEM 4(a). Information about our Executive Officers"). Kept whole, the line made the
    paragraph's first words the section's name and left them out of its text."""
    s = text.strip()
    opened = _opening(s)
    if opened is None or opened[0].name.startswith("cn_"):
        return None
    end = opened[1]
    start = len(s) - len(s[end:].lstrip(_MARK_END))
    for stop in _TITLE_STOP.finditer(s, start):
        title = s[start:stop.start()]
        last = re.findall(r"[\w.’']+$", title)
        word = last[0].casefold() if last else ""
        if len(word.strip(".")) < 2 or word in _ABBREVIATIONS or not re.search(r"[^\W\d_]{2}", title):
            continue  # a number, an initial or an abbreviation ("5.07", "(a)", "U.S", "Inc")
        rest = s[stop.end():]
        if len(title.split()) > _RUN_IN_TITLE_WORDS or len(rest.split()) < _RUN_IN_REST_WORDS:
            return None
        return s[:stop.start() + 1], rest
    return None


def scheme_ranks(names: set[str]) -> dict[str, int]:
    """Marker levels 1.. for the schemes a document uses, in the table's order of depth.

    Schemes of equal rank (Chapter and Item) keep one level; a document with only Items
    gets Item = 1, so a missing PART never leaves an empty level above it.
    """
    ranks = sorted({rank for name, rank, _ in _SCHEMES if name in names})
    level = {rank: i + 1 for i, rank in enumerate(ranks)}
    return {name: level[rank] for name, rank, _ in _SCHEMES if name in names}


def split_divisions(text: str) -> tuple[str, str] | None:
    """("Part I", "Item 1 Business") for a line that opens one division and then, at once, a
    narrower one ("Part I Item 1 Business": a contents row, or a page, that prints a PART and its
    first Item on one line); None otherwise. The first division keeps only its mark and any title
    before the second mark is not guessed at: the split happens only where the narrower mark
    follows the first mark directly (after punctuation)."""
    s = text.strip()
    opened = _opening(s)
    if opened is None or opened[0].name.startswith("cn_"):
        return None
    first, end = opened
    rest = s[end:].lstrip(".:-–—) ").lstrip()
    second = scheme_of(rest) if rest else None
    if second is None or second.rank <= first.rank:
        return None
    return s[:end].strip(), rest
