"""Which documents a question names, by their cards (issuer, title, form, period): step 1's
first choice in a collection of look-alike documents.

Three annual reports of one company hold the same Items; a question about "FY2018" is answered
by one of them. The sections cannot tell them apart, their cards can (``tree_builder.doc_card``).
A document's card match is

    name   = sum of log(1 + N / df) x spread over the question's words its card's names hold
             (issuer, title; df = how many cards hold the word, so a word on every card,
             "Inc" or "Company", weighs nearly nothing; spread = how few documents' *texts* hold it,
             so a word of a press release's title that every filing uses, "operating", weighs
             nothing either), or more than any words when the question holds the card's whole title
             or file name; scaled so the best document has 1. Chinese names count only whole: a
             statute question's words ("劳动", "合同") name its topic as often as a statute, and a
             word of a title is not the title. A question that names no issuer so may name one by its
             trading symbol or an abbreviation ("AXP", "AmEx": ``issuers_aliased``), as if written whole;
    period = year x kind when the question names a year: ``year_match`` (the latest year named
             first, then the years a filing restates or looks ahead to) times ``kind_match`` (a
             quarterly report for "Q2 2023", an annual one for "FY2022");
    form   = 1 for a card of a form the question names ("the 8k filing dated ...", "this 10-K"),
             ``OTHER_FORM`` for the others (an issuer's 10-K, 8-K and earnings release matched it
             alike); 1 for every card when the question names no form or no card has it;
    date   = ``OTHER_DATE`` for a dated report (a current report, whose period is the day it
             reports) of another day than the one the question writes out ("the 8-K dated May 20,
             2022", not the issuer's 8-K of August 19); 1 otherwise;
    match  = name x period x form x date (else name x form x date).

The hybrid locator multiplies each leaf's score by ``1 + weight x match`` of its document, so the
sections of the named document rise above their look-alikes while the leaves' own evidence still
orders them. A file-name hint counts half (it is weaker than the text). Nothing happens with one
document in scope, or when no card tells the documents apart: one-document behaviour is unchanged.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from indexing.search import Scope
from retrieval.asked_figure import HALF, NINE_MONTHS, QUARTER, YEAR, asked_period_kind, asked_periods, period_kinds
from retrieval.query import Query
from retrieval.scoring import documents_scope
from tree_builder.doc_card import FILE_NAME_WEIGHT, CardSet, CardTerms, form_codes, named_dates, phrase_key


@dataclass(frozen=True)
class CardParams:
    """How much a card match moves a leaf (a small params object; see the module docstring)."""

    weight: float = 1.0
    """A leaf of the best-matching document scores up to (1 + weight) times its own evidence."""


def card_match(question: str, tokens: Sequence[str], cards: Sequence[CardTerms],
               spread: Mapping[str, float] | None = None) -> np.ndarray:
    """Each card's match with the question, in [0, 1] (module docstring); zeros when none matches.
    ``spread``: word -> how much of a name it is by the documents' texts (``name_spread``; a word
    left out counts whole)."""
    n = len(cards)
    out = np.zeros(n, dtype=np.float64)
    if n < 2:
        return out
    key = phrase_key(question)
    q = set(tokens) | glued_names(key, tokens, cards)
    aliased = issuers_aliased(question, key, q, cards)
    q |= aliased
    df: dict[str, int] = {}
    for c in cards:
        for t in (c.names | c.hint_names) & q:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1 + n / k) for t, k in df.items()}
    # a name written whole ("American Express") counts every word of it, on every card
    whole = {t for c in cards if c.issuer and c.issuer in key for t in c.issuer_words} | aliased
    weight = {t: w * (1.0 if spread is None or t in whole else spread.get(t, 1.0)) for t, w in idf.items()}
    name = np.array([sum(weight[t] for t in c.names & q)
                     + FILE_NAME_WEIGHT * sum(weight[t] for t in (c.hint_names - c.names) & q) for c in cards])
    said = [any(p in key for p in c.phrases) for c in cards]
    if any(said):  # a whole name in the question outweighs any of its words
        name = name + np.array(said, dtype=np.float64) * (math.log(1 + n) * (1 + len(q)))
    years = asked_periods(question)
    if name.max() > 0:
        name = name / name.max()
    elif not years:
        return out
    else:
        name = np.ones(n)  # no name in the question: the year alone tells the look-alikes apart
    form_and_day = form_match(question, cards) * date_match(question, cards)
    if not years:
        return _apart(latest_first(name, cards) * form_and_day)
    asked = asked_period_kind(question)
    asked_quarters = quarters_named(question)
    period = np.zeros(n)
    for i, c in enumerate(cards):
        kinds = covered_kinds(c.stated)
        own, scale = (c.years, 1.0) if c.years else (c.hint_years, FILE_NAME_WEIGHT)
        period[i] = (scale * year_match(own, years, asked, kinds) * kind_match(asked, kinds)
                     * quarter_match(asked_quarters, quarters_named(c.stated)))
    return _apart(name * period * form_and_day)


OTHER_FORM = 0.5
"""What a filing of another form than the question names keeps of its match (a kind of period the
question does not ask keeps as much: ``kind_match``)."""


def form_match(question: str, cards: Sequence[CardTerms]) -> np.ndarray:
    """Per card, 1 when it is of a form the question names or the question names none any card has,
    else ``OTHER_FORM``. A form does not name a document as an issuer does: the rare "10-Q" of a
    collection of annual reports would otherwise lift every issuer's quarterly report above the
    named issuer's annual one."""
    asked = form_codes(question)
    held = np.array([bool(c.forms & asked) for c in cards])
    return np.where(held, 1.0, OTHER_FORM) if held.any() else np.ones(len(cards))


OTHER_DATE = 0.5
"""What a dated report of another day than the question names keeps of its match."""


def date_match(question: str, cards: Sequence[CardTerms]) -> np.ndarray:
    """Per card, ``OTHER_DATE`` for a dated report (its stated period a day, no kind of period) of
    another day than every date the question writes out, else 1. An annual or quarterly report's
    period ends on a day too, but a question's "as of December 31, 2021" is answered by the next
    year's report as well (``year_match`` weighs that), so only a report that is its day is judged by it."""
    out = np.ones(len(cards))
    asked = named_dates(question)
    if not asked:
        return out
    for i, c in enumerate(cards):
        if c.dates and not c.dates & asked and not covered_kinds(c.stated):
            out[i] = OTHER_DATE
    return out


EARLIER = 0.9
"""What an earlier filing of the named issuer keeps of its match when the question asks no period."""


def latest_first(name: np.ndarray, cards: Sequence[CardTerms]) -> np.ndarray:
    """``name`` (the cards' name matches) with, among the best-named cards, each filing of an issuer's
    series (one issuer, one kind of period: its annual reports, or its quarterly ones) but the latest
    times ``EARLIER``: a question that asks no period ("Is Boeing's business subject to
    cyclicality?") asks about now, and the series' latest filing says what now is. A quarterly report
    is no later annual report, statutes or papers that share words with a question are no versions of
    one another, and a name the cards match unequally still decides first."""
    best = name.max() if len(name) else 0.0
    series: dict[tuple[str, tuple[str, ...]], dict[int, int]] = {}
    for i, c in enumerate(cards):
        years = [int(y) for y in (c.years or c.hint_years) if y.isdigit()]
        if best > 0 and name[i] == best and c.issuer and years:
            series.setdefault((c.issuer, tuple(covered_kinds(c.stated))), {})[i] = max(years)
    out = name.copy()
    for last in series.values():
        newest = max(last.values())
        for i, year in last.items():
            if year < newest:
                out[i] *= EARLIER
    return out


MIN_GLUED_CHARS = 5
"""A file-name word shorter than this ("corp", "inc") is too likely inside another word."""


def glued_names(key: str, tokens: Sequence[str], cards: Sequence[CardTerms]) -> set[str]:
    """File-name words the question holds once spaces and punctuation are dropped (``key``,
    ``phrase_key``): a file name glues a name's words ("COCACOLA", "GENERALMILLS") that the question
    writes apart ("Coca-Cola", "General Mills"). Not where the question already names a word of that
    card inside it ("MGM Resorts" and "MGMRESORTS"): that would count one name twice."""
    q = set(tokens)
    out: set[str] = set()
    for c in cards:
        said = (c.names | c.hint_names) & q
        out |= {t for t in c.hint_names if len(t) >= MIN_GLUED_CHARS and not t.isdigit() and t in key
                and not any(w in t for w in said)}
    return out


_WRITTEN_NAME = re.compile(r"(?<![\w.&])([A-Z]{1,3}&[A-Z]{1,3}|[A-Z]{2,5}(?:\.[A-Z])?|[A-Z][A-Za-z]{1,9})(?![\w&])")
"""A word written as a name (a capital first), as ``issuers_aliased`` reads one; initials joined by
"&" ("P&G") are one."""
MIN_ABBREVIATION = 3
"""An abbreviation shorter than this ("GM") is too likely another name's; initials joined by "&"
("J&J") say they are initials, and two letters are enough, of a name joined by "&" ("P&L" is no
"Pacific Lumber")."""


def issuers_aliased(question: str, key: str, words: set[str], cards: Sequence[CardTerms]) -> set[str]:
    """The issuer words of the cards the question names by a trading symbol ("AXP") or by an
    abbreviation of the issuer's name ("AmEx", "AMD": a piece of the start of each of its words, in
    order), when it names no issuer otherwise: no card's whole issuer is in ``key``, and no issuer
    word is written as a name (capitalised, past the question's first word: "Lockheed", but not the
    "general" of "general and administrative expenses", a word of "General Mills"). A fallback: a
    capitalised word that happens to abbreviate some issuer ("MRI") must not outweigh the issuer the
    question names outright. Stop-words are never names ("IT", "ALL")."""
    from utils.tokenizer import EN_STOPWORDS, tokenize  # noqa: PLC0415

    matches = list(_WRITTEN_NAME.finditer(question))
    first = len(question) - len(question.lstrip())
    as_names = {t for m in matches if m.start() > first for t in tokenize(m.group(1))} & words
    if any(c.issuer_words & as_names or (c.issuer and c.issuer in key) for c in cards):
        return set()
    written = [m.group(1) for m in matches if m.group(1).casefold() not in EN_STOPWORDS]
    out: set[str] = set()
    for c in cards:
        if any(w in c.symbols or ("&" not in w or c.ampersand) and abbreviates(w, c.spelled) for w in written):
            out |= c.issuer_words
    return out


def abbreviates(written: str, spelled: Sequence[str]) -> bool:
    """Whether ``written`` (as the question writes it) is a non-empty start of each of ``spelled``'s
    words (two or more), in order: "AmEx" of ("american", "express"), "AMD" of ("advanced", "micro",
    "devices"), "P&G" of ("procter", "gamble")."""
    word = written.casefold().replace("&", "")
    if not 2 <= len(spelled) <= len(word) or len(word) < (2 if "&" in written else MIN_ABBREVIATION) \
            or word in spelled:
        return False

    def cut(rest: str, i: int) -> bool:
        if i == len(spelled):
            return not rest
        return any(rest[:k] == spelled[i][:k] and cut(rest[k:], i + 1)
                   for k in range(1, min(len(rest), len(spelled[i])) + 1))

    return cut(word, 0)


_QUARTER_NAMED = re.compile(r"\b(first|second|third|fourth)\s+quarter\b|(?:\b|(?<=\d))Q([1-4])(?:\b|(?='?\d{2}))|"
                            r"\b([1-4])Q\b", re.I)
_ORDINAL = {"first": "1", "second": "2", "third": "3", "fourth": "4"}


def quarters_named(text: str) -> frozenset[str]:
    """The quarters ``text`` names by number ("Q2", "2Q", "second quarter" -> "2")."""
    return frozenset(_ORDINAL[m.group(1).lower()] if m.group(1) else (m.group(2) or m.group(3))
                     for m in _QUARTER_NAMED.finditer(text))


def quarter_match(asked: frozenset[str], stated: frozenset[str]) -> float:
    """0.25 when the question and the document both name quarters and no quarter is the same (the
    fourth quarter's release for "Q2 of FY2023"), else 1."""
    return 0.25 if asked and stated and not asked & stated else 1.0


def year_match(own: Sequence[str], years: Sequence[str], asked: str | None, kinds: Sequence[str]) -> float:
    """How well a document of period years ``own`` answers a question naming ``years``: 1 for the
    latest year named (a filing states its own year and restates the year before, so "2021 vs 2022"
    is read in the 2022 filing); 0.5 for another year named, or the year after the latest (a later
    filing restates it); 0.25 two years after (an annual report's income statement spans three
    years), or the year before (where a filing states its outlook for the next); 0 otherwise. A
    quarterly document a year before a quarter asked is worth 0.5: a fiscal year's first quarters end
    in the calendar year before ("Q2 of FY2023", ended December 2022)."""
    if not own:
        return 0.0
    latest = int(max(years))
    if str(latest) in own:
        return 1.0
    if any(y in own for y in years):
        return 0.5
    gaps = {int(y) - latest for y in own if y.isdigit()}
    if 1 in gaps or (-1 in gaps and asked in kinds and asked != YEAR):
        return 0.5
    return 0.25 if gaps & {2, -1} else 0.0


def covered_kinds(stated: str) -> list[str]:
    """The kinds of period a document covers by its stated period: a quarterly report's year-to-date
    columns cover six months in the second quarter, nine in the third, the year in the fourth (a
    10-Q for June 30 reports the three and six months); one that names no quarter, six or nine
    months (a year is reported in an annual report, not a quarterly one)."""
    kinds = period_kinds(stated)
    if QUARTER not in kinds:
        return kinds
    named = quarters_named(stated)
    out = kinds + [k for k, q in ((HALF, "2"), (NINE_MONTHS, "3")) if not named or q in named]
    return out + [YEAR] if "4" in named and YEAR not in out else out


def kind_match(asked: str | None, kinds: Sequence[str]) -> float:
    """1 when the document covers the kind of period asked (a quarter for "Q2 2023", a year for
    "FY2022"), or none is asked; 0.5 when it states no kind (a dated report); 0.25 for another kind."""
    if asked is None or asked in kinds:
        return 1.0
    return 0.5 if not kinds else 0.25


def _apart(match: np.ndarray) -> np.ndarray:
    """``match``, or zeros when it is the same for every document (it tells none apart)."""
    return match if match.max() > match.min() else np.zeros(len(match))


def may_match(cards: CardSet, question: str, tokens: Sequence[str]) -> bool:
    """False when no card can match: an index built before cards, or a question that shares no word
    with any card and names no year (known without visiting the cards)."""
    return bool(cards) and not (cards.words.isdisjoint(tokens) and not cards.phrases and not cards.aliases
                                and not asked_periods(question))


def document_card_match(index: Any, question: str, tokens: Sequence[str], docs: Sequence[int]) -> np.ndarray | None:
    """Each of ``docs``' (document numbers of ``index.tree.doc_paths``) card match with the question,
    the documents without a card 0; None when the cards do not tell these documents apart (fewer than
    two have cards, or the match is the same for all). Callers test ``may_match`` first: it spares
    them listing the documents."""
    cards = index.card_terms
    paths = index.tree.doc_paths
    scoped = [i for i, d in enumerate(docs) if paths[int(d)] in cards.by_path]
    if len(scoped) < 2:
        return None
    chosen = [confirmed(index, cards.by_path[paths[int(docs[i])]], tokens) for i in scoped]
    match = card_match(question, tokens, chosen, name_spread(index, tokens, chosen))
    if not match.any():
        return None
    out = np.zeros(len(docs))
    out[scoped] = match
    return out


def confirmed(index: Any, card: CardTerms, tokens: Sequence[str]) -> CardTerms:
    """``card`` with the file-name words the question holds that the document's own text holds too
    counted as names: a file name is a weaker hint than the text, unless the text says the same
    (an earnings release whose cover names no registrant, yet its text names the company throughout)."""
    asked = set(tokens) & (card.hint_names - card.names)  # a glued word stays a hint (``glued_names``)
    if not asked:
        return card
    _, held = index.search.term_stats(sorted(asked), Scope.of_documents({card.path}))
    said = frozenset(held)
    return replace(card, names=card.names | said, hint_names=card.hint_names - said) if said else card


MIN_SPREAD = 0.1
"""A word more documents' texts hold than N ** (1 - MIN_SPREAD) (31 or more of 44; all 3 of 3) names
none: else a near-zero weight, the only one a question shares with any card, would be scaled up to a
full match."""


def name_spread(index: Any, tokens: Sequence[str], cards: Sequence[CardTerms]) -> dict[str, float]:
    """Per question word on a card, how much of a name it is by the documents' texts:
    log(N / df) / log(N), df = the index's documents whose chunks hold the word, and 0 below
    ``MIN_SPREAD``. "Adobe", in the texts of Adobe's filings alone, names them; "operating", in
    every filing's text, names none, though it be on one card only (a press release titled "...
    Financial and Operating Results"). A word no text holds counts whole; a name of common words
    ("American Express") is matched whole, by its card's issuer phrase (``card_match``)."""
    words = set(tokens) & {t for c in cards for t in c.names | c.hint_names}
    if not words:
        return {}
    n, held = index.search.document_counts(sorted(words))
    if n < 2:
        return {}
    spread = {w: math.log(n / min(max(held[w], 1), n)) / math.log(n) for w in words if w in held}
    return {w: s if s >= MIN_SPREAD else 0.0 for w, s in spread.items()}


def memo_card_match(index: Any, query: Query, docs: np.ndarray) -> np.ndarray | None:
    """``document_card_match`` of ``docs``, computed once per question and set of documents: step 1
    (the locator's leaves of a scope) and step 2 (its candidates) ask it of the same documents, and
    each computation counts words in the store (on an engine, a scan of the chunks)."""
    docs = np.asarray(docs, dtype=np.int64)
    return query.memo.get_or_make(("card_match_docs", docs.tobytes()),
                                  lambda: document_card_match(index, query.text, query.asked_tokens, docs))


def scope_card_match(index: Any, query: Query, doc_paths: set[str] | None) -> np.ndarray | None:
    """Per document number of ``index.tree.doc_paths`` the card match over the question's scope
    (``doc_paths``; None: the whole index), 0 outside it; None when the cards tell nothing apart.
    Computed once per question and scope: the union's candidates, the flat ranking's lead and the
    documents a section lead reads all ask it."""
    return query.memo.get_or_make(("card_match", documents_scope(doc_paths)),
                                  lambda: _scope_card_match(index, query, doc_paths))


def _scope_card_match(index: Any, query: Query, doc_paths: set[str] | None) -> np.ndarray | None:
    if not may_match(index.card_terms, query.text, query.asked_tokens):
        return None
    paths = index.tree.doc_paths
    docs = (np.arange(len(paths)) if doc_paths is None
            else np.array([i for i, p in enumerate(paths) if p in doc_paths], dtype=np.int64))
    match = memo_card_match(index, query, docs)
    if match is None:
        return None
    out = np.zeros(len(paths))
    out[docs] = match
    return out


def leaf_card_factors(index: Any, query: Query, positions: np.ndarray,
                      params: CardParams = CardParams()) -> np.ndarray | None:
    """Per leaf (``positions``: index leaf numbers) the factor its score is multiplied by; None when
    the cards do not tell the documents in scope apart (nothing to do)."""
    if params.weight <= 0 or len(positions) == 0 \
            or not may_match(index.card_terms, query.text, query.asked_tokens):
        return None
    tree = index.tree
    leaf_docs = np.asarray(tree.doc[tree.leaf_rows[np.asarray(positions, dtype=np.int64)]])
    docs, of = np.unique(leaf_docs, return_inverse=True)
    match = memo_card_match(index, query, docs)
    if match is None:
        return None
    return 1.0 + params.weight * match[of]


def candidate_card_match(index: Any, query: Query, rows: np.ndarray, doc_paths: set[str] | None) -> np.ndarray:
    """Each row's document's card match with the question over the scope (0 where the cards tell
    the scope's documents apart in no way); the scope's matches computed once per question."""
    per_doc = scope_card_match(index, query, doc_paths)
    if per_doc is None or len(rows) == 0:
        return np.zeros(len(rows))
    tree = index.tree
    return per_doc[tree.doc[tree.leaf_rows[index.layout.row_leaf[rows]]]]


def documents_named_by_cards(index: Any, query: Query, doc_paths: set[str] | None) -> list[str]:
    """The documents in scope the question names by their cards (those matched best; the one document
    of a one-document scope or index); none when the cards tell the scope's documents apart in no way."""
    per_doc = scope_card_match(index, query, doc_paths)
    paths = index.tree.doc_paths
    if per_doc is not None and per_doc.max() > 0:
        return [paths[int(d)] for d in np.flatnonzero(per_doc == per_doc.max())]
    alone = sorted(doc_paths) if doc_paths is not None else list(paths)
    return alone if len(alone) == 1 else []


CARD_LEAD = 10.0
"""How far a named document's chunks lead a flat ranking (``card_lead``): a chunk's fused score (on
[0, ~1]) plus this much times its document's card match, so the documents the question names by
their cards come first and the fusion orders within them."""


def card_lead(index: Any, query: Query, rows: np.ndarray, doc_paths: set[str] | None) -> np.ndarray:
    """What a flat ranking adds to the fused score of each of ``rows`` so the documents the question
    names by their cards come first: the flat ranking's part of step 2's union and of the context's
    pool, and the flat arm given the same cards (an honest baseline among look-alike documents)."""
    return CARD_LEAD * candidate_card_match(index, query, rows, doc_paths)
