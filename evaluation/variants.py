"""Step 2 variants that evaluation measures and the product does not ship.

Each is an ordering (retrieval/ordering.py) under a name that ``--set document_order=NAME``
or ``collection_order=NAME`` selects; ``VARIANTS`` is the product's ``ORDERINGS`` plus these,
and every tree arm runs through the product's retriever with it. A name may carry modifiers:

- ``+net``: an ordering that draws on leaves also takes the in-document flat ranking's best
  ``NET_TOP_K`` (the ``+net`` arms); an ordering that scores the whole scope has nothing to add;
- ``+soft``: a section ordering scores each paragraph's best window by the log-mean-exp of its
  windows' scores (evaluation/paragraph_pooling.py).

The flat arms' orderings (``flat_ordering``) live here too: they rank the scoped chunks by one
signal, a fusion or the flat learner, with nothing located.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from config import Config
from evaluation.paragraph_pooling import pooled_scores
from indexing.index_store import Index
from retrieval.candidates import dedupe_best, flat_lead, flat_top, located_candidates, rank_scored
from retrieval.ordering import Ask, Ordering, SectionOrdering, UnionOrdering
from retrieval.query import Query, QueryEmbedder
from retrieval.rankers import SectionRanker
from retrieval.retriever import ORDERINGS
from retrieval.scoring import documents_scope, flat_scores, score_scope
from retrieval.types import RetrievedChunk
from retrieval.union_features import UnionSignals
from utils.errors import InputError

NET_TOP_K = 5
"""The in-document flat ranking's chunks a ``+net`` ordering adds."""
LEAF_PRIOR_WEIGHT = 0.4
"""union-blend: the locator's belief in a candidate's leaf against its rank-fused score."""
SOFT_TEMPERATURE = 0.5
"""+soft: in the ranker's standardised score units; towards 0 it is the best window."""


@dataclass(frozen=True)
class FusedOrdering:
    """The spec's strict in-leaf retrieval: each located leaf's top chunks by their in-leaf fused
    score, merged (``net_top_k``: with the flat ranking's best)."""

    net_top_k: int = 0

    def order(self, index: Index, embedder: QueryEmbedder, config: Config, ask: Ask) -> list[RetrievedChunk]:
        out = located_candidates(index, embedder, ask.query, ask.located, config, ask.stages)
        if self.net_top_k > 0:
            out.extend(flat_top(index, ask.query, config, ask.doc_paths, self.net_top_k, ask.stages))
        return dedupe_best(out)


@dataclass(frozen=True)
class BlendRanker:
    """A union candidate's rank-fused score blended with the locator's belief in its leaf."""

    weight: float = LEAF_PRIOR_WEIGHT
    flat_standing: bool = False

    def score(self, index: Index, query: Query, sig: UnionSignals, config: Config) -> np.ndarray:
        return (1 - self.weight) * sig.fused + self.weight * sig.prior


def _soft(index: Index, rows: np.ndarray, scores: np.ndarray, n: int) -> np.ndarray:
    return pooled_scores(index, rows, scores, n, SOFT_TEMPERATURE)


_SECTION = {
    "section-once": SectionRanker(joint=None),
    "section-once-flat": SectionRanker(chunk_model="flat", joint=None),
    "section-every": SectionRanker(chunk_model=None, joint=None),
    "section-joint-flat": SectionRanker(chunk_model="flat"),
    "section-joint": SectionRanker(),
}


def _variants() -> dict[str, Ordering]:
    out: dict[str, Ordering] = dict(ORDERINGS)
    for name, ranker in _SECTION.items():
        out[name] = SectionOrdering(ranker)
        out[name + "+soft"] = SectionOrdering(ranker, rescore=_soft)
    out["fused"] = FusedOrdering()
    out["union-blend"] = UnionOrdering(BlendRanker())
    net = {"fused": FusedOrdering(NET_TOP_K), "union-blend": UnionOrdering(BlendRanker(), NET_TOP_K),
           "union-learned": UnionOrdering(net_top_k=NET_TOP_K)}
    out.update({name + "+net": net.get(name, ordering) for name, ordering in list(out.items())})
    return out


VARIANTS: Mapping[str, Ordering] = _variants()
"""Every ordering eval can measure, by name (the product's included)."""


def with_net(name: str, net: bool = True) -> str:
    """An ordering's name with (``net``) or without its ``+net`` modifier; an unknown name is an error
    before any question is asked."""
    base = name.removesuffix("+net")
    out = base + "+net" if net else base
    if out not in VARIANTS:
        raise InputError(f"unknown ordering {name!r} (choose from: {', '.join(VARIANTS)})")
    return out


@dataclass(frozen=True)
class FlatOrdering:
    """A flat arm: the scoped chunks ranked by one signal (``bm25``, ``dense``), by the fusion of both
    (``hybrid``; ``hybrid-card``: with the documents the question names by their cards first, and the
    sections it names first in them: ``candidates.flat_lead``) or by
    the flat learner (``learned``), ``top`` of them; nothing is located."""

    method: str
    top: int
    learned: SectionOrdering = field(default_factory=lambda: SectionOrdering(
        SectionRanker("flat", chunk_model=None, joint=None), tree=False))

    def order(self, index: Index, embedder: QueryEmbedder, config: Config, ask: Ask) -> list[RetrievedChunk]:
        doc_paths, question, top = ask.doc_paths, ask.query, self.top
        if doc_paths is not None and not doc_paths & index.doc_rows.keys():
            return []
        scope = documents_scope(doc_paths)
        if self.method == "bm25":
            # corpus IDF, as the flat ranking uses for the hybrid arms and the net
            scores = score_scope(index, question, scope, config, "corpus")
            return _rank_single(index, scores.rows, scores.lexical, top, "bm25_score", question.text, True)
        if self.method == "dense":
            words_off = Query(question.text, (), question.vector)  # dense alone: no lexical work
            scores = score_scope(index, words_off, scope, config)
            return _rank_single(index, scores.rows, scores.dense, top, "dense_score", question.text, False)
        if self.method == "learned":
            return self.learned.order(index, embedder, config.replace(final_top_k=top), ask)[:top]
        scores = flat_scores(index, question, config, doc_paths)
        lead = flat_lead(index, question, scores.rows, doc_paths) if self.method == "hybrid-card" else None
        return rank_scored(index, scores, top, config.tuning.ranking.fused, question.text, "flat", lead=lead)


def _rank_single(index: Index, rows: np.ndarray, scores: np.ndarray, top: int, key: str,
                 query: str, positive_only: bool) -> list[RetrievedChunk]:
    """Rank by one score, ties by row (document order); BM25 zero = no evidence, not ranked."""
    if positive_only:
        keep = scores > 0
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:top]
    return [RetrievedChunk(chunk=index.chunks[int(rows[i])], score=float(scores[i]),
                           retrieval_detail={key: round(float(scores[i]), 4)}, row=int(rows[i]), sub_query=query,
                           source="flat") for i in order]

