"""The tuning parameters of BM25 scoring and of the stores' search (``search.ScoreParams`` is built
from them per query). Set by their names like any setting (a TOML file, ``eval --set``); config.py
composes them, so this module imports nothing of the project."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

IdfScope = Literal["leaf", "document", "corpus"]


@dataclass(frozen=True)
class Bm25Params:
    """Okapi BM25's constants and the chunks its IDF is counted over."""

    bm25_k1: float = 1.5
    """Term-frequency saturation (the usual Okapi value); also fixes the index's stored BM25 weights."""
    bm25_b: float = 0.75
    """Length normalisation (the usual Okapi value); also fixes the index's stored BM25 weights."""
    bm25_epsilon: float = 0.25
    """A negative IDF (a word in more than half the chunks) is floored to this share of the mean IDF
    (rank_bm25's rule)."""
    bm25_idf_scope: IdfScope = "document"
    """IDF over the chunk's whole document: a leaf of three chunks has no usable IDF (chosen by
    evaluation)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "bm25_k1": (0, math.inf), "bm25_b": (0, 1), "bm25_epsilon": (0, math.inf)}


@dataclass(frozen=True)
class StoreTuning:
    """How a database engine and the file store's ANN find a large scope's candidates (docs/seekdb.md,
    docs/scale.md)."""

    store_exact_rows: int = 4096
    """An engine scores a scope of at most this many chunks exactly; a larger one from its kNN and
    full-text candidates."""
    store_candidates: int = 500
    """Chunks each of an engine's kNN and full-text search proposes for a larger scope: fewer rows read
    is what makes a fresh engine's question cheaper, and 500 held parity with 1,000 (docs/seekdb.md)."""
    store_fulltext_max_share: float = 0.1
    """An engine's full-text candidates are searched without the question's words found in more than
    this share of the chunks (near-zero IDF, a scan of most of the collection; docs/seekdb.md); 1:
    every word."""
    ann_min_rows: int = field(default=250_000, metadata={"build": True})
    """ann=auto: vector sets from this many rows get an ANN at build time; below it an exact scan is
    cheap."""
    ann_candidates: int = 1000
    """Rows the ANN proposes per whole-collection question (each re-scored on its float vector), and the
    BM25 best rows added beside them."""
    ann_candidates_growth: float = 1 / 3
    """The ANN proposes ann_candidates x (its lists / 4096) ** this: more lists spread the exact top
    over more of them (docs/scale.md); 0: a constant count."""
    ann_probe: float = 0.3
    """Share of the IVF lists a question scans; hash embeddings cluster weakly, so less loses recall
    (docs/scale.md)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "store_exact_rows": (1, math.inf), "store_candidates": (1, math.inf),
        "store_fulltext_max_share": (0, 1), "ann_min_rows": (0, math.inf), "ann_candidates": (1, math.inf),
        "ann_candidates_growth": (0, 1), "ann_probe": (0.0001, 1)}
