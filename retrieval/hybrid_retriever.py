"""Step 2: dense + BM25 inside each located leaf, fused, then reranked across leaves.

Edge cases are defined, not accidental:
- a leaf with one chunk: min-max of one value is 1.0 if the raw score is
  positive, else 0.0 (see utils.similarity.min_max_normalize);
- all-zero BM25 (no query term in the leaf): BM25 contributes nothing;
- a chunk reached twice (two located leaves overlap, or the safety net finds a
  chunk a leaf already gave): kept once, with its best fused score.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from config import Config, IdfScope
from indexing.embedders.memo import memoized
from indexing.index_store import Index
from indexing.search import Scores
from retrieval.learned_ranker import MULTI_SUFFIX, LinearRanker, load_ranker, model_name
from retrieval.paragraph_pooling import pooled_scores
from retrieval.query import Query, QueryEmbedder
from retrieval.scoring import documents_scope, fuse, leaf_scope, score_params, score_scope
from retrieval.section_features import chunk_features
from retrieval.types import LocatedNode, RetrievedChunk
from retrieval.union_features import UnionSignals, union_feature_matrix


@dataclass
class StageHits:
    """Every candidate at every stage, for the audit record."""

    keyword: list[RetrievedChunk] = field(default_factory=list)
    vector: list[RetrievedChunk] = field(default_factory=list)
    fusion: list[RetrievedChunk] = field(default_factory=list)
    rerank: list[RetrievedChunk] = field(default_factory=list)


def retrieved_chunk(index: Index, row: int, dense: float, bm25: float, fused: float, sub_query: str,
          source: str) -> RetrievedChunk:
    return RetrievedChunk(
        chunk=index.chunks[row], score=float(fused),
        retrieval_detail={"dense_score": round(float(dense), 4), "bm25_score": round(float(bm25), 4),
                          "fused_score": round(float(fused), 4)},
        row=int(row), sub_query=sub_query, source=source)


def rank_scored(index: Index, scores: Scores, top_k: int, config: Config, sub_query: str,
                source: str, stages: StageHits | None = None, fused: np.ndarray | None = None) -> list[RetrievedChunk]:
    """The ``top_k`` of a scored scope by ``fuse`` under ``config`` (``fused``: that fusion, when the
    caller already has it)."""
    if fused is None:
        fused = fuse(scores.dense, scores.lexical, config)
    order = np.lexsort((scores.rows, -fused))[:top_k]
    wanted = [order] if stages is None else [order, *_single_signal_orders(scores, top_k)]
    index.prefetch_chunks(int(scores.rows[i]) for part in wanted for i in part)
    out = [retrieved_chunk(index, int(scores.rows[i]), scores.dense[i], scores.lexical[i], fused[i], sub_query, source)
           for i in order]
    if stages is not None:
        _record_single_signals(index, scores, fused, top_k, sub_query, source, stages)
        stages.fusion.extend(out)
    return out


def _single_signal_orders(scores: Scores, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the keyword top-k (lexical > 0 only) and the vector top-k of a scored scope."""
    kw = np.lexsort((scores.rows, -scores.lexical))[:top_k]
    return kw[scores.lexical[kw] > 0], np.lexsort((scores.rows, -scores.dense))[:top_k]


def _record_single_signals(index: Index, scores: Scores, fused: np.ndarray, top_k: int, sub_query: str,
                           source: str, stages: StageHits) -> None:
    """The keyword (lexical > 0) and vector top-k of a scored scope, for the audit record."""
    for order, bucket in zip(_single_signal_orders(scores, top_k), (stages.keyword, stages.vector)):
        for i in order:
            bucket.append(retrieved_chunk(index, int(scores.rows[i]), scores.dense[i], scores.lexical[i],
                                fused[i], sub_query, source))


def retrieve_in_leaf(index: Index, embedder: QueryEmbedder, node: LocatedNode, config: Config, question: Query,
                     stages: StageHits | None = None) -> list[RetrievedChunk]:
    """The leaf's top chunks for its sub-query (the question itself when the texts match, else the
    sub-query as a question of its own), BM25 with the config's statistics scope."""
    scope = leaf_scope(index, node.node_id)
    if scope is None:
        return []
    sub = question if question.text == node.sub_query else Query.build(node.sub_query, embedder)
    scores = score_scope(index, sub, scope, config)
    return rank_scored(index, scores, config.top_k_per_leaf, config, node.sub_query, "tree", stages)


def flat_scores(index: Index, query: Query, config: Config, doc_paths: set[str] | None = None,
                idf_scope: IdfScope = "corpus") -> Scores:
    """Dense + lexical for every chunk of the question's documents (flat retrieval, safety net, locator,
    section ranker), computed once per question (``score_scope``)."""
    return score_scope(index, query, documents_scope(doc_paths), config, idf_scope)


def dedupe_best(chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
    best: dict[str, RetrievedChunk] = {}
    for rc in chunks:
        cur = best.get(rc.chunk.chunk_id)
        if cur is None or rc.score > cur.score:
            best[rc.chunk.chunk_id] = rc
    return sorted(best.values(), key=lambda r: (-r.score, r.row))


def leaf_priors(located: Sequence[LocatedNode]) -> dict[str, float]:
    """How strongly the locator believed in each leaf, in [0, 1].

    Locators with scores (hybrid, keyword) are scaled by their best; an LLM's
    list is ordered, so its rank is the belief.
    """
    if not located:
        return {}
    scores = [n.score for n in located]
    known = [s for s in scores if s is not None]
    if len(known) == len(scores) and max(known) > 0:
        top = float(max(known))
        return {n.node_id: max(0.0, float(n.score or 0.0)) / top for n in located}
    k = len(located)
    return {n.node_id: 1.0 - i / k for i, n in enumerate(located)}


def order_union(index: Index, query: Query, cands: list[RetrievedChunk], located: Sequence[LocatedNode],
                config: Config, doc_paths: set[str] | None = None) -> list[RetrievedChunk]:
    """Order candidates of several leaves on one scale.

    In-leaf fused scores are min-max normalised per leaf (the spec), so every
    leaf's best chunk scores ~1.0 and they cannot be compared across leaves.
    Here all candidates are re-scored against the original question with
    document-level BM25 statistics, fused on one scale (``union_fusion``), and
    blended with the locator's belief in their leaf (``union_model = "blend"``), or
    scored by the learned union model over those and the candidates' standing beside
    each other (``"learned"``: retrieval/union_features.py).
    """
    if not cands:
        return cands
    sig = union_signals(index, query, cands, located, config, doc_paths)
    if config.union_model == "learned":
        ranker = load_ranker(UNION_MODEL, config.ranker_weights,
                             missing="union_model=learned needs one: fit it with `python -m evaluation.learn_union`, "
                                     "or set union_model=blend")
        scores = ranker.score(union_feature_matrix(index, query.tokens, sig, ranker.names, config.chunk_size))
    else:
        w = config.leaf_prior_weight
        scores = (1 - w) * sig.fused + w * sig.prior
    out = [c.with_scores(float(s), leaf_prior=round(float(p), 4), union_score=round(float(s), 4))
           for c, s, p in zip(cands, scores, sig.prior)]
    return sorted(out, key=lambda r: (-r.score, r.row))


UNION_MODEL = "union" + MULTI_SUFFIX
"""The learned union ordering's key in the weights file: fitted on collection questions only."""


def union_signals(index: Index, query: Query, cands: list[RetrievedChunk], located: Sequence[LocatedNode],
                  config: Config, doc_paths: set[str] | None = None) -> UnionSignals:
    """What the union ordering knows of each candidate: its re-scored signals fused over the union, its
    leaf's prior, and its standing in the whole scope's flat ranking."""
    rows = np.array([c.row for c in cands], dtype=np.int64)
    scored = index.search.rescore(query, rows, "document", score_params(config))
    fused = union_fusion(scored.dense, scored.lexical, config)
    priors = leaf_priors(located)
    prior = np.array([priors.get(c.chunk.source_node_id, 0.0) for c in cands], dtype=np.float64)
    flat = np.zeros(len(rows))
    if config.union_model == "learned":
        flat = _flat_standing(index, query, rows, config, doc_paths)
    return UnionSignals(rows, fused, prior, np.asarray(scored.dense, dtype=np.float64),
                        np.asarray(scored.lexical, dtype=np.float64), flat)


def _flat_standing(index: Index, query: Query, rows: np.ndarray, config: Config,
                   doc_paths: set[str] | None) -> np.ndarray:
    """Each row's score in the scope's flat ranking as a collection fuses it (on [0, 1]); 0 for a row
    the scope's scores do not hold (a store that answered from candidates)."""
    scores, collection = collection_fused(index, query, config, doc_paths)
    if len(scores.rows) == 0:
        return np.zeros(len(rows))
    fused = _unit_scale(collection, collection_config(config))
    order = np.argsort(scores.rows, kind="stable")
    pos = np.searchsorted(scores.rows[order], rows)
    pos = np.minimum(pos, len(order) - 1)
    found = scores.rows[order][pos] == rows
    return np.where(found, fused[order][pos], 0.0)


def union_fusion(dense: np.ndarray, lexical: np.ndarray, config: Config) -> np.ndarray:
    """The union's two signals fused as a collection question's flat ranking fuses them
    (``collection_fusion``), on [0, 1] so the leaf prior's weight means the same in every mode.

    The candidates come from several documents, each scored with its own BM25 statistics, so their
    BM25 scores are on different scales: min-max over the union lets one statute's large scores
    decide. Rank fusion compares ranks only. Measured on all LeCoQA questions (docs/evaluation.md):
    2-3% more of the evidence read in 2,000 characters, the 8,000-character figures level; a question
    within one document is ordered by the section ranker and never reaches here.
    """
    cfg = collection_config(config)
    return _unit_scale(fuse(dense, lexical, cfg), cfg)


def _unit_scale(fused: np.ndarray, cfg: Config) -> np.ndarray:
    """``fuse``'s scores under a collection's fusion on [0, 1]."""
    if cfg.fusion == "rrf":  # a chunk first on both signals scores 1
        fused = fused * ((cfg.rrf_k + 1) / 2.0)
    return np.asarray(fused, dtype=np.float64)


def collection_fused(index: Index, query: Query, config: Config,
                     doc_paths: set[str] | None) -> tuple[Scores, np.ndarray]:
    """The scope's flat scores and their fusion as a collection question's flat ranking fuses them
    (``collection_config``), computed once per question: the union's flat candidates and the union
    model's flat standing both read it, and over an exactly scanned collection it is a rank fusion of
    every chunk (~15 ms at 100,000 chunks)."""
    scores = flat_scores(index, query, config, doc_paths)
    cfg = collection_config(config)
    key = ("collection_fused", documents_scope(doc_paths), score_params(config),
           cfg.fusion, cfg.dense_weight, cfg.bm25_weight, cfg.fusion_depth, cfg.rrf_k)
    return scores, query.memo.get_or_make(key, lambda: fuse(scores.dense, scores.lexical, cfg))


def rank_in_sections(index: Index, question: Query, located: list[LocatedNode],
                     config: Config, doc_paths: set[str] | None = None, kind: str = "tree",
                     stages: StageHits | None = None) -> list[RetrievedChunk]:
    """Every chunk in scope, scored by itself and by the evidence of its leaf, section and document.

    The located leaves are a prior, not a cut: a chunk of a leaf step 1 missed can still win
    on its own and its section's evidence (the hard cut to five leaves scored zero on ~17% of
    questions). ``kind="flat"`` scores the same chunks with the flat model (chunk features only).
    """
    scores = flat_scores(index, question, config, doc_paths)
    if len(scores.rows) == 0:
        return []
    query = question.text
    n_docs = scope_documents(index, doc_paths)
    ranker = load_ranker(model_name(kind, n_docs), config.ranker_weights)
    loc_ids = {n.node_id for n in located}
    once = kind == "tree" and config.section_evidence in ("once", "joint")
    inner = load_ranker(model_name(config.section_chunk_model, n_docs), config.ranker_weights) if once else None
    joint = _joint_ranker(n_docs, config) if kind == "tree" and config.section_evidence == "joint" else None
    names = ranker.names
    for extra in (inner, joint):
        if extra is not None:
            names += tuple(n for n in extra.names if n not in names)
    X = chunk_features(index, question, scores, config, loc_ids, names)
    s = ranker.score(X[:, :len(ranker.names)])
    if inner is not None:
        s = _section_evidence_once(index, scores.rows, X[:, [names.index(n) for n in inner.names]], inner, s)
    if joint is not None:
        s = _joint_head(scores.rows, joint.score(X[:, [names.index(n) for n in joint.names]]), s,
                        config.joint_top_k)
    keep = max(config.final_top_k, config.context_pool)  # rerank + context pool
    if config.paragraph_pooling == "soft":
        s = pooled_scores(index, scores.rows, s, keep, config.paragraph_pooling_temperature)
    order = np.lexsort((scores.rows, -s))[:keep]
    fused = fuse(scores.dense, scores.lexical, config)
    subs = {n.node_id: n.sub_query for n in located}
    out: list[RetrievedChunk] = []
    for i in order:
        row = int(scores.rows[i])
        rc = retrieved_chunk(index, row, scores.dense[i], scores.lexical[i], fused[i], query, "flat")
        detail = dict(rc.retrieval_detail)
        if kind == "tree":
            leaf = rc.chunk.source_node_id
            for feature, value in zip(ranker.names, X[i]):
                if feature not in ("dense", "bm25_hit"):
                    detail.setdefault(feature, round(float(value), 4))
            rc = replace(rc, source="tree" if leaf in loc_ids else "net", sub_query=subs.get(leaf, query))
        detail["section_score" if kind == "tree" else "learned_score"] = round(float(s[i]), 4)
        out.append(replace(rc, score=float(s[i]), retrieval_detail=detail))
    if stages is not None:
        _record_single_signals(index, scores, fused, config.final_top_k, query, "flat", stages)
        stages.fusion.extend(out)
    return out


def _section_evidence_once(index: Index, rows: np.ndarray, X_inner: np.ndarray, inner: LinearRanker,
                           tree_score: np.ndarray) -> np.ndarray:
    """Each leaf's best chunk ordered by the tree model, every other chunk by ``inner`` (the flat
    model, or the chunk-and-paragraph model: ``section_chunk_model``).

    The tree model adds a section's evidence (its best chunks, heading, neighbours) to every chunk
    of the section, so all of a matching section's chunks rise together and fill the list: evidence
    that lies in a second section is pushed out (on papers, R@8k 0.87 of the best flat arm for
    questions whose evidence spans sections). Counted once, the section's evidence decides which
    sections are entered and where; past that entry, a chunk competes on its own evidence (and, with
    the paragraph model, its paragraph's). Both scores are standardised over the scope so they share
    one scale.
    """
    chunk_score = inner.score(X_inner)

    def z(v: np.ndarray) -> np.ndarray:
        sd = float(v.std())
        return (v - v.mean()) / (sd if sd > 0 else 1.0)

    zt, key = z(tree_score), z(chunk_score)
    leaf_of = index.layout.row_leaf[rows]
    by_tree = np.lexsort((rows, -zt))
    _, first = np.unique(leaf_of[by_tree], return_index=True)
    entry = by_tree[first]
    key[entry] = zt[entry]
    return key


def _joint_ranker(n_docs: int, config: Config) -> LinearRanker:
    return load_ranker(model_name("joint", n_docs), config.ranker_weights,
                       missing="section_evidence=joint needs one: fit it with `python -m evaluation.learn_ranker "
                               "--models joint`, or set section_evidence=once")


def _joint_head(rows: np.ndarray, joint_score: np.ndarray, once_score: np.ndarray, top_k: int) -> np.ndarray:
    """The joint model's best ``top_k`` chunks first, in its order; every other chunk after them in
    the ``once`` order (``top_k`` 0: the joint model orders everything).

    The joint model is fitted for the top of the list (pairs weighed by their effect on nDCG@10);
    the list past it is what the 8,000-character context reads, and there the blend of the tree and
    paragraph models, fitted on every pair alike, reads as much evidence or more (docs/evaluation.md).
    The result is one score per chunk, decreasing along the list."""
    if top_k <= 0 or top_k >= len(rows):
        return joint_score
    head = np.lexsort((rows, -joint_score))[:top_k]
    out = np.asarray(once_score, dtype=np.float64).copy()
    floor = float(np.delete(out, head).max()) if len(out) > len(head) else 0.0
    j = joint_score[head]
    out[head] = floor + 1.0 + (j - float(j.min()))
    return out


def scope_documents(index: Index, doc_paths: set[str] | None) -> int:
    return len(index.doc_rows) if doc_paths is None else len(set(doc_paths) & index.doc_rows.keys())


def candidate_order(index: Index, doc_paths: set[str] | None, config: Config) -> str:
    """``auto``: the section ranker within one document, the union ordering across a collection.

    Measured (README, Evaluation): within a paper the section ranker gains 15% nDCG@10 out of
    fold; across 139 statutes its out-of-fold estimate loses ~4% while the union ordering is level
    with the best flat arm, so a collection gets the union ordering.
    """
    if config.candidate_order != "auto":
        return config.candidate_order
    return "section" if scope_documents(index, doc_paths) <= 1 else "union"


def retrieve(index: Index, embedder: QueryEmbedder, query: Query, located: list[LocatedNode],
             config: Config, doc_paths: set[str] | None = None,
             stages: StageHits | None = None, beliefs: Sequence[LocatedNode] = ()) -> list[RetrievedChunk]:
    """All candidates before rerank: per-leaf top-k, plus the flat safety net when on.

    ``embedder`` embeds the locator's sub-queries (leaves sharing one: one model call).
    ``beliefs``: the locator's ranked candidate leaves with their scores (beyond the located ones),
    the prior of a union candidate outside the located leaves (``union_flat_top_k``)."""
    embedder = memoized(embedder)
    order = candidate_order(index, doc_paths, config)
    if order == "section":
        return rank_in_sections(index, query, located, config, doc_paths, stages=stages)
    if order != "union":
        return dedupe_best(_located_candidates(index, embedder, query, located, config, doc_paths, stages))
    cands, believed = union_candidates(index, embedder, query, located, config, doc_paths, stages, beliefs)
    return order_union(index, query, cands, believed, config, doc_paths)


def _located_candidates(index: Index, embedder: QueryEmbedder, query: Query, located: list[LocatedNode],
                        config: Config, doc_paths: set[str] | None, stages: StageHits | None
                        ) -> list[RetrievedChunk]:
    """Each located leaf's top chunks, and the flat safety net's when it is on."""
    out: list[RetrievedChunk] = []
    for node in located:
        out.extend(retrieve_in_leaf(index, embedder, node, config, query, stages))
    if config.safety_net:
        scores = flat_scores(index, query, config, doc_paths)
        out.extend(rank_scored(index, scores, config.safety_net_top_k, config, query.text, "net", stages))
    return out


def union_candidates(index: Index, embedder: QueryEmbedder, query: Query, located: list[LocatedNode],
                     config: Config, doc_paths: set[str] | None = None, stages: StageHits | None = None,
                     beliefs: Sequence[LocatedNode] = ()) -> tuple[list[RetrievedChunk], list[LocatedNode]]:
    """The union's candidates, each once (the located leaves' and the flat ranking's best), and the
    leaves whose belief is their prior (the located ones and the locator's further ranked leaves).
    ``order_union`` orders them; the union model's learner reads the same candidates."""
    out = _located_candidates(index, memoized(embedder), query, located, config, doc_paths, stages)
    if config.union_flat_top_k > 0:
        scores, fused = collection_fused(index, query, config, doc_paths)
        out.extend(rank_scored(index, scores, config.union_flat_top_k, collection_config(config), query.text,
                               "net", stages, fused))
    known = {n.node_id for n in located}
    scored = all(n.score is not None for n in [*located, *beliefs])  # an LLM's list has ranks, not scores
    wider = [b for b in beliefs if b.node_id not in known] if scored else []
    return dedupe_best(out), [*located, *wider]


def collection_config(config: Config) -> Config:
    """``config`` with the fusion of the flat ranking a collection question draws on."""
    return config if config.collection_fusion == "same" else config.replace(fusion=config.collection_fusion)


def document_order(chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
    """Order evidence as it stands in the documents (DOS-RAG): rows are in document order."""
    return sorted(chunks, key=lambda r: r.row)


def with_flat_tail(pool: list[RetrievedChunk], index: Index, query: Query, config: Config,
                   doc_paths: set[str] | None, limit: int) -> list[RetrievedChunk]:
    """``pool`` filled up to ``limit`` with the flat ranking's best chunks it lacks (source "net").

    Across a collection step 2 keeps only the located leaves' top chunks (about 25): enough for
    the step-2 list, too few for a context of several thousand characters, which then read the
    located leaves' weakest chunks before anything else. The flat ranking continues the list, as
    the safety net does for step 2 (measured: LeCoQA R@2k 0.88 -> 0.96 of the best flat arm).
    """
    if len(pool) >= limit:
        return pool
    have = {h.row for h in pool}
    tail = rank_scored(index, flat_scores(index, query, config, doc_paths), limit, collection_config(config),
                       query.text, "net")
    return pool + [h for h in tail if h.row not in have][:limit - len(pool)]
