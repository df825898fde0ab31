"""HTML -> Document (BeautifulSoup with the standard-library parser; MIT licence).

h1-h6 are headings; script/style and the page's chrome (nav, header, footer,
aside, forms, ARIA navigation/banner/contentinfo) are dropped; when the page
marks its content with <main> (or a single <article>) only that is read.
Every block element is its own paragraph; table rows become `` | `` rows.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tree_builder.parser import Document, _decode, document_from_parts
from tree_builder.readers.builder import TextBuilder

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


def read_html(path: Path, rel_path: str, data: bytes) -> Document:
    from bs4 import BeautifulSoup, Comment, Declaration, Doctype, NavigableString, ProcessingInstruction

    soup = BeautifulSoup(_decode(data, rel_path), "html.parser")
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

    def walk(node: Any) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, skip_types):
                    inline.append(str(child))
                continue
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
            elif name in _BLOCKS:
                flush()
                walk(child)
                flush()
            else:
                walk(child)

    walk(_content_root(soup))
    flush()
    return document_from_parts(builder.text(), rel_path, "html", builder.headings, None, title)
