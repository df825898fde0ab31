"""Reading Markdown input: encodings, front matter, titles, folders, headings."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tree_builder.document import EmptyDocumentError
from tree_builder.documents import document_from_text
from tree_builder.loader import load_document, load_documents
from tree_builder.markdown_headings import parse_headings
from utils.errors import InputError


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- decoding

def test_utf8_bom_and_crlf_are_normalised_before_anything(tmp_path: Path) -> None:
    lf = write(tmp_path / "lf.md", "# Title\n\nBody line\nnext\n")
    crlf = write(tmp_path / "crlf.md", b"\xef\xbb\xbf# Title\r\n\r\nBody line\rnext\r\n")
    a = load_document(lf, "lf.md")
    b = load_document(crlf, "crlf.md")
    assert b.text == a.text == "# Title\n\nBody line\nnext\n"
    assert "\r" not in b.text and "\ufeff" not in b.text
    assert b.content_hash == a.content_hash == hashlib.sha256(a.text.encode()).hexdigest()


def test_gb18030_file_is_decoded(tmp_path: Path) -> None:
    path = write(tmp_path / "law.md", "# 中华人民共和国测试法\n\n第一条 为了测试，制定本法。\n".encode("gb18030"))
    doc = load_document(path, "law.md")
    assert doc.title == "中华人民共和国测试法"
    assert "第一条" in doc.text


def test_undecodable_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.md", b"# T\n\n\xff\xfe\xff\x80 text\n")
    with pytest.raises(InputError, match="bad.md"):
        load_document(path, "bad.md")


def test_binary_file_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "img.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InputError, match="img.md.*binary"):
        load_document(path, "img.md")
    no_nul = write(tmp_path / "ctl.md", bytes(range(1, 9)) * 200)
    with pytest.raises(InputError, match="binary"):
        load_document(no_nul, "ctl.md")


def test_utf16_is_named_not_called_binary(tmp_path: Path) -> None:
    path = write(tmp_path / "u16.md", "# Hi\n".encode("utf-16"))
    with pytest.raises(InputError, match="u16.md.*UTF-16"):
        load_document(path, "u16.md")


def test_error_messages_are_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.md", b"\x00\x01")
    with pytest.raises(InputError) as info:
        load_document(path, "bad.md")
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- front matter & titles

def test_front_matter_is_metadata_and_names_the_document() -> None:
    text = "---\ntitle: My Paper\ndate: 2024-01-02\ntags: [a, b]\n---\n# Intro\n\nHello.\n"
    doc = document_from_text(text, "x.md")
    assert doc.title == "My Paper"
    assert doc.front_matter == {"title": "My Paper", "date": "2024-01-02", "tags": ["a", "b"]}
    assert doc.text[doc.body_start:].startswith("# Intro")
    headings = parse_headings(doc)
    assert [h.text for h in headings] == ["Intro"]
    assert headings[0].line == 6  # lines count from the top of the file, front matter included


def test_unclosed_or_non_mapping_front_matter_is_content() -> None:
    doc = document_from_text("---\ntitle: x\n\nbody\n", "x.md")
    assert doc.body_start == 0 and doc.front_matter == {}
    doc2 = document_from_text("---\njust a sentence\n---\n\nbody\n", "y.md")
    assert doc2.body_start == 0


def test_title_single_h1_else_stem() -> None:
    assert document_from_text("intro\n\n# Only Title\n\n## A\n\ntext\n", "d/p.md").title == "Only Title"
    assert document_from_text("# A\n\ntext\n\n# B\n\ntext\n", "dir/paper.md").title == "paper"
    assert document_from_text("no headings at all\n", "notes.markdown").title == "notes"


def test_statute_title_block_of_two_h1s() -> None:
    text = "# 中华人民共和国民法典\n\n# 总则\n\n2020年通过\n\n## 第一章 基本规定\n\n第一条 内容。\n"
    assert document_from_text(text, "民法典/总则.md").title == "中华人民共和国民法典 总则"


def test_whitespace_only_document_is_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        document_from_text(" \n\t\n\u3000\n", "e.md")
    with pytest.raises(EmptyDocumentError):
        document_from_text("---\ntitle: only metadata\n---\n\n", "fm.md")


# --------------------------------------------------------------------------- files and folders

def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_documents(tmp_path / "nope")


def test_folder_without_supported_documents(tmp_path: Path) -> None:
    write(tmp_path / "logo.png", b"\x89PNG\r\n")
    write(tmp_path / "data.xlsx", b"PK\x03\x04")
    with pytest.raises(InputError, match=r"no supported documents.*logo.png \(image\).*data.xlsx \(unsupported\)|"
                                         r"no supported documents.*data.xlsx \(unsupported\).*logo.png \(image\)"):
        load_documents(tmp_path)


def test_single_empty_file_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.md", "\n  \n")
    with pytest.raises(InputError, match="empty.md"):
        load_documents(path)


def test_folder_recursive_sorted_skips_empty_and_hidden(tmp_path: Path) -> None:
    write(tmp_path / "b.md", "# B\n\ntext\n")
    write(tmp_path / "a" / "z.markdown", "# Z\n\ntext\n")
    write(tmp_path / "a" / "y.MD", "# Y\n\ntext\n")
    write(tmp_path / "empty.md", "   \n")
    write(tmp_path / ".git" / "x.md", "# hidden\n")
    write(tmp_path / "notes.bin", "ignored")
    docs, warnings = load_documents(tmp_path)
    assert [d.path for d in docs] == ["a/y.MD", "a/z.markdown", "b.md"]
    assert warnings == ["skipped empty document: empty.md"]


def test_folder_of_only_empty_documents(tmp_path: Path) -> None:
    write(tmp_path / "e1.md", "")
    write(tmp_path / "e2.md", "\n\n")
    with pytest.raises(InputError):
        load_documents(tmp_path)


def test_non_markdown_single_file_is_accepted(tmp_path: Path) -> None:
    docs, warnings = load_documents(write(tmp_path / "readme.txt", "# Hi\n\nthere\n"))
    assert docs[0].path == "readme.txt" and docs[0].title == "Hi" and warnings == []


def test_thousand_documents_load_and_build_quickly(tmp_path: Path) -> None:
    from config import Config
    from tree_builder.tree import build_tree

    for i in range(1000):
        write(tmp_path / f"d{i // 100}" / f"doc{i:04d}.md",
              f"# Doc {i}\n\nIntro {i}.\n\n## 1 Part\n\nText {i}.\n\n## 2 Part\n\nMore {i}.\n")
    docs, _ = load_documents(tmp_path)
    root = build_tree(docs, Config(), folder_mode=True)
    assert len(docs) == 1000 and len(root.children) == 1000
    ids = [n.node_id for n in root.iter_preorder()]
    assert len(set(ids)) == len(ids) == 1 + 1000 * 4


# --------------------------------------------------------------------------- headings

def headings_of(text: str) -> list[tuple[str, int, int]]:
    return [(h.text, h.marker_level, h.line) for h in parse_headings(document_from_text(text, "t.md"))]


def test_atx_and_setext_headings_with_spans() -> None:
    text = "# One #\n\npara\n\nTwo\n===\n\nThree\nlines\n---\n\n###### Six\n"
    doc = document_from_text(text, "t.md")
    hs = parse_headings(doc)
    assert [(h.text, h.marker_level, h.line, h.end_line) for h in hs] == [
        ("One", 1, 1, 1), ("Two", 1, 5, 6), ("Three lines", 2, 8, 10), ("Six", 6, 12, 12)]
    assert doc.text[hs[1].start_char:hs[1].end_char] == "Two\n===\n"
    assert doc.text[hs[2].start_char:hs[2].end_char] == "Three\nlines\n---\n"
    assert doc.text[hs[3].start_char:hs[3].end_char] == "###### Six\n"


def test_nothing_inside_code_html_comments_or_quotes_is_a_heading() -> None:
    text = (
        "# Real\n\n"
        "```python\n# comment in code\n## more\n```\n\n"
        "~~~\n# tilde fence\n~~~\n\n"
        "    # indented code\n\n"
        "<div>\n# inside html\n</div>\n\n"
        "<!--\n# inside comment\n-->\n\n"
        "> # quoted\n\n"
        "- # in a list\n\n"
        "#hashtag is not a heading\n\n"
        "## Also Real\n"
    )
    assert headings_of(text) == [("Real", 1, 1), ("Also Real", 2, 28)]


def test_heading_inline_markup_is_stripped() -> None:
    text = "# **Bold** and *em* `code` [link](http://x) ![img](a.png)\n\n## 第一章\u2003\u2003基本规定\n"
    assert [t for t, _, _ in headings_of(text)] == ["Bold and em code link img", "第一章 基本规定"]
