"""Readers bounded in output as well as input: what a document becomes stays in proportion to its file.

HTML whose optional end tags are omitted (valid HTML) is read as a browser reads it, one row or
item at a time, not nested ever deeper; a document's headings and text are held to limits
relative to its size (``max_headings``, ``max_headings_per_kb``, ``max_text_per_byte``), and a
file over one is skipped with a warning naming it and the setting, or refused in one line alone.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config import Config
from tests.conftest import ROOT
from tree_builder.loader import load_input
from tree_builder.markdown_headings import heading_line_count, markdown_headings
from tree_builder.readers.html_implied import ImpliedEndTags, TooDeep, with_implied_end_tags
from tree_builder.readers.limits import ReadLimits, check_output
from utils.errors import InputError


def _table(rows: int) -> str:
    return ("<html><body><h1>T</h1><table>" + "".join(f"<tr><td>cell {i}<td>more {i}" for i in range(rows))
            + "</table></body></html>")


def test_table_without_end_tags_gives_one_line_per_row(tmp_path: Path) -> None:
    page = tmp_path / "td.html"
    page.write_text(_table(300), encoding="utf-8")
    doc = load_input(page).documents[0]
    rows = [ln for ln in doc.text.splitlines() if ln.startswith("cell ")]
    assert rows == [f"cell {i} | more {i}" for i in range(300)]
    assert len(doc.text) < len(_table(300))


def test_table_without_end_tags_stays_small_under_a_memory_cap(tmp_path: Path) -> None:
    """4,000 such rows (96 KB) exhausted 3 GB before; in a child capped at 1 GB of address space."""
    page = tmp_path / "td.html"
    page.write_text(_table(4000), encoding="utf-8")

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    code = ("import sys; from tree_builder.loader import load_input\n"
            "doc = load_input(__import__('pathlib').Path(sys.argv[1])).documents[0]\n"
            "print(len(doc.text), doc.text.count('cell '))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(page)], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=600, preexec_fn=cap)
    assert proc.returncode == 0, proc.stderr[-2000:]
    chars, cells = map(int, proc.stdout.split())
    assert cells == 4000 and chars < page.stat().st_size


@pytest.mark.parametrize("item", ["li", "p", "dd"])
def test_600_unclosed_items_are_siblings_not_too_deep(tmp_path: Path, item: str) -> None:
    outer = {"li": "ul", "p": "div", "dd": "dl"}[item]
    page = tmp_path / f"{item}.html"
    page.write_text(f"<html><body><{outer}>" + "".join(f"<{item}>item {i}" for i in range(600))
                    + f"</{outer}></body></html>", encoding="utf-8")
    doc = load_input(page).documents[0]
    assert [ln for ln in doc.text.splitlines() if ln.startswith("item")] == [f"item {i}" for i in range(600)]


def test_implied_end_tags_follow_the_html_rules() -> None:
    markup, depth = with_implied_end_tags(
        "<p>a<div>b</div><ul><li>one<li>two &amp; <b>x</b></ul>"
        "<table><tr><td><table><tr><td>inner</table>after<td>two</table><dl><dt>t<dd>d<dt>u</dl>", 512)
    assert markup == ("<p>a</p><div>b</div><ul><li>one</li><li>two &amp; <b>x</b></li></ul>"
                      "<table><tr><td><table><tr><td>inner</td></tr></table>after</td><td>two</td></tr></table>"
                      "<dl><dt>t</dt><dd>d</dd><dt>u</dt></dl>")
    assert depth == 6
    # a stray end tag inside a cell does not close what lies outside the table
    assert with_implied_end_tags("<div><table><tr><td>x</div>y</table>z</div>", 512)[0] == \
        "<div><table><tr><td>xy</td></tr></table>z</div>"


def test_really_deep_html_is_still_refused(tmp_path: Path) -> None:
    page = tmp_path / "deep.html"
    page.write_text("<html><body>" + "<div>" * 600 + "x" + "</div>" * 600 + "</body></html>", encoding="utf-8")
    with pytest.raises(InputError, match="max_html_depth"):
        load_input(page)


def test_100000_nested_elements_are_refused_at_the_depth_limit() -> None:
    """Each tag's search for what it closes walks the open elements: the walk stops at the depth
    limit, so a page nested 100,000 deep costs the limit's steps a tag, not 100,000 (it hung)."""
    parser = ImpliedEndTags(512)
    with pytest.raises(TooDeep):
        parser.feed("<div>" * 100_000)
    assert len(parser._open) == 513


# --------------------------------------------------------------------------- Markdown and text headings

def test_markdown_heading_limit_applies_to_markdown(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "ok.md").write_text("# Ok\n\nSome text.\n", encoding="utf-8")
    (src / "h.md").write_text("".join(f"# H{i}\n" for i in range(60)), encoding="utf-8")
    loaded = load_input(src, limits=ReadLimits.from_config(Config(max_headings=50)))
    assert [d.path for d in loaded.documents] == ["ok.md"]
    assert loaded.warnings == ["skipped h.md: more than 50 headings (max_headings); not read"]


def test_a_million_markdown_headings_are_refused_within_a_memory_cap(tmp_path: Path) -> None:
    """11 MB of ``# H`` lines took 1.3 GB before; in a child capped at 1 GB of address space."""
    page = tmp_path / "h.md"
    page.write_text("".join(f"# H{i}\n" for i in range(1_000_000)), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "index", "--input", str(page), "--output",
                           str(tmp_path / "idx"), "--mock", "--quiet"], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=600,
                          preexec_fn=lambda: __import__("resource").setrlimit(
                              __import__("resource").RLIMIT_AS, (1 << 30, 1 << 30)))
    assert proc.returncode != 0
    assert proc.stderr == "error: h.md: more than 20,000 headings (max_headings); not read\n"


def test_heading_limit_is_relative_to_the_file_size(tmp_path: Path) -> None:
    page = tmp_path / "small.md"
    page.write_text("".join(f"# {i}\n" for i in range(300)), encoding="utf-8")  # 1.7 KB: 200 allowed at 100/KB
    with pytest.raises(InputError, match=r"more than 200 headings for its 1,690 bytes \(max_headings_per_kb\)"):
        load_input(page)
    assert load_input(page, limits=ReadLimits.from_config(Config(max_headings_per_kb=200))).documents


def test_plain_text_detected_headings_are_limited(tmp_path: Path) -> None:
    page = tmp_path / "law.txt"
    page.write_text("".join(f"第{i}章 总则\n\n本章的正文内容写在这里，足够长。\n\n" for i in range(1, 40)), encoding="utf-8")
    assert load_input(page).documents
    with pytest.raises(InputError, match="max_headings"):
        load_input(page, limits=ReadLimits.from_config(Config(max_headings=10)))


def test_heading_lines_in_code_fences_are_not_counted() -> None:
    text = "# Title\n\n```sh\n" + "# a comment\n" * 100 + "```\n\nPara\n---\n\n---\n~~~\n# no\n"
    assert heading_line_count(text) == len(markdown_headings(text, 0)) == 2


def test_reader_output_beyond_the_text_ratio_is_refused() -> None:
    check_output(20 * 4096, 0, "a.pdf", ReadLimits(), 4096)
    with pytest.raises(InputError, match=r"a.pdf: 81,921 characters of text from 4,096 bytes.*max_text_per_byte"):
        check_output(20 * 4096 + 1, 0, "a.pdf", ReadLimits(), 4096)


@pytest.mark.parametrize("field,value", [("max_headings_per_kb", 0), ("max_text_per_byte", 0),
                                         ("hash_dim", 1 << 40), ("hash_dim", 1)])
def test_limit_settings_out_of_range_are_refused(field: str, value: int) -> None:
    with pytest.raises(Exception, match=field):
        Config(**{field: value})
