"""Step 2 behind one interface: a Retriever built once per index and settings, entered once per
(sub)question with ``retrieve(ask)``.

It runs the stages in one order: the ordering the question's scope calls for (one document or a
collection: retrieval/ordering.py), the graph channel where the index has graphs, rerank, and each
paragraph's best window first. The whole question, each part of a multi-part question and every
evaluation arm go through here, so they cannot drift apart.

``ORDERINGS`` holds the orderings the product ships; ``make_retriever`` is the only place that maps
the names in ``RankingParams`` to them and rejects an unknown name. Evaluation passes a larger table
(evaluation/variants.py). Another ordering is one class with an ``order`` method and one entry in a
table (docs/architecture.md, "Adding a ranker").
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from config import Config
from indexing.index_store import Index
from retrieval.breadth import paragraph_first
from retrieval.candidates import collection_top, scope_documents
from retrieval.ordering import Ask, Ordering, SectionOrdering, UnionOrdering, keep
from retrieval.query import QueryEmbedder
from retrieval.rerankers import Reranker, rerank
from retrieval.types import Fallback, RetrievedChunk
from utils.errors import InputError

if TYPE_CHECKING:
    from retrieval.graph_channel import GraphUse

ORDERINGS: Mapping[str, Ordering] = {"section-joint": SectionOrdering(), "union-learned": UnionOrdering()}
"""The product's orderings: ``section-joint`` within one document, ``union-learned`` across several."""


@dataclass(frozen=True)
class Found:
    """One (sub)question's step 2."""

    ranked: list[RetrievedChunk]
    """Best first, after rerank, each paragraph's best window first: step 2's list is its first k."""
    pool: list[RetrievedChunk]
    """What the context may read: ``ranked``, filled from the flat ranking when asked to."""
    graph: list["GraphUse"] = field(default_factory=list)


@dataclass(frozen=True)
class Retriever:
    index: Index
    config: Config
    embedder: QueryEmbedder
    reranker: Reranker | None
    document: Ordering
    """The ordering of a question within one document."""
    collection: Ordering
    """The ordering of a question across several documents."""
    graph: bool = False
    """Lift graph-connected chunks in located leaves (retrieval/graph_channel.py)."""

    def ordering_for(self, doc_paths: set[str] | None) -> Ordering:
        """The document ordering for a question within one document, else the collection ordering."""
        return self.document if scope_documents(self.index, doc_paths) <= 1 else self.collection

    def retrieve(self, ask: Ask, fallbacks: list[Fallback], timing: dict[str, float] | None = None,
                 fill: bool = False) -> Found:
        """The question's ranked hits (``fill``: the pool grown to the context's size from the
        collection's flat ranking, so a context of several thousand characters does not read the
        located leaves' weakest chunks first). ``timing`` gets ``retrieve`` and ``rerank`` in ms."""
        t = time.perf_counter()
        hits = self.ordering_for(ask.doc_paths).order(self.index, self.embedder, self.config, ask)
        uses: list[GraphUse] = []
        if self.graph:
            from retrieval.graph_channel import apply_graph_channel  # noqa: PLC0415 - graphs are optional

            hits, uses = apply_graph_channel(self.index, ask.query, ask.located, hits, self.config)
        t2 = time.perf_counter()
        limit = keep(self.config)
        ranked = paragraph_first(rerank(ask.query.text, hits, self.reranker, limit, fallbacks), self.index)
        pool = ranked
        if fill and len(ranked) < limit:
            have = {h.row for h in ranked}
            tail = collection_top(self.index, ask.query, self.config, ask.doc_paths, limit)
            pool = ranked + [h for h in tail if h.row not in have][:limit - len(ranked)]
        if timing is not None:
            timing["retrieve"] = (t2 - t) * 1000
            timing["rerank"] = (time.perf_counter() - t2) * 1000
        return Found(ranked, pool, uses)


def make_retriever(index: Index, config: Config, embedder: QueryEmbedder, reranker: Reranker | None,
                   orderings: Mapping[str, Ordering] = ORDERINGS) -> Retriever:
    """The retriever of ``config.tuning.ranking``'s orderings, looked up in ``orderings``."""
    params = config.tuning.ranking
    chosen = []
    for setting, name in (("document_order", params.document_order), ("collection_order", params.collection_order)):
        if name not in orderings:
            extra = "" if orderings is not ORDERINGS else "; the others are evaluation variants (eval only)"
            raise InputError(f"setting ranking.{setting}: unknown ordering {name!r} "
                             f"(choose from: {', '.join(orderings)}{extra})")
        chosen.append(orderings[name])
    graph = getattr(index, "kg", None) is not None and config.kg_channel
    return Retriever(index, config, embedder, reranker, chosen[0], chosen[1], graph)
