"""The line scan of plain Markdown bodies gives exactly the CommonMark parser's headings."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tree_builder.markdown_headings import _RISKY_LINE, _parsed_headings, _plain_headings, markdown_headings

ROOT = Path(__file__).resolve().parent.parent

_LINES = st.sampled_from([
    "", "   ", "# Title", "## 1 Methods", "###### six", "####### seven", "#nospace", "## closed ##",
    "## ends with#", "# #", "##", "## *emph* and `code`", "## [link](x) here", "## a \\# b ##  ",
    "Plain text. More text.", "Text with # inside", "Ünïcode 第一章 总则", "\u3000indented ideograph",
    "1 Intro", "12.5 percent", "1234567890. long", "3.", "1. item", "2) item", "- item", "* item", "+ item", "> quote", "    code", " lead",
    "---", "===", "***", "___", "```", "~~~", "<div>", "[ref]: http://x", "| a | b |", "Title\u00a0x",
    "a\tb", ":colon", "Text ###",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINES, min_size=0, max_size=25), st.booleans())
def test_markdown_headings_equals_the_parser_whenever_the_scan_is_taken(lines: list[str], front: bool) -> None:
    body = "\n".join(lines)
    text = ("---\ntitle: x\n---\n" if front else "") + body
    start = 16 if front else 0
    assert markdown_headings(text, start) == _parsed_headings(text, start)
    if "\t" not in text and _RISKY_LINE.search(text, start) is None:
        assert _plain_headings(text, start) == _parsed_headings(text, start)


def test_the_scan_is_taken_for_paragraphs_and_atx_headings_only() -> None:
    assert _RISKY_LINE.search("# A\n\nText 1. here\n## B ##\n") is None
    for risky in ("- a", "1. a", "2)", "> a", "    a", "===", "```", "<p>", "[a]: b", "#######", "#x"):
        assert _RISKY_LINE.search(f"# A\n\n{risky}\n") is not None, risky


def test_the_repository_documents_give_the_parsers_headings() -> None:
    for path in sorted((ROOT / "test_data").rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        assert markdown_headings(text, 0) == _parsed_headings(text, 0), path
