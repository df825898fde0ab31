"""Markdown headings and document titles, read from a CommonMark parser's block structure.

Headings come from markdown-it-py rather than a regex, because "a line starting
with #" is wrong inside fenced/indented code, HTML blocks, comments, block
quotes and list items. Only the parser's token line maps are read and the
original normalised text sliced: nothing is re-rendered, so every character of
a tree node can be traced back to the file.
"""
from __future__ import annotations

import functools
import re
from typing import Any

from tree_builder.document import Document, Heading
from tree_builder.heading_schemes import bare_mark

_WS = re.compile(r"\s+")


@functools.lru_cache(maxsize=1)
def _trim_chars() -> str:
    """markdown-it's trim set for a heading's text, imported when a heading is first read: a query
    imports this module (for the tree's line helpers) but parses no Markdown, and importing
    markdown_it reads some sixty files, from disk on a cold start."""
    from markdown_it.common.utils import MD_TRIM_CHARS  # noqa: PLC0415

    return MD_TRIM_CHARS


@functools.lru_cache(maxsize=1)
def _block_parser() -> Any:
    """Block structure only: inline parsing is most of markdown-it's cost and we need none."""
    from markdown_it import MarkdownIt  # built once, when the first Markdown document is parsed

    return MarkdownIt("commonmark").disable("inline")


@functools.lru_cache(maxsize=1)
def _inline_parser() -> Any:
    from markdown_it import MarkdownIt  # built once, when the first inline text is parsed

    return MarkdownIt("commonmark")


def _inline_plain_text(source: str, env: dict) -> str:
    """Heading inline Markdown -> plain text (emphasis, links, code spans unwrapped)."""
    if not any(ch in source for ch in "*_`[]<>!\\&~"):
        return _WS.sub(" ", source).strip()
    tokens = _inline_parser().parseInline(source, env)
    parts: list[str] = []

    def walk(children: list[Any]) -> None:
        for tok in children:
            if tok.type in ("text", "code_inline"):
                parts.append(tok.content)
            elif tok.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            elif tok.type == "image":
                walk(tok.children or [])
            elif tok.children:
                walk(tok.children)

    for tok in tokens:
        walk(tok.children or [])
    return _WS.sub(" ", "".join(parts)).strip()


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins; computed once per document, reused for every node and chunk."""
    starts = [0]
    find = text.find
    pos = find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


_RISKY_LINE = re.compile(r"^(?:[ \t]+(?=[^ \t\n])|[>+*_=<`~\[|:-]|[0-9]{1,9}[.)](?:[ \t]|$)|#(?!#{0,5}(?:[ \t]|$)))", re.M)
"""A line start that may open a block other than a paragraph or an ATX heading (a list, quote, fence,
code, HTML, setext underline, thematic break, link definition) or continue one: the parser decides."""
_ATX_LINE = re.compile(r"^(#{1,6})(?=[ \t]|$)(.*)$", re.M)


_HEADING_LINE = re.compile(r"^ {0,3}(?:#{1,6}(?=[ \t]|$)|(?:=+|-+)[ \t]*$)", re.M)
"""An ATX heading line or a setext underline (``===``/``---``): each is at most one heading."""
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.M)


def heading_line_count(text: str, body_start: int = 0) -> int:
    """An upper bound on the Markdown headings of ``text[body_start:]``, without parsing it.

    Why: the parser holds tokens for every heading and the tree a node for each, hundreds of bytes
    a heading, so a file of a million ``#`` lines cost over a gigabyte before any limit was checked.
    Lines inside fenced code are not counted (a shell script's ``# comments``); a setext underline
    counts only after a non-blank line. Exact for ATX headings outside lists and quotes.
    """
    fenced: list[tuple[int, int]] = []
    open_at, marker = -1, ""
    for m in _FENCE_LINE.finditer(text, body_start):
        run = m.group(1)
        if open_at < 0:
            if run[0] == "`" and "`" in m.group(2):
                continue  # a backtick fence's info string holds no backtick: an inline code span
            open_at, marker = m.start(), run
        elif run[0] == marker[0] and len(run) >= len(marker) and not m.group(2).strip():
            fenced.append((open_at, m.end()))
            open_at = -1
    if open_at >= 0:
        fenced.append((open_at, len(text)))  # an unclosed fence runs to the end of the document
    count, k = 0, 0
    for m in _HEADING_LINE.finditer(text, body_start):
        pos = m.start()
        while k < len(fenced) and fenced[k][1] <= pos:
            k += 1
        if k < len(fenced) and fenced[k][0] <= pos:
            continue
        if m.group(0).lstrip()[:1] in "=-":
            before = text.rfind("\n", body_start, max(pos - 1, body_start))
            if pos == body_start or not text[before + 1:pos - 1].strip():
                continue  # a thematic break or a stray underline: no paragraph above it
        count += 1
    return count


@functools.lru_cache(maxsize=64)
def markdown_headings(text: str, body_start: int) -> tuple[Heading, ...]:
    """Memoised because titles need headings at load time and the tree needs them again (moments
    apart in a build, which reads a document and sets it aside with its headings: a few suffice)."""
    if "\t" not in text and "\0" not in text and _RISKY_LINE.search(text, body_start) is None:
        return _plain_headings(text, body_start)
    return _parsed_headings(text, body_start)


def _plain_headings(text: str, body_start: int) -> tuple[Heading, ...]:
    """The headings of a body made only of paragraphs and ATX headings, read line by line.

    Why: the CommonMark parser costs ~9 ms for 16 KB of Markdown, most of a document's build time,
    and a body whose every line starts a paragraph or an ATX heading (nothing a list, quote, fence,
    indented code, HTML, table or setext underline could begin) has no other structure to find.
    The result is the parser's, field for field: its ATX rule is replayed exactly (closing ``#``
    run, trimming), and anything else takes the parser (``_RISKY_LINE``).
    """
    out: list[Heading] = []
    line = text.count("\n", 0, body_start)
    pos = body_start
    trim = _trim_chars()
    for m in _ATX_LINE.finditer(text, body_start):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        rest = m.group(2)
        end = len(rest)
        while end > 0 and rest[end - 1] in " \t":  # the parser's skipSpacesBack
            end -= 1
        tmp = end
        while tmp > 0 and rest[tmp - 1] == "#":  # skipCharsStrBack: a closing run of #
            tmp -= 1
        if tmp > 0 and rest[tmp - 1] in " \t":
            end = tmp
        inline = rest[:end].strip(trim)
        end_char = m.end() + 1 if m.end() < len(text) else len(text)
        out.append(Heading(text=_inline_plain_text(inline, {}), marker_level=len(m.group(1)),
                           line=line + 1, start_char=m.start(), end_char=end_char, end_line=line + 1))
    return tuple(out)


def _parsed_headings(text: str, body_start: int) -> tuple[Heading, ...]:
    """Headings as the CommonMark parser's block structure places them."""
    starts = line_starts(text)
    line_offset = text.count("\n", 0, body_start)
    env: dict = {}
    tokens = _block_parser().parse(text[body_start:], env)
    out: list[Heading] = []
    for i, tok in enumerate(tokens):
        # level 0 = not nested in a block quote or list item: a quoted "# x" is content.
        if tok.type != "heading_open" or tok.level != 0 or tok.map is None:
            continue
        first, last = tok.map[0] + line_offset, tok.map[1] + line_offset  # 0-based, [first, last)
        inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
        marker = len(tok.markup) if tok.markup.startswith("#") else (1 if tok.markup == "=" else 2)
        start_char = starts[first]
        end_char = starts[last] if last < len(starts) else len(text)
        out.append(Heading(text=_inline_plain_text(inline, env), marker_level=marker,
                           line=first + 1, start_char=start_char, end_char=end_char,
                           end_line=last))
    return tuple(out)


def parse_headings(doc: Document) -> list[Heading]:
    """All section headings of the body (ATX and setext, or a reader's own), in document order."""
    if doc.headings is not None:
        return list(doc.headings)
    return list(markdown_headings(doc.text, doc.body_start))


def title_block(doc: Document, headings: list[Heading] | None = None) -> list[Heading]:
    """The heading(s) that name the document rather than open a section.

    Either the single H1 when it is the first thing in the body, or a run of
    H1s at the very top with nothing between them and no H1 later (statute
    files start ``# 中华人民共和国民法典`` / ``# 总则``). Everything else in
    the document is then below them, so they can become the document node
    without any section losing its parent. Empty list when there is none.
    """
    hs = parse_headings(doc) if headings is None else headings
    if not hs or hs[0].marker_level != 1 or bare_mark(hs[0].text):  # "Exhibit 99.1" names no document
        return []
    text = doc.text
    if text[doc.body_start:hs[0].start_char].strip():
        return []
    block = [hs[0]]
    for prev, h in zip(hs, hs[1:]):
        if h.marker_level != 1 or text[prev.end_char:h.start_char].strip():
            break
        block.append(h)
    if any(h.marker_level == 1 for h in hs[len(block):]):
        return []
    return block


def document_title(doc: Document, fallback: str) -> str:
    """Front matter ``title``, else the single H1, else a top title block, else ``fallback``."""
    fm_title = doc.front_matter.get("title") if doc.front_matter else None
    if fm_title is not None and str(fm_title).strip():
        return _WS.sub(" ", str(fm_title)).strip()
    headings = parse_headings(doc)
    h1s = [h for h in headings if h.marker_level == 1]
    if len(h1s) == 1 and h1s[0].text and not bare_mark(h1s[0].text):
        return h1s[0].text
    title = " ".join(h.text for h in title_block(doc, headings) if h.text).strip()
    return title or fallback
