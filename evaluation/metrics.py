"""The figures of ../shared/bench/README.md, defined once so every arm is scored alike.

- A chunk is *relevant* to an evidence span of the same document when their
  overlap is at least half of the shorter of the two spans.
- Evidence recall@k counts an evidence item as found when some top-k chunk is
  relevant to it in that same sense (so Hit@k > 0 exactly when recall@k > 0;
  a chunk grazing a paragraph by a few characters finds nothing).
- nDCG@10 uses binary gains; the ideal ranking holds every relevant chunk
  *of the index within the question's scope* (capped at 10), so an arm cannot
  score well by retrieving few chunks.
- Gold leaves: leaves whose content span contains an evidence span; an evidence
  span that no single leaf contains (it crosses leaves) makes every leaf it
  overlaps gold.

Everything here is pure (numpy and the standard library): the index enters as
plain spans through ``SpanTable`` so the definitions are testable by hand.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

Span = tuple[int, int]

METRIC_KEYS = ("hit@1", "hit@5", "recall@5", "recall@10", "mrr@10", "ndcg@10", "cov@2k",
               "leaf_recall", "leaf_precision")
"""Per-question figures, in table order. Leaf figures are None for flat arms."""


# --------------------------------------------------------------------------- relevance

def overlap(a: Span, b: Span) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def is_relevant(chunk: Span, evidence: Span) -> bool:
    """Overlap >= half of the shorter span (integers: 2 * overlap >= shorter)."""
    ov = overlap(chunk, evidence)
    shorter = min(chunk[1] - chunk[0], evidence[1] - evidence[0])
    return ov > 0 and 2 * ov >= shorter


@dataclass
class SpanTable:
    """Chunk spans (by index row) and leaf content spans, grouped by document."""

    chunks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    """doc -> (rows, starts, ends), int64 arrays."""
    leaves: dict[str, list[tuple[str, int, int]]]
    """doc -> [(node_id, content_start, content_end)] of its non-empty leaves."""

    @classmethod
    def build(cls, chunks: Iterable[tuple[str, int, int]],
              leaves: Iterable[tuple[str, str, int, int]]) -> "SpanTable":
        """``chunks``: (doc, start, end) in row order; ``leaves``: (node_id, doc, start, end)."""
        by_doc: dict[str, list[tuple[int, int, int]]] = {}
        for row, (doc, s, e) in enumerate(chunks):
            by_doc.setdefault(doc, []).append((row, s, e))
        table = {d: tuple(np.asarray(col, dtype=np.int64) for col in zip(*items))
                 for d, items in by_doc.items()}
        leaf_map: dict[str, list[tuple[str, int, int]]] = {}
        for node_id, doc, s, e in leaves:
            if e > s:
                leaf_map.setdefault(doc, []).append((node_id, s, e))
        return cls(chunks=table, leaves=leaf_map)  # type: ignore[arg-type]

    @classmethod
    def from_index(cls, index: Any) -> "SpanTable":
        return cls.build(((c.doc_path, c.start_char, c.end_char) for c in index.chunks),
                         ((n.node_id, n.doc_path, n.content_start, n.content_end) for n in index.leaves))

    def relevant_rows(self, doc: str, span: Span) -> set[int]:
        entry = self.chunks.get(doc)
        if entry is None:
            return set()
        rows, starts, ends = entry
        ov = np.minimum(ends, span[1]) - np.maximum(starts, span[0])
        shorter = np.minimum(ends - starts, span[1] - span[0])
        mask = (ov > 0) & (2 * ov >= shorter)
        return set(rows[mask].tolist())

    def gold_leaves(self, doc: str, span: Span) -> set[str]:
        leaves = self.leaves.get(doc, [])
        inside = {nid for nid, s, e in leaves if s <= span[0] and span[1] <= e}
        if inside:
            return inside
        return {nid for nid, s, e in leaves if overlap((s, e), span) > 0}


@dataclass(frozen=True)
class Relevance:
    """What counts as a right answer for one question, against one index."""

    per_evidence: tuple[frozenset[int], ...]
    """Rows (within scope) relevant to each evidence item."""
    relevant: frozenset[int]
    """Union of ``per_evidence``: the question's relevant chunks in the index."""
    gold_leaves: frozenset[str]
    evidence_spans: tuple[tuple[str, tuple[Span, ...]], ...] = ()
    """In-scope evidence items: (doc, spans of its verbatim occurrences), for cov@2k."""

    @property
    def scorable(self) -> bool:
        """False when no chunk of the index can be relevant (e.g. evidence only in headings)."""
        return bool(self.relevant)


def question_relevance(table: SpanTable, evidence: Sequence[tuple[str, Sequence[Span]]],
                       scope: Iterable[str] | None = None) -> Relevance:
    """``evidence``: (doc, spans of its occurrences) per item; ``scope``: docs searched (None = all)."""
    allowed = set(scope) if scope is not None else None
    per_item: list[frozenset[int]] = []
    gold: set[str] = set()
    items: list[tuple[str, tuple[Span, ...]]] = []
    for doc, spans in evidence:
        rows: set[int] = set()
        in_scope = allowed is None or doc in allowed
        if in_scope and spans:
            items.append((doc, tuple(spans)))
        for span in spans:
            if in_scope:
                rows |= table.relevant_rows(doc, span)
            gold |= table.gold_leaves(doc, span)
        per_item.append(frozenset(rows))
    union = frozenset().union(*per_item) if per_item else frozenset()
    return Relevance(per_evidence=tuple(per_item), relevant=union, gold_leaves=frozenset(gold),
                     evidence_spans=tuple(items))


# --------------------------------------------------------------------------- per question

def _dedupe(items: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


def dcg(gains: Sequence[int | float]) -> float:
    return float(sum(g / math.log2(i + 2) for i, g in enumerate(gains)))


def score_ranking(rows: Sequence[int], rel: Relevance, cutoff: int = 10) -> dict[str, float]:
    """Hit@1, Hit@5, evidence recall@5/@10, MRR@10, nDCG@10 of one ranked list of index rows."""
    ranked = _dedupe(rows)
    gains = [1 if r in rel.relevant else 0 for r in ranked]

    def recall(k: int) -> float:
        if not rel.per_evidence:
            return 0.0
        top = set(ranked[:k])
        return sum(1 for item in rel.per_evidence if item & top) / len(rel.per_evidence)

    first = next((i for i, g in enumerate(gains[:cutoff]) if g), None)
    ideal = dcg([1] * min(len(rel.relevant), cutoff))
    return {
        "hit@1": float(any(gains[:1])),
        "hit@5": float(any(gains[:5])),
        "recall@5": recall(5),
        "recall@10": recall(10),
        "mrr@10": 0.0 if first is None else 1.0 / (first + 1),
        "ndcg@10": dcg(gains[:cutoff]) / ideal if ideal > 0 else 0.0,
    }


def _subtract(span: Span, covered: list[Span]) -> list[Span]:
    """The parts of ``span`` not inside any interval of ``covered``, in text order."""
    parts = [span]
    for c0, c1 in covered:
        nxt: list[Span] = []
        for a, b in parts:
            if c1 <= a or b <= c0:
                nxt.append((a, b))
                continue
            if a < c0:
                nxt.append((a, c0))
            if c1 < b:
                nxt.append((c1, b))
        parts = nxt
    return parts


def coverage_at_budget(ranked_spans: Sequence[tuple[str, Span]], rel: Relevance,
                       budget: int = 2000) -> float:
    """cov@budget: share of the evidence characters inside the first ``budget`` new characters.

    Chunks are read in rank order; a character already read (an overlapping window of
    the same document) costs nothing again; the last chunk is cut at the budget. An
    evidence item found verbatim more than once counts by its best-covered occurrence.
    """
    total = sum(min(s[1] - s[0] for s in spans) for _, spans in rel.evidence_spans)
    if total <= 0:
        return 0.0
    read: dict[str, list[Span]] = {}
    left = budget
    for doc, span in ranked_spans:
        if left <= 0:
            break
        for a, b in _subtract(span, read.setdefault(doc, [])):
            take = min(b - a, left)
            if take <= 0:
                break
            read[doc].append((a, a + take))
            left -= take
    covered = 0
    for doc, spans in rel.evidence_spans:
        got = read.get(doc, [])
        covered += max(s[1] - s[0] - sum(b - a for a, b in _subtract(s, got)) for s in spans) \
            if got else 0
    return covered / total


def leaf_scores(located: Sequence[str], gold: frozenset[str] | set[str]) -> tuple[float | None, float | None]:
    """(recall, precision) of located leaves against gold leaves.

    None when there are no gold leaves (the figure is undefined and left out of
    the mean); precision is 0 when nothing was located but something should have been.
    """
    if not gold:
        return None, None
    loc = set(located)
    hit = len(loc & set(gold))
    return hit / len(gold), (hit / len(loc) if loc else 0.0)


# --------------------------------------------------------------------------- aggregation

def mean_metrics(per_question: Sequence[Mapping[str, float | None]],
                 keys: Sequence[str] = METRIC_KEYS) -> dict[str, float | None]:
    """Mean of each figure over the questions where it is defined (None: defined nowhere)."""
    out: dict[str, float | None] = {}
    for k in keys:
        vals = [q[k] for q in per_question if q.get(k) is not None]
        out[k] = float(np.mean(vals)) if vals else None
    return out


def latency_percentiles(ms: Sequence[float]) -> tuple[float | None, float | None]:
    if len(ms) == 0:
        return None, None
    p50, p95 = np.percentile(np.asarray(ms, dtype=np.float64), [50, 95])
    return float(p50), float(p95)


@dataclass(frozen=True)
class BootstrapCI:
    """Paired bootstrap of mean(a) - mean(b) over the same questions."""

    n: int
    resamples: int
    mean_a: float
    mean_b: float
    diff: float
    low: float
    high: float
    rel: float | None
    """mean(a) / mean(b) - 1 (None when mean(b) == 0)."""
    rel_low: float | None
    rel_high: float | None

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("n", "resamples", "mean_a", "mean_b", "diff", "low",
                                              "high", "rel", "rel_low", "rel_high")}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], resamples: int = 10_000, seed: int = 0,
                     confidence: float = 0.95, block: int = 1000) -> BootstrapCI:
    """Percentile interval of the mean paired difference, resampling questions with replacement.

    Vectorised in blocks of ``block`` resamples (bounded memory); seeded, so
    the same inputs and seed give the same interval. The relative difference
    is bootstrapped from the same resamples (ratio of the resampled means).
    """
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape or xa.ndim != 1:
        raise ValueError("paired bootstrap needs two 1-d arrays of the same length")
    n = len(xa)
    if n == 0:
        raise ValueError("paired bootstrap of zero questions")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    rng = np.random.default_rng(seed)
    diffs = np.empty(resamples, dtype=np.float64)
    rels = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, block):
        m = min(block, resamples - start)
        idx = rng.integers(0, n, size=(m, n))
        ma, mb = xa[idx].mean(axis=1), xb[idx].mean(axis=1)
        diffs[start:start + m] = ma - mb
        with np.errstate(divide="ignore", invalid="ignore"):
            rels[start:start + m] = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0) - 1.0, np.nan)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    mean_a, mean_b = float(xa.mean()), float(xb.mean())
    rel = rel_low = rel_high = None
    if mean_b > 0:
        rel = mean_a / mean_b - 1
        finite = rels[np.isfinite(rels)]
        if len(finite):
            rel_low, rel_high = (float(v) for v in np.percentile(finite, [tail, 100 - tail]))
    return BootstrapCI(n=n, resamples=resamples, mean_a=mean_a, mean_b=mean_b, diff=mean_a - mean_b,
                       low=float(low), high=float(high), rel=rel, rel_low=rel_low, rel_high=rel_high)
