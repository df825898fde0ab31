"""Property tests over generated Markdown: no text is ever unreachable.

Every non-blank character of the body outside section-heading lines belongs to
exactly one leaf's content span, leaves appear in document order, and the tree
is well formed (unique ids, consistent links, no level jumps, depth <= cap except
inside a section longer than the long-section size).
"""
from __future__ import annotations

from unittest.mock import patch

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from config import Config
from tree_builder.document import EmptyDocumentError
from tree_builder.documents import document_from_text
from tree_builder.markdown_headings import parse_headings, title_block
from tree_builder.summary import summarize_tree
from tree_builder.document import Document
from tree_builder import tree as tree_mod
from tree_builder.tree import TreeNode, build_tree, titled_marks
from tree_builder.visualizer import serialize_tree

HIDDEN = "NOTAHEADING"
"""Marks '#' lines that CommonMark does not treat as headings; none may become a node."""

NUMBERINGS = ["", "", "", "1 ", "2.3 ", "1.2.3 ", "A.1 ", "4.1.2.1 ", "第一编 ", "第二章 ", "第三节 ",
              "第一分编 ", "一、", "（二）", "(三) ", "I. ", "B. "]
WORDS = ["alpha", "beta", "gamma", "数据", "模型", "Router", "x_t", "73.2%", "e.g.", "#tag", "*em*",
         "[link](u)", "`code`", "第五条", "。", "！", "."]

word = st.sampled_from(WORDS)
line_text = st.lists(word, min_size=1, max_size=6).map(" ".join)

atx = st.builds(lambda n, num, t, close: "#" * n + " " + num + t + (" ##" if close else ""),
                st.integers(1, 6), st.sampled_from(NUMBERINGS), line_text, st.booleans())
setext = st.builds(lambda num, t, u: f"{num}{t}\n{u}", st.sampled_from(NUMBERINGS), line_text,
                   st.sampled_from(["===", "---", "========"]))
paragraph = st.lists(line_text, min_size=1, max_size=3).map("\n".join)
fenced = st.builds(lambda fence, t: f"{fence}\n# {HIDDEN} {t}\n## {HIDDEN}\n{fence}",
                   st.sampled_from(["```", "~~~", "````"]), line_text)
# Indented code cannot interrupt a paragraph (CommonMark): after a bare newline these four spaces
# would be a lazy continuation of the previous line, i.e. ordinary text. The leading blank line
# makes the block what its name says in every position.
indented = st.just(f"\n    # {HIDDEN} indented code")
comment = st.just(f"<!--\n# {HIDDEN} in a comment\n-->")
html = st.just(f"<div>\n# {HIDDEN} in html\n</div>")
quote = st.just(f"> # {HIDDEN} quoted")
listed = st.just(f"- # {HIDDEN} in a list item")
blank = st.sampled_from(["", " ", "\t"])

block = st.one_of(atx, atx, setext, paragraph, paragraph, fenced, indented, comment, html, quote,
                  listed, blank)
front_matter = st.sampled_from(["", "", "---\ntitle: Generated\n---\n", "---\nx: 1\n---\n"])


@st.composite
def markdown_docs(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(block, min_size=1, max_size=25))
    # Blocks separated by a blank line or, sometimes, a bare newline (lazy continuation, setext
    # over a paragraph, …): the parser decides, the invariant must hold either way.
    seps = draw(st.lists(st.sampled_from(["\n\n", "\n\n", "\n", "\n\n\n"]),
                         min_size=len(blocks), max_size=len(blocks)))
    body = "".join(b + s for b, s in zip(blocks, seps))
    if draw(st.booleans()):
        body = body.rstrip("\n")  # no final newline
    text = draw(front_matter) + body
    newline = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    return text.replace("\n", newline)


def check_structure(root: TreeNode, max_depth: int, folder: bool, long_chars: int | None = None) -> None:
    nodes = list(root.iter_preorder())
    ids = [n.node_id for n in nodes]
    assert ids == [f"{i:04d}" for i in range(len(nodes))]  # unique, pre-order
    for n in nodes:
        for c in n.children:
            assert c.parent is n
        if n.kind == "root":
            assert n.parent is None
            continue
        assert n.level <= max_depth or (long_chars is not None and any(
            a.level == max_depth and a.end_char - a.start_char > long_chars for a in n.ancestors()))
        if n.kind == "document":
            assert n.level == 0 and n.parent is root
        else:
            assert n.level == n.parent.level + 1
            assert folder or n.parent is root or n.parent.kind != "document"
        path = [a.heading for a in n.ancestors()] + [n.heading]
        assert n.heading_path == " > ".join(path)
        if n.is_leaf:
            assert n.kind != "root"
        else:
            assert n.content == ""
            intros = [c for c in n.children if c.kind == "intro"]
            assert intros in ([], [n.children[0]])
        if n.kind == "intro":
            assert n.is_leaf and n.content.strip()
            owner = n.parent.heading if n.parent is not root else n.heading[: -len(" (intro)")]
            assert n.heading == f"{owner} (intro)" and owner
        assert HIDDEN not in n.heading


def check_coverage(root: TreeNode, doc: Document) -> None:
    text = doc.text
    leaves = root.leaves()
    for lf in leaves:
        assert text[lf.content_start:lf.content_end] == lf.content
        assert lf.start_char <= lf.content_start <= lf.content_end <= max(lf.end_char, lf.content_end)
    # Leaves in document order, spans strictly increasing and disjoint.
    spans = [(lf.content_start, lf.content_end) for lf in leaves if lf.content_end > lf.content_start]
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert a1 <= b0 and a0 < b0
    section_starts = {n.start_char for n in root.iter_preorder() if n.kind == "section"}
    absorbed = title_block(doc)
    absorbed_ok = bool(absorbed) and " ".join(h.text for h in absorbed if h.text) == doc.title

    def in_leaf(a: int, b: int) -> bool:
        return any(s <= a and b <= e for s, e in spans)

    heading_chars: set[int] = set()
    headings = parse_headings(doc)
    # as the tree builds it: a bare division mark joined with the title after it is one heading
    rest = titled_marks(headings[len(absorbed):] if absorbed_ok else headings, text)
    for h in (list(absorbed) if absorbed_ok else []) + rest:
        is_node = h.start_char in section_starts
        is_text = in_leaf(h.start_char, len(text[:h.end_char].rstrip()))
        is_title = absorbed_ok and h in absorbed
        assert is_node + is_text + is_title == 1, (h, is_node, is_text, is_title)
        if not is_text:
            heading_chars.update(range(h.start_char, h.end_char))

    covered = [0] * len(text)
    for s, e in spans:
        for i in range(s, e):
            covered[i] += 1
    for i in range(doc.body_start, len(text)):
        if text[i].isspace():
            continue
        if i in heading_chars:
            assert covered[i] == 0, f"heading character {i} inside a leaf"
        else:
            assert covered[i] == 1, f"character {i} {text[i]!r} covered {covered[i]} times"
    assert all(covered[i] == 0 for i in range(doc.body_start))  # front matter is metadata


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdown_docs(), st.integers(1, 4), st.booleans())
@example("第一编 .\n===\n\nalpha\n===\n", 1, False)  # a bare mark takes the heading after it as its title
def test_no_text_is_ever_unreachable(raw: str, max_depth: int, folder: bool) -> None:
    try:
        doc = document_from_text(raw, "gen/doc.md")
    except EmptyDocumentError:
        return
    config = Config(max_depth=max_depth)
    root = build_tree([doc], config, folder_mode=folder)
    check_structure(root, max_depth, folder)
    check_coverage(root, doc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdown_docs(), st.integers(1, 2), st.integers(0, 40))
def test_opening_long_sections_loses_no_text(raw: str, max_depth: int, long_chars: int) -> None:
    """The generated documents are short: with a small long-section size, the headings past the cap
    that become sections must still leave every character in exactly one leaf."""
    try:
        doc = document_from_text(raw, "gen/doc.md")
    except EmptyDocumentError:
        return
    with patch.object(tree_mod, "LONG_SECTION_CHARS", long_chars):
        root = build_tree([doc], Config(max_depth=max_depth), folder_mode=True)
    check_structure(root, max_depth, True, long_chars)
    check_coverage(root, doc)


@settings(max_examples=100, deadline=None)
@given(markdown_docs())
def test_line_endings_do_not_change_the_tree(raw: str) -> None:
    lf = raw.replace("\r\n", "\n").replace("\r", "\n")
    try:
        a = document_from_text(lf, "d.md")
    except EmptyDocumentError:
        return
    b = document_from_text(lf.replace("\n", "\r\n"), "d.md")
    key = lambda r: [(n.node_id, n.heading, n.level, n.content, n.start_char, n.end_char,  # noqa: E731
                      n.start_line, n.end_line, n.content_start, n.content_end)
                     for n in r.iter_preorder()]
    assert key(build_tree([a], Config(), False)) == key(build_tree([b], Config(), False))


@settings(max_examples=100, deadline=None)
@given(markdown_docs())
def test_summaries_and_serialisation_are_one_line_per_node(raw: str) -> None:
    try:
        doc = document_from_text(raw, "d.md")
    except EmptyDocumentError:
        return
    root = build_tree([doc], Config(), folder_mode=True)
    summarize_tree(root, Config())
    out = serialize_tree(root).split("\n")
    n_nodes = sum(1 for n in root.iter_preorder() if n.kind != "root")
    assert out[:2] == ["文档结构:", ""]
    assert len(out) == 2 + 3 * n_nodes - 1  # heading line, summary line, blank between nodes
    for n in root.iter_preorder():
        assert "\n" not in n.summary and len(n.summary) <= Config().tuning.summary.summary_max_chars
