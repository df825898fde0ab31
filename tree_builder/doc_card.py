"""A document's card: what it is, as its own first pages state it (title, issuer, symbols, form, period).

Why: a collection often holds look-alike documents (three years of one company's annual report,
all with the same Items; several statutes with the same chapter names). A question names the one
it means ("FY2018", "3M", "劳动合同法"); the sections alone cannot tell the years apart, the
cover can. The card is read by rules from the first pages, generically:

- ``form``: "FORM 10-K", "Form 20-F" (a form named on the cover);
- ``period``: "For the fiscal year ended December 31, 2022", "For the quarterly period ended ...",
  "Date of Report ...: July 1, 2022", "fiscal 2023", else the first full date of the first page
  (a manual's or paper's date under its title);
- ``issuer``: the line above "(Exact name of registrant as specified in its charter)";
- ``symbols``: the trading symbols of the cover's "Trading Symbol(s)" column ("AXP", "GLW"), the
  names a market knows the issuer by;
- ``title``: the document's title (its first heading, as the tree names it).

The file name is never read for these fields. Where the text states no issuer or no period, the
file name is kept beside them as ``file_name`` and every reader shows it as such ("file name: ..."),
a weaker hint than the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Mapping

FILE_NAME_WEIGHT = 0.5
"""A word or year only the file name holds counts this much of one the text states (a weaker hint)."""
COVER_CHARS = 8000
"""How much of the start is read: a filing's cover page and the page after (a statute's heading)."""
_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
          r"Jan\.?|Feb\.?|Mar\.?|Apr\.?|Jun\.?|Jul\.?|Aug\.?|Sept?\.?|Oct\.?|Nov\.?|Dec\.?)")
_DATE = rf"{_MONTH}\s+\d{{1,2}}\s*,?\s*(?:19|20)\d{{2}}"
_PERIODS = (
    re.compile(rf"for\s+the\s+((?:fiscal\s+)?(?:year|quarter(?:ly)?\s+period|quarter|period|"
               rf"(?:three|six|nine|twelve|thirteen|fifty-two|fifty-three)\s+(?:months|weeks))\s+ended\s*{_DATE})", re.I),
    re.compile(rf"(?:date\s+of\s+report[^:\n]{{0,60}}:\s*)({_DATE})", re.I),
    re.compile(r"\b((?:first|second|third|fourth)\s+quarter(?:\s+(?:of\s+)?(?:fiscal\s+(?:year\s+)?)?)\s*(?:19|20)\d{2})\b", re.I),
    re.compile(r"\b(fiscal\s+(?:year\s+)?(?:19|20)\d{2})\b", re.I),
    re.compile(r"\b([1-4]Q\s?(?:19|20)\d{2}|Q[1-4]\s?(?:19|20)\d{2})\b"),
)
"""Period statements, most specific first: the first that matches is the card's period."""
_ANY_DATE = re.compile(rf"\b({_DATE})")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_NAMED_DATES = (
    re.compile(rf"\b({_MONTH})\s+{_DAY}\s*,?\s*((?:19|20)\d{{2}})\b", re.I),  # July 1, 2022; July 1st 2022
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\s*,?\s*((?:19|20)\d{{2}})\b", re.I),  # 1st July 2022; 1 July, 2022
)


def named_dates(text: str) -> frozenset[tuple[int, int, int]]:
    """The calendar dates ``text`` writes out, as (year, month, day): "July 1, 2022", "1st July 2022"
    and "1 Jul. 2022" are one date."""
    out: set[tuple[int, int, int]] = set()
    for k, pattern in enumerate(_NAMED_DATES):
        for m in pattern.finditer(text):
            month, day = (m.group(1), m.group(2)) if k == 0 else (m.group(2), m.group(1))
            if 1 <= int(day) <= 31:
                out.add((int(m.group(3)), _MONTHS.index(month[:3].casefold()) + 1, int(day)))
    return frozenset(out)


_FORM = re.compile(r"\bFORM\s+([A-Z]{0,2}-?\d{1,2}-?[A-Z]{0,2}|\d{1,2}-[A-Z]{1,2})(?:/A)?[ \t]*(?:\([^)\n]*\)[ \t]*)?$",
                   re.I | re.M)
"""A form designation that ends its line ("FORM 10-K", "FORM 10-K/A (Mark One)"): the cover's own
line. A press release that mentions "our Quarterly Report on Form 10-Q for the quarter" is no 10-Q."""
_REGISTRANT = re.compile(r"\(\s*exact\s+name\s+of\s+(?:the\s+)?registrant", re.I)
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")
_SYMBOL_COLUMN = re.compile(r"trading\s+symbols?", re.I)
_EXCHANGE = (r"(?:The\s+)?(?:New\s+York\s+Stock\s+Exchange|NYSE|Nasdaq|NASDAQ|Cboe|CBOE|"
             r"[A-Z][a-z]+\s+(?:Stock\s+)?Exchange)")
_SYMBOL = re.compile(rf"(?<![\w$%./&-])([A-Z]{{1,5}}(?:\.[A-Z])?)\s+{_EXCHANGE}\b")
"""A symbol as the cover's table of registered securities lists it: capitals right before the
exchange's name ("... par value AXP New York Stock Exchange"); a note's symbol holds digits
("PEP26") and is not the issuer's name."""
_EXCHANGE_WORDS = frozenset({"NYSE", "NASDAQ", "CBOE", "LLC", "THE"})
"""Capitals of an exchange's own name ("NYSE Arca"), no issuer's symbol."""
SYMBOL_WINDOW = 1500
"""How far around the "Trading Symbol(s)" column header the table's rows are read."""
_LISTED = re.compile(r"(?<![\w&.'’])((?:[A-Z][\w&.'’-]*,?[ \t]+(?:(?:and|of|the|&)[ \t]+)?){0,5}[A-Z][\w&.'’-]*)"
                     r"[ \t]*\([ \t]*(?:NYSE|NASDAQ|Nasdaq|NYSE American|Cboe|CBOE)[ \t]*:[ \t]*([A-Z]{1,5}(?:\.[A-Z])?)\b")
"""An issuer as a press release names it: "PepsiCo, Inc. (NASDAQ: PEP) today reported", "MGM Resorts
International (NYSE: MGM)", "Calif.--(BUSINESS WIRE)--Adobe Inc. (Nasdaq:ADBE)"; a release has no
cover naming its registrant."""
_RULE = re.compile(r"_{3,}")
_SEPARATORS = re.compile(r"[_\-.\s]+")


@dataclass(frozen=True)
class DocumentCard:
    """What a document says it is. Empty fields: the document does not state them."""

    title: str = ""
    issuer: str = ""
    form: str = ""
    period: str = ""
    file_name: str = ""
    """The file's name, kept only when the text states no issuer or no period (a weaker hint)."""
    symbols: tuple[str, ...] = ()
    """The issuer's trading symbols, as its cover lists them."""

    @property
    def years(self) -> tuple[str, ...]:
        """The years the period names (the period's end: a fiscal year is named by the year it ends)."""
        return tuple(dict.fromkeys(_YEAR.findall(self.period)))

    @property
    def name_years(self) -> tuple[str, ...]:
        """Years in the file name (read only when the text states no period)."""
        return tuple(dict.fromkeys(_YEAR.findall(self.file_name)))

    def record(self) -> dict[str, Any]:
        """The card as plain JSON (metadata.json ``documents[].card``), empty fields left out."""
        out: dict[str, Any] = {k: v for k, v in (("title", self.title), ("issuer", self.issuer), ("form", self.form),
                                                 ("period", self.period), ("file_name", self.file_name)) if v}
        if self.symbols:
            out["symbols"] = list(self.symbols)
        return out

    @classmethod
    def from_record(cls, data: Any) -> "DocumentCard | None":
        """A card from its JSON; None for an index built before cards (or a malformed entry)."""
        if not isinstance(data, Mapping):
            return None
        fields = {k: data[k] for k in ("title", "issuer", "form", "period", "file_name")
                  if isinstance(data.get(k), str)}
        symbols = data.get("symbols")
        if isinstance(symbols, list):
            fields["symbols"] = tuple(str(x) for x in symbols if isinstance(x, str) and _SYMBOL_ONLY.match(x))
        return cls(**fields)

    def line(self, labels: Mapping[str, str]) -> str:
        """One line for a reader: ``labels`` names each field (the prompt's language or the user's)."""
        parts = [f"{labels[k]} {v}" for k, v in (("issuer", self.issuer), ("symbols", ", ".join(self.symbols)),
                                                 ("form", self.form), ("period", self.period),
                                                 ("file_name", self.file_name)) if v]
        return "; ".join(parts)


@dataclass(frozen=True)
class CardTerms:
    """One document's card as a question is matched with it: its words and years."""

    path: str
    names: frozenset[str]
    """Words of the title and issuer (no numbers, no single letters; the form is ``forms``)."""
    hint_names: frozenset[str]
    """Words only the file name holds."""
    years: tuple[str, ...]
    hint_years: tuple[str, ...]
    """Years of the file name, kept only when the text states no period."""
    phrases: tuple[str, ...] = ()
    """The title and the file name's words, whole (``phrase_key``): a question that contains one
    names the document. Chinese names are matched only so: their words ("劳动", "合同") are a
    question's topic words as often as a name's parts."""
    stated: str = ""
    """The period and title as the document states them ("Quarterly Period Ended December 31, 2022";
    "... Fourth Quarter and Full Year 2022 ..."): what kind of period the document covers."""
    issuer: str = ""
    """The issuer without its legal form, whole (``phrase_key``: "americanexpress"): a question that
    writes it so names the company even where each of its words is common."""
    issuer_words: frozenset[str] = frozenset()
    """The words of ``issuer``."""
    spelled: tuple[str, ...] = ()
    """The issuer's words in order as written, case-folded, without legal form or connectives
    ("american", "express"): what an abbreviation ("AmEx") is cut from."""
    symbols: frozenset[str] = frozenset()
    """The issuer's trading symbols ("AXP")."""
    ampersand: bool = False
    """Whether the issuer's name joins words with "&" ("Procter & Gamble"): then "P&G" abbreviates it."""
    forms: frozenset[str] = frozenset()
    """The SEC forms the title and form name, as ``form_codes`` writes them ("10k")."""
    dates: frozenset[tuple[int, int, int]] = frozenset()
    """The days ``stated`` writes out (``named_dates``): a current report's one day."""


MIN_PHRASE_CHARS = 4
"""A phrase shorter than this ("Form", "刑法") is too likely to occur by chance in a question."""


_LEGAL_FORM = re.compile(r"^\s*the\s+|\b(?:inc|incorporated|corp|corporation|company|co|ltd|limited|plc|llc|"
                         r"l\.?p|n\.?v|s\.?a|ag)\b\.?", re.I)
"""The article and legal-form words of a registrant's name ("The Boeing Company", "PepsiCo, Inc."): a
question names the company without them."""


_CONNECTIVES = frozenset({"and", "of", "the", "for", "de", "et"})
_SYMBOL_ONLY = re.compile(r"^[A-Z]{1,5}(?:\.[A-Z])?$")


def phrase_key(text: str) -> str:
    """``text`` as phrases are compared: case-folded, without spaces, punctuation or dates."""
    text = re.sub(r"\(?\d{4}[-./ ]\d{1,2}[-./ ]\d{1,2}\)?", "", text)
    return "".join(ch for ch in text.casefold() if ch.isalnum())


_FORM_CODE = re.compile(r"(?<![\w-])(10|8|6|11|20|40)\s?-?\s?([kqf])(?![\w-])", re.I)
"""An SEC form as a text writes it ("10-K", "10K", "8-k", "Form 20-F")."""


def form_codes(text: str) -> frozenset[str]:
    """The SEC forms ``text`` names, each as one word ("10k", "8k", "10q"): words drop numbers, so
    "Form 8-K" and "Form 10-K" are both the word "k"."""
    return frozenset(f"{m.group(1)}{m.group(2).casefold()}" for m in _FORM_CODE.finditer(text))


def card_terms(path: str, card: DocumentCard) -> CardTerms:
    """A card's words (Latin-script words of its title and issuer; of its file name as a hint), its
    whole-name phrases and its forms."""
    from utils.cjk import has_cjk  # noqa: PLC0415
    from utils.tokenizer import tokenize  # noqa: PLC0415

    def words_of(text: str) -> set[str]:  # a letter alone ("k" of "10-K") names nothing: forms are codes
        return {t for t in tokenize(text) if not t.isdigit() and not has_cjk(t) and len(t) > 1}

    words = words_of(" ".join((card.title, card.issuer)))
    hint = words_of(card.file_name) - words
    phrases = tuple(dict.fromkeys(k for k in (phrase_key(card.title), phrase_key(card.file_name))
                                  if len(k) >= MIN_PHRASE_CHARS))
    bare = _LEGAL_FORM.sub(" ", card.issuer)
    issuer = phrase_key(bare)
    spelled = tuple(w for w in re.findall(r"[^\W\d_]+", bare.casefold()) if w not in _CONNECTIVES)
    stated = _one_line(f"{card.period} {card.title}")
    return CardTerms(path, frozenset(words), frozenset(hint), card.years, () if card.years else card.name_years,
                     phrases, stated, issuer if len(issuer) >= MIN_PHRASE_CHARS else "", frozenset(words_of(bare)),
                     spelled if not has_cjk(bare) else (), frozenset(card.symbols), "&" in bare,
                     form_codes(f"{card.title} {card.form}"), named_dates(stated))


@dataclass(frozen=True)
class CardSet:
    """The cards of an index's documents, as questions are matched with them."""

    by_path: dict[str, CardTerms]
    words: frozenset[str]
    """Every word of every card: a question sharing none of them (and naming no year, and no card
    having a phrase) is matched with no card, and that is known without visiting the cards."""
    phrases: bool = False
    """Whether any card has a whole-name phrase (then every question is checked against them)."""
    aliases: bool = False
    """Whether any card's issuer may be named by a symbol or an abbreviation (then too)."""

    def __bool__(self) -> bool:
        return bool(self.by_path)

    def get(self, path: str) -> CardTerms | None:
        return self.by_path.get(path)


def cards_of(documents: Any) -> CardSet:
    """The card terms of metadata.json's ``documents`` (entries without a card, as an index built
    before cards has, are left out)."""
    out: dict[str, CardTerms] = {}
    for d in documents or []:
        if not isinstance(d, Mapping) or not isinstance(d.get("path"), str):
            continue
        card = DocumentCard.from_record(d.get("card"))
        if card is not None:
            out[d["path"]] = card_terms(d["path"], card)
    words: set[str] = set()
    for c in out.values():
        words |= c.names | c.hint_names
    return CardSet(out, frozenset(words), any(c.phrases for c in out.values()),
                   any(c.symbols or len(c.spelled) > 1 for c in out.values()))


def _one_line(text: str) -> str:
    return " ".join(text.split())


SUFFIX_ONLY = re.compile(r"^(?:inc|corp|corporation|co|company|ltd|llc|plc|l\.?p|n\.?v|s\.?a|ag)\.?$", re.I)
"""A line that is only a company-form suffix: a name wrapped over two lines ("Square," / "Inc.")."""
_NOT_A_NAME = re.compile(r"commission\s+file|file\s+number|i\.?r\.?s\.?\s+employer", re.I)


def _issuer(cover: str) -> str:
    m = _REGISTRANT.search(cover)
    if m is None:
        return ""
    lines = [ln.strip() for ln in cover[:m.start()].rstrip().split("\n")]
    while lines and not any(ch.isalpha() for ch in lines[-1]):  # the name sits on a line above
        lines.pop()
    if not lines:
        return ""
    # the name after a rule on the file number's line ("Commission File Number 001-37622 ____ SQUARE, INC.")
    line = next((seg.strip() for seg in reversed(_RULE.split(lines.pop())) if seg.strip()), "")
    if SUFFIX_ONLY.match(line) and lines:
        line = f"{lines[-1]} {line}"
    line = _one_line(line).strip(" ,;:")
    if _NOT_A_NAME.search(line):
        return ""
    return line if 1 < len(line) <= 120 and any(ch.isalpha() for ch in line) else ""


def _period(cover: str) -> str:
    flat = _one_line(cover)
    for pat in _PERIODS:
        m = pat.search(flat)
        if m:
            return _one_line(m.group(1))
    first_page = _one_line(cover[:3000])
    m = _ANY_DATE.search(first_page)
    return m.group(1) if m else ""


def _symbols(cover: str) -> tuple[str, ...]:
    """The trading symbols of the cover's table of registered securities; none where the cover has
    no "Trading Symbol(s)" column (before 2019 the form had none, and capitals before an exchange's
    name may then be anything)."""
    m = _SYMBOL_COLUMN.search(cover)
    if m is None:
        return ()
    window = cover[max(0, m.start() - SYMBOL_WINDOW):m.end() + SYMBOL_WINDOW]
    return tuple(dict.fromkeys(s for s in _SYMBOL.findall(window) if s not in _EXCHANGE_WORDS))


def _form(cover: str) -> str:
    m = _FORM.search(cover)
    return m.group(1).upper() if m else ""


def _normal(text: str) -> str:
    return _SEPARATORS.sub(" ", text).strip().casefold()


def _cover(text: str, page_starts: list[int] | None) -> str:
    """The first pages (the first two, or ``COVER_CHARS``)."""
    end = COVER_CHARS
    if page_starts and len(page_starts) > 2:
        end = min(max(page_starts[2], 1), COVER_CHARS * 2)
    return text[:end]


def _stated_title(issuer: str, form: str, period: str) -> str:
    if not issuer or not form:
        return ""
    return f"{issuer} \u2014 Form {form}" + (f", {period}" if period else "")


def cover_form(text: str, page_starts: list[int] | None = None) -> str:
    """The form a document's cover prints on a line of its own ("10-K"); "" when none."""
    return _form(_cover(text, page_starts))


def cover_title(text: str, page_starts: list[int] | None = None) -> str:
    """A filing's name as its cover states it: "The Boeing Company — Form 10-K, fiscal year ended
    December 31, 2022" (registrant, form, period); "" when the cover names no registrant and form.
    Why: a filing's file metadata titles it by an identifier (an accession number), which names
    nothing a reader or a question knows it by."""
    cover = _cover(text, page_starts)
    return _stated_title(_issuer(cover), _form(cover), _period(cover))


_IDENTIFIER = re.compile(r"^[\W\d_]*(?:[0-9a-f]{8,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]+)?[\W\d_]*$", re.I)
_FILE_NAME_TITLE = re.compile(r"\.(?:pdf|docx?|rtf|html?|txt|indd|xlsx?|pptx?|qxd|ps|tex)$", re.I)
_WORD = re.compile(r"[^\W\d_]{2,}")
_PLACEHOLDERS = {"untitled", "untitled document", "document", "title", "no title", "none", "pdf"}


def identifier_like(title: str) -> bool:
    """A metadata title that is no title: an accession or document number ("0000012927-23-000007"),
    a hash or UUID, a file name ("10K_2022.docx"), a placeholder ("Untitled"), or nothing."""
    t = _one_line(title)
    return (not t or bool(_IDENTIFIER.match(t)) or bool(_FILE_NAME_TITLE.search(t))
            or t.casefold() in _PLACEHOLDERS or not _WORD.search(t))


def read_card(text: str, title: str, rel_path: str, page_starts: list[int] | None = None) -> DocumentCard:
    """The card of a document from its first pages (the first two, or ``COVER_CHARS``)."""
    cover = _cover(text, page_starts)
    issuer, form, period, symbols = _issuer(cover), _form(cover), _period(cover), _symbols(cover)
    listed = _LISTED.search(cover) if not issuer else None
    if listed is not None:  # a press release: no registrant line, the issuer named with its listing
        issuer, symbols = listed.group(1).strip(" ,"), symbols or (listed.group(2),)
    stem = PurePosixPath(rel_path).stem
    title = _one_line(title)
    if title and _normal(title) == _normal(stem) and _normal(title) not in _normal(cover):
        title = ""  # the reader fell back to the file name: the text states no title
    if title and title == _stated_title(issuer, form, period):
        title = ""  # the title is the card's own fields: it adds no words of its own
    file_name = ""
    if (not issuer or not period) and _normal(stem) != _normal(title):
        file_name = _SEPARATORS.sub(" ", stem).strip()
    return DocumentCard(title, issuer, form, period, file_name, symbols)
