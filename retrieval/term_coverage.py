"""How much of the question's vocabulary a chunk's paragraph holds.

BM25 scores a 200-character window: a window that repeats one rare question word can outscore one
whose paragraph holds every word of the question once. A long-chunk retriever sees the whole
paragraph (and its neighbours) in one chunk, so a paragraph that covers the question counts in full
there. ``para_cover`` gives the section ranker that view without changing the chunking: the share
of the question's distinct terms, each weighed by its rarity among the scope's paragraphs, that
occur anywhere in the chunk's paragraph. It reads only the question and the scope's own text.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.breadth import ParagraphMemo, paragraph_ids
from utils.idf import paragraph as paragraph_idf
from utils.tokenizer import tokenize


def coverage_features(index: Any, rows: np.ndarray, question_tokens: tuple[str, ...] | list[str],
                      pid: np.ndarray | None = None, memo: ParagraphMemo | None = None,
                      keys: dict[tuple[str, int], int] | None = None) -> dict[str, np.ndarray]:
    """``para_cover`` for every row of ``rows`` (module docstring).

    Each term weighs log(1 + P / (1 + df)), df its paragraph frequency among the scope's P
    paragraphs: the scope is what the question is asked of, so a paper's own topic words, present in
    most of its paragraphs, weigh little. A question without terms gives zeros. ``pid``, ``memo`` and
    ``keys``: the rows' paragraphs as ``paragraph_ids`` found them (read here when not given)."""
    terms = sorted(set(question_tokens))
    n = len(rows)
    if not terms or n == 0:
        return {"para_cover": np.zeros(n)}
    if pid is None or memo is None or keys is None:
        memo, keys = {}, {}
        pid = paragraph_ids(index, rows, memo, keys)
    col = {t: j for j, t in enumerate(terms)}
    _, first = np.unique(pid, return_index=True)  # a row of each paragraph: its first in ``rows``
    first_row = rows[first]
    contents: dict[str, str] = {}
    present = np.zeros((len(keys), len(terms)), dtype=bool)
    for key, p in keys.items():
        chunk = index.chunks[int(first_row[p])]
        present[p] = _presence(_paragraph_text(index, chunk, key, memo, contents), col)
    w = paragraph_idf(len(present), present.sum(axis=0))
    cover = present @ w / float(w.sum())
    return {"para_cover": cover[pid]}


def _presence(text: str, col: dict[str, int]) -> np.ndarray:
    out = np.zeros(len(col), dtype=bool)
    for tok in set(tokenize(text)):
        j = col.get(tok)
        if j is not None:
            out[j] = True
    return out


def _paragraph_text(index: Any, chunk: Any, key: tuple[str, int], memo: ParagraphMemo,
                    contents: dict[str, str]) -> str:
    """The paragraph's text from its leaf (read once per leaf); a chunk between paragraphs is its own."""
    if key[1] < 0:
        return str(getattr(chunk, "text", "") or "")
    leaf = key[0]
    if leaf not in contents:
        node = index.get_node(leaf)
        contents[leaf] = node.content if node is not None else ""
    a, b = memo[leaf][1][key[1]]
    return contents[leaf][a:b]
