"""The words of every leaf's heading path and summary, as postings built once at index time.

Why: the no-LLM keyword locator scores each leaf by the IDF-weighted overlap of
the question's words with its heading path and summary. Tokenising every
leaf's text per index load cost seconds at a thousand documents (jieba for
Chinese costs more); stored as postings (term -> leaves containing it, a BM25
index over each leaf's *set* of words) a query touches only the leaves that
share one of its words.
"""
from __future__ import annotations

from typing import Sequence

from indexing.bm25_builder import BM25Builder, BM25Index
from tree_builder.tree import TreeNode
from utils.tokenizer import tokenize

PREFIX = "leafterms_"


def leaf_words(leaf: TreeNode) -> list[str]:
    """The distinct words the keyword locator matches for one leaf."""
    return sorted(set(tokenize(f"{leaf.heading_path} {leaf.summary}")))


def build_leaf_terms(leaves: Sequence[TreeNode]) -> BM25Index:
    builder = BM25Builder()
    for leaf in leaves:
        builder.add(leaf_words(leaf))
    return builder.finish()
