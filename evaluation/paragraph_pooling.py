"""A paragraph judged by all of its windows, not only by its best one.

Chunks are 200-character windows; a ranked list lists each paragraph's best window first
(``retrieval.breadth.paragraph_first``), so a paragraph is ranked by its single best window. A
1,400-character chunk of a long-chunk retriever is judged on all of its text: a paragraph whose
every window matches the question beats one where a single window happens to. Here each
paragraph's best window is re-scored by a soft mean of its windows' scores (log-mean-exp at a
temperature ``t``): with one window, or windows scoring alike, the best window's score is kept;
a window that matches inside a long paragraph whose other windows do not loses up to
``t * log(windows)``. As ``t`` goes to 0 this is the plain best window. Only the paragraph's
best window moves, so its further windows keep their place behind every paragraph's first.

An evaluation variant (``+soft`` on a section ordering, evaluation/variants.py); its figures are in
docs/evaluation.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.breadth import ParagraphMemo, paragraph_key


def pooled_scores(index: Any, rows: np.ndarray, scores: np.ndarray, n: int, temperature: float) -> np.ndarray:
    """``scores`` of the scope's ``rows`` with each paragraph's best window pooled (module docstring),
    exact for the ``n`` best after pooling.

    Pooling never raises a score, so a row whose own score is below the ``n``-th best pooled score
    cannot enter the ``n`` best: only the paragraphs of the best rows are read (a paragraph's windows
    are consecutive rows of its leaf), widening until the next row's own score falls below that bar.
    Over a collection that reads a few hundred chunk records instead of every one."""
    out = np.asarray(scores, dtype=np.float64).copy()
    if len(out) == 0 or n <= 0 or temperature <= 0:
        return out
    order = np.lexsort((rows, -out))
    at = {int(r): j for j, r in enumerate(rows.tolist())}
    memo: ParagraphMemo = {}
    done = np.zeros(len(out), dtype=bool)
    m = min(len(out), 2 * n)
    while True:
        for j in order[:m]:
            if done[j]:
                continue
            members = np.asarray(_paragraph_rows(index, int(rows[j]), at, memo), dtype=np.int64)
            if len(members) > 1:  # a paragraph of one window keeps its score
                out[members] = pool_paragraphs(out[members], np.zeros(len(members), dtype=np.int64), temperature)
            done[members] = True
        computed = out[done]
        bar = np.sort(computed)[::-1][min(n, len(computed)) - 1]
        if m >= len(out) or scores[order[m]] < bar:
            return out
        m = min(len(out), 2 * m)


def _paragraph_rows(index: Any, row: int, at: dict[int, int], memo: ParagraphMemo) -> list[int]:
    """Scope positions of the windows in ``row``'s paragraph: the consecutive rows around it with the
    same (leaf, paragraph) key."""
    key = paragraph_key(index.chunks[row], index, memo)
    found = [at[row]]
    if key[1] < 0:
        return found
    for step in (-1, 1):
        r = row + step
        while r in at and 0 <= r < len(index.chunks) and paragraph_key(index.chunks[r], index, memo) == key:
            found.append(at[r])
            r += step
    return found


def pool_paragraphs(scores: np.ndarray, paragraphs: np.ndarray, temperature: float) -> np.ndarray:
    """``scores`` with each paragraph's best window re-scored as the log-mean-exp of the paragraph's
    windows at ``temperature`` (module docstring); every other window unchanged."""
    out = np.asarray(scores, dtype=np.float64).copy()
    if len(out) == 0 or temperature <= 0:
        return out
    order = np.lexsort((-out, paragraphs))  # by paragraph, best window first
    para = paragraphs[order]
    starts = np.flatnonzero(np.r_[True, para[1:] != para[:-1]])
    best = order[starts]
    top = out[best]
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
    shifted = np.exp((out[order] - top[group]) / temperature)
    means = np.bincount(group, weights=shifted) / np.bincount(group)
    out[best] = top + temperature * np.log(means)
    return out
