"""Which documents a question names, by their cards (issuer, title, form, period): step 1's
first choice in a collection of look-alike documents.

Three annual reports of one company hold the same Items; a question about "FY2018" is answered
by one of them. The sections cannot tell them apart, their cards can (``tree_builder.doc_card``).
A document's card match is

    name  = sum of log(1 + N / df) over the question's words its card's names hold
            (issuer, title, form; df = how many cards hold the word, so a word on every card,
            "Inc" or "Company", weighs nearly nothing), or more than any words when the question
            holds the card's whole title or file name; scaled so the best document has 1. Chinese
            names count only whole: a statute question's words ("劳动", "合同") name its topic
            as often as a statute, and a word of a title is not the title;
    year  = 1 when its period's year is the latest year the question names (a filing states
            its own year and restates the year before, so "2021 vs 2022" is read in the 2022
            filing), 0.5 for another year the question names, 0 for none;
    match = name x year when the question names a year (else name).

The hybrid locator multiplies each leaf's score by ``1 + weight x match`` of its document, so the
sections of the named document rise above their look-alikes while the leaves' own evidence still
orders them. A file-name hint counts half (it is weaker than the text). Nothing happens with one
document in scope, or when no card tells the documents apart: one-document behaviour is unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from retrieval.figure_rows import asked_periods
from tree_builder.doc_card import FILE_NAME_WEIGHT, CardSet, CardTerms, phrase_key


@dataclass(frozen=True)
class CardParams:
    """How much a card match moves a leaf (a small params object; see the module docstring)."""

    weight: float = 1.0
    """A leaf of the best-matching document scores up to (1 + weight) times its own evidence."""


def card_match(question: str, tokens: Sequence[str], cards: Sequence[CardTerms]) -> np.ndarray:
    """Each card's match with the question, in [0, 1] (module docstring); zeros when none matches."""
    n = len(cards)
    out = np.zeros(n, dtype=np.float64)
    if n < 2:
        return out
    q = set(tokens)
    df: dict[str, int] = {}
    for c in cards:
        for t in (c.names | c.hint_names) & q:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1 + n / k) for t, k in df.items()}
    name = np.array([sum(idf[t] for t in c.names & q)
                     + FILE_NAME_WEIGHT * sum(idf[t] for t in (c.hint_names - c.names) & q) for c in cards])
    key = phrase_key(question)
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
    if not years:
        return _apart(name)
    latest = max(years)
    year = np.zeros(n)
    for i, c in enumerate(cards):
        own, scale = (c.years, 1.0) if c.years else (c.hint_years, FILE_NAME_WEIGHT)
        if latest in own:
            year[i] = scale
        elif any(y in own for y in years):
            year[i] = 0.5 * scale
    return _apart(name * year)


def _apart(match: np.ndarray) -> np.ndarray:
    """``match``, or zeros when it is the same for every document (it tells none apart)."""
    return match if match.max() > match.min() else np.zeros(len(match))


def may_match(cards: CardSet, question: str, tokens: Sequence[str]) -> bool:
    """False when no card can match: an index built before cards, or a question that shares no word
    with any card and names no year (known without visiting the cards)."""
    return bool(cards) and not (cards.words.isdisjoint(tokens) and not cards.phrases and not asked_periods(question))


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
    match = card_match(question, tokens, [cards.by_path[paths[int(docs[i])]] for i in scoped])
    if not match.any():
        return None
    out = np.zeros(len(docs))
    out[scoped] = match
    return out


def scope_card_match(index: Any, question: str, tokens: Sequence[str],
                     doc_paths: set[str] | None) -> np.ndarray | None:
    """Per document number of ``index.tree.doc_paths`` the card match over the question's scope
    (``doc_paths``; None: the whole index), 0 outside it; None when the cards tell nothing apart."""
    if not may_match(index.card_terms, question, tokens):
        return None
    paths = index.tree.doc_paths
    docs = (np.arange(len(paths)) if doc_paths is None
            else np.array([i for i, p in enumerate(paths) if p in doc_paths], dtype=np.int64))
    match = document_card_match(index, question, tokens, docs)
    if match is None:
        return None
    out = np.zeros(len(paths))
    out[docs] = match
    return out


def leaf_card_factors(index: Any, question: str, tokens: Sequence[str], positions: np.ndarray,
                      params: CardParams = CardParams()) -> np.ndarray | None:
    """Per leaf (``positions``: index leaf numbers) the factor its score is multiplied by; None when
    the cards do not tell the documents in scope apart (nothing to do)."""
    if params.weight <= 0 or len(positions) == 0 or not may_match(index.card_terms, question, tokens):
        return None
    tree = index.tree
    leaf_docs = np.asarray(tree.doc[tree.leaf_rows[np.asarray(positions, dtype=np.int64)]])
    docs, of = np.unique(leaf_docs, return_inverse=True)
    match = document_card_match(index, question, tokens, docs)
    if match is None:
        return None
    return 1.0 + params.weight * match[of]
