"""Between retrieval and synthesis: turn ranked chunks into the text the answer step reads.

Ranked chunks are 200-character windows that overlap by 50. Handing the top five to the
answer step gives it under 1,000 new characters, a quarter of them repeated, cut mid-sentence,
often five windows of one paragraph. A person reading the same sections would read whole
paragraphs, once each, from every section the question needs. So, within a character budget:

1. **Units.** A hit is read as its paragraph when the paragraph is short enough for the unit
   (``unit_chars``, a third of the budget for a detail question, a sixth for a multi-part or
   overview one), else as the sentences around it up to the unit: a person who finds a match in a
   long paragraph reads a good part of the paragraph around it, not one sentence. (Reading only
   the hit's own sentences, six units to the budget, found more evidence items in 2,000 characters
   but rarely half of any one; reading a paragraph whole because several ranked hits fall in it
   was tried and dropped: it read fewer items and no more of each than the wider unit.) A hit on a
   table's rows is read from the table's column header down when that fits the unit: "Effective tax
   rate 23% 20%" read alone does not say which year each figure is.
2. **No overlap waste.** Units of one leaf that overlap or touch (only whitespace between) merge
   into one passage with one citation span; a character is paid for once.
3. **Spread.** On the first pass one leaf may take at most ``leaf_share`` of the budget (its first
   hit is always read); hits beyond that wait while other leaves' hits are read, and are read on a
   second pass if the budget allows. A hit whose unit is a contents listing (titles with page numbers
   that run upward: "Consolidated Balance Sheets 53", "Income Tax Expense and Accruals 57") waits too:
   it names the sections that hold the answer and answers nothing, yet shares every word of a
   question that names them. (Making a hit wait also when it adds none of the question's
   words already read was tried and dropped: it cost every arm a sixth of the evidence found in
   2,000 characters on the papers.)
4. **Small-to-big.** Budget left after every hit was read grows passages, best first, to their
   paragraph and then to their whole leaf (the tree knows where a section ends).

Flat and tree retrieval get the same assembly: it is not the tree's; only which sections the
ranked list favours is. Passages come out in reading order (document, then position).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from indexing.chunker import Chunk, paragraph_at, paragraph_spans
from indexing.representation import column_header_span
from retrieval.extractive import leaf_text, sentence_window, widen_to_sentences
from retrieval.types import RetrievedChunk

if TYPE_CHECKING:
    from retrieval.query_plan import QueryPlan
    from retrieval.types import ContextParams

UNITS_PER_BUDGET = 3
"""A hit is read as at most budget / this many characters on the first pass (its paragraph whole when
that fits); ContextParams.context_units_per_budget says why three."""
MIN_TAKE = 40
"""Remaining budget below which no new unit is started (a fragment that short answers nothing)."""
_LISTING_ROW = re.compile(r"^\S.*[^\W\d_][)’'.]?[\s.…]+(\d{1,3})$")
"""A contents row: a title, spaces or dot leaders, a page number ("Pension and Retiree Medical Plans 58")."""
LISTING_ROWS = 4
"""Fewest rows a contents listing has (a table of a few one-figure rows is no listing)."""
LISTING_STEP = 60
"""Most pages between two rows of a listing (a column of figures leaps)."""


def contents_listing(text: str) -> bool:
    """Most lines of ``text`` are contents rows, at least ``LISTING_ROWS`` of them, their page numbers
    rising by a few pages at a time: a table's column of figures rises and falls, or leaps."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    pages = [int(m.group(1)) for m in map(_LISTING_ROW.match, lines) if m]
    return len(pages) >= LISTING_ROWS and 2 * len(pages) > len(lines) \
        and all(0 <= b - a <= LISTING_STEP for a, b in zip(pages, pages[1:]))


@dataclass
class ContextPassage:
    """One contiguous span of one leaf that the answer step reads, with one citation."""

    doc_path: str
    node_id: str
    heading_path: str
    start: int
    end: int
    """Document character span [start, end)."""
    text: str
    ranks: list[int] = field(default_factory=list)
    """Step-2 ranks (1-based) of the hits read inside this passage."""
    chunk: Chunk | None = None
    """A chunk carrying the passage's span, lines and pages (for citations)."""

    @property
    def best_rank(self) -> int:
        return min(self.ranks) if self.ranks else 10**9

    def to_dict(self) -> dict[str, Any]:
        c = self.chunk
        return {"doc_path": self.doc_path, "node_id": self.node_id, "heading_path": self.heading_path,
                "start_char": self.start, "end_char": self.end, "ranks": list(self.ranks),
                "start_line": c.start_line if c else None, "end_line": c.end_line if c else None,
                "page_start": (c.page_start or None) if c else None,
                "page_end": (c.page_end or None) if c else None, "text": self.text}


@dataclass
class _Leaf:
    """A leaf's text and what has been chosen from it, in leaf offsets."""

    node_id: str
    doc_path: str
    heading_path: str
    content: str
    start: int
    """Document offset of ``content[0]``."""
    anchor: Chunk
    """A retrieved chunk of the leaf: its line and page anchor the passage's citation."""
    paragraphs: list[tuple[int, int]]
    pages: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(start_char, end_char, page_start, page_end) of the leaf's chunks, for a paged source."""
    chosen: list[tuple[int, int]] = field(default_factory=list)
    ranks: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    headers: dict[int, tuple[int, int] | None] = field(default_factory=dict)
    """``column_header_span`` by unit start: the hits of one table share their starts and the walk up."""

    def used(self) -> int:
        return sum(b - a for a, b in _merge(self.chosen, self.content))

    def paragraphs_of(self, a: int, b: int) -> tuple[int, int]:
        """The whole paragraphs [a, b) touches: a window's paragraph, or the paragraphs a packed chunk
        holds (an edge between paragraphs stays where it is)."""
        i, j = paragraph_at(self.paragraphs, a), paragraph_at(self.paragraphs, b - 1)
        return (self.paragraphs[i][0] if i >= 0 else a, self.paragraphs[j][1] if j >= 0 else b)


def _merge(spans: Sequence[tuple[int, int]], content: str) -> list[tuple[int, int]]:
    """Union of spans; two spans with only whitespace (no blank line) between them become one."""
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out:
            gap = content[out[-1][1]:a] if a > out[-1][1] else ""
            if a <= out[-1][1] or (gap.strip() == "" and "\n\n" not in gap):
                out[-1][1] = max(out[-1][1], b)
                continue
        out.append([a, b])
    return [(a, b) for a, b in out]


def _new_chars(leaf: _Leaf, a: int, b: int) -> int:
    """What adding [a, b) costs: how much longer the leaf's merged passages get (new characters,
    and the whitespace that joins the span to a passage it touches)."""
    before = leaf.used()
    return sum(y - x for x, y in _merge(leaf.chosen + [(a, b)], leaf.content)) - before


def _fit(leaf: _Leaf, a: int, b: int, left: int) -> int:
    """The largest end e in (a, b] such that [a, e) costs at most ``left`` (a if none does)."""
    lo, hi = a, b
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _new_chars(leaf, a, mid) <= left:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _load_leaf(index: Any, chunk: Chunk) -> _Leaf | None:
    """The chunk's leaf, when its stored content really holds the chunk's span."""
    leaf = leaf_text(index, chunk)
    if leaf is None:
        return None
    content, start = leaf
    pages = []
    rows = index.leaf_rows.get(chunk.source_node_id) if chunk.page_start else None
    if rows is not None:
        pages = [(c.start_char, c.end_char, c.page_start, c.page_end)
                 for c in (index.chunks[r] for r in range(rows[0], rows[1]))]
    return _Leaf(chunk.source_node_id, chunk.doc_path, chunk.heading_path, content, start, chunk,
                 paragraph_spans(content), pages)


def _units(leaf: _Leaf, a: int, b: int, unit_chars: int) -> list[tuple[int, int]]:
    """What a hit at [a, b) may be read as, most preferred first: its paragraph(s) when short enough
    for the unit, else the sentences around the hit up to the unit, its own sentences, the chunk as
    retrieved; each from its table's column header down first, when it opens on a table row."""
    out = []
    pa, pb = leaf.paragraphs_of(a, b)
    if pb - pa <= unit_chars:
        out.append((pa, pb))
    core = widen_to_sentences(leaf.content, a, b)
    out.append(sentence_window(leaf.content, (pa, pb), core, unit_chars))
    out.append(core)
    out.append((a, b))
    return [u for x, y in out for u in (_from_header(leaf, x, y, unit_chars), (x, y)) if u is not None]


def _from_header(leaf: _Leaf, a: int, b: int, unit_chars: int) -> tuple[int, int] | None:
    """[a, b) read from its table's column header down ("Year ended December 31," / "2022 2021"), when
    it opens on a table row and that fits the unit: rows alone ("Effective tax rate 23% 20%") do not
    say which period each figure is."""
    if a not in leaf.headers:
        leaf.headers[a] = column_header_span(leaf.content, a)
    span = leaf.headers[a]
    if span is None:
        return None
    starts = (leaf.paragraphs_of(*span)[0], span[0])  # the header's paragraph, else its line alone
    return next(((x, b) for x in starts if b - x <= unit_chars), None)


def assemble_planned(index: Any, ranked: Sequence[RetrievedChunk], budget: int, plan: "QueryPlan",
                     params: "ContextParams") -> AssembledContext:
    """``assemble_context`` as the question's plan and the context parameters say: the query pipeline,
    every evaluation arm and the benchmarks read through this one call, so they cannot drift apart."""
    return assemble_context(index, ranked, budget, leaf_share=plan.leaf_share(params.context_leaf_share),
                            units_per_budget=plan.units_per_budget(params.context_units_per_budget))


@dataclass
class AssembledContext:
    passages: list[ContextPassage]
    budget: int
    used: int
    """Characters read (at most ``budget``)."""
    hits_read: int
    """Ranked hits whose text is inside some passage."""

    def spans(self) -> list[tuple[str, int, int]]:
        return [(p.doc_path, p.start, p.end) for p in self.passages]


def assemble_context(index: Any, ranked: Sequence[RetrievedChunk], budget: int, *,
                     leaf_share: float = 0.5, units_per_budget: int = UNITS_PER_BUDGET) -> AssembledContext:
    """The passages (reading order) the answer step reads from ``ranked`` within ``budget`` characters.

    ``units_per_budget``: a hit is read as at most ``budget / units_per_budget`` characters on the first
    pass; a hit in a paragraph longer than that is read as its sentences and those around them up to
    that size.
    """
    unit_chars = max(1, budget // max(1, units_per_budget))
    leaves: dict[str, _Leaf] = {}
    loose: list[ContextPassage] = []
    left = budget
    hits_read = 0
    waiting: list[tuple[int, _Leaf, list[tuple[int, int]]]] = []
    prefetch = getattr(index, "prefetch_contents", None)
    if prefetch is not None:  # the leaves of the hits that may be read, in one statement on an engine
        prefetch(rc.chunk.source_node_id for rc in ranked)

    def take(rank: int, leaf: _Leaf, units: list[tuple[int, int]]) -> None:
        """Read the first unit that fits; if none does, the hit's first characters up to the budget."""
        nonlocal left
        for a, b in units:
            cost = _new_chars(leaf, a, b)
            if cost <= left:
                break
        else:
            b = _fit(leaf, a, b, left)
            cost = _new_chars(leaf, a, b)
        if b > a and cost > 0:
            leaf.chosen.append((a, b))
            left -= cost
        leaf.ranks.setdefault((a, b), []).append(rank)

    for rank, rc in enumerate(ranked, 1):
        if left < MIN_TAKE:
            break
        c = rc.chunk
        leaf = leaves.get(c.source_node_id)
        if leaf is None:
            leaf = _load_leaf(index, c)
            if leaf is None:  # no trustworthy leaf text: the chunk alone, as retrieved
                if len(c.text) <= left and not any(p.doc_path == c.doc_path and p.start < c.end_char
                                                   and c.start_char < p.end for p in loose):
                    loose.append(ContextPassage(c.doc_path, c.source_node_id, c.heading_path, c.start_char,
                                                c.end_char, c.text, [rank], c))
                    left -= len(c.text)
                    hits_read += 1
                continue
            leaves[c.source_node_id] = leaf
        hit = (c.start_char - leaf.start, c.end_char - leaf.start)
        units = _units(leaf, *hit, unit_chars)
        crowded = bool(leaf.chosen) and leaf.used() + _new_chars(leaf, *units[0]) > leaf_share * budget
        if crowded or contents_listing(leaf.content[units[0][0]:units[0][1]]):
            waiting.append((rank, leaf, units))
            continue
        take(rank, leaf, units)
        hits_read += 1
    for rank, leaf, units in waiting:  # second pass: what waited, best first, while budget lasts
        if left < MIN_TAKE:
            break
        take(rank, leaf, units)
        hits_read += 1
    left = _grow(leaves, left)
    passages = [p for leaf in leaves.values() for p in _passages(leaf)] + loose
    passages.sort(key=lambda p: (p.doc_path, p.start))
    return AssembledContext(passages, budget, budget - left, hits_read)


def _grow(leaves: dict[str, _Leaf], left: int) -> int:
    """Small-to-big with what is left: each leaf, best hit first, to its paragraphs, then whole.
    Returns the budget still left."""
    order = sorted(leaves.values(), key=lambda lf: min((min(r) for r in lf.ranks.values()), default=10**9))
    for stage in ("paragraph", "leaf"):
        for leaf in order:
            if left < MIN_TAKE:
                return left
            if not leaf.chosen:
                continue
            targets = ([leaf.paragraphs_of(a, b) for a, b in _merge(leaf.chosen, leaf.content)]
                       if stage == "paragraph" else [(0, len(leaf.content.rstrip()))])
            for a, b in targets:
                cost = _new_chars(leaf, a, b)
                if 0 < cost <= left:
                    leaf.chosen.append((a, b))
                    left -= cost
    return left


def _passages(leaf: _Leaf) -> list[ContextPassage]:
    out = []
    for a, b in _merge(leaf.chosen, leaf.content):
        while a < b and leaf.content[a].isspace():
            a += 1
        while b > a and leaf.content[b - 1].isspace():
            b -= 1
        if b <= a:
            continue
        ranks = sorted({r for (x, y), rs in leaf.ranks.items() if x < b and y > a for r in rs})
        out.append(ContextPassage(leaf.doc_path, leaf.node_id, leaf.heading_path, leaf.start + a,
                                  leaf.start + b, leaf.content[a:b], ranks, _span_chunk(leaf, a, b)))
    return out


def _span_chunk(leaf: _Leaf, a: int, b: int) -> Chunk:
    """A chunk record for the passage's own span: lines counted from the anchor chunk's line."""
    anc = leaf.anchor
    ao = anc.start_char - leaf.start

    def line_at(off: int) -> int:
        if off >= ao:
            return anc.start_line + leaf.content.count("\n", ao, off)
        return anc.start_line - leaf.content.count("\n", off, ao)

    first, last = line_at(a), line_at(max(a, b - 1))
    lo, hi = leaf.start + a, leaf.start + b
    inside = [(p0, p1) for c0, c1, p0, p1 in leaf.pages if c0 < hi and c1 > lo and p0]
    page_start = min((p0 for p0, _ in inside), default=anc.page_start)
    page_end = max((p1 or p0 for p0, p1 in inside), default=anc.page_end)
    return Chunk(chunk_id=f"{leaf.node_id}_passage_{a}", text=leaf.content[a:b], source_node_id=leaf.node_id,
                 heading_path=leaf.heading_path, doc_path=leaf.doc_path, start_char=leaf.start + a,
                 end_char=leaf.start + b, start_line=max(1, first), end_line=max(1, last),
                 page_start=page_start, page_end=page_end)
