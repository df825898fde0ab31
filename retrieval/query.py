"""The question as every step sees it, built once per run: text, tokens, vector, and its caches.

Steps 1 and 2 and the answer all need the question's tokens (BM25, keyword match, the relevance
floor, the extractive answer) and its vector (dense scores everywhere). Built once at the edge
(``pipeline.run_retrieval``, the evaluation arms, a tool) and passed down (LlamaIndex's
``QueryBundle``), it is tokenised once and embedded once; nothing inside retrieval takes a plain
string. A locator's sub-query is a question of its own (``Query.build`` again, with its own caches).

``memo`` holds what is computed for this question and read again later in its run (the scores of
a scope, the file store's ANN candidates, the ranker weights): on the question, never on the
shared index, so a server answering several questions at once cannot mix them up. The scope (the
question's documents) travels beside it as ``doc_paths``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from indexing.search import QueryMemo
from retrieval.named_sections import searched_text
from utils.tokenizer import tokenize


class QueryEmbedder(Protocol):
    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass(frozen=True)
class Query:
    text: str
    tokens: tuple[str, ...]
    vector: np.ndarray | None
    """None when no embedder is loaded (keyword-only paths)."""
    memo: QueryMemo = field(default_factory=QueryMemo, init=False, repr=False, compare=False)
    """This question's caches (see the module docstring); a new one for every Query, ``replace`` included."""

    @classmethod
    def build(cls, text: str, embedder: QueryEmbedder | None) -> "Query":
        """Tokens and vector are of what retrieval searches for the text (``named_sections.searched_text``:
        the titles of the financial statements it names beside it); ``text`` stays as asked."""
        searched = searched_text(text)
        vector = None if embedder is None else np.asarray(embedder.embed_query(searched), dtype=np.float32)
        return cls(text, tuple(tokenize(searched)), vector)

    @property
    def asked_tokens(self) -> tuple[str, ...]:
        """The question's own words. ``tokens`` are what retrieval searches (with the titles of the
        statements the question names); what names a document (its card), whether the evidence holds
        the question's words, and which sentence or row answers are judged on the words asked."""
        return self.memo.get_or_make(
            "asked_tokens", lambda: self.tokens if searched_text(self.text) == self.text else tuple(tokenize(self.text)))

    @property
    def dense_vector(self) -> np.ndarray:
        """The vector, for steps that cannot run without one (a Query built without an embedder is a
        caller's mistake there, not a reason to embed again)."""
        if self.vector is None:
            raise ValueError(f"the question {self.text[:60]!r} was built without an embedder")
        return self.vector
