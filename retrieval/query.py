"""The question as every step sees it, built once per run: text, tokens, vector.

Steps 1 and 2 and the answer all need the question's tokens (BM25, keyword match, the relevance
floor, the extractive answer) and its vector (dense scores everywhere). Built once in
``run_retrieval`` and passed down (LlamaIndex's ``QueryBundle``), it is tokenised once and
embedded once. Functions that also serve callers with a plain string (tests, tools) accept either:
``query_parts`` computes what a string lacks. The scope (the question's documents) travels beside it
as ``doc_paths``, as it always has, rather than in a second place here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from utils.tokenizer import tokenize


@dataclass(frozen=True)
class Query:
    text: str
    tokens: tuple[str, ...]
    vector: np.ndarray | None
    """None when no embedder is loaded (keyword-only paths)."""

    @classmethod
    def build(cls, text: str, embedder: Any) -> "Query":
        vector = None if embedder is None else np.asarray(embedder.embed_query(text), dtype=np.float32)
        return cls(text, tuple(tokenize(text)), vector)


QueryLike = str | Query


def query_text(query: QueryLike) -> str:
    return query.text if isinstance(query, Query) else query


def query_tokens(query: QueryLike) -> list[str]:
    return list(query.tokens) if isinstance(query, Query) else tokenize(query)


def query_vector(query: QueryLike, embedder: Any) -> np.ndarray:
    if isinstance(query, Query) and query.vector is not None:
        return query.vector
    return embedder.embed_query(query_text(query))


def query_parts(query: QueryLike, embedder: Any) -> tuple[str, list[str], np.ndarray]:
    """(text, tokens, vector), computing only what a plain string does not carry."""
    return query_text(query), query_tokens(query), query_vector(query, embedder)
