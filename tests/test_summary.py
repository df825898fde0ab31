"""Extractive summaries, the summariser interface and its cache."""
from __future__ import annotations


import pytest

from config import Config
from tree_builder.documents import document_from_text
from tree_builder.summary import (
    ExtractiveSummarizer,
    Summarizer,
    fair_pack,
    markdown_blocks,
    split_sentences,
    summarize_tree,
    truncate,
)
from tree_builder.tree import TreeNode, build_tree
from utils.errors import BackendError


def leaf(content: str, heading: str = "H") -> TreeNode:
    return TreeNode(node_id="0001", heading=heading, level=1, content=content)


LONG_EN = " ".join(
    f"Sentence number {i} talks about routing venues and liquidity in detail." for i in range(40))


# --------------------------------------------------------------------------- text helpers

def test_split_sentences_cjk_and_latin() -> None:
    assert split_sentences("第一条 为了保护。第二条 民法调整！是吗？是；好") == [
        "第一条 为了保护。", "第二条 民法调整！", "是吗？", "是；", "好"]
    assert split_sentences("It rose 73.2% on EUR/USD. Then it fell! Why? Fine") == [
        "It rose 73.2% on EUR/USD.", "Then it fell!", "Why?", "Fine"]


def test_split_sentences_keeps_abbreviations_together() -> None:
    text = "Nevmyvaka et al. (2006) used RL, e.g. Q-learning. J. Smith agreed. Next one."
    assert split_sentences(text) == [
        "Nevmyvaka et al. (2006) used RL, e.g. Q-learning.", "J. Smith agreed.", "Next one."]


def test_markdown_noise_is_stripped() -> None:
    text = ("#### Deep heading\n\nSome **bold** and _em_ text with a [link](http://x.y) and "
            "`code` and snake_case_name.\n\n```python\nx = 1  # code is dropped\n```\n\n"
            "<!-- hidden -->\n\n- item one\n- item two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    blocks = markdown_blocks(text)
    assert blocks == ["Deep heading",
                      "Some bold and em text with a link and code and snake_case_name.",
                      "item one item two", "a b 1 2"]


def test_truncate_prefers_word_boundaries() -> None:
    out = truncate("alpha beta gamma delta epsilon", 20)
    assert out == "alpha beta gamma…" and len(out) <= 20
    assert truncate("短文本", 10) == "短文本"
    assert len(truncate("很长的中文文本" * 10, 15)) == 15


# --------------------------------------------------------------------------- extractive

def test_short_section_uses_its_own_text() -> None:
    s = ExtractiveSummarizer(max_chars=160, short_section_tokens=200)
    assert s.summarize_leaf(leaf("First line\nwraps here.\n\nSecond para.")) == \
        "First line wraps here. Second para."


def test_long_section_uses_first_whole_sentences_capped() -> None:
    s = ExtractiveSummarizer(max_chars=160, short_section_tokens=200)
    out = s.summarize_leaf(leaf(LONG_EN))
    assert out == ("Sentence number 0 talks about routing venues and liquidity in detail. "
                   "Sentence number 1 talks about routing venues and liquidity in detail.")
    assert len(out) <= 160


def test_cjk_long_section_first_sentences() -> None:
    text = "".join(f"第{i}条 自然人的民事权利能力一律平等，依法享有民事权利。" for i in range(60))
    out = ExtractiveSummarizer(max_chars=80).summarize_leaf(leaf(text))
    assert out == "第0条 自然人的民事权利能力一律平等，依法享有民事权利。第1条 自然人的民事权利能力一律平等，依法享有民事权利。"


def test_first_sentence_longer_than_cap_is_truncated() -> None:
    out = ExtractiveSummarizer(max_chars=50).summarize_leaf(leaf("word " * 300))
    assert len(out) <= 50 and out.endswith("…")


def test_empty_leaf_has_empty_summary() -> None:
    assert ExtractiveSummarizer().summarize_leaf(leaf("")) == ""
    assert ExtractiveSummarizer().summarize_leaf(leaf("```\ncode only\n```")) == ""


def test_parent_summary_covers_each_child() -> None:
    parts = ["Encoder uses a Transformer. More text.", "Router uses LinUCB bandits. Extra."]
    out = ExtractiveSummarizer(max_chars=160).summarize_parent(leaf(""), parts)
    assert out == "Encoder uses a Transformer. Router uses LinUCB bandits."
    long_parts = ["A" * 200 + ".", "B" * 200 + ".", "C" * 10 + "."]
    packed = fair_pack(long_parts, 160)  # the short child keeps its whole sentence
    assert len(packed) <= 160 and packed.endswith(" CCCCCCCCCC.")
    assert abs(packed.count("A") - packed.count("B")) <= 1 and packed.count("A") > 60
    assert "C" not in fair_pack(long_parts, 100)  # shares under 40 chars say nothing: 2 children


def test_summarize_tree_fills_every_node_bottom_up_one_line() -> None:
    doc = document_from_text(
        "# P\n\nPreface line.\n\n## A\n\nAlpha first.\nAlpha second.\n\n## B\n\nBeta text.\n", "p.md")
    root = build_tree([doc], Config(), folder_mode=True)
    summarize_tree(root, Config())
    by_heading = {n.heading: n.summary for n in root.iter_preorder()}
    assert by_heading["A"] == "Alpha first. Alpha second."
    assert by_heading["P"] == "Preface line. Alpha first. Beta text."
    assert by_heading[""] == ""  # the synthetic root is not summarised
    assert all("\n" not in s for s in by_heading.values())


def test_llm_mode_without_a_summariser_is_a_clear_error() -> None:
    root = TreeNode(node_id="0000", heading="", level=0, content="", kind="root")
    with pytest.raises(BackendError, match="summari"):
        summarize_tree(root, Config(summary_mode="llm"))


# --------------------------------------------------------------------------- cache

def test_protocol_is_satisfied() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)


