"""Which paragraphs of a packed hit the context reads first (``context_packed_read = "matched"``).

A packed chunk holds several short paragraphs (a statute's articles, a list's items) so that the
dense model and BM25 see enough text to match. Reading the hit means reading all of them, yet
usually one of them is what matched: on the statutes a 2,000-character context read ~10 hits of
~200 characters, and most of those characters were the articles packed beside the one the
question was about. Here a hit spanning several paragraphs is read first as the paragraphs that
carry the question's words (weighed by their IDF); its other paragraphs wait for the second pass,
as a crowded leaf's hits do, so the budget reaches further hits first. A hit no paragraph of which
shares a question word (a dense-only match) is read whole: there is nothing to choose by.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from indexing.chunker import paragraph_at
from utils.tokenizer import tokenize

Span = tuple[int, int]

MATCH_SHARE = 0.5
"""A paragraph is part of the match when its question-word weight is at least this share of the
best paragraph's in the hit: two articles that both answer are read together, a neighbour that
shares only a common word is not."""


@dataclass
class QuestionWords:
    """The question's words with their IDF over the index (its rare words weigh most)."""

    weights: dict[str, float]
    _memo: dict[str, float] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, index: Any, texts: Iterable[str]) -> "QuestionWords":
        """From the question's texts (its parts, for a multi-part question). An index that cannot
        count its terms weighs every word 1."""
        words = sorted({t for text in texts for t in tokenize(text)})
        stats = getattr(getattr(index, "search", None), "term_stats", None)
        if not words or stats is None:
            return cls({t: 1.0 for t in words})
        n, dfs = stats(words)
        return cls({t: max(math.log((n - df + 0.5) / (df + 0.5)), 0.05)
                    for t, df in dfs.items() if 0 < df <= n})

    def weigh(self, text: str) -> float:
        """Sum of the weights of the question's distinct words the text holds."""
        w = self._memo.get(text)
        if w is None:
            w = self._memo[text] = sum(self.weights.get(t, 0.0) for t in set(tokenize(text)))
        return w


def matched_part(content: str, paragraphs: Sequence[Span], a: int, b: int, words: QuestionWords,
                 share: float = MATCH_SHARE) -> tuple[Span, list[Span]]:
    """(what to read first, what waits) for a hit at [a, b) of a leaf's ``content``.

    A hit within one paragraph, or none of whose paragraphs holds a question word, is read as it
    is (nothing waits). Otherwise the first span runs from the first to the last paragraph whose
    weight reaches ``share`` of the best (one contiguous passage, one citation); the hit's
    paragraphs before and after it wait.
    """
    i, j = paragraph_at(paragraphs, a), paragraph_at(paragraphs, b - 1)
    if i < 0 or j <= i:
        return (a, b), []
    w = [words.weigh(content[s:e]) for s, e in paragraphs[i:j + 1]]
    top = max(w)
    if top <= 0:
        return (a, b), []
    keep = [k for k, x in enumerate(w) if x >= share * top]
    lo, hi = i + keep[0], i + keep[-1]
    rest = []
    if lo > i:
        rest.append((paragraphs[i][0], paragraphs[lo - 1][1]))
    if hi < j:
        rest.append((paragraphs[hi + 1][0], paragraphs[j][1]))
    return (paragraphs[lo][0], paragraphs[hi][1]), rest


def around_part(paragraphs: Sequence[Span], a: int, b: int, limit: int) -> Span:
    """A hit spanning several paragraphs, with the paragraph just after and just before it in its
    leaf (each only while the span stays within ``limit``): short clauses that were packed together
    continue past the chunk's edge. A hit within one paragraph is left as it is."""
    i, j = paragraph_at(paragraphs, a), paragraph_at(paragraphs, b - 1)
    if i < 0 or j <= i:
        return a, b
    lo, hi = paragraphs[i][0], paragraphs[j][1]
    if j + 1 < len(paragraphs) and paragraphs[j + 1][1] - lo <= limit:
        hi = paragraphs[j + 1][1]
    if i > 0 and hi - paragraphs[i - 1][0] <= limit:
        lo = paragraphs[i - 1][0]
    return lo, hi
