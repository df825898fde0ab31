"""Features of a collection question's union candidates, for the learned union ordering.

Across a collection step 2 gathers the located leaves' best chunks and the flat ranking's best
(``hybrid_retriever.retrieve``) and orders them on one scale: a rank fusion of the chunk's two
signals blended with the locator's belief in its leaf (``order_union``). Two numbers with a
hand-set weight decide the top 10 and the order the context is read in, and on the statutes the
evidence a reference reads first usually sits a few places too low in that list, inside a leaf the
locator believes in (docs/evaluation.md). What else the list knows about a candidate is how it stands
beside the others: is it its leaf's best, how strongly its document and its neighbours match, how
the whole collection's flat ranking placed it, how many of the question's words it holds. A linear
model over these (``union_multi`` in the weights file, fitted by ``evaluation.learn_union`` with
cross-validation grouped by document) orders the candidates when ``union_model = "learned"``.

Everything is computed over the few dozen candidates of one question; nothing reads a set's
contents beyond the candidates' own text and positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexing.index_store import Index
from utils.similarity import min_max_normalize
from utils.tokenizer import tokenize

UNION_FEATURES: tuple[str, ...] = (
    "u_fused", "u_prior", "u_dense", "u_dense_mm", "u_flat", "u_bm25_hit", "u_cover",
    "u_leaf_best", "u_leaf_first", "u_doc_best", "u_doc_share", "u_neighbour")
"""The candidate's union score (rank fusion of its dense and per-document BM25 scores over the union,
on [0, 1]); the locator's belief in its leaf; its cosine, raw and min-max over the union; its score in
the whole scope's flat ranking (rank fusion with the collection's BM25 statistics, on [0, 1]); any BM25
match; the share of the question's distinct words its text holds; the best union score of its leaf,
and whether it is that best; the best union score of its document and its document's share of the
candidates; the best union score of an adjacent chunk of the same leaf among the candidates."""


@dataclass(frozen=True)
class UnionSignals:
    """The per-candidate inputs ``order_union`` already has (one entry per candidate, same order)."""

    rows: np.ndarray
    fused: np.ndarray
    """union_fusion's score, [0, 1]."""
    prior: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray
    """BM25 with each candidate's own document's statistics."""
    flat: np.ndarray
    """The candidate's flat-ranking score over the whole scope, [0, 1] (0 when the scope's scores
    do not hold the row)."""


def union_feature_matrix(index: Index, query_tokens: tuple[str, ...] | list[str], sig: UnionSignals,
                         names: tuple[str, ...] = UNION_FEATURES) -> np.ndarray:
    """``len(rows) x len(names)``, columns in ``names`` order. ``u_cover`` tokenises every candidate's
    text (about 15 ms of CPU for 40 statute chunks), so it is computed only when ``names`` holds it."""
    n = len(sig.rows)
    if n == 0:
        return np.zeros((0, len(names)))
    rows = np.asarray(sig.rows, dtype=np.int64)
    fused = np.asarray(sig.fused, dtype=np.float64)
    lay = index.layout
    leaf_ids, leaf_of = np.unique(lay.row_leaf[rows], return_inverse=True)
    doc_ids, doc_of = np.unique(lay.row_doc[rows], return_inverse=True)
    leaf_best = np.full(len(leaf_ids), -np.inf)
    np.maximum.at(leaf_best, leaf_of, fused)
    doc_best = np.full(len(doc_ids), -np.inf)
    np.maximum.at(doc_best, doc_of, fused)
    doc_share = np.bincount(doc_of, minlength=len(doc_ids)) / n
    # the leaf's best: the highest union score, ties to the earlier row (as the list orders them)
    order = np.lexsort((rows, -fused, leaf_of))
    first = np.zeros(n)
    first[order[np.r_[True, leaf_of[order][1:] != leaf_of[order][:-1]]]] = 1.0
    by_row = {int(r): (float(f), int(lf)) for r, f, lf in zip(rows, fused, leaf_of)}
    neighbour = np.zeros(n)
    for i, r in enumerate(rows.tolist()):
        best = 0.0
        for adj in (r - 1, r + 1):
            hit = by_row.get(adj)
            if hit is not None and hit[1] == leaf_of[i]:
                best = max(best, hit[0])
        neighbour[i] = best
    words = set(query_tokens)
    cover = np.zeros(n)
    if words and "u_cover" in names:
        for i, r in enumerate(rows.tolist()):
            cover[i] = len(words & set(tokenize(index.chunks[r].text))) / len(words)
    cols = {
        "u_fused": fused,
        "u_prior": np.asarray(sig.prior, dtype=np.float64),
        "u_dense": np.asarray(sig.dense, dtype=np.float64),
        "u_dense_mm": min_max_normalize(np.asarray(sig.dense, dtype=np.float64)),
        "u_flat": np.asarray(sig.flat, dtype=np.float64),
        "u_bm25_hit": (np.asarray(sig.lexical) > 0).astype(np.float64),
        "u_cover": cover,
        "u_leaf_best": leaf_best[leaf_of],
        "u_leaf_first": first,
        "u_doc_best": doc_best[doc_of],
        "u_doc_share": doc_share[doc_of],
        "u_neighbour": neighbour,
    }
    return np.column_stack([np.asarray(cols[name], dtype=np.float64) for name in names])
