"""Chunk-level dense and BM25 scores over row ranges of the index.

Shared by the in-node retriever, the no-LLM locator and the flat safety net so
all three score a chunk identically.
"""
from __future__ import annotations

import numpy as np

from config import Config
from indexing.index_store import Index
from indexing.search import ScoreParams, RangeScores, empty_scores
from utils.similarity import min_max_normalize, rrf_scores


def idf_range(index: Index, start: int, end: int, scope: str) -> tuple[int, int]:
    """Rows over which BM25 statistics are computed for the leaf rows [start, end)."""
    if scope == "leaf" or end <= start:
        return start, end
    if scope == "document":
        doc = index.chunks[start].doc_path
        return index.doc_rows[doc]
    return 0, len(index.chunks)


def score_params(config: Config) -> ScoreParams:
    return ScoreParams(k1=config.bm25_k1, b=config.bm25_b, epsilon=config.bm25_epsilon,
                       exact_rows=config.store_exact_rows, candidates=config.store_candidates, ann=config.ann,
                       ann_candidates=config.ann_candidates, ann_probe=config.ann_probe)


def score_range(index: Index, qvec: np.ndarray | None, tokens: list[str], start: int, end: int,
                config: Config, idf_scope: str | None = None) -> RangeScores:
    """Dense + BM25 of rows [start, end) from the index's store (a store may return candidates only)."""
    if end <= start:
        return empty_scores()
    idf = idf_range(index, start, end, idf_scope or config.bm25_idf_scope)
    return index.search.score_range(qvec, tokens, start, end, idf, score_params(config))


def concat_scores(parts: list[RangeScores]) -> RangeScores:
    if not parts:
        return empty_scores()
    return RangeScores(np.concatenate([p.rows for p in parts]),
                       np.concatenate([p.dense for p in parts]),
                       np.concatenate([p.bm25 for p in parts]))


def fuse(dense: np.ndarray, bm25: np.ndarray, config: Config) -> np.ndarray:
    """Weighted min-max fusion (spec) or reciprocal-rank fusion."""
    if len(dense) == 0:
        return np.zeros(0, dtype=np.float32)
    if config.fusion == "rrf":
        order_d = np.argsort(-dense, kind="stable")
        order_b = np.argsort(-bm25, kind="stable")
        # a chunk with zero BM25 has no keyword evidence: it gets no BM25 rank
        order_b = order_b[bm25[order_b] > 0]
        return rrf_scores([order_d, order_b], n=len(dense), k=config.rrf_k)
    return (config.dense_weight * min_max_normalize(dense)
            + config.bm25_weight * min_max_normalize(bm25)).astype(np.float32)
