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
from tree_builder.doc_card import FILE_NAME_WEIGHT, CardTerms, phrase_key


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


def leaf_card_factors(index: Any, question: str, tokens: Sequence[str], positions: np.ndarray,
                      params: CardParams = CardParams()) -> np.ndarray | None:
    """Per leaf (``positions``: index leaf numbers) the factor its score is multiplied by; None when
    the cards do not tell the documents in scope apart (nothing to do). The cheap tests come first:
    a question that shares no word with any card and names no year costs no pass over the leaves."""
    if params.weight <= 0 or len(positions) == 0:
        return None
    cards = index.card_terms
    if not cards or (cards.words.isdisjoint(tokens) and not cards.phrases and not asked_periods(question)):
        return None  # an index built before cards, or a question that names nothing a card holds
    tree = index.tree
    leaf_docs = np.asarray(tree.doc[tree.leaf_rows[np.asarray(positions, dtype=np.int64)]])
    docs = np.unique(leaf_docs)
    paths = tree.doc_paths
    scoped = [int(d) for d in docs if paths[int(d)] in cards.by_path]
    if len(scoped) < 2:
        return None
    match = card_match(question, tokens, [cards.by_path[paths[d]] for d in scoped])
    if not match.any():
        return None
    per_doc = np.zeros(int(docs.max()) + 1)
    per_doc[scoped] = match
    return 1.0 + params.weight * per_doc[leaf_docs]
