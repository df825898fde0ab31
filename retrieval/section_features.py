"""Per-chunk ranking features, including what only the section tree can say.

A flat retriever sees each chunk alone. The tree knows which chunks belong
together: a leaf, its parent section, its document. A question is usually
answered by a section whose several chunks all match it a little, and a
chunk's own score is noisy; pooling evidence over the section (max and top-3
mean of its chunks, the section heading's similarity, the neighbours in the
same leaf) is the structural signal (DAPR, arXiv 2305.13915: document +
passage fusion; RAPTOR's collapsed tree).

Features come in two groups so a comparison stays fair: ``FLAT_FEATURES``
need nothing but the chunk (a flat arm uses exactly these), ``TREE_FEATURES``
add the section-level ones. Everything is computed for every chunk in scope
in a few vectorised passes (rows of a leaf, of a section and of a document
are contiguous), so scoring the whole scope costs about as much as flat
retrieval does.
"""
from __future__ import annotations

import numpy as np

from config import Config
from indexing.index_store import Index
from indexing.search import Scores
from retrieval.breadth import ParagraphMemo, paragraph_ids
from retrieval.query import Query
from retrieval.scoring import score_params
from utils.similarity import min_max_normalize

FLAT_FEATURES: tuple[str, ...] = ("dense", "dense_mm", "bm25_mm", "bm25_hit")
"""Chunk-only signals: raw cosine, cosine and BM25 min-max normalised over the scope, any BM25 match."""
TREE_FEATURES: tuple[str, ...] = FLAT_FEATURES + (
    "leaf_max", "leaf_top3", "leaf_heading", "neighbour", "section_max", "doc_max", "doc_top3",
    "located")
"""Plus section evidence: the best and top-3 mean fused chunk score of the chunk's leaf, the leaf's
heading+summary cosine, the best adjacent chunk of the same leaf, the best leaf of its parent
section, the best and top-3 mean of its document, and whether step 1 located its leaf."""
PARAGRAPH_FEATURES: tuple[str, ...] = ("para_mean", "para_adjacent", "para_near_top")
"""The chunk's paragraph and its neighbourhood, for a model that orders the chunks inside a section: the
mean fused score of the paragraph's windows (a paragraph matching throughout, not in one window), the best
fused window of the previous or next paragraph of the same leaf, and the share of the leaf's three best
chunks that lie in this paragraph or an adjacent one. A 200-character window sees a fifth of what a
long-chunk retriever's chunk sees; these give it the text around it without changing the chunking."""
COVERAGE_FEATURES: tuple[str, ...] = ("para_cover",)
"""The share of the question's distinct terms (each weighed by its rarity among the scope's
paragraphs) that the chunk's paragraph holds anywhere (retrieval.term_coverage): a window's BM25
sees 200 characters; a paragraph that covers the whole question is visible only here."""
ENTRY_FEATURES: tuple[str, ...] = ("entry", "entry_leaf_max", "entry_leaf_top3", "entry_leaf_heading",
                                   "entry_neighbour", "entry_section_max", "entry_located")
"""Section evidence counted once more on the section's entry: ``entry`` is 1 for each leaf's best chunk
by fused score, and ``entry_<f>`` is the section feature ``f`` on that chunk, 0 on every other. One
linear model over these and all the other features (``section-joint``) then decides by
its fit how much a matching section lifts its entry and how much all of its chunks, on the list it
orders as it is, instead of two models fitted apart and blended on a standardised scale."""
ALL_FEATURES: tuple[str, ...] = TREE_FEATURES + PARAGRAPH_FEATURES + COVERAGE_FEATURES + ENTRY_FEATURES
"""Every feature a weights file may name."""


def _group_max(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    out = np.full(n_groups, -np.inf, dtype=np.float64)
    np.maximum.at(out, groups, values)
    return out


def _group_top_mean(values: np.ndarray, groups: np.ndarray, n_groups: int, k: int) -> np.ndarray:
    """Mean of each group's k best values (fewer when the group is smaller)."""
    order = np.lexsort((-values, groups))
    g = groups[order]
    first = np.searchsorted(g, g, side="left")
    keep = (np.arange(len(g)) - first) < k
    sums = np.bincount(g[keep], weights=values[order][keep], minlength=n_groups)
    counts = np.bincount(g[keep], minlength=n_groups)
    return np.divide(sums, counts, out=np.zeros(n_groups), where=counts > 0)


def chunk_features(index: Index, question: Query, scores: Scores, config: Config,
                   located: set[str] | None = None, names: tuple[str, ...] = TREE_FEATURES
                   ) -> np.ndarray:
    """Feature matrix (len(scores.rows) x len(names)) for the scope's chunks, in ``scores.rows`` order."""
    rows = scores.rows
    cols: dict[str, np.ndarray] = {}
    dense_mm = min_max_normalize(scores.dense)
    bm25_mm = min_max_normalize(scores.lexical)
    cols["dense"] = scores.dense.astype(np.float64)
    cols["dense_mm"] = dense_mm
    cols["bm25_mm"] = bm25_mm
    cols["bm25_hit"] = (scores.lexical > 0).astype(np.float64)
    if any(n not in cols for n in names):
        lay = index.layout
        fused = config.tuning.ranking.dense_weight * dense_mm + config.tuning.ranking.bm25_weight * bm25_mm
        # compact group ids over the scope only (scoped queries touch a few hundred rows)
        leaf_ids, leaf_of = np.unique(lay.row_leaf[rows], return_inverse=True)
        n_leaf = len(leaf_ids)
        leaf_max = _group_max(fused, leaf_of, n_leaf)
        cols["leaf_max"] = leaf_max[leaf_of]
        cols["leaf_top3"] = _group_top_mean(fused, leaf_of, n_leaf, 3)[leaf_of]
        leaf_dense = index.search.leaf_dense(question, leaf_ids, score_params(config))
        cols["leaf_heading"] = np.clip(leaf_dense, 0.0, 1.0).astype(np.float64)[leaf_of]
        # neighbours: the adjacent rows when they belong to the same leaf
        prev = np.concatenate(([-np.inf], fused[:-1]))
        nxt = np.concatenate((fused[1:], [-np.inf]))
        same_prev = np.concatenate(([False], leaf_of[1:] == leaf_of[:-1]))
        same_next = np.concatenate((leaf_of[:-1] == leaf_of[1:], [False]))
        neigh = np.maximum(np.where(same_prev, prev, -np.inf), np.where(same_next, nxt, -np.inf))
        cols["neighbour"] = np.where(np.isfinite(neigh), neigh, 0.0)
        sec_ids, sec_of_leaf = np.unique(lay.leaf_section[leaf_ids], return_inverse=True)
        sec_max = _group_max(leaf_max, sec_of_leaf, len(sec_ids))
        cols["section_max"] = sec_max[sec_of_leaf][leaf_of]
        doc_ids, doc_of = np.unique(lay.row_doc[rows], return_inverse=True)
        cols["doc_max"] = _group_max(fused, doc_of, len(doc_ids))[doc_of]
        cols["doc_top3"] = _group_top_mean(fused, doc_of, len(doc_ids), 3)[doc_of]
        if any(n in PARAGRAPH_FEATURES or n in COVERAGE_FEATURES for n in names):
            _prefetch(index, rows, leaf_ids)
            memo: ParagraphMemo = {}
            keys: dict[tuple[str, int], int] = {}
            pid = paragraph_ids(index, rows, memo, keys)  # numbered in row order: adjacent ones differ by one
            if any(n in PARAGRAPH_FEATURES for n in names):
                cols.update(_paragraph_features(rows, pid, fused, leaf_of, leaf_ids))
            if any(n in COVERAGE_FEATURES for n in names):
                from retrieval.term_coverage import coverage_features

                cols.update(coverage_features(index, rows, question.tokens, pid, memo, keys))
        if located:
            loc_leaf = np.array([index.leaves[i].node_id in located for i in leaf_ids], dtype=np.float64)
            cols["located"] = loc_leaf[leaf_of]
        else:
            cols["located"] = np.zeros(len(rows))
        if any(n in ENTRY_FEATURES for n in names):
            by_fused = np.lexsort((rows, -fused))
            _, first = np.unique(leaf_of[by_fused], return_index=True)
            entry = np.zeros(len(rows))
            entry[by_fused[first]] = 1.0
            cols["entry"] = entry
            for name in ENTRY_FEATURES[1:]:
                cols[name] = cols[name[len("entry_"):]] * entry
    return np.column_stack([cols[n] for n in names]) if len(rows) else np.zeros((0, len(names)))


def _prefetch(index: Index, rows: np.ndarray, leaf_ids: np.ndarray) -> None:
    """Reading which paragraph a row lies in touches every row's chunk record and its leaf's text: cheap
    within a paper (read together first: on an engine one statement each instead of one per leaf), a
    few milliseconds per thousand rows over a collection, hence done only when a model names them."""
    prefetch_chunks = getattr(index, "prefetch_chunks", None)
    if prefetch_chunks is not None:
        prefetch_chunks(rows.tolist())
    prefetch_contents = getattr(index, "prefetch_contents", None)
    if prefetch_contents is not None:
        prefetch_contents(index.leaves[int(i)].node_id for i in leaf_ids)


def _paragraph_features(rows: np.ndarray, pid: np.ndarray, fused: np.ndarray, leaf_of: np.ndarray,
                        leaf_ids: np.ndarray) -> dict[str, np.ndarray]:
    """``PARAGRAPH_FEATURES`` for the scope's rows (ascending, so a leaf's paragraphs are consecutive),
    ``pid`` their paragraph numbers (``breadth.paragraph_ids``)."""
    n_leaf = len(leaf_ids)
    n_par = int(pid.max()) + 1
    par_leaf = np.zeros(n_par, dtype=np.int64)
    par_leaf[pid] = leaf_of
    par_max = _group_max(fused, pid, n_par)
    par_mean = np.bincount(pid, weights=fused, minlength=n_par) / np.maximum(np.bincount(pid, minlength=n_par), 1)
    prev_ok = np.r_[False, par_leaf[1:] == par_leaf[:-1]]
    next_ok = np.r_[par_leaf[:-1] == par_leaf[1:], False]
    adj = np.maximum(np.where(prev_ok, np.r_[0.0, par_max[:-1]], 0.0),
                     np.where(next_ok, np.r_[par_max[1:], 0.0], 0.0))
    # the leaf's three best rows, counted on their paragraph and its two neighbours of the same leaf
    order = np.lexsort((rows, -fused, leaf_of))
    g = leaf_of[order]
    top = order[(np.arange(len(g)) - np.searchsorted(g, g, side="left")) < 3]
    near = np.zeros(n_par)
    np.add.at(near, pid[top], 1.0)
    near_prev = np.where(prev_ok, np.r_[0.0, near[:-1]], 0.0)
    near_next = np.where(next_ok, np.r_[near[1:], 0.0], 0.0)
    leaf_n = np.minimum(np.bincount(leaf_of, minlength=n_leaf), 3)
    share = (near + near_prev + near_next)[pid] / leaf_n[leaf_of]
    return {"para_mean": par_mean[pid], "para_adjacent": adj[pid], "para_near_top": share}
