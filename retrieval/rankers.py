"""Step 2's rankers: linear models over one question's feature matrix -> one score per candidate.

``SectionRanker`` scores every chunk of a scope (features: retrieval/section_features.py);
``UnionRanker`` scores a collection question's union candidates (retrieval/union_features.py). The
models are the weights file's (retrieval/learned_ranker.py); a ranker names the models it reads and
the features they need, so a variant is a ranker with other models, not another code path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from config import Config
from indexing.index_store import Index
from indexing.search import Scores
from retrieval.candidates import collection_fused
from retrieval.doc_cards import candidate_card_match
from retrieval.named_sections import named_kinds, titled_as
from retrieval.learned_ranker import MULTI_SUFFIX, LinearRanker, load_ranker, model_name
from retrieval.query import Query
from retrieval.scoring import documents_scope, fuse, score_params, unit_scale
from retrieval.section_features import chunk_features
from retrieval.types import LocatedNode, RetrievedChunk
from retrieval.union_features import UnionSignals, union_feature_matrix

UNION_MODEL = "union" + MULTI_SUFFIX
"""The learned union ordering's key in the weights file: fitted on collection questions only."""


@dataclass(frozen=True)
class SectionScores:
    """One score per chunk of the scope, the features that made it and the model whose features a
    hit shows."""

    scores: np.ndarray
    X: np.ndarray
    shown: LinearRanker


@dataclass(frozen=True)
class SectionRanker:
    """Every chunk scored by itself and by the evidence of its leaf, section and document.

    ``entry_model``: the model that picks and places each leaf's entry (its best chunk); ``chunk_model``
    (None: the entry model's score stands for every chunk) orders a section's chunks past its entry;
    ``joint`` (None: off): the model that orders the list's first ``joint_top_k`` chunks, the others
    following in the entry/chunk order.
    """

    entry_model: str = "tree"
    chunk_model: str | None = "para"
    joint: str | None = "joint"

    def score(self, index: Index, question: Query, scores: Scores, located: set[str], config: Config,
              n_docs: int) -> SectionScores:
        """``n_docs``: the documents of the question's scope (the models' regime)."""
        weights = config.ranker_weights
        entry = load_ranker(model_name(self.entry_model, n_docs), weights)
        inner = load_ranker(model_name(self.chunk_model, n_docs), weights) if self.chunk_model else None
        joint = load_ranker(model_name(self.joint, n_docs), weights,
                            missing="fit it with `python -m evaluation.learn_ranker --models joint`"
                            ) if self.joint else None
        names = entry.names
        for extra in (inner, joint):
            if extra is not None:
                names += tuple(n for n in extra.names if n not in names)
        X = chunk_features(index, question, scores, config, located, names)
        s = entry.score(X[:, :len(entry.names)])
        if inner is not None:
            s = section_evidence_once(index, scores.rows, X[:, [names.index(n) for n in inner.names]], inner, s)
        if joint is not None:
            s = joint_head(scores.rows, joint.score(X[:, [names.index(n) for n in joint.names]]), s,
                           config.tuning.ranking.joint_top_k)
        return SectionScores(s, X, entry)


def section_evidence_once(index: Index, rows: np.ndarray, X_inner: np.ndarray, inner: LinearRanker,
                          entry_score: np.ndarray) -> np.ndarray:
    """Each leaf's best chunk ordered by the entry model, every other chunk by ``inner``.

    The entry model adds a section's evidence (its best chunks, heading, neighbours) to every chunk
    of the section, so all of a matching section's chunks rise together and fill the list, pushing
    out evidence that lies in a second section. Counted once, the section's evidence decides which
    sections are entered and where; past that entry, a chunk competes on its own evidence (and, with
    the paragraph model, its paragraph's). Both scores are standardised over the scope so they share
    one scale.
    """
    chunk_score = inner.score(X_inner)

    def z(v: np.ndarray) -> np.ndarray:
        sd = float(v.std())
        return (v - v.mean()) / (sd if sd > 0 else 1.0)

    zt, key = z(entry_score), z(chunk_score)
    leaf_of = index.layout.row_leaf[rows]
    by_tree = np.lexsort((rows, -zt))
    _, first = np.unique(leaf_of[by_tree], return_index=True)
    entry = by_tree[first]
    key[entry] = zt[entry]
    return key


def joint_head(rows: np.ndarray, joint_score: np.ndarray, once_score: np.ndarray, top_k: int) -> np.ndarray:
    """The joint model's best ``top_k`` chunks first, in its order; every other chunk after them in
    the ``once`` order (``top_k`` 0: the joint model orders everything).

    The joint model is fitted for the top of the list (pairs weighed by their effect on nDCG@10);
    past it lies what a long context reads, where the once order, fitted on every pair alike, reads
    as much evidence or more. The result is one score per chunk, decreasing along the list."""
    if top_k <= 0 or top_k >= len(rows):
        return joint_score
    head = np.lexsort((rows, -joint_score))[:top_k]
    out = np.asarray(once_score, dtype=np.float64).copy()
    floor = float(np.delete(out, head).max()) if len(out) > len(head) else 0.0
    j = joint_score[head]
    out[head] = floor + 1.0 + (j - float(j.min()))
    return out


def leaf_priors(located: Sequence[LocatedNode]) -> dict[str, float]:
    """How strongly the locator believed in each leaf, in [0, 1].

    Locators with scores (hybrid, keyword) are scaled by their best; an LLM's list is ordered, so
    its rank is the belief.
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


def union_signals(index: Index, query: Query, cands: list[RetrievedChunk], located: Sequence[LocatedNode],
                  config: Config, doc_paths: set[str] | None = None, flat_standing: bool = True) -> UnionSignals:
    """What the union ordering knows of each candidate: its re-scored signals rank-fused over the
    union (each document's BM25 comes with its own statistics, so only ranks compare), its leaf's
    prior, and (``flat_standing``) its standing in the whole scope's flat ranking."""
    rows = np.array([c.row for c in cands], dtype=np.int64)
    scored = index.search.rescore(query, rows, "document", score_params(config))
    fusion = config.tuning.ranking.collection
    fused = unit_scale(fuse(scored.dense, scored.lexical, fusion), fusion)
    priors = leaf_priors(located)
    prior = np.array([priors.get(c.chunk.source_node_id, 0.0) for c in cands], dtype=np.float64)
    flat = _flat_standing(index, query, rows, config, doc_paths) if flat_standing else np.zeros(len(rows))
    kinds = named_kinds(query.text)
    named = np.array([titled_as(kinds, index.nodes[c.chunk.source_node_id].heading) for c in cands]
                     if kinds else np.zeros(len(cands)), dtype=np.float64)
    return UnionSignals(rows, fused, prior, np.asarray(scored.dense, dtype=np.float64),
                        np.asarray(scored.lexical, dtype=np.float64), flat,
                        candidate_card_match(index, query, rows, doc_paths), named)


def _flat_standing(index: Index, query: Query, rows: np.ndarray, config: Config,
                   doc_paths: set[str] | None) -> np.ndarray:
    """Each row's score in the scope's flat ranking as a collection fuses it (on [0, 1]); 0 for a row
    the scope's scores do not hold (a store that answered from candidates)."""
    scores, collection = collection_fused(index, query, config, doc_paths)
    if len(scores.rows) == 0:
        return np.zeros(len(rows))
    fused = unit_scale(collection, config.tuning.ranking.collection)
    order = np.argsort(scores.rows, kind="stable")
    pos = np.searchsorted(scores.rows[order], rows)
    pos = np.minimum(pos, len(order) - 1)
    found = scores.rows[order][pos] == rows
    return np.where(found, fused[order][pos], 0.0)


class UnionScorer(Protocol):
    """Scores a union's candidates from their signals (``flat_standing``: it reads ``sig.flat``, so the
    signals must hold each candidate's standing in the scope's flat ranking)."""

    flat_standing: bool

    def score(self, index: Index, query: Query, sig: UnionSignals, config: Config) -> np.ndarray: ...


@dataclass(frozen=True)
class UnionRanker:
    """The learned union ordering: the weights file's ``union_multi`` model over the candidates'
    signals and their standing beside each other (retrieval/union_features.py)."""

    model: str = UNION_MODEL
    flat_standing: bool = True
    """The model reads each candidate's standing in the scope's flat ranking (``u_flat``)."""

    def score(self, index: Index, query: Query, sig: UnionSignals, config: Config) -> np.ndarray:
        ranker = load_ranker(self.model, config.ranker_weights,
                             missing="fit it with `python -m evaluation.learn_union`")
        return ranker.score(union_feature_matrix(index, query.tokens, sig, ranker.names, config.chunk_size))
