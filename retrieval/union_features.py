"""Features of a collection question's union candidates, for the learned union ordering.

Across a collection step 2 gathers the located leaves' best chunks and the flat ranking's best
(``retrieval.candidates.union_candidates``) and orders them on one scale. A rank fusion of the chunk's
two signals blended with the locator's belief in its leaf (the ``union-blend`` variant,
evaluation/variants.py) lets two numbers with a hand-set weight decide the top 10 and the order the
context is read in, and tends to place the evidence a few places too low inside a leaf the locator
believes in (docs/evaluation.md). What else the list knows about a candidate is how it stands
beside the others: is it its leaf's best, how strongly its document and its neighbours match, how
the whole collection's flat ranking placed it, how many of the question's words it holds. A linear
model over these (``union_multi`` in the weights file, fitted by ``evaluation.learn_union`` with
cross-validation grouped by document) orders the candidates (``union-learned``).

Everything is computed over the few dozen candidates of one question; nothing reads a set's
contents beyond the candidates' own text and positions.
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

import numpy as np

from indexing.chunker import paragraph_spans
from indexing.index_store import Index
from utils.idf import lucene
from utils.similarity import min_max_normalize

UNION_FEATURES: tuple[str, ...] = (
    "u_fused", "u_prior", "u_dense", "u_dense_mm", "u_flat", "u_bm25_hit", "u_cover",
    "u_leaf_best", "u_leaf_first", "u_doc_best", "u_doc_share", "u_neighbour",
    "u_cover_idf", "u_para_idf", "u_paragraphs", "u_length", "u_card", "u_named")
"""The candidate's union score (rank fusion of its dense and per-document BM25 scores over the union,
on [0, 1]); the locator's belief in its leaf; its cosine, raw and min-max over the union; its score in
the whole scope's flat ranking (rank fusion with the collection's BM25 statistics, on [0, 1]); any BM25
match; the share of the question's distinct words its text holds; the best union score of its leaf,
and whether it is that best; the best union score of its document and its document's share of the
candidates; the best union score of an adjacent chunk of the same leaf among the candidates; the
share of the question's words it holds weighted by their IDF over the collection, and the same for its
best paragraph alone (a packed chunk holds several short paragraphs: an article that answers holds
the rare words together, a chunk whose words are spread over unrelated articles does not); the log
of its paragraph count and its length in units of ``chunk_size`` (a packed chunk of whole paragraphs
holds more of an article than a scrap does); how well the question names its document by the
document's card (retrieval/doc_cards.py: issuer, title, form, period; 0 where the cards tell the
scope's documents apart in no way, so a collection without cards is ordered as before); whether its
section is titled as one the question names ("the balance sheet": retrieval/named_sections.py)."""
TEXT_FEATURES = frozenset({"u_cover", "u_cover_idf", "u_para_idf", "u_paragraphs", "u_length"})
"""Read from the candidates' text: computed only when a model names one."""


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
    card: np.ndarray
    """Its document's card match with the question over the scope, [0, 1]."""
    named: np.ndarray
    """1 where its leaf is titled as a section the question names (retrieval/named_sections.py), else 0."""


def union_feature_matrix(index: Index, query_tokens: tuple[str, ...] | list[str], sig: UnionSignals,
                         names: tuple[str, ...] = UNION_FEATURES, chunk_size: int = 200) -> np.ndarray:
    """``len(rows) x len(names)``, columns in ``names`` order (``TEXT_FEATURES`` only when named)."""
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
    text_cols = (_text_features(index, rows, query_tokens, chunk_size) if TEXT_FEATURES & set(names)
                 else {name: np.zeros(n) for name in TEXT_FEATURES})
    cols = {
        "u_fused": fused,
        "u_prior": np.asarray(sig.prior, dtype=np.float64),
        "u_dense": np.asarray(sig.dense, dtype=np.float64),
        "u_dense_mm": min_max_normalize(np.asarray(sig.dense, dtype=np.float64)),
        "u_flat": np.asarray(sig.flat, dtype=np.float64),
        "u_bm25_hit": (np.asarray(sig.lexical) > 0).astype(np.float64),
        "u_leaf_best": leaf_best[leaf_of],
        "u_leaf_first": first,
        "u_doc_best": doc_best[doc_of],
        "u_doc_share": doc_share[doc_of],
        "u_neighbour": neighbour,
        "u_card": np.asarray(sig.card, dtype=np.float64),
        "u_named": np.asarray(sig.named, dtype=np.float64),
        **text_cols,
    }
    return np.column_stack([np.asarray(cols[name], dtype=np.float64) for name in names])


def _text_features(index: Index, rows: np.ndarray, query_tokens: tuple[str, ...] | list[str],
                   chunk_size: int) -> dict[str, np.ndarray]:
    """``TEXT_FEATURES`` of the candidates: their paragraphs (blank-line separated, as packing joins
    them), the question's distinct BM25 words weighted by their IDF over the whole index (one count
    per question). A word is held where it occurs in the NFKC-normalised, lower-cased text, as the
    tokeniser normalises it: tokenising every candidate again cost ~60 ms a question (jieba), the
    containment test ~2 ms, and on the statutes it fits as well (docs/evaluation.md)."""
    n = len(rows)
    out = {name: np.zeros(n) for name in TEXT_FEATURES}
    words = list(dict.fromkeys(query_tokens))
    if words:
        total, df = index.search.term_stats(words)
        idf = {w: lucene(total, df.get(w, 0)) for w in words}
        weight = sum(idf.values()) or 1.0
    for i, r in enumerate(rows.tolist()):
        raw = index.chunks[r].text
        text = unicodedata.normalize("NFKC", raw).lower()
        paragraphs = [text[a:b] for a, b in paragraph_spans(text)] or [text]
        out["u_paragraphs"][i] = math.log(len(paragraphs))
        out["u_length"][i] = len(raw) / max(1, chunk_size)
        if not words:
            continue
        held = [{w for w in words if w in p} for p in paragraphs]
        every = set().union(*held)
        out["u_cover"][i] = len(every) / len(words)
        out["u_cover_idf"][i] = sum(idf[w] for w in every) / weight
        out["u_para_idf"][i] = max(sum(idf[w] for w in h) for h in held) / weight
    return out
