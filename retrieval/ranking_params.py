"""Step 2's tuning parameters: one frozen object, owned by the retrieval stages that read them.

They are not user settings: the defaults are what evaluation chose (docs/evaluation.md), and an
experiment overrides one by its flat name like every tuning parameter (``eval --set joint_top_k=0``,
a TOML file's top level: ``Config.replace`` routes it to ``config.tuning.ranking``; docs/tuning.md). The orderings named by ``document_order`` and
``collection_order`` are looked up in the retriever's ordering table (retrieval/retriever.py): the
product ships the two it uses; evaluation registers its variants (evaluation/variants.py).

This module imports nothing from the project so that config.py can nest it without a cycle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

FusionMode = Literal["weighted", "relative", "rrf"]


@dataclass(frozen=True)
class Fusion:
    """How a chunk's dense and BM25 scores become one (retrieval/scoring.fuse)."""

    mode: FusionMode = "weighted"
    dense_weight: float = 0.5
    bm25_weight: float = 0.5
    rrf_k: int = 60
    depth: int = 40


@dataclass(frozen=True)
class RankingParams:
    fusion: FusionMode = "weighted"
    """weighted: each signal min-max scaled over the scope, then the weighted sum (the spec);
    relative: each signal scaled between its best and its fusion_depth-th best score; rrf:
    reciprocal-rank fusion. Orders the in-leaf candidates, the flat-hybrid arm and the shown
    ``fused_score``; the section ranker and the union ordering have their own models."""
    fusion_depth: int = 40
    """fusion=relative: the score ranked this deep is a signal's zero."""
    dense_weight: float = 0.5
    bm25_weight: float = 0.5
    rrf_k: int = 60
    """The k of every reciprocal-rank fusion (a collection's flat ranking, merged parts)."""
    document_order: str = "section-joint"
    """The ordering of a question within one document (retrieval/retriever.ORDERINGS)."""
    collection_order: str = "union-learned"
    """The ordering of a question across several documents."""
    joint_top_k: int = 20
    """section-joint: the joint model orders the list's first this many chunks, the section model's
    order the rest (0: the joint model orders everything)."""
    union_flat_top_k: int = 20
    """union orderings: the flat ranking's best this-many chunks join the located leaves' candidates
    (0: off)."""
    top_k_per_leaf: int = 5
    """Candidates each located leaf gives an ordering that draws on leaves."""
    context_pool: int = 60
    """Ranked hits the context may be assembled from (step 2's list is the first final_top_k)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "fusion_depth": (1, math.inf), "dense_weight": (0, 1), "bm25_weight": (0, 1), "rrf_k": (1, math.inf),
        "joint_top_k": (0, 100_000), "union_flat_top_k": (0, math.inf), "top_k_per_leaf": (1, math.inf),
        "context_pool": (1, math.inf),
    }
    """Inclusive bounds, checked by config.validate with every other setting."""

    @property
    def fused(self) -> Fusion:
        """The fusion of a chunk's two signals within a scope whose BM25 statistics agree."""
        return Fusion(self.fusion, self.dense_weight, self.bm25_weight, self.rrf_k, self.fusion_depth)

    @property
    def collection(self) -> Fusion:
        """Where chunks of several documents meet: each document's BM25 comes with its own statistics
        and a whole collection's cosines crowd into the top hundredths under min-max scaling, so only
        ranks are compared."""
        return Fusion("rrf", self.dense_weight, self.bm25_weight, self.rrf_k, self.fusion_depth)
