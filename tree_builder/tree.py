"""The section tree: the data contract every later stage reads.

A TreeNode is the spec's (node_id, heading, level, content, summary, parent,
children, heading_path) plus what traceability needs: the document it came
from and its source span in the *normalised* document text, so any chunk can
be cited back to ``doc.md:L12-L15``.
"""
from __future__ import annotations

import bisect
import re
from collections import Counter, deque
from itertools import islice
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple, Optional, Protocol

from tree_builder.document import Document, Heading
from tree_builder.heading_schemes import bare_mark, scheme_of
from tree_builder.markdown_headings import line_starts, parse_headings, title_block
from tree_builder.numbering import Numbering, heading_numbering
from tree_builder.pages import page_span
from utils.cjk import has_cjk

class Settings(Protocol):
    """What the tree builder reads of the settings: config.Config has it (config.py imports the summary
    and chunk parameters, which import this module for types)."""

    @property
    def max_depth(self) -> int: ...

ROOT_ID = "0000"


@dataclass
class TreeNode:
    node_id: str
    heading: str
    level: int
    content: str
    summary: str = ""
    parent: Optional["TreeNode"] = field(default=None, repr=False, compare=False)
    children: list["TreeNode"] = field(default_factory=list)
    heading_path: str = ""
    doc_path: str = ""
    """Document path relative to the input (file name for a single file)."""
    kind: str = "section"
    """root | document | section | intro  (intro = text a parent holds before its first child)."""
    start_line: int = 0
    end_line: int = 0
    """1-based inclusive line span of the whole section (heading line included)."""
    start_char: int = 0
    end_char: int = 0
    """Character span [start, end) of the whole section in the normalised document."""
    content_start: int = 0
    content_end: int = 0
    """Character span of ``content``: ``doc_text[content_start:content_end] == content``."""
    page_start: int = 0
    page_end: int = 0
    """1-based pages of the section in a paged source (PDF); 0 when the source has no pages."""

    @property
    def is_leaf(self) -> bool:
        return len(self.children) == 0

    def iter_preorder(self) -> Iterator["TreeNode"]:
        """Node, then each child's subtree in order; a stack, so cost does not grow with depth."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def leaves(self) -> list["TreeNode"]:
        return [n for n in self.iter_preorder() if n.is_leaf and n.kind != "root"]

    def ancestors(self) -> list["TreeNode"]:
        """Ancestors from the top down, excluding the synthetic root."""
        out: list[TreeNode] = []
        node = self.parent
        while node is not None and node.kind != "root":
            out.append(node)
            node = node.parent
        return out[::-1]


# =========================================================================== building
#
# Levels come from numbering first and ``#`` marks second, decided
# *relative to the open section* with a stack: a heading opens a child of the
# section on top of the stack when it is deeper than it, else that section is
# closed. "Deeper" compares numbering when both headings use the same numbering
# family (``1.2`` vs ``1``, 节 vs 章, （一） vs 一、) and ``#`` counts otherwise.
# A node's level is therefore always its parent's level + 1: numbering that
# disagrees with ``#`` marks or skips a level cannot create jumps or orphans,
# and a law with only 章/节 gets 章 = 1, 节 = 2 without a lookup table.

class _Open(NamedTuple):
    level: int
    marker: int
    numbering: Numbering | None


def _is_deeper(marker: int, numbering: Numbering | None, top: _Open) -> bool:
    if numbering is not None and top.numbering is not None \
            and numbering.family == top.numbering.family:
        return numbering.depth > top.numbering.depth
    return marker > top.marker


def assign_levels(headings: list[Heading], base_marker: int = 0) -> list[int]:
    """Logical level (1 = top section) of each heading, before the depth cap."""
    stack = [_Open(0, base_marker, None)]
    levels: list[int] = []
    for h in headings:
        numbering = heading_numbering(h.text)
        while len(stack) > 1 and not _is_deeper(h.marker_level, numbering, stack[-1]):
            stack.pop()
        level = stack[-1].level + 1
        stack.append(_Open(level, h.marker_level, numbering))
        levels.append(level)
    return levels


LONG_SECTION_CHARS = 20_000
"""A section whose own text runs longer than this (about five pages of a filing) opens the next heading
level inside it, past the depth cap. The cap keeps a paper or a statute from splintering into
one-paragraph sections; but a filing's notes or its MD&A read as one 150,000-character leaf give the
locator one choice where the document offers forty, and the in-leaf ranking a whole book to search.
PageIndex caps a node's size the same way, splitting what is too long by the structure inside it."""
MAX_OPENED = 60
"""More headings than this at the next level of a long section are not its sections (a contract's
clause lines, a table's rows read as headings): the section stays one leaf."""
RUNNING = 3
"""A heading text (``_running_key``) this many times among the headings hidden in one section is a
running header or footer the page-furniture pass missed (it prints on only that section's pages, under
half the document's), not a section."""


def _running_key(text: str) -> str:
    """What a running header keeps from page to page: its words, with the page number (and any other
    digits) blanked when two or more words remain to tell it apart ("Pfizer Inc. 2021 Form 10-K 58");
    a bare "Note 3" or "Item 7" keeps its number, which is what names it."""
    exact = " ".join(text.split()).casefold()
    blanked = re.sub(r"\d+", "#", exact)
    return blanked if len(re.findall(r"[^\W\d_]{2,}", blanked)) >= 2 else exact


MARK_TITLE_CHARS = 120
"""Longest line read as a division mark's title when the title is set as body text."""
_SENTENCE_ENDS = (".", ",", ";", "!", "?", "。", "，", "；", "！", "？")
"""How a line that is a sentence or a clause ends ("为了规范……，制定本法。" under a bare "第一条")."""


def _join_mark(mark: Heading, title: str, end_char: int, end_line: int) -> Heading:
    text = mark.text.strip()
    joint = " " if has_cjk(text) or text[-1] in ".:-–—)" else " — "
    return Heading(text=f"{text}{joint}{title}", marker_level=mark.marker_level, line=mark.line,
                   start_char=mark.start_char, end_char=end_char, end_line=end_line)


def _body_title(text: str, start: int, end: int) -> tuple[str, int] | None:
    """The line opening ``text[start:end]`` when it stands alone as a title: a paragraph of one short
    line ("RESTRUCTURING", "Introduction") that is no sentence and no division of its own; with
    where it ends (its newline included)."""
    seg = text[start:min(end, start + 8 * MARK_TITLE_CHARS)]  # the title's line and what follows it
    body = seg.lstrip()
    raw, sep, after = body.partition("\n")
    line = raw.strip()
    alone = not after.partition("\n")[0].strip()  # a blank line (or the section's end) follows it
    if not alone or not line or len(line) > MARK_TITLE_CHARS or line.endswith(_SENTENCE_ENDS) \
            or not line[0].isupper() and not has_cjk(line[0]) or scheme_of(line) is not None:
        return None
    return line, start + (len(seg) - len(body)) + len(raw) + len(sep)


def _alone_under(mark: Heading, title: Heading, later: Iterable[Heading]) -> bool:
    """``title`` has no sibling inside ``mark``'s division: no later heading at its level or above
    comes before the mark's next division or a division ranked above the title (a plan's ARTICLEs under
    its title hold headings of their own). A first section ("Management's Discussion and Analysis"
    opening an annual report, "Report of Independent Registered Public Accounting Firm" after it; a
    release's title before its statements) is no title."""
    for h in later:
        if h.marker_level <= mark.marker_level or h.marker_level < title.marker_level and scheme_of(h.text):
            return True
        if h.marker_level <= title.marker_level:
            return False
    return True


def titled_marks(headings: list[Heading], text: str) -> list[Heading]:
    """A bare division mark ("NOTE 24") and the title printed on the line after it ("REPORTABLE
    OPERATING SEGMENTS AND GEOGRAPHIC OPERATIONS") are one heading. Kept apart, the mark named a
    section by its number alone: the title was a child hidden under the depth cap, or the mark's only
    child where the section is long, or a line of its text, so its words were in no heading the
    locator or the ranker read. The title is the next heading when one follows at once in the same or
    a deeper font, is no division itself and has no sibling in the division; else the next line when
    it stands alone as a title. Read from the end, so a later mark has its title when an earlier one
    looks for siblings ("Exhibit 10.13", its plan's title, "ARTICLE I", "Introduction")."""
    out: deque[Heading] = deque()
    for h in reversed(headings):
        nxt = out[0] if out else None
        if not bare_mark(h.text):
            out.appendleft(h)
        elif nxt is not None and scheme_of(nxt.text) is None and nxt.marker_level >= h.marker_level \
                and not text[h.end_char:nxt.start_char].strip() and _alone_under(h, nxt, islice(out, 1, None)):
            out.popleft()
            out.appendleft(_join_mark(h, nxt.text.strip(), nxt.end_char, nxt.end_line or nxt.line))
        else:
            found = _body_title(text, h.end_char, nxt.start_char if nxt is not None else len(text))
            if found is None:
                out.appendleft(h)
            else:
                title, end = found
                out.appendleft(_join_mark(h, title, end, h.line + text.count("\n", h.start_char, end - 1)))
    return list(out)


def kept_headings(headings: list[Heading], levels: list[int], text_len: int,
                  max_depth: int) -> list[tuple[Heading, int]]:
    """The headings that become nodes: every one down to ``max_depth``, and, inside a leaf longer than
    ``LONG_SECTION_CHARS``, the level below it (again while a new leaf is still that long).

    Only a leaf at the cap can hide headings: ``assign_levels`` gives the heading after a shallower
    leaf a level at most one below it, so that heading is kept. ``max_depth`` 0 (one leaf per
    document) stays that."""
    keep = [lvl <= max_depth for lvl in levels]
    grew = max_depth >= 1
    while grew:
        grew = False
        open_at = [i for i, k in enumerate(keep) if k]
        for pos, i in enumerate(open_at):
            nxt = open_at[pos + 1] if pos + 1 < len(open_at) else len(headings)
            end = headings[nxt].start_char if nxt < len(headings) else text_len
            if nxt == i + 1 or end - headings[i].end_char <= LONG_SECTION_CHARS:
                continue  # no hidden heading inside, or short enough to read whole
            inner = [j for j in range(i + 1, nxt) if levels[j] == levels[i] + 1]
            seen = Counter(_running_key(headings[j].text) for j in range(i + 1, nxt))
            inner = [j for j in inner if seen[_running_key(headings[j].text)] < RUNNING]
            if 0 < len(inner) <= MAX_OPENED:
                for j in inner:
                    keep[j] = True
                grew = True
    return [(h, lvl) for h, lvl, k in zip(headings, levels, keep) if k]


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop leading blank lines and trailing whitespace; keep the first line's indentation."""
    seg = text[start:end]
    left = len(seg) - len(seg.lstrip())
    if left == len(seg):
        return start, start
    first = start + left
    line_start = max(start, text.rfind("\n", start, first) + 1)
    return line_start, start + len(seg.rstrip())


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = line_starts(text)

    def line(self, pos: int) -> int:
        """1-based line of character ``pos``."""
        return bisect.bisect_right(self.starts, pos)

    def span(self, start: int, end: int) -> tuple[int, int]:
        first = self.line(start)
        return first, (self.line(end - 1) if end > start else first)


def _build_document(doc: Document, config: Settings) -> TreeNode:
    """One document -> a kind="document" node with its section subtree (levels 1..cap)."""
    text = doc.text
    lines = _Lines(text)
    headings = parse_headings(doc)
    block = title_block(doc, headings)
    absorbed = bool(block) and " ".join(h.text for h in block if h.text) == doc.title
    rest = titled_marks(headings[len(block):] if absorbed else headings, text)
    levels = assign_levels(rest, base_marker=block[-1].marker_level if absorbed else 0)
    kept = kept_headings(rest, levels, len(text), config.max_depth)

    doc_node = TreeNode(node_id="", heading=doc.title, level=0, content="", kind="document",
                        doc_path=doc.path, start_char=doc.body_start)
    doc_head_end = block[-1].end_char if absorbed else doc.body_start
    # (node, end of its heading, end of its own text = next kept heading's start)
    spans: list[tuple[TreeNode, int, int]] = [
        (doc_node, doc_head_end, kept[0][0].start_char if kept else len(text))]
    stack = [doc_node]
    for i, (h, level) in enumerate(kept):
        while stack[-1].level >= level:
            stack.pop()
        node = TreeNode(node_id="", heading=h.text, level=level, content="", kind="section",
                        parent=stack[-1], doc_path=doc.path, start_char=h.start_char)
        stack[-1].children.append(node)
        stack.append(node)
        own_end = kept[i + 1][0].start_char if i + 1 < len(kept) else len(text)
        spans.append((node, h.end_char, own_end))

    for node, head_end, own_end in spans:
        if node.children:
            node.content_start = node.content_end = head_end
            a, b = _trim(text, head_end, own_end)
            if b > a:  # a preface before the first child would be unreachable: own leaf
                intro = TreeNode(node_id="", heading=f"{node.heading} (intro)",
                                 level=node.level + 1, content=text[a:b], kind="intro",
                                 parent=node, doc_path=doc.path, start_char=a, end_char=b,
                                 content_start=a, content_end=b)
                intro.start_line, intro.end_line = lines.span(a, b)
                node.children.insert(0, intro)
        else:
            a, b = _trim(text, head_end, own_end)
            node.content, node.content_start, node.content_end = text[a:b], a, b

    # A section ends where its last descendant's own text ends.
    last_end: dict[int, int] = {}
    for node, _head_end, own_end in spans:
        last_end[id(node)] = own_end
        anc = node.parent
        while anc is not None:
            last_end[id(anc)] = own_end
            anc = anc.parent
    for node, _head_end, _own_end in spans:
        end = last_end[id(node)]
        node.end_char = node.start_char + len(text[node.start_char:end].rstrip())
        node.start_line, node.end_line = lines.span(node.start_char, node.end_char)
    if doc.page_starts:
        for node in doc_node.iter_preorder():
            node.page_start, node.page_end = page_span(doc.page_starts, node.start_char, node.end_char)
    return doc_node


def number_nodes(tops: list[TreeNode], first: int) -> int:
    """Pre-order ids from ``first`` over top-level nodes (children of the root), and heading paths;
    the next free id. Numbering the root's children a document at a time gives the ids of the whole
    forest numbered at once, so a build can hold one document's subtree at a time."""
    counter = first - 1
    stack: list[tuple[TreeNode, str]] = [(c, "") for c in reversed(tops)]
    while stack:
        node, prefix = stack.pop()
        counter += 1
        node.node_id = f"{counter:04d}"
        node.heading_path = f"{prefix} > {node.heading}" if prefix else node.heading
        stack.extend((c, node.heading_path) for c in reversed(node.children))
    return counter + 1


def new_root() -> TreeNode:
    """The synthetic root ("0000") the documents hang under (its text and summary stay empty)."""
    return TreeNode(node_id=ROOT_ID, heading="", level=0, content="", kind="root")


def document_tops(doc: Document, config: Settings, folder_mode: bool, root: TreeNode) -> list[TreeNode]:
    """One document's nodes directly under ``root``, parented to it, not yet numbered.

    folder_mode: the kind="document" node. Single file: the document's top-level sections (the
    spec's serialisation); a document without sections stays one leaf.
    """
    doc_node = _build_document(doc, config)
    tops = [doc_node] if folder_mode or not doc_node.children else list(doc_node.children)
    for node in tops:
        node.parent = root
    return tops


def build_tree(docs: list[Document], config: Settings, folder_mode: bool) -> TreeNode:
    """Documents -> synthetic root ("0000") over the section forest (see ``document_tops``)."""
    if not folder_mode and len(docs) != 1:
        raise ValueError(f"single-file mode needs exactly one document, got {len(docs)}")
    root = new_root()
    for doc in docs:
        root.children.extend(document_tops(doc, config, folder_mode, root))
    number_nodes(root.children, 1)
    return root
