"""HTML -> Document (BeautifulSoup with the standard-library parser; MIT licence).

h1-h6 are headings; script/style and the page's chrome (nav, header, footer,
aside, forms, ARIA navigation/banner/contentinfo) are dropped; when the page
marks its content with <main> (or a single <article>) only that is read.
Every block element is its own paragraph; table rows become `` | `` rows.
Omitted end tags (``<td>``, ``<tr>``, ``<li>``, ``<p>`` ...) are closed where a browser closes
them before the page is parsed (html_implied.py), so the tree and the text stay the page's size.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tree_builder.decoding import decode_text
from tree_builder.document import Document
from tree_builder.documents import document_from_parts
from tree_builder.readers.builder import TextBuilder
from tree_builder.readers.html_implied import TooDeep, with_implied_end_tags
from tree_builder.readers.limits import DEFAULT_LIMITS, ReadLimits, check_headings
from utils.errors import InputError

_TAG = re.compile(rb"<[A-Za-z]")
_HEADING_TAG = re.compile(rb"<[hH][1-6][\s>/]")

_DROP = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form",
         "svg", "iframe", "button", "select", "head")
_DROP_ROLES = {"navigation", "banner", "contentinfo", "search", "menu", "menubar"}
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_BLOCKS = {"p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "blockquote",
           "pre", "figure", "figcaption", "table", "caption", "address", "details", "summary", "hr",
           "body", "html", "center", "fieldset", "legend"}


def _content_root(soup: Any) -> Any:
    main = soup.find("main") or soup.find(attrs={"role": "main"})
    if main is not None:
        return main
    articles = soup.find_all("article")
    if len(articles) == 1:
        return articles[0]
    return soup.body or soup


def check_markup(data: bytes, rel_path: str, limits: ReadLimits) -> None:
    """Count tags and headings in the raw bytes before parsing: a parsed tag costs hundreds of bytes
    and the section tree of a million headings minutes, so an oversized page is refused up front."""
    tags = sum(1 for _ in _TAG.finditer(data))
    if tags > limits.max_html_elements:
        raise InputError(f"{rel_path}: more than {limits.max_html_elements:,} HTML elements "
                         f"(max_html_elements); not read")
    check_headings(sum(1 for _ in _HEADING_TAG.finditer(data)), rel_path, limits, len(data))


def _too_deep(rel_path: str, limits: ReadLimits) -> InputError:
    return InputError(f"{rel_path}: HTML nested more than {limits.max_html_depth} elements deep "
                      f"(max_html_depth); not read")


def read_html(path: Path, rel_path: str, data: bytes, limits: ReadLimits = DEFAULT_LIMITS) -> Document:
    from bs4 import BeautifulSoup, Comment, Declaration, Doctype, NavigableString, ProcessingInstruction  # noqa: E501 - bs4 only for an HTML file

    check_markup(data, rel_path, limits)
    try:  # refused before the tree is built: the parser's tree of a deep page costs more than its text
        markup, _ = with_implied_end_tags(decode_text(data, rel_path), limits.max_html_depth)
    except TooDeep:
        raise _too_deep(rel_path, limits) from None
    soup = BeautifulSoup(markup, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for tag in soup.find_all(attrs={"role": True}):
        if not tag.decomposed and str(tag.get("role", "")).lower() in _DROP_ROLES:
            tag.decompose()
    for tag in soup.find_all(attrs={"aria-hidden": "true"}):
        if not tag.decomposed:
            tag.decompose()
    builder = TextBuilder()
    inline: list[str] = []
    skip_types = (Comment, Declaration, Doctype, ProcessingInstruction)

    def flush() -> None:
        builder.paragraph(" ".join("".join(inline).split()))
        inline.clear()

    _FLUSH = object()  # a marker on the stack: a block element ends here

    def walk(root: Any) -> None:
        """Document order with an explicit stack (no recursion: nesting depth costs no Python frames)."""
        stack: list[tuple[Any, int]] = [(c, 1) for c in reversed(list(root.children))]
        while stack:
            child, depth = stack.pop()
            if child is _FLUSH:
                flush()
                continue
            if isinstance(child, NavigableString):
                if not isinstance(child, skip_types):
                    inline.append(str(child))
                continue
            if depth > limits.max_html_depth:
                raise _too_deep(rel_path, limits)
            name = child.name
            if name in _HEADINGS:
                flush()
                builder.heading(child.get_text(" ", strip=True), _HEADINGS[name])
            elif name == "tr":
                flush()
                cells = [" ".join(c.get_text(" ", strip=True).split()) for c in child.find_all(["td", "th"])]
                builder.paragraph(" | ".join(c for c in cells if c))
            elif name == "br":
                inline.append("\n")
            elif name == "pre":
                flush()
                builder.paragraph(child.get_text())
            else:
                kids = [(c, depth + 1) for c in reversed(list(child.children))]
                if name in _BLOCKS:
                    flush()
                    stack.append((_FLUSH, depth))
                stack.extend(kids)

    walk(_content_root(soup))
    flush()
    return document_from_parts(builder.text(), rel_path, "html", builder.headings, None, title)
