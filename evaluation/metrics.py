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
- dnDCG@10 and the context figures (R@B, all@B, any@B, cov@B) count each
  evidence item once, so repeating one section cannot look better than
  finding several evidence items ("Counting each evidence item once").
- Slices group questions by where their evidence lies (one leaf, several
  leaves, several documents, a long leaf), since a structure-aware arm is
  expected to help on some of these and not others.

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

BUDGETS = (2000, 4000, 8000)
"""Context budgets (characters) the context figures are reported at."""

CONTEXT_FIGURES = ("R", "all", "any", "cov")
"""The figures of one context budget, each keyed ``<figure>@<budget name>`` (``R@2k``)."""


def budget_name(budget: int) -> str:
    """2000 -> "2k": the key suffix, so a figure's key says its budget without a lookup table."""
    if budget > 0 and budget % 1000 == 0:
        return f"{budget // 1000}k"
    return str(budget)


def budget_keys(budget: int) -> tuple[str, ...]:
    return tuple(f"{f}@{budget_name(budget)}" for f in CONTEXT_FIGURES)


CONTEXT_KEYS = tuple(k for b in BUDGETS for k in budget_keys(b))
"""R@2k, all@2k, any@2k, cov@2k, R@4k, ... cov@8k."""

SLICE_KEYS = ("ndcg@10", "dndcg@10") + CONTEXT_KEYS
"""Figures reported per slice with an interval against the best flat arm."""

PAGE_BUDGETS = (2000, 4000, 8000, 16000)
"""Budgets page@B is reported at (one financial-statement page alone holds 3,000-6,000 characters)."""
PAGE_READ_CHARS = 200
"""page@B: an evidence page counts as read when this many of its characters are (or all of a shorter page)."""
PAGE_KEYS = tuple(f"page@{budget_name(b)}" for b in PAGE_BUDGETS) + ("doc@1",)
"""Figures of sets whose evidence names pages: page@2k .. page@16k and doc@1."""

SCORE_KEYS = tuple(dict.fromkeys(METRIC_KEYS + SLICE_KEYS + PAGE_KEYS))
"""Every per-question figure (cov@2k once: the context's, which is the ranked chunks' when
an arm has no context step). Page figures are None for a question whose evidence names no page."""

SLICES = ("all", "one-leaf", "multi-leaf", "multi-doc", "long-leaf", "long-leaf-multi")
"""long-leaf-multi: two or more evidence items inside the same long leaf (what the graph channel is for)."""
LONG_LEAF_CHARS = 3000
"""A gold leaf with more content characters than this puts its question in "long-leaf"."""


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

    def leaf_lengths(self, doc: str) -> dict[str, int]:
        """node_id -> content characters of the document's leaves (for the long-leaf slice)."""
        return {nid: e - s for nid, s, e in self.leaves.get(doc, [])}

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
    item_leaves: tuple[tuple[str, frozenset[str]], ...] = ()
    """Every located evidence item (in scope or not, like ``gold_leaves``): (doc, its gold
    leaves over all its occurrences), for the slices."""

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
    item_leaves: list[tuple[str, frozenset[str]]] = []
    for doc, spans in evidence:
        rows: set[int] = set()
        leaves: set[str] = set()
        in_scope = allowed is None or doc in allowed
        if in_scope and spans:
            items.append((doc, tuple(spans)))
        for span in spans:
            if in_scope:
                rows |= table.relevant_rows(doc, span)
            leaves |= table.gold_leaves(doc, span)
        per_item.append(frozenset(rows))
        gold |= leaves
        if spans:
            item_leaves.append((doc, frozenset(leaves)))
    union = frozenset().union(*per_item) if per_item else frozenset()
    return Relevance(per_evidence=tuple(per_item), relevant=union, gold_leaves=frozenset(gold),
                     evidence_spans=tuple(items), item_leaves=tuple(item_leaves))


def question_slices(rel: Relevance, table: SpanTable) -> set[str]:
    """The slices (``SLICES``) a question belongs to, by where its evidence lies.

    A structure-aware arm should matter most where evidence sits in one leaf or
    in long leaves, and least (or hurt) where it is spread over many; the
    overall mean hides which. Leaves are counted over all of an item's verbatim
    occurrences (as ``gold_leaves`` is); an item in no leaf (a heading) adds
    none, so a question may be in neither one-leaf nor multi-leaf.
    """
    out = {"all"}
    leaves = {(doc, nid) for doc, ids in rel.item_leaves for nid in ids}
    if len(leaves) == 1:
        out.add("one-leaf")
    elif len(leaves) >= 2:
        out.add("multi-leaf")
    if len({doc for doc, _ in rel.item_leaves}) >= 2:
        out.add("multi-doc")
    lengths = {doc: table.leaf_lengths(doc) for doc, _ in leaves}
    if any(lengths[doc].get(nid, 0) > LONG_LEAF_CHARS for doc, nid in leaves):
        out.add("long-leaf")
    items_in: dict[tuple[str, str], int] = {}
    for doc, ids in rel.item_leaves:
        for nid in ids:
            if lengths[doc].get(nid, 0) > LONG_LEAF_CHARS:
                items_in[(doc, nid)] = items_in.get((doc, nid), 0) + 1
    if any(n >= 2 for n in items_in.values()):
        out.add("long-leaf-multi")
    return out


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


def distinct_ndcg(rows: Sequence[int], rel: Relevance, cutoff: int = 10) -> float:
    """dnDCG@cutoff: nDCG where a chunk gains only if it finds an evidence item not yet found.

    Plain nDCG gives three overlapping chunks of one paragraph three gains, so a
    ranking repeating one section beats one finding several items. Here a chunk
    gains 1 when it is relevant to some evidence item no earlier chunk was
    relevant to. The ideal is min(cutoff, in-scope items with a relevant chunk in
    the index) gains at the top: an item no chunk can be relevant to (e.g. only
    in a heading) cannot be found by any arm. Every gain finds a new item, so
    the figure never exceeds 1.
    """
    findable = sum(1 for item in rel.per_evidence if item)
    ideal = dcg([1] * min(findable, cutoff))
    if ideal <= 0:
        return 0.0
    found: set[int] = set()
    gains: list[int] = []
    for row in _dedupe(rows)[:cutoff]:
        items = {i for i, item in enumerate(rel.per_evidence) if row in item}
        gains.append(1 if items - found else 0)
        found |= items
    return dcg(gains) / ideal


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


@dataclass(frozen=True)
class ReadContext:
    """What the answer step reads of a context within a budget."""

    read: dict[str, list[Span]]
    """doc -> the characters read (disjoint intervals, in reading order)."""
    passages: list[tuple[str, Span]]
    """The passages reached, in reading order, each cut where the budget ran out."""


def read_context(passages: Sequence[tuple[str, Span]], budget: int) -> ReadContext:
    """Walk passages in reading order until ``budget`` new characters are read.

    A character already read (an overlapping passage of the same document) costs
    nothing again, so overlapping windows are not charged twice; the passage the
    budget runs out in is cut at its last new character read. A passage wholly
    read before is reached whole (free) while budget is left.
    """
    read: dict[str, list[Span]] = {}
    reached: list[tuple[str, Span]] = []
    left = budget
    for doc, span in passages:
        if left <= 0:
            break
        end = span[1]
        for a, b in _subtract(span, read.setdefault(doc, [])):
            take = min(b - a, left)
            if take <= 0:
                end = a
                break
            read[doc].append((a, a + take))
            left -= take
            if take < b - a:
                end = a + take
                break
        if end > span[0]:
            reached.append((doc, (span[0], end)))
    return ReadContext(read=read, passages=reached)


def _covered(spans: Sequence[Span], got: list[Span]) -> int:
    """Characters of an item's best-covered occurrence that lie inside ``got``."""
    if not got:
        return 0
    return max(s[1] - s[0] - sum(b - a for a, b in _subtract(s, got)) for s in spans)


def _half_read(spans: Sequence[Span], got: list[Span]) -> bool:
    """At least half of one occurrence's characters (and at least one) were read."""
    for s in spans:
        inside = s[1] - s[0] - sum(b - a for a, b in _subtract(s, got))
        if inside > 0 and 2 * inside >= s[1] - s[0]:
            return True
    return False


def _coverage(ctx: ReadContext, rel: Relevance) -> float:
    total = sum(min(s[1] - s[0] for s in spans) for _, spans in rel.evidence_spans)
    if total <= 0:
        return 0.0
    covered = sum(_covered(spans, ctx.read.get(doc, [])) for doc, spans in rel.evidence_spans)
    return covered / total


def coverage_at_budget(ranked_spans: Sequence[tuple[str, Span]], rel: Relevance,
                       budget: int = 2000) -> float:
    """cov@budget: share of the evidence characters inside the first ``budget`` new characters.

    Chunks are read in rank order; a character already read (an overlapping window of
    the same document) costs nothing again; the last chunk is cut at the budget. An
    evidence item found verbatim more than once counts by its best-covered occurrence.
    """
    return _coverage(read_context(ranked_spans, budget), rel)


def context_figures(passages: Sequence[tuple[str, Span]], rel: Relevance,
                    budget: int) -> dict[str, float]:
    """R@B, all@B, any@B, cov@B of the context the answer step reads (keys named by ``budget``).

    Retrieval figures say what was ranked; these say what the answer step gets to
    read within B characters, with each evidence item counted once however many
    passages repeat it. An item is *found* when some passage, as read (cut at the
    budget), is relevant to one of its occurrences by the relevant-chunk rule;
    *any* asks only that half of one item's characters were read (a passage may
    be far longer than the evidence). The denominator of R@B is the question's
    in-scope evidence items (``rel.evidence_spans``): evidence outside the scope
    could never be read.
    """
    r_key, all_key, any_key, cov_key = budget_keys(budget)
    items = rel.evidence_spans
    if not items:
        return {r_key: 0.0, all_key: 0.0, any_key: 0.0, cov_key: 0.0}
    ctx = read_context(passages, budget)
    found = sum(1 for doc, spans in items
                if any(d == doc and is_relevant(p, s) for d, p in ctx.passages for s in spans))
    half_read = any(_half_read(spans, ctx.read.get(doc, [])) for doc, spans in items)
    return {r_key: found / len(items), all_key: float(found == len(items)),
            any_key: float(half_read), cov_key: _coverage(ctx, rel)}


def _inside(span: Span, got: Sequence[Span]) -> int:
    """Characters of ``span`` inside the disjoint intervals ``got``."""
    return sum(overlap(span, g) for g in got)


def page_read(pages: Sequence[tuple[str, Span]], ctx: ReadContext,
              min_chars: int = PAGE_READ_CHARS) -> float | None:
    """Share of ``pages`` (doc, the page's span) of which the context read at least ``min_chars``
    characters, or the whole page when it holds fewer; None when there is no non-empty page.

    A page rather than the annotators' sentence: a figure on a financial statement is read from
    its row and column headers, so reading a part of the page is what an answer needs, and it does
    not depend on how a reader cut the page's text into lines.
    """
    pages = [(d, s) for d, s in dict.fromkeys(pages) if s[1] > s[0]]
    if not pages:
        return None
    hit = sum(1 for d, s in pages if _inside(s, ctx.read.get(d, [])) >= min(min_chars, s[1] - s[0]))
    return hit / len(pages)


def page_figures(passages_at: Mapping[int, Sequence[tuple[str, Span]]],
                 pages: Sequence[tuple[str, Span]]) -> dict[str, float | None]:
    """page@B for each budget B of ``passages_at`` (budget -> the passages in reading order); None
    for every B when there is no evidence page."""
    if not pages:
        return {f"page@{budget_name(b)}": None for b in passages_at}
    return {f"page@{budget_name(b)}": page_read(pages, read_context(p, b)) for b, p in passages_at.items()}


def doc_at_1(top_doc: str | None, evidence_docs: Iterable[str]) -> float:
    """doc@1: 1 when the top-ranked chunk comes from a document that holds evidence (0 with no chunk)."""
    return float(top_doc is not None and top_doc in set(evidence_docs))


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


def resampled_means(values: np.ndarray, resamples: int = 10_000, seed: int = 0,
                    block: int = 1000) -> np.ndarray:
    """(n questions, k columns) -> (resamples, k): the column means over question resamples.

    One draw of question indices serves every column, so every arm and figure of
    a slice is compared on the same resamples (paired across arms, not only
    within a pair) and a run of many arms x figures costs one draw. The draws
    are those ``paired_bootstrap`` makes with the same seed and block; a resample
    becomes per-question counts, so the means are one matrix product rather
    than an (resamples x n x k) gather.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("resampled_means needs an (n, k) matrix")
    n, k = x.shape
    if n == 0:
        raise ValueError("bootstrap of zero questions")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not np.all(np.isfinite(x)):
        raise ValueError("bootstrap values must be finite (leave undefined figures out)")
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, k), dtype=np.float64)
    for start in range(0, resamples, block):
        m = min(block, resamples - start)
        idx = rng.integers(0, n, size=(m, n))
        flat = (idx + n * np.arange(m, dtype=idx.dtype)[:, None]).ravel()
        counts = np.bincount(flat, minlength=m * n).reshape(m, n).astype(np.float64)
        out[start:start + m] = counts @ x / n
    return out


def bootstrap_cis(resampled_a: np.ndarray, resampled_b: np.ndarray, mean_a: Sequence[float],
                  mean_b: Sequence[float], n: int, confidence: float = 0.95) -> list[BootstrapCI]:
    """One ``BootstrapCI`` per column from resampled means of a and b (``resampled_means``).

    Separate from the resampling so a caller can pair any column with any other
    (each figure has its own best flat arm) without drawing again.
    """
    ma, mb = np.asarray(resampled_a, dtype=np.float64), np.asarray(resampled_b, dtype=np.float64)
    if ma.shape != mb.shape or ma.ndim != 2:
        raise ValueError("bootstrap_cis needs two (resamples, k) matrices of the same shape")
    tail = (1 - confidence) / 2 * 100
    lows, highs = np.percentile(ma - mb, [tail, 100 - tail], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rels = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0) - 1.0, np.nan)
    out: list[BootstrapCI] = []
    for j in range(ma.shape[1]):
        a_j, b_j = float(mean_a[j]), float(mean_b[j])
        rel = rel_low = rel_high = None
        if b_j > 0:
            rel = a_j / b_j - 1
            finite = rels[:, j][np.isfinite(rels[:, j])]
            if len(finite):
                rel_low, rel_high = (float(v) for v in np.percentile(finite, [tail, 100 - tail]))
        out.append(BootstrapCI(n=n, resamples=ma.shape[0], mean_a=a_j, mean_b=b_j, diff=a_j - b_j,
                               low=float(lows[j]), high=float(highs[j]), rel=rel, rel_low=rel_low,
                               rel_high=rel_high))
    return out


def paired_bootstrap_columns(a: np.ndarray, b: np.ndarray, resamples: int = 10_000, seed: int = 0,
                             confidence: float = 0.95, block: int = 1000) -> list[BootstrapCI]:
    """``paired_bootstrap`` of each column of a against the same column of b, on shared resamples.

    Column j gives the interval ``paired_bootstrap(a[:, j], b[:, j])`` gives with the
    same seed (up to floating-point summation order).
    """
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape or xa.ndim != 2:
        raise ValueError("paired_bootstrap_columns needs two (n, k) matrices of the same shape")
    k = xa.shape[1]
    means = resampled_means(np.hstack([xa, xb]), resamples, seed, block)
    return bootstrap_cis(means[:, :k], means[:, k:], [float(xa[:, j].mean()) for j in range(k)],
                         [float(xb[:, j].mean()) for j in range(k)], xa.shape[0], confidence)
