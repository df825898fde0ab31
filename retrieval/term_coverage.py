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

from retrieval.breadth import ParagraphMemo, paragraph_key
from utils.tokenizer import tokenize


def coverage_features(index: Any, rows: np.ndarray, question_tokens: tuple[str, ...] | list[str]
                      ) -> dict[str, np.ndarray]:
    """``para_cover`` for every row of ``rows`` (module docstring).

    Each term weighs log(1 + P / (1 + df)), df its paragraph frequency among the scope's P
    paragraphs: the scope is what the question is asked of, so a paper's own topic words, present in
    most of its paragraphs, weigh little. A question without terms gives zeros."""
    terms = sorted(set(question_tokens))
    n = len(rows)
    if not terms or n == 0:
        return {"para_cover": np.zeros(n)}
    col = {t: j for j, t in enumerate(terms)}
    memo: ParagraphMemo = {}
    contents: dict[str, str] = {}
    para_terms: dict[tuple[str, int], np.ndarray] = {}
    row_para: list[tuple[str, int]] = []
    for r in rows.tolist():
        chunk = index.chunks[r]
        key = paragraph_key(chunk, index, memo)
        if key not in para_terms:
            para_terms[key] = _presence(_paragraph_text(index, chunk, key, memo, contents), col)
        row_para.append(key)
    present = np.vstack(list(para_terms.values()))
    w = np.log1p(len(present) / (1.0 + present.sum(axis=0)))
    cover = dict(zip(para_terms, (present @ w / float(w.sum())).tolist()))
    return {"para_cover": np.array([cover[k] for k in row_para])}


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
