"""Leaf content -> chunks (paragraph first, then a 200/50 sliding window).

By default (``chunk_units = "packed"``) consecutive paragraphs that fit share a chunk of at most
``chunk_size``: a statute written one clause a paragraph would otherwise become 50-character scraps
(``pack`` in ``chunk_spans``). What follows is the spec's per-paragraph rule, which packing extends.

Every chunk's ``text`` is exactly ``doc_text[start_char:end_char]`` of its
document, so a citation can point at the characters and lines it came from.
The chunker therefore works on *spans* of the original text and never edits it.

The spec's algorithm, with two fixes:

1. Short paragraphs (< ``min_chars``) are merged, not dropped (dropping loses
   text: a one-line "Accuracy: 93.1%" paragraph is often the answer).
   Consecutive short paragraphs gather into a group; a group that reaches
   ``min_chars`` becomes a chunk of its own (a run of short list items stays
   together, instead of all piling onto one neighbour); a group still below
   ``min_chars`` is prepended to the *following* chunk, or, at the end of the
   leaf, appended to the *preceding* one. A short paragraph only ever touches a
   long paragraph's first or last window, so every merged span is contiguous
   (the blank lines between are part of it). A leaf with nothing but short
   text still yields one chunk.
2. A window of a long paragraph prefers to end at a sentence boundary
   (``。！？；…`` anywhere, ``.!?`` before whitespace or the end, optionally
   followed by a closing quote/bracket), else at a word boundary (before
   whitespace, after ``，、：；,;:``), when one lies in the window's last quarter;
   otherwise it is cut at ``chunk_size``. The next window starts ``overlap``
   characters before the previous end, moved back (by at most ``overlap // 2``)
   to a sentence or word start when one is near, and always at least
   ``chunk_size // 4`` (>= 1) characters after the previous start, so the loop
   always progresses.

Guarantees (tested as properties in tests/test_chunker.py):
- every non-whitespace character of the content is inside at least one span;
- spans are non-empty, start and end on non-whitespace, and strictly increase
  in both start and end;
- a span with no merged short paragraph is at most ``chunk_size`` long;
- every span, with whitespace runs collapsed to one character, is at most
  ``chunk_size + 2 * min_chars`` (the whole chunk plus one short group on
  each side);
- consecutive windows of one long paragraph overlap by at most
  ``overlap + overlap // 2`` characters, and by exactly ``overlap`` in text
  with no boundaries to snap to (e.g. unpunctuated CJK), as long as
  ``overlap`` leaves room for the minimum advance.
"""
from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, Sequence

from utils.errors import TreeRAGError
from tree_builder.markdown_headings import line_starts
from tree_builder.pages import page_span

if TYPE_CHECKING:  # pragma: no cover - typing only
    from tree_builder.tree import TreeNode


class Settings(Protocol):
    """What chunking reads of the settings: config.Config has it (config.py composes ChunkParams, so this
    module cannot import config)."""

    @property
    def chunk_size(self) -> int: ...

    @property
    def chunk_overlap(self) -> int: ...

    @property
    def tuning(self) -> Any: ...


@dataclass(frozen=True)
class ChunkParams:
    """How a leaf's text becomes chunks beyond the user's chunk_size and chunk_overlap (build only)."""

    min_chunk_chars: int = field(default=20, metadata={"build": True})
    """A scrap shorter than this joins a neighbouring chunk instead of being one."""
    chunk_units: Literal["paragraph", "packed"] = field(default="packed", metadata={"build": True})
    """packed: consecutive paragraphs share a chunk while it fits chunk_size (a statute's clauses
    embedded together; chosen by evaluation); paragraph: every paragraph its own chunk (the spec's)."""
    chunk_context: Literal["none", "headings"] = field(default="headings", metadata={"build": True})
    """headings: a chunk is embedded and BM25-indexed with its document title and heading path on a
    line before it (chosen by evaluation); none: its text alone. Stored text and citations never change."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {"min_chunk_chars": (0, math.inf)}


@dataclass
class Chunk:
    chunk_id: str
    """``<node_id>_chunk_<NN>`` (spec)."""
    text: str
    source_node_id: str
    heading_path: str
    embedding: list[float] = field(default_factory=list, repr=False)
    """Kept for the spec's contract; on disk embeddings live in embeddings.npy."""
    doc_path: str = ""
    start_char: int = 0
    end_char: int = 0
    """Span [start, end) in the normalised document text."""
    start_line: int = 0
    end_line: int = 0
    """1-based inclusive lines of the span, for ``doc.md:L12-L15`` citations."""
    page_start: int = 0
    page_end: int = 0
    """1-based pages of the span in a paged source (``report.pdf:p12``); 0 without pages."""

    @property
    def section_title(self) -> str:
        """The heading of the chunk's own section, the last of its heading path (what a statement's
        or a note's title is matched with)."""
        return self.heading_path.rsplit(" > ", 1)[-1]


_PARA_SEP = re.compile(r"\n\s*\n")
_CJK_SENT_END = "。！？；…"
_ASCII_SENT_END = ".!?"
_CLOSERS = "\"'”’」』）)]】》"
_WORD_PUNCT = frozenset("，、：；,;:")
_CJK_SE, _ASCII_SE, _CL = (re.escape(x) for x in (_CJK_SENT_END, _ASCII_SENT_END, _CLOSERS))
#: A sentence end; the boundary is the match's end. CJK punctuation needs
#: nothing after it; ASCII needs whitespace or the end (so 73.2 and e.g.x do not count).
SENTENCE_END = re.compile(f"[{_CJK_SE}][{_CL}]?|[{_ASCII_SE}][{_CL}]?(?=\\s|\\Z)")

Span = tuple[int, int]


def _check_params(chunk_size: int, overlap: int, min_chars: int) -> None:
    if chunk_size < 1:
        raise TreeRAGError(f"invalid chunking settings: chunk_size {chunk_size} must be at least 1")
    if not 0 <= overlap < chunk_size:
        raise TreeRAGError(f"invalid chunking settings: overlap {overlap} must be in [0, chunk_size={chunk_size})")
    if not 0 <= min_chars <= chunk_size:
        raise TreeRAGError(f"invalid chunking settings: min_chars {min_chars} must be in [0, chunk_size={chunk_size}]")


def _last_sentence_break(text: str, lo: int, hi: int) -> int | None:
    """Largest sentence boundary p in [lo, hi] (hi < paragraph end), or None.

    Only the window's tail is scanned (``pos``/``endpos``), so a window costs
    O(chunk_size), whatever the paragraph's length.
    """
    last = None
    for m in SENTENCE_END.finditer(text, max(lo - 2, 0), hi + 1):
        p = m.end()
        if lo <= p <= hi:  # an end at endpos is the scan's edge, not a boundary
            last = p
    return last


def _last_word_break(text: str, lo: int, hi: int) -> int | None:
    """Largest word boundary p in [lo, hi]: where whitespace begins or ends, or after ，、：; etc.

    Scanned backwards: in prose a space is a few characters away.
    """
    for p in range(hi, lo - 1, -1):
        prev, cur = text[p - 1], text[p]
        if cur.isspace():
            if not prev.isspace():
                return p
        elif prev.isspace() or prev in _WORD_PUNCT:
            return p
    return None


def _windows(text: str, ps: int, pe: int, chunk_size: int, overlap: int) -> list[Span]:
    """Sliding windows over the paragraph text[ps:pe] (which starts/ends on non-space)."""
    quarter = chunk_size // 4
    min_adv = max(1, quarter)
    spans: list[Span] = []
    s = ps
    prev_end = -1
    while True:
        if pe - s <= chunk_size:
            spans.append((s, pe))
            return spans
        hard = s + chunk_size
        lo = s + max(1, chunk_size - quarter)
        e = _last_sentence_break(text, lo, hard)
        if e is None:
            e = _last_word_break(text, lo, hard)
            if e is None:
                e = hard
        e2 = e
        while e2 > s and text[e2 - 1].isspace():
            e2 -= 1
        if e2 <= prev_end:
            # Only whitespace beyond the previous window: a window here would
            # repeat it. Restart after the whitespace (nothing to overlap with).
            s = e
            while text[s].isspace():
                s += 1
            continue
        spans.append((s, e2))
        prev_end = e2
        # Next start: `overlap` before e, moved back to a sentence or word start
        # within overlap // 2, never less than min_adv after s.
        floor = s + min_adv
        c = max(e - overlap, floor)
        ns = c
        if overlap:
            back = max(c - overlap // 2, floor)
            hit = _last_sentence_break(text, back, c)
            if hit is None:
                hit = _last_word_break(text, back, c)
            if hit is not None:
                ns = hit
        while text[ns].isspace():
            ns += 1
        s = ns


def paragraph_spans(text: str) -> list[Span]:
    """Stripped, non-blank paragraphs (separated by runs of blank lines)."""
    out: list[Span] = []
    pos = 0
    bounds = [(m.start(), m.end()) for m in _PARA_SEP.finditer(text)] + [(len(text), len(text))]
    for sep_start, sep_end in bounds:
        s, e = pos, sep_start
        pos = sep_end
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def paragraph_at(spans: Sequence[Span], offset: int) -> int:
    """Index of the span of ``paragraph_spans`` holding ``offset``, or -1 (a blank between paragraphs)."""
    i = bisect_right(spans, (offset, math.inf)) - 1
    return i if i >= 0 and spans[i][0] <= offset < spans[i][1] else -1


def chunk_spans(text: str, chunk_size: int = 200, overlap: int = 50, min_chars: int = 20,
                pack: bool = False) -> list[Span]:
    """Chunk spans ``[(start, end), ...]`` of ``text`` (see the module docstring).

    ``pack``: consecutive paragraphs share one chunk while the span holding them (blank lines
    included) stays within ``chunk_size``. A statute's clauses or a paper's short list items are
    then read together, as the units a reader cites, instead of as 50-character scraps that say
    little to a dense model or to BM25. A paragraph longer than ``chunk_size`` is windowed as
    without packing, and the ``min_chars`` rule still joins a scrap left over to its neighbour.
    """
    _check_params(chunk_size, overlap, min_chars)
    chunks: list[list[int]] = []
    pending: list[int] | None = None  # [start, end, length with 1-char separators]
    packed: list[int] | None = None  # [start, end] of paragraphs packed so far (pack only)

    def flush_packed() -> None:
        """Close the packed group; a scrap below ``min_chars`` waits to join its neighbour instead."""
        nonlocal packed, pending
        if packed is None:
            return
        if packed[1] - packed[0] < min_chars:
            pending = [packed[0], packed[1], packed[1] - packed[0]]
        else:
            chunks.append(packed)
        packed = None

    for s, e in paragraph_spans(text):
        n = e - s
        if pack and n <= chunk_size:
            if packed is not None and e - packed[0] <= chunk_size:
                packed[1] = e
                continue
            flush_packed()
            if pending is not None:
                if e - pending[0] <= chunk_size:
                    s = pending[0]
                else:
                    chunks.append(pending[:2])
                pending = None
            packed = [s, e]
            continue
        flush_packed()
        if n < min_chars:
            if pending is None:
                pending = [s, e, n]
            else:
                pending = [pending[0], e, pending[2] + 1 + n]
            if pending[2] >= min_chars:
                chunks.append(pending[:2])
                pending = None
            continue
        units = [(s, e)] if n <= chunk_size else _windows(text, s, e, chunk_size, overlap)
        first = [units[0][0], units[0][1]]
        if pending is not None:
            first[0] = pending[0]
            pending = None
        chunks.append(first)
        chunks.extend([a, b] for a, b in units[1:])
    flush_packed()
    if pending is not None:
        if chunks:
            chunks[-1][1] = pending[1]
        else:
            chunks.append(pending[:2])
    return [(a, b) for a, b in chunks]


def span_lines(starts: Sequence[int], start_char: int, end_char: int) -> tuple[int, int]:
    """1-based inclusive (first line, last line) of the non-empty span [start_char, end_char)."""
    return bisect_right(starts, start_char), bisect_right(starts, max(start_char, end_char - 1))


def chunk_leaf(node: "TreeNode", doc_text: str, config: Settings,
               starts: Sequence[int] | None = None,
               page_starts: Sequence[int] = ()) -> list[Chunk]:
    """Chunks of one leaf, with absolute character and line spans in its document.

    ``starts`` is ``line_starts(doc_text)``; pass it when chunking many leaves of
    one document (it is recomputed otherwise). ``page_starts`` is the
    document's ``Document.page_starts`` (PDF): each chunk then records its pages.
    """
    lo, hi = node.content_start, node.content_end
    if hi - lo != len(node.content) or not doc_text.startswith(node.content, lo):
        raise ValueError(f"node {node.node_id}: content does not match doc_text[{lo}:{hi}]")
    if starts is None:
        starts = line_starts(doc_text)
    out: list[Chunk] = []
    params = config.tuning.chunking
    spans = chunk_spans(node.content, config.chunk_size, config.chunk_overlap, params.min_chunk_chars,
                        pack=params.chunk_units == "packed")
    for i, (s, e) in enumerate(spans):
        a, b = lo + s, lo + e
        first, last = span_lines(starts, a, b)
        p_first, p_last = page_span(page_starts, a, b)
        out.append(Chunk(chunk_id=f"{node.node_id}_chunk_{i:02d}", text=doc_text[a:b],
                         source_node_id=node.node_id, heading_path=node.heading_path,
                         doc_path=node.doc_path, start_char=a, end_char=b,
                         start_line=first, end_line=last, page_start=p_first, page_end=p_last))
    return out
