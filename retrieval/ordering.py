"""Step 2's orderings: a located question -> its ranked candidates, before rerank.

An ordering is one object with ``order(index, embedder, config, ask)``: it chooses its candidates
(retrieval/candidates.py), scores them with a ranker (retrieval/rankers.py) and returns them best
first. The product ships two, chosen by the question's scope (retrieval/retriever.py):

- ``SectionOrdering``: within one document every chunk in scope is scored by itself and by its
  leaf's, section's and document's evidence; the located leaves are a prior, not a cut, so a chunk
  of a leaf step 1 missed can still win on its own and its section's evidence.
- ``UnionOrdering``: across a collection the located leaves' best chunks and the collection's flat
  ranking's best are ordered on one scale by the learned union model.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Protocol, Sequence

import numpy as np

from config import Config
from indexing.index_store import Index
from retrieval.candidates import StageHits, named_lead, record_single_signals, scope_documents, union_candidates
from retrieval.query import Query, QueryEmbedder
from retrieval.rankers import SectionRanker, UnionRanker, UnionScorer, union_signals
from retrieval.scoring import flat_scores, fuse
from retrieval.types import LocatedNode, RetrievedChunk

Rescore = Callable[[Index, np.ndarray, np.ndarray, int], np.ndarray]
"""(index, scope rows, scores, how many are kept) -> scores: a variant's last word on a scope's
scores before the cut (evaluation/variants.py)."""


@dataclass(frozen=True)
class Ask:
    """What an ordering is asked: the question, what step 1 found, and the question's documents."""

    query: Query
    located: list[LocatedNode]
    doc_paths: set[str] | None = None
    beliefs: Sequence[LocatedNode] = ()
    """The locator's ranked candidate leaves with their scores (beyond the located ones): the prior
    of a union candidate outside the located leaves."""
    stages: StageHits | None = None
    """Filled with every stage's candidates for the audit record (the whole question only)."""


class Ordering(Protocol):
    def order(self, index: Index, embedder: QueryEmbedder, config: Config, ask: Ask) -> list[RetrievedChunk]:
        """The question's candidates, best first (at most ``keep(config)`` of a scored scope)."""
        ...


def keep(config: Config) -> int:
    """Hits a ranked list holds: step 2's top k and the context's pool."""
    return max(config.final_top_k, config.tuning.ranking.context_pool)


@dataclass(frozen=True)
class SectionOrdering:
    """Every chunk in scope by the section ranker. ``tree`` False: the ranker's score alone, shown as
    ``learned_score`` (a flat arm's); ``rescore``: a variant's change to the scores before the cut."""

    ranker: SectionRanker = field(default_factory=SectionRanker)
    tree: bool = True
    rescore: Rescore | None = None

    def order(self, index: Index, embedder: QueryEmbedder, config: Config, ask: Ask) -> list[RetrievedChunk]:
        question, located = ask.query, ask.located
        scores = flat_scores(index, question, config, ask.doc_paths)
        if len(scores.rows) == 0:
            return []
        loc_ids = {n.node_id for n in located}
        scored = self.ranker.score(index, question, scores, loc_ids, config, scope_documents(index, ask.doc_paths))
        s, X, shown = scored.scores, scored.X, scored.shown
        n = keep(config)
        if self.rescore is not None:
            s = self.rescore(index, scores.rows, s, n)
        if self.tree:  # the section the question names first, as a card-led flat ranking puts it
            s = s + named_lead(index, question, scores.rows, ask.doc_paths) * (float(np.ptp(s)) + 1.0)
        order = np.lexsort((scores.rows, -s))[:n]
        fused = fuse(scores.dense, scores.lexical, config.tuning.ranking.fused)
        text = question.text
        subs = {n.node_id: n.sub_query for n in located}
        out: list[RetrievedChunk] = []
        for i in order:
            rc = RetrievedChunk.at(index, int(scores.rows[i]), scores.dense[i], scores.lexical[i], fused[i], text,
                                   "flat")
            detail = dict(rc.retrieval_detail)
            if self.tree:
                leaf = rc.chunk.source_node_id
                for feature, value in zip(shown.names, X[i]):
                    if feature not in ("dense", "bm25_hit"):
                        detail.setdefault(feature, round(float(value), 4))
                rc = replace(rc, source="tree" if leaf in loc_ids else "net", sub_query=subs.get(leaf, text))
            detail["section_score" if self.tree else "learned_score"] = round(float(s[i]), 4)
            out.append(replace(rc, score=float(s[i]), retrieval_detail=detail))
        if ask.stages is not None:
            record_single_signals(index, scores, fused, config.final_top_k, text, "flat", ask.stages)
            ask.stages.fusion.extend(out)
        return out


@dataclass(frozen=True)
class UnionOrdering:
    """The located leaves' best chunks and the collection's flat ranking's best, on one scale.

    In-leaf fused scores are min-max normalised per leaf, so every leaf's best chunk scores ~1.0 and
    they cannot be compared across leaves: every candidate is re-scored against the question with
    document-level BM25 statistics and scored by ``ranker`` over its signals. ``net_top_k``: the in-document flat
    ranking's best also join (an evaluation variant)."""

    ranker: UnionScorer = field(default_factory=UnionRanker)
    net_top_k: int = 0

    def order(self, index: Index, embedder: QueryEmbedder, config: Config, ask: Ask) -> list[RetrievedChunk]:
        cands, believed = union_candidates(index, embedder, ask.query, ask.located, config, ask.doc_paths,
                                           ask.stages, ask.beliefs, self.net_top_k)
        if not cands:
            return cands
        sig = union_signals(index, ask.query, cands, believed, config, ask.doc_paths, self.ranker.flat_standing)
        scores = self.ranker.score(index, ask.query, sig, config)
        return ordered_union(cands, scores, sig.prior)


def ordered_union(cands: list[RetrievedChunk], scores: np.ndarray, prior: np.ndarray) -> list[RetrievedChunk]:
    """The candidates with their union score and leaf prior shown, best first (ties by row)."""
    out = [c.with_scores(float(s), leaf_prior=round(float(p), 4), union_score=round(float(s), 4))
           for c, s, p in zip(cands, scores, prior)]
    return sorted(out, key=lambda r: (-r.score, r.row))
