"""Step 2's candidate sources: the chunks an ordering considers, each with its two signals.

An ordering that draws on leaves takes the located leaves' best chunks (``located_candidates``) and
the flat ranking's best (``flat_top`` within a document's statistics, ``collection_top`` where
chunks of several documents meet), each chunk once with its best score (``dedupe_best``). The
section ranker needs no source: it scores every chunk in scope (``scoring.flat_scores``).

Edge cases are defined, not accidental:
- a leaf with one chunk: min-max of one value is 1.0 if the raw score is positive, else 0.0
  (utils.similarity.min_max_normalize);
- all-zero BM25 (no query term in the leaf): BM25 contributes nothing;
- a chunk reached twice (two located leaves overlap, or the flat ranking finds a chunk a leaf
  already gave): kept once, with its best score.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from config import Config
from indexing.embedders.memo import memoized
from indexing.index_store import Index
from indexing.search import Scores
from retrieval.doc_cards import card_lead, documents_named_by_cards
from retrieval.named_sections import named_kinds, titled_as
from retrieval.query import Query, QueryEmbedder
from retrieval.ranking_params import Fusion
from retrieval.scoring import documents_scope, flat_scores, fuse, leaf_scope, score_params, score_scope
from retrieval.types import LocatedNode, RetrievedChunk


@dataclass
class StageHits:
    """Every candidate at every stage, for the audit record."""

    keyword: list[RetrievedChunk] = field(default_factory=list)
    vector: list[RetrievedChunk] = field(default_factory=list)
    fusion: list[RetrievedChunk] = field(default_factory=list)
    rerank: list[RetrievedChunk] = field(default_factory=list)


def scope_documents(index: Index, doc_paths: set[str] | None) -> int:
    return len(index.doc_rows) if doc_paths is None else len(set(doc_paths) & index.doc_rows.keys())


def rank_scored(index: Index, scores: Scores, top_k: int, fusion: Fusion, sub_query: str, source: str,
                stages: StageHits | None = None, fused: np.ndarray | None = None,
                lead: np.ndarray | None = None) -> list[RetrievedChunk]:
    """The ``top_k`` of a scored scope by ``fusion`` (``fused``: that fusion, when the caller has it),
    ranked by ``fused + lead`` when given (shown: the fused score)."""
    if fused is None:
        fused = fuse(scores.dense, scores.lexical, fusion)
    order = np.lexsort((scores.rows, -(fused if lead is None else fused + lead)))[:top_k]
    wanted = [order] if stages is None else [order, *_single_signal_orders(scores, top_k)]
    index.prefetch_chunks(int(scores.rows[i]) for part in wanted for i in part)
    out = [RetrievedChunk.at(index, int(scores.rows[i]), scores.dense[i], scores.lexical[i], fused[i], sub_query,
                             source) for i in order]
    if stages is not None:
        record_single_signals(index, scores, fused, top_k, sub_query, source, stages)
        stages.fusion.extend(out)
    return out


def _single_signal_orders(scores: Scores, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the keyword top-k (lexical > 0 only) and the vector top-k of a scored scope."""
    kw = np.lexsort((scores.rows, -scores.lexical))[:top_k]
    return kw[scores.lexical[kw] > 0], np.lexsort((scores.rows, -scores.dense))[:top_k]


def record_single_signals(index: Index, scores: Scores, fused: np.ndarray, top_k: int, sub_query: str,
                          source: str, stages: StageHits) -> None:
    """The keyword (lexical > 0) and vector top-k of a scored scope, for the audit record."""
    for order, bucket in zip(_single_signal_orders(scores, top_k), (stages.keyword, stages.vector)):
        for i in order:
            bucket.append(RetrievedChunk.at(index, int(scores.rows[i]), scores.dense[i], scores.lexical[i],
                                            fused[i], sub_query, source))


def in_leaf(index: Index, embedder: QueryEmbedder, node: LocatedNode, config: Config, question: Query,
            stages: StageHits | None = None) -> list[RetrievedChunk]:
    """The leaf's top chunks for its sub-query (the question itself when the texts match, else the
    sub-query as a question of its own), BM25 with the config's statistics scope."""
    scope = leaf_scope(index, node.node_id)
    if scope is None:
        return []
    sub = question if question.text == node.sub_query else Query.build(node.sub_query, embedder)
    scores = score_scope(index, sub, scope, config)
    return rank_scored(index, scores, config.tuning.ranking.top_k_per_leaf, config.tuning.ranking.fused, node.sub_query, "tree",
                       stages)


def located_candidates(index: Index, embedder: QueryEmbedder, query: Query, located: Sequence[LocatedNode],
                       config: Config, stages: StageHits | None = None) -> list[RetrievedChunk]:
    """Each located leaf's top chunks (leaves sharing a sub-query: one model call)."""
    embedder = memoized(embedder)
    out: list[RetrievedChunk] = []
    for node in located:
        out.extend(in_leaf(index, embedder, node, config, query, stages))
    return out


def flat_top(index: Index, query: Query, config: Config, doc_paths: set[str] | None, top_k: int,
             stages: StageHits | None = None) -> list[RetrievedChunk]:
    """The flat ranking's best ``top_k`` under the in-document fusion (source "net")."""
    scores = flat_scores(index, query, config, doc_paths)
    return rank_scored(index, scores, top_k, config.tuning.ranking.fused, query.text, "net", stages)


def collection_fused(index: Index, query: Query, config: Config,
                     doc_paths: set[str] | None) -> tuple[Scores, np.ndarray]:
    """The scope's flat scores and their fusion as a collection's flat ranking fuses them, computed
    once per question: the union's flat candidates, the union model's flat standing and the pool's
    continuation all read it."""
    scores = flat_scores(index, query, config, doc_paths)
    fusion = config.tuning.ranking.collection
    key = ("collection_fused", documents_scope(doc_paths), score_params(config), fusion)
    return scores, query.memo.get_or_make(key, lambda: fuse(scores.dense, scores.lexical, fusion))


NAMED_LEAD = 1.0
"""What a chunk of a section the question names adds to its fused score (on [0, ~1]) in a card-led
flat ranking: it comes before the other chunks of its document, the fusion orders the section's own
chunks, and the cards' lead (``doc_cards.CARD_LEAD``, 10 per unit of match) still orders documents."""


def named_lead(index: Index, query: Query, rows: np.ndarray, doc_paths: set[str] | None) -> np.ndarray:
    """``NAMED_LEAD`` for each of ``rows`` in a leaf titled as a section the question names
    (retrieval/named_sections.py) in a document it names (``doc_cards.documents_named_by_cards``), else 0. Only
    those documents' headings are read: a few hundred a question, whatever the collection's size."""
    out = np.zeros(len(rows))
    titled = _named_leaves(index, query, doc_paths) if len(rows) else []
    if titled:
        out[np.isin(index.layout.row_leaf[np.asarray(rows, dtype=np.int64)], titled)] = NAMED_LEAD
    return out


def _named_leaves(index: Index, query: Query, doc_paths: set[str] | None) -> list[int]:
    """The leaf numbers ``named_lead`` raises, read once per question and scope (the union's flat part
    and the context's pool each ask)."""
    def read() -> list[int]:
        kinds = named_kinds(query.text)
        docs = documents_named_by_cards(index, query, doc_paths) if kinds else []
        return [int(p) for p in index.leaf_positions(set(docs)) if titled_as(kinds, index.leaves[int(p)].heading)]
    return query.memo.get_or_make(("named_leaves", documents_scope(doc_paths)), read)


def flat_lead(index: Index, query: Query, rows: np.ndarray, doc_paths: set[str] | None) -> np.ndarray:
    """What a flat ranking adds to the fused score of each of ``rows``: the documents the question names
    by their cards first (``doc_cards.card_lead``), and in them the sections it names (``named_lead``).
    Step 2's flat part and the context's pool read it, and so does the flat arm given the same cards:
    neither lead is the tree's."""
    return card_lead(index, query, rows, doc_paths) + named_lead(index, query, rows, doc_paths)


def collection_top(index: Index, query: Query, config: Config, doc_paths: set[str] | None, top_k: int,
                   stages: StageHits | None = None) -> list[RetrievedChunk]:
    """The flat ranking's best ``top_k`` as a collection fuses it, led as ``flat_lead`` says (source
    "net"): in a collection of look-alike filings the flat ranking's best of the other years' filings
    are no candidates, nor context."""
    scores, fused = collection_fused(index, query, config, doc_paths)
    return rank_scored(index, scores, top_k, config.tuning.ranking.collection, query.text, "net", stages, fused,
                       flat_lead(index, query, scores.rows, doc_paths))


def dedupe_best(chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
    """Each chunk once, with its best score; best first, ties by row."""
    best: dict[str, RetrievedChunk] = {}
    for rc in chunks:
        cur = best.get(rc.chunk.chunk_id)
        if cur is None or rc.score > cur.score:
            best[rc.chunk.chunk_id] = rc
    return sorted(best.values(), key=lambda r: (-r.score, r.row))


def union_candidates(index: Index, embedder: QueryEmbedder, query: Query, located: list[LocatedNode],
                     config: Config, doc_paths: set[str] | None = None, stages: StageHits | None = None,
                     beliefs: Sequence[LocatedNode] = (), net_top_k: int = 0
                     ) -> tuple[list[RetrievedChunk], list[LocatedNode]]:
    """The union's candidates, each once (the located leaves', ``net_top_k`` of the in-document flat
    ranking, and ``union_flat_top_k`` of the collection's), and the leaves whose belief is their
    prior (the located ones and the locator's further ranked leaves, when it scored them)."""
    out = located_candidates(index, embedder, query, located, config, stages)
    if net_top_k > 0:
        out.extend(flat_top(index, query, config, doc_paths, net_top_k, stages))
    if config.tuning.ranking.union_flat_top_k > 0:
        out.extend(collection_top(index, query, config, doc_paths, config.tuning.ranking.union_flat_top_k, stages))
    known = {n.node_id for n in located}
    scored = all(n.score is not None for n in [*located, *beliefs])  # an LLM's list has ranks, not scores
    wider = [b for b in beliefs if b.node_id not in known] if scored else []
    return dedupe_best(out), [*located, *wider]
