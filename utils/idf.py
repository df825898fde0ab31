"""Inverse document frequency: every formula the project uses, once each, by name.

A word found in ``df`` of ``n`` units (chunks, or a scope's paragraphs) weighs:

- ``okapi``: log((n - df + 0.5) / (df + 0.5)), Robertson-Sparck Jones as Okapi BM25 uses it
  (rank_bm25, bm25s "robertson"). Negative for a word in more than half of the units, so every user
  floors it (BM25 scoring, the extractive answer's sentence BM25, the relevance floor's coverage);
- ``lucene``: log(1 + (n - df + 0.5) / (df + 0.5)), never negative (bm25s "lucene"); the union
  ordering's coverage features;
- ``paragraph``: log(1 + n / (1 + df)) over a scope's paragraphs, never negative and gentle on a
  paper's own topic words (the section ranker's ``para_cover``).

Each is written exactly as its scores were computed when the models and floors were fitted: a
different but equal-in-theory expression changes the last bits, and with them tie orders.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np


def okapi(n: float, df: float) -> float:
    return math.log(n - df + 0.5) - math.log(df + 0.5)


def lucene(n: float, df: float) -> float:
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


def paragraph(n: float, df: np.ndarray) -> np.ndarray:
    """Vectorised: ``df`` holds one count per word."""
    return np.log1p(n / (1.0 + df))


IDF: dict[str, Callable] = {"okapi": okapi, "lucene": lucene, "paragraph": paragraph}
"""The formulas by name (bm25s keeps its variants the same way: ``scoring._select_idf_scorer``)."""
