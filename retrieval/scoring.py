"""Chunk-level dense and lexical scores of a scope, through the index's store, and their fusion.

Shared by the in-leaf candidates, the no-LLM locator, the section ranker and the flat ranking so
all of them score a chunk identically. Scores of a scope are kept on the question (``Query.memo``)
under a key naming everything else they depend on: the locator and the section ranker score the
same scope one after the other, and a whole-collection scope is then paid once.
"""
from __future__ import annotations

import numpy as np

from config import Config, IdfScope
from indexing.index_store import Index
from indexing.search import Scope, ScoreParams, Scores
from retrieval.query import Query
from retrieval.ranking_params import Fusion
from utils.similarity import min_max_normalize, rrf_scores


def score_params(config: Config) -> ScoreParams:
    bm25, store = config.tuning.bm25, config.tuning.store
    return ScoreParams(k1=bm25.bm25_k1, b=bm25.bm25_b, epsilon=bm25.bm25_epsilon,
                       exact_rows=store.store_exact_rows, candidates=store.store_candidates,
                       fulltext_max_share=store.store_fulltext_max_share, ann=config.ann,
                       ann_candidates=store.ann_candidates, ann_candidates_growth=store.ann_candidates_growth,
                       ann_probe=store.ann_probe,
                       mapped_mb=config.query_mapped_mb, ann_kept_mb=config.query_ann_kept_mb)


def documents_scope(doc_paths: set[str] | None) -> Scope:
    """The question's documents (None: the whole collection)."""
    return Scope.of_documents(doc_paths)


def leaf_scope(index: Index, node_id: str) -> Scope | None:
    """The scope of one leaf's chunks; None for a node that is not a leaf with chunks."""
    row = index.tree.row_of_id(node_id)
    leaf = -1 if row is None else int(index.tree.leaf_of_row[row])
    if leaf < 0 or index.leaf_ptr[leaf + 1] == index.leaf_ptr[leaf]:
        return None
    return Scope.of_leaf(leaf)


def score_scope(index: Index, query: Query, scope: Scope, config: Config, idf: IdfScope | None = None) -> Scores:
    """Dense + lexical scores of ``scope`` for ``query`` (``idf``: BM25 statistics scope, default the
    config's), computed once per question, scope, statistics scope and store settings."""
    idf_scope: IdfScope = idf or config.tuning.bm25.bm25_idf_scope
    params = score_params(config)
    return query.memo.get_or_make(("scores", scope, idf_scope, params),
                                  lambda: index.search.score(query, scope, idf_scope, params))


def flat_scores(index: Index, query: Query, config: Config, doc_paths: set[str] | None = None,
                idf_scope: IdfScope = "corpus") -> Scores:
    """Dense + lexical for every chunk of the question's documents (the flat ranking, the locator,
    the section ranker), computed once per question (``score_scope``)."""
    return score_scope(index, query, documents_scope(doc_paths), config, idf_scope)


def fuse(dense: np.ndarray, lexical: np.ndarray, fusion: Fusion) -> np.ndarray:
    """Weighted min-max fusion (spec), the same scaled over each signal's top candidates, or
    reciprocal-rank fusion."""
    if len(dense) == 0:
        return np.zeros(0, dtype=np.float32)
    if fusion.mode == "relative":
        return (fusion.dense_weight * top_scaled(dense, fusion.depth)
                + fusion.bm25_weight * top_scaled(lexical, fusion.depth)).astype(np.float32)
    if fusion.mode == "rrf":
        order_d = np.argsort(-dense, kind="stable")
        order_b = np.argsort(-lexical, kind="stable")
        # a chunk with zero lexical score has no keyword evidence: it gets no lexical rank
        order_b = order_b[lexical[order_b] > 0]
        return rrf_scores([order_d, order_b], n=len(dense), k=fusion.rrf_k)
    return (fusion.dense_weight * min_max_normalize(dense)
            + fusion.bm25_weight * min_max_normalize(lexical)).astype(np.float32)


def unit_scale(fused: np.ndarray, fusion: Fusion) -> np.ndarray:
    """``fuse``'s scores on [0, 1] (a rank fusion: a chunk first on both signals scores 1), so a
    weight on them means the same under every fusion."""
    if fusion.mode == "rrf":
        fused = fused * ((fusion.rrf_k + 1) / 2.0)
    return np.asarray(fused, dtype=np.float64)


def top_scaled(scores: np.ndarray, depth: int) -> np.ndarray:
    """``scores`` scaled to [0, 1] between the best and the ``depth``-th best (lower ones: 0).

    What LlamaIndex's ``relative_score`` fusion does to each retriever's top-k list, over a whole
    scope: a chunk below a signal's top candidates gets nothing from it. A scope of at most
    ``depth`` scores is scaled over all of them, as ``weighted`` does; non-finite scores get 0.
    """
    arr = np.asarray(scores, dtype=np.float64).reshape(-1)
    finite = np.isfinite(arr)
    if int(finite.sum()) <= depth:
        return min_max_normalize(arr)
    vals = arr[finite]
    floor, best = float(np.partition(vals, len(vals) - depth)[len(vals) - depth]), float(vals.max())
    out = np.zeros(arr.shape, dtype=np.float64)
    if best - floor <= 1e-12 * max(1.0, abs(best)):  # the top candidates tie: they all match fully
        out[finite] = np.where((vals >= floor) & (best > 0), 1.0, 0.0)
        return out
    out[finite] = np.clip((vals - floor) / (best - floor), 0.0, 1.0)
    return out
