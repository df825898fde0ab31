"""Chunk-level dense and BM25 scores over row ranges of the index.

Shared by the in-node retriever, the no-LLM locator and the flat safety net so
all three score a chunk identically.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from config import Config
from indexing.index_store import Index
from utils.errors import IndexFormatError
from utils.similarity import matvec, min_max_normalize, rrf_scores


@dataclass
class RangeScores:
    rows: np.ndarray
    """Index rows scored (int64)."""
    dense: np.ndarray
    bm25: np.ndarray


def dense_scores(vectors: np.ndarray, qvec: np.ndarray, name: str = "embeddings.npy") -> np.ndarray:
    """Dot products of stored vectors with the query; a non-finite one means a corrupt index.

    A load does not read every vector (they are memory-mapped), so the check is
    made where vectors are used: NaN would otherwise silently reorder rankings.
    """
    scores = matvec(vectors, qvec)
    if not np.isfinite(scores).all():
        raise IndexFormatError(f"{name} holds NaN or infinite values; rebuild the index")
    return scores


def idf_range(index: Index, start: int, end: int, scope: str) -> tuple[int, int]:
    """Rows over which BM25 statistics are computed for the leaf rows [start, end)."""
    if scope == "leaf" or end <= start:
        return start, end
    if scope == "document":
        doc = index.chunks[start].doc_path
        return index.doc_rows[doc]
    return 0, len(index.chunks)


def score_range(index: Index, qvec: np.ndarray, tokens: list[str], start: int, end: int,
                config: Config, idf_scope: str | None = None) -> RangeScores:
    rows = np.arange(start, end, dtype=np.int64)
    if end <= start:
        empty = np.zeros(0, dtype=np.float32)
        return RangeScores(rows, empty, empty)
    dense = dense_scores(index.embeddings[start:end], qvec)
    i0, i1 = idf_range(index, start, end, idf_scope or config.bm25_idf_scope)
    bm25 = index.bm25.score_range(tokens, start, end, idf_start=i0, idf_end=i1,
                                  k1=config.bm25_k1, b=config.bm25_b, epsilon=config.bm25_epsilon)
    return RangeScores(rows, dense, np.asarray(bm25, dtype=np.float32))


def concat_scores(parts: list[RangeScores]) -> RangeScores:
    if not parts:
        z = np.zeros(0, dtype=np.float32)
        return RangeScores(np.zeros(0, dtype=np.int64), z, z)
    return RangeScores(np.concatenate([p.rows for p in parts]),
                       np.concatenate([p.dense for p in parts]),
                       np.concatenate([p.bm25 for p in parts]))


def fuse(dense: np.ndarray, bm25: np.ndarray, config: Config) -> np.ndarray:
    """Weighted min-max fusion (spec) or reciprocal-rank fusion (seed 004)."""
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
