"""Section tree: levels, depth cap, intro leaves, spans, folders, serialisation."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config
from tree_builder.documents import document_from_text
from tree_builder.loader import load_documents
from tree_builder.summary import summarize_tree
from tree_builder.document import Document
from tree_builder.numbering import heading_numbering
from tree_builder import tree as tree_mod
from tree_builder.tree import TreeNode, build_tree
from tree_builder.visualizer import serialize_tree

from tests.conftest import BENCH, SHARED  # the shared sets, found beside the repository

ROOT = Path(__file__).resolve().parents[1]


def tree_of(text: str, config: Config | None = None, folder: bool = False,
            path: str = "doc.md") -> tuple[TreeNode, Document]:
    doc = document_from_text(text, path)
    return build_tree([doc], config or Config(), folder_mode=folder), doc


def outline(root: TreeNode) -> list[tuple[str, int, str, bool]]:
    """(id, level, heading, is_leaf) in pre-order, synthetic root skipped."""
    return [(n.node_id, n.level, n.heading, n.is_leaf) for n in root.iter_preorder()
            if n.kind != "root"]


def shape(root: TreeNode) -> list[str]:
    """Indented headings: a compact picture of the tree for assertions."""
    return ["  " * len(n.ancestors()) + n.heading for n in root.iter_preorder() if n.kind != "root"]


# --------------------------------------------------------------------------- the spec's paper

def test_spec_test_paper_structure() -> None:
    docs, _ = load_documents(ROOT / "test_data" / "test_paper.md")
    root = build_tree(docs, Config(), folder_mode=False)
    assert shape(root) == [
        "Abstract", "1 Introduction", "  1.1 Background", "  1.2 Motivation", "2 Related Work",
        "3 Methods", "  3.1 Problem Formulation", "  3.2 Model Architecture",
        "    3.2.1 Encoder Design", "    3.2.2 Router Design", "  3.3 Training Procedure",
        "4 Experiments", "  4.1 Dataset", "  4.2 Performance", "  4.3 Ablation Study",
        "5 Conclusion"]
    ids = [n.node_id for n in root.iter_preorder()]
    assert ids == [f"{i:04d}" for i in range(len(ids))]
    router = next(n for n in root.iter_preorder() if n.heading == "3.2.2 Router Design")
    assert router.heading_path == "3 Methods > 3.2 Model Architecture > 3.2.2 Router Design"
    assert router.level == 3 and router.is_leaf and router.doc_path == "test_paper.md"
    assert "contextual bandit" in router.content
    assert all(n.content == "" for n in root.iter_preorder() if not n.is_leaf)


# --------------------------------------------------------------------------- levels

def test_heading_numbering_patterns() -> None:
    assert heading_numbering("1 Introduction") == ("decimal", 1)
    assert heading_numbering("1.2.3 Deep") == ("decimal", 3)
    assert heading_numbering("A.1.2 Proof") == ("decimal", 3)
    assert heading_numbering("2. Methods") == ("decimal", 1)
    assert heading_numbering("第二分编 所有权")[1] < heading_numbering("第一章 总则")[1] \
        < heading_numbering("第三节 监护")[1]
    assert heading_numbering("第一编 总则")[1] < heading_numbering("第二分编 所有权")[1]
    assert heading_numbering("一、总体要求") == ("cn_outline", 1)
    assert heading_numbering("（二）指导思想") == ("cn_outline", 2)
    assert heading_numbering("(三) 原则") == ("cn_outline", 2)
    for text in ("A Simple Method", "3D Reconstruction", "2019 Annual Report", "Introduction",
                 "BERT-base results"):
        assert heading_numbering(text) is None, text


def test_numbering_wins_over_hash_marks() -> None:
    root, _ = tree_of("# 1 Intro\n\n### 1.1 Back\n\nb\n\n## 2 Methods\n\n# 2.1 Enc\n\nd\n")
    assert shape(root) == ["1 Intro", "  1.1 Back", "2 Methods", "  2.1 Enc"]


def test_no_level_jumps_whatever_the_marks() -> None:
    root, _ = tree_of("# 1 Top\n\n#### 1.1.1 Skips a level\n\ny\n\n"
                      "### Unnumbered deep\n\n###### Six\n\nw\n\n# 2 End\n\nz\n")
    levels = {n.heading: n.level for n in root.iter_preorder()}
    assert levels["1.1.1 Skips a level"] == 2
    assert levels["Unnumbered deep"] == 2
    assert levels["Six"] == 3
    for n in root.iter_preorder():
        if n.parent is not None and n.parent.kind != "root":
            assert n.level == n.parent.level + 1


def test_chinese_statute_ranks_present_kinds_only() -> None:
    text = ("# 中华人民共和国测试法\n\n2020年通过\n\n## 第一章 总则\n\n第一条 目的。\n\n"
            "## 第二章 分则\n\n### 第一节 一般规定\n\n第二条 规定。\n\n### 第二节 特别规定\n\n"
            "第三条 特别。\n\n## 第三章 附则\n\n第四条 施行。\n")
    root, _ = tree_of(text)
    assert shape(root) == ["中华人民共和国测试法 (intro)", "第一章 总则", "第二章 分则",
                           "  第一节 一般规定", "  第二节 特别规定", "第三章 附则"]
    assert [n.level for n in root.children] == [1, 1, 1, 1]


def test_chinese_markers_nest_even_with_flat_hash_marks() -> None:
    text = ("## 第一编 总则\n\n## 第一章 任务\n\n## 第一节 犯罪\n\n第十三条 内容。\n\n## 第二章 刑罚\n\n"
            "内容。\n\n## 第二编 分则\n\n内容。\n")
    root, _ = tree_of(text)
    assert shape(root) == ["第一编 总则", "  第一章 任务", "    第一节 犯罪", "  第二章 刑罚",
                           "第二编 分则"]


def test_chinese_outline_numbering() -> None:
    text = "# 一、总体要求\n\n## （一）指导思想\n\n甲。\n\n# (二) 基本原则\n\n乙。\n\n# 二、重点任务\n\n丙。\n"
    root, _ = tree_of(text)
    assert shape(root) == ["一、总体要求", "  （一）指导思想", "  (二) 基本原则", "二、重点任务"]


def test_unnumbered_containers_above_numbered_sections() -> None:
    """Statute files: unnumbered H1s, then numbered chapters one # deeper."""
    text = ("# 前言\n\n说明。\n\n# 正文\n\n## 第一章 总则\n\n第一条 甲。\n\n## 第二章 附则\n\n第二条 乙。\n")
    root, _ = tree_of(text)
    assert shape(root) == ["前言", "正文", "  第一章 总则", "  第二章 附则"]


# --------------------------------------------------------------------------- depth cap

def test_headings_deeper_than_cap_stay_in_the_leaf() -> None:
    text = "# 1 A\n\n## 1.1 B\n\n### 1.1.1 C\n\nc text\n\n#### 1.1.1.1 D\n\nd text\n\n# 2 E\n\ne\n"
    root, doc = tree_of(text)
    c = next(n for n in root.iter_preorder() if n.heading == "1.1.1 C")
    assert c.is_leaf and "#### 1.1.1.1 D" in c.content and "d text" in c.content
    assert all(n.level <= 3 for n in root.iter_preorder())
    assert doc.text[c.content_start:c.content_end] == c.content

    root2, _ = tree_of(text, Config(max_depth=2))
    b = next(n for n in root2.iter_preorder() if n.heading == "1.1 B")
    assert b.is_leaf and "### 1.1.1 C" in b.content and "d text" in b.content
    assert max(n.level for n in root2.iter_preorder()) == 2


def _long(word: str, chars: int) -> str:
    return " ".join([word] * (chars // (len(word) + 1) + 1))


def test_a_long_leaf_at_the_cap_opens_the_next_level_inside_it() -> None:
    """A 60-page note read as one leaf gives the locator nothing to choose: past LONG_SECTION_CHARS the
    headings below the cap become its sections, and a new leaf still that long opens its own."""
    half = tree_mod.LONG_SECTION_CHARS // 2 + 100
    text = ("# 1 A\n\n## 1.1 B\n\n### 1.1.1 C\n\nopening words\n\n"
            f"#### 1.1.1.1 D\n\n{_long('dee', half)}\n\n"
            f"#### 1.1.1.2 E\n\n{_long('eee', half)}\n\n##### 1.1.1.2.1 F\n\n{_long('eff', 2 * half)}\n\n"
            f"##### 1.1.1.2.2 G\n\ngee\n\n### 1.1.2 H\n\nshort\n\n#### 1.1.2.1 I\n\nstays inside\n\n# 2 Z\n\nz\n")
    root, doc = tree_of(text)
    assert shape(root) == ["1 A", "  1.1 B", "    1.1.1 C", "      1.1.1 C (intro)", "      1.1.1.1 D",
                           "      1.1.1.2 E", "        1.1.1.2 E (intro)", "        1.1.1.2.1 F",
                           "        1.1.1.2.2 G", "    1.1.2 H", "2 Z"]
    h = next(n for n in root.iter_preorder() if n.heading == "1.1.2 H")
    assert "#### 1.1.2.1 I" in h.content  # a short leaf keeps the cap
    for leaf in root.leaves():
        assert doc.text[leaf.content_start:leaf.content_end] == leaf.content
    f = next(n for n in root.iter_preorder() if n.heading == "1.1.1.2.1 F")
    assert f.level == 5 and f.heading_path == "1 A > 1.1 B > 1.1.1 C > 1.1.1.2 E > 1.1.1.2.1 F"


def test_a_long_leaf_does_not_open_running_headers_or_a_crowd_of_headings(monkeypatch) -> None:
    monkeypatch.setattr(tree_mod, "LONG_SECTION_CHARS", 200)
    body = _long("text", 120)
    footers = "".join(f"#### Acme Corp 2021 Form 10-K {58 + i}\n\n{body}\n\n" for i in range(3))
    root, _ = tree_of(f"# A\n\n## B\n\n### C\n\n{footers}### D\n\nd\n\n# Z\n\nz\n")
    c = next(n for n in root.iter_preorder() if n.heading == "C")
    assert c.is_leaf and "Acme Corp 2021 Form 10-K 60" in c.content  # printed on each page: not a section
    notes = "".join(f"#### Note {i}\n\n{body}\n\n" for i in range(1, 4))
    root, _ = tree_of(f"# A\n\n## B\n\n### C\n\n{notes}# Z\n\nz\n")
    assert [n.heading for n in root.leaves()] == ["Note 1", "Note 2", "Note 3", "Z"]  # the number names each
    crowd = "".join(f"#### Clause {i} text\n\nx\n\n" for i in range(tree_mod.MAX_OPENED + 1))
    root, _ = tree_of(f"# A\n\n## B\n\n### C\n\n{body}\n\n{crowd}# Z\n\nz\n")
    assert [n.heading for n in root.leaves()] == ["C", "Z"]
    root, _ = tree_of(f"# A\n\n## B\n\n### C\n\n{notes}", Config(max_depth=0))
    assert len(root.leaves()) == 1  # one leaf per document stays that


def test_a_bare_division_mark_takes_the_title_printed_after_it() -> None:
    """A filing prints "NOTE 24" on one line and its title on the next: the section is named by both,
    not by a number whose title hides under the depth cap."""
    text = ("# PART II\n\n## Item 8. Financial Statements\n\n### NOTE 24\n\n#### REPORTABLE SEGMENTS AND "
            "GEOGRAPHIC OPERATIONS\n\nWe operate in four regions.\n\n### NOTE 25\n\nRESTRUCTURING\n\n"
            "We periodically initiate restructuring programs.\n\n### NOTE 26\n\nThe Company leases offices\n"
            "in three states.\n\n### Note 27\n\n#### Consolidated Balance Sheets\n\nrows\n\n"
            "# PART III\n\n## Item 10. Directors\n\nnames\n\n# 第一章\n\n## 总则\n\n### 第一条\n\n"
            "为了规范管理，制定本法。\n")
    root, doc = tree_of(text)
    assert shape(root) == [
        "PART II", "  Item 8. Financial Statements",
        "    NOTE 24 — REPORTABLE SEGMENTS AND GEOGRAPHIC OPERATIONS", "    NOTE 25 — RESTRUCTURING",
        "    NOTE 26", "    Note 27", "PART III", "  Item 10. Directors", "第一章 总则", "  第一条"]
    n24, n25, n26, n27 = (root.children[0].children[0].children[i] for i in range(4))
    assert n24.content == "We operate in four regions." and n24.start_line == 5
    assert n25.content == "We periodically initiate restructuring programs."
    assert n26.content.startswith("The Company leases offices")  # a paragraph, not a title
    assert "Consolidated Balance Sheets" in n27.content  # a statement's title is no note's title
    assert root.children[-1].children[0].content == "为了规范管理，制定本法。"  # an article's text, no title
    for leaf in root.leaves():
        assert doc.text[leaf.content_start:leaf.content_end] == leaf.content


def test_a_division_mark_atop_a_document_names_no_document_and_a_first_section_is_no_title() -> None:
    """A press release filed as "Exhibit 99.1": the mark is no document title, and the release's title,
    followed by statements at its level, is the exhibit's first section, not the exhibit's title."""
    text = ("# Exhibit 99.1\n\n## ACME REPORTS RECORD RESULTS\n\n### Highlights\n\nRevenue grew.\n\n"
            "## CONSOLIDATED BALANCE SHEETS\n\nCash 100 90\n")
    root, doc = tree_of(text, folder=True, path="acme-release.md")
    assert doc.title == "acme-release"
    assert shape(root) == ["acme-release", "  Exhibit 99.1", "    ACME REPORTS RECORD RESULTS",
                           "      Highlights", "    CONSOLIDATED BALANCE SHEETS"]


def test_max_depth_zero_gives_one_leaf_per_document() -> None:
    root, doc = tree_of("# A\n\ntext\n\n## B\n\nmore\n", Config(max_depth=0))
    assert len(root.leaves()) == 1
    # The single top H1 names the document; everything below it is the one leaf.
    assert root.leaves()[0].content == "text\n\n## B\n\nmore"
    assert root.leaves()[0].heading == "A"


# --------------------------------------------------------------------------- no lost text

def test_preface_text_gets_an_intro_leaf() -> None:
    text = "Before any heading.\n\n# 1 A\n\nPreface of A.\n\n## 1.1 B\n\nb\n\n# 2 C\n\n## 2.1 D\n\nd\n"
    root, _ = tree_of(text, path="paper.md")
    assert shape(root) == ["paper (intro)", "1 A", "  1 A (intro)", "  1.1 B", "2 C", "  2.1 D"]
    intro = root.children[0]
    assert intro.kind == "intro" and intro.content == "Before any heading."
    a_intro = root.children[1].children[0]
    assert a_intro.content == "Preface of A." and a_intro.heading_path == "1 A > 1 A (intro)"
    assert a_intro.start_line == a_intro.end_line == 5


def test_document_without_headings_is_one_leaf() -> None:
    root, doc = tree_of("Just text.\n\nTwo paragraphs.\n", path="notes.md")
    assert outline(root) == [("0001", 0, "notes", True)]
    assert root.children[0].kind == "document"
    assert root.children[0].content == "Just text.\n\nTwo paragraphs."
    folder_root, _ = tree_of("Just text.\n", folder=True, path="notes.md")
    assert outline(folder_root) == [("0001", 0, "notes", True)]


def test_spans_and_lines() -> None:
    text = "# A\n\nline3\nline4\n\n\nB title\n-------\n\nline9\n"
    root, doc = tree_of(text, folder=True, path="s.md")
    # Single H1 at the top names the document and *is* the document node.
    docnode = root.children[0]
    assert docnode.kind == "document" and docnode.heading == "A"
    intro, b = docnode.children
    assert intro.content == "line3\nline4" and (intro.start_line, intro.end_line) == (3, 4)
    assert b.heading == "B title" and (b.start_line, b.end_line) == (7, 10)
    assert text[b.start_char:b.content_start].startswith("B title\n-------\n")
    assert b.content == "line9" and text[b.content_start:b.content_end] == "line9"
    assert (docnode.start_line, docnode.end_line) == (1, 10)
    for n in root.iter_preorder():
        assert doc.text[n.content_start:n.content_end] == n.content


def test_front_matter_never_becomes_content() -> None:
    text = "---\ntitle: FM Title\nauthor: x\n---\nIntro text.\n\n# Sec\n\nbody\n"
    root, doc = tree_of(text, folder=True, path="fm.md")
    assert root.children[0].heading == "FM Title"
    assert all("author" not in n.content for n in root.iter_preorder())
    assert root.children[0].children[0].content == "Intro text."
    assert root.children[0].children[0].start_line == 5


# --------------------------------------------------------------------------- folders

def test_folder_forest_document_nodes() -> None:
    d1 = document_from_text("# Paper One\n\n## Abstract\n\nabs\n\n## 1 Intro\n\nintro\n", "a/one.md")
    d2 = document_from_text("# X\n\ntext\n\n# Y\n\nmore\n", "b.md")
    root = build_tree([d1, d2], Config(), folder_mode=True)
    assert shape(root) == ["Paper One", "  Abstract", "  1 Intro", "b", "  X", "  Y"]
    one, b = root.children
    assert one.kind == b.kind == "document" and one.level == b.level == 0
    assert one.children[0].level == 1
    assert one.children[1].heading_path == "Paper One > 1 Intro"
    assert {n.doc_path for n in one.iter_preorder()} == {"a/one.md"}
    assert {n.doc_path for n in b.iter_preorder()} == {"b.md"}
    ids = [n.node_id for n in root.iter_preorder()]
    assert ids == [f"{i:04d}" for i in range(7)]


def test_single_file_mode_rejects_several_documents() -> None:
    d = document_from_text("# A\n\nx\n", "a.md")
    with pytest.raises(ValueError):
        build_tree([d, d], Config(), folder_mode=False)


# --------------------------------------------------------------------------- serialisation

SPEC_TOC = """文档结构:

[0001] Abstract (叶子节点)
  摘要: 本文提出AdaRouter，一种基于contextual bandit的自适应路由方法...

[0002] 1 Introduction
  摘要: 介绍研究背景和动机...

  [0003] 1.1 Background (叶子节点)
    摘要: 外汇市场算法交易的发展现状...

  [0004] 1.2 Motivation (叶子节点)
    摘要: 现有静态路由方法的局限性...

[0005] 2 Methods
  摘要: 本章描述方法论...

  [0006] 2.1 Encoder Design (叶子节点)
    摘要: 基于Transformer的时序编码器设计...

  [0007] 2.2 Router Design (叶子节点)
    摘要: Contextual bandit路由决策算法...

[0008] 3 Experiments
  摘要: 实验设置与结果分析...

  [0009] 3.1 Performance (叶子节点)
    摘要: 主实验结果，AdaRouter在EUR/USD上达到73.2%准确率...

  [0010] 3.2 Ablation Study (叶子节点)
    摘要: 各模块消融实验结果...

[0011] 4 Conclusion (叶子节点)
  摘要: 总结贡献和未来方向..."""

SPEC_SUMMARIES = {
    "Abstract": "本文提出AdaRouter，一种基于contextual bandit的自适应路由方法...",
    "1 Introduction": "介绍研究背景和动机...",
    "1.1 Background": "外汇市场算法交易的发展现状...",
    "1.2 Motivation": "现有静态路由方法的局限性...",
    "2 Methods": "本章描述方法论...",
    "2.1 Encoder Design": "基于Transformer的时序编码器设计...",
    "2.2 Router Design": "Contextual bandit路由决策算法...",
    "3 Experiments": "实验设置与结果分析...",
    "3.1 Performance": "主实验结果，AdaRouter在EUR/USD上达到73.2%准确率...",
    "3.2 Ablation Study": "各模块消融实验结果...",
    "4 Conclusion": "总结贡献和未来方向...",
}


class HeadingLookup:
    summarizer_id = "lookup"

    def summarize_leaf(self, node: TreeNode) -> str:
        return SPEC_SUMMARIES[node.heading]

    def summarize_parent(self, node: TreeNode, child_summaries: list[str]) -> str:
        return SPEC_SUMMARIES[node.heading]


SPEC_MARKDOWN = """# Abstract

AdaRouter text.

# 1 Introduction

## 1.1 Background

Text.

## 1.2 Motivation

Text.

# 2 Methods

## 2.1 Encoder Design

Text.

## 2.2 Router Design

Text.

# 3 Experiments

## 3.1 Performance

Text.

## 3.2 Ablation Study

Text.

# 4 Conclusion

Text.
"""


def test_serialisation_matches_the_spec_character_by_character() -> None:
    root, _ = tree_of(SPEC_MARKDOWN)
    summarize_tree(root, Config(), HeadingLookup())
    assert serialize_tree(root) == SPEC_TOC
    seed = next((SHARED / "seeds").glob("000_*.txt"), None) if (SHARED / "seeds").is_dir() else None
    if seed is not None:  # the literal above is the spec's own block
        assert SPEC_TOC in seed.read_text(encoding="utf-8")


def test_serialisation_include_filter() -> None:
    root, _ = tree_of(SPEC_MARKDOWN)
    summarize_tree(root, Config(), HeadingLookup())
    out = serialize_tree(root, include={"0005", "0007"})
    assert out == ("文档结构:\n\n[0005] 2 Methods\n  摘要: 本章描述方法论...\n\n"
                   "  [0007] 2.2 Router Design (叶子节点)\n    摘要: Contextual bandit路由决策算法...")


def test_serialisation_of_a_folder_indents_under_documents() -> None:
    d1 = document_from_text("# P\n\n## A\n\nx\n", "p.md")
    root = build_tree([d1], Config(), folder_mode=True)
    summarize_tree(root, Config())
    assert serialize_tree(root) == "文档结构:\n\n[0001] P\n  摘要: x\n\n  [0002] A (叶子节点)\n    摘要: x"


# --------------------------------------------------------------------------- real documents

def assert_sane(root: TreeNode, max_depth: int = 3) -> None:
    seen: set[str] = set()
    for n in root.iter_preorder():
        assert n.node_id not in seen
        seen.add(n.node_id)
        for c in n.children:
            assert c.parent is n
        if n.kind == "root":
            continue
        assert n.level <= max_depth
        if n.kind == "document":
            assert n.level == 0 and n.parent is root
        else:
            assert n.level == n.parent.level + 1  # no jumps, no orphans
        if not n.is_leaf:
            assert n.content == ""


@pytest.mark.skipif(not BENCH.is_dir(), reason="shared bench data not available")
def test_real_statute_tree() -> None:
    path = BENCH / "lecoqa-train" / "docs" / "民法典" / "总则.md"
    docs, _ = load_documents(path)
    root = build_tree(docs, Config(), folder_mode=True)
    assert_sane(root)
    code = root.children[0]
    assert code.heading == "中华人民共和国民法典 总则"
    chapters = [c for c in code.children if c.kind == "section"]
    assert [c.heading.split()[0] for c in chapters][:3] == ["第一章", "第二章", "第三章"]
    assert len(chapters) == 10 and all(c.level == 1 for c in chapters)
    sections = chapters[1].children
    assert [s.heading.split()[0] for s in sections] == ["第一节", "第二节", "第三节", "第四节"]
    assert code.children[0].kind == "intro" and "2020年5月28日" in code.children[0].content
    art = next(n for n in root.leaves() if "第二十六条" in n.content)
    assert art.heading_path == "中华人民共和国民法典 总则 > 第二章 自然人 > 第二节 监 护"


@pytest.mark.skipif(not BENCH.is_dir(), reason="shared bench data not available")
def test_real_criminal_code_three_levels() -> None:
    path = BENCH / "lecoqa-train" / "docs" / "刑法" / "刑法.md"
    docs, _ = load_documents(path)
    root = build_tree(docs, Config(), folder_mode=False)
    assert_sane(root)
    parts = [c for c in root.children if c.heading.startswith("第") and "编" in c.heading]
    assert [p.heading.split()[0] for p in parts] == ["第一编", "第二编"]
    chapter = parts[0].children[1]
    assert chapter.heading == "第二章 犯罪" and chapter.children[0].heading == "第一节 犯罪和刑事责任"
    assert chapter.children[0].level == 3


@pytest.mark.skipif(not BENCH.is_dir(), reason="shared bench data not available")
def test_real_paper_tree() -> None:
    path = BENCH / "qasper-dev" / "docs" / "1908.05828.md"
    docs, _ = load_documents(path)
    root = build_tree(docs, Config(), folder_mode=True)
    assert_sane(root)
    paper = root.children[0]
    assert paper.heading == "Named Entity Recognition for Nepali Language"
    assert [c.heading for c in paper.children][:3] == ["Abstract", "Introduction", "Related Work"]
    features = next(n for n in root.iter_preorder() if n.heading == "Features")
    assert features.level == 2 and "Word embeddings" in [c.heading for c in features.children]
    summarize_tree(root, Config())
    assert all(n.summary and "\n" not in n.summary for n in root.iter_preorder()
               if n.kind != "root")
