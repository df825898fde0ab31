"""Chunker: the spec's paragraph/window algorithm, no lost text, exact spans."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config import Config
from indexing.chunker import Chunk, chunk_leaf, chunk_spans, span_lines
from tree_builder.markdown_headings import line_starts
from tree_builder.tree import TreeNode
from utils.errors import TreeRAGError

# Letters, CJK, digits, sentence/word punctuation and every kind of whitespace
# the chunker must treat specially (blank lines, space-only lines, tabs, U+3000).
_ALPHABET = st.sampled_from(list("aaaabcdeeefghiklmnoprstu  ") + list("中文法律条款规定") +
                            list("0123456789") + list(".,;:!?。，、；！？”)") +
                            ["\n", "\n", "\n\n", "\n  \n", "\t", "\u3000", "   "])
_TEXT = st.lists(_ALPHABET, max_size=700).map("".join)


def chunk_content(content: str, chunk_size: int = 200, overlap: int = 50, min_chars: int = 20) -> list[str]:
    """The spec's ``chunk_content`` (texts only), as the index sees it through ``chunk_spans``."""
    return [content[s:e] for s, e in chunk_spans(content, chunk_size, overlap, min_chars)]


def _collapsed_len(s: str) -> int:
    return len(re.sub(r"\s+", " ", s))


def _check_invariants(text: str, spans: list[tuple[int, int]], cs: int, ov: int, mn: int) -> None:
    covered = bytearray(len(text))
    prev = (-1, -1)
    for s, e in spans:
        assert 0 <= s < e <= len(text)
        piece = text[s:e]
        assert piece == piece.strip() and piece, "spans start and end on non-whitespace"
        assert s > prev[0] and e > prev[1], "spans strictly increase"
        prev = (s, e)
        assert _collapsed_len(piece) <= cs + 2 * mn
        for i in range(s, e):
            covered[i] = 1
    lost = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not lost, f"non-blank characters not in any chunk: {lost[:5]}"


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, cs=st.integers(1, 120), ov_frac=st.floats(0, 0.99), mn=st.integers(0, 30), pack=st.booleans())
def test_property_no_text_lost_and_spans_well_formed(text: str, cs: int, ov_frac: float, mn: int,
                                                     pack: bool) -> None:
    ov = min(int(cs * ov_frac), cs - 1)
    mn = min(mn, cs)
    spans = chunk_spans(text, cs, ov, mn, pack=pack)
    _check_invariants(text, spans, cs, ov, mn)
    if text.strip():
        assert spans


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.text(alphabet="abcdefghij中文法律。.,", min_size=1, max_size=12), min_size=1, max_size=80),
       cs=st.integers(8, 200), ov_frac=st.floats(0, 0.33))
def test_property_windows_of_one_long_paragraph(words: list[str], cs: int, ov_frac: float) -> None:
    """One paragraph, single spaces: windows <= chunk_size, overlap ~ overlap."""
    text = " ".join(words)
    ov = int(cs * ov_frac)
    spans = chunk_spans(text, cs, ov, 0)
    _check_invariants(text, spans, cs, ov, 0)
    for (s1, e1), (s2, _) in zip(spans, spans[1:]):
        assert e1 - s1 <= cs
        # snapping moves a start back by <= overlap//2; a stripped space or a
        # skipped space can cost 2 characters of overlap.
        assert ov - 2 <= e1 - s2 <= ov + ov // 2
    assert spans[-1][1] == len(text)


def test_unpunctuated_cjk_is_cut_exactly_at_chunk_size_with_exact_overlap() -> None:
    text = "".join(chr(0x4E00 + (i * 7) % 500) for i in range(620))
    spans = chunk_spans(text, 200, 50, 20)
    assert spans[:3] == [(0, 200), (150, 350), (300, 500)]
    assert spans[-1] == (450, 620)


def test_window_prefers_sentence_then_word_boundary_in_last_quarter() -> None:
    sent = "A" * 160 + ". " + "b" * 100
    (s, e), *_ = chunk_spans(sent, 200, 50, 20)
    assert sent[s:e].endswith("."), "cut after the sentence in the last quarter"
    words = ("word " * 60).strip()
    spans = chunk_spans(words, 200, 50, 20)
    assert all(words[s:e].endswith("word") and words[s:e].startswith("word") for s, e in spans)
    zh = "甲" * 170 + "，" + "乙" * 100
    (s, e), *_ = chunk_spans(zh, 200, 50, 20)
    assert zh[s:e].endswith("，")
    early = "A" * 100 + ". " + "b" * 200  # boundary outside the last quarter: hard cut
    assert chunk_spans(early, 200, 50, 20)[0] == (0, 200)


def test_decimal_point_is_not_a_sentence_end() -> None:
    text = "x" * 170 + " 73.2 " + "y" * 100
    (s, e), *_ = chunk_spans(text, 200, 50, 20)
    assert not text[s:e].endswith("73.") and text[s:e].endswith("73.2")


def test_spec_behaviour_for_ordinary_paragraphs() -> None:
    paras = ["First paragraph with enough text.", "Second paragraph, also long enough."]
    assert chunk_content("\n\n".join(paras)) == paras
    long = "z" * 450
    assert [len(c) for c in chunk_content(long)] == [200, 200, 150]


def test_short_paragraph_merges_into_following_chunk() -> None:
    text = "Table 1\n\n" + "The accuracy of the router is 93.1 percent on GLUE."
    assert chunk_content(text) == [text]


def test_trailing_short_paragraph_merges_into_preceding_chunk() -> None:
    text = "The accuracy of the router is 93.1 percent on GLUE.\n\n  \n\nDone."
    assert chunk_content(text) == [text.strip()]


def test_short_paragraph_before_long_one_joins_its_first_window_only() -> None:
    text = "Note:\n\n" + "w" * 450
    spans = chunk_spans(text, 200, 50, 20)
    assert spans[0][0] == 0 and text[spans[0][0]:spans[0][1]].startswith("Note:\n\nwww")
    assert spans[1][0] > spans[0][0] and all(e - s <= 200 for s, e in spans[1:])


def test_run_of_short_paragraphs_forms_its_own_chunk_once_long_enough() -> None:
    items = ["- item one", "- item two", "- item three", "- item four"]
    body = "A normal paragraph that is long enough on its own."
    text = "\n\n".join(items) + "\n\n" + body
    chunks = chunk_content(text)
    assert chunks == ["- item one\n\n- item two", "- item three\n\n- item four", body]


def test_leaf_with_only_tiny_text_still_yields_one_chunk() -> None:
    assert chunk_content("Yes.") == ["Yes."]
    assert chunk_content("a\n\nb") == ["a\n\nb"]
    assert chunk_content("") == [] and chunk_content(" \n\n \t\n") == []


def test_invalid_settings_are_a_one_line_user_error() -> None:
    for cs, ov, mn in ((0, 0, 0), (200, 200, 20), (200, -1, 20), (200, 50, 201)):
        with pytest.raises(TreeRAGError):
            chunk_spans("text", cs, ov, mn)


def test_extreme_overlap_still_terminates_and_covers() -> None:
    text = "abcdefghij" * 30
    spans = chunk_spans(text, 8, 7, 0)
    _check_invariants(text, spans, 8, 7, 0)
    assert all(s2 - s1 >= 2 for (s1, _), (s2, _) in zip(spans, spans[1:])), "advances >= chunk_size//4"


def _doc_and_leaf(prefix: str, content: str, suffix: str) -> tuple[str, TreeNode]:
    doc = prefix + content + suffix
    node = TreeNode(node_id="0007", heading="2.2 Router", level=2, content=content,
                    heading_path="Method > 2.2 Router", doc_path="papers/a.md",
                    content_start=len(prefix), content_end=len(prefix) + len(content))
    return doc, node


def test_chunk_leaf_spans_are_exact_absolute_offsets_and_lines() -> None:
    content = "Intro line.\n\n" + " ".join(f"Sentence {i} about routing." for i in range(30)) + "\n\nEnd."
    doc, node = _doc_and_leaf("# Title\n\nsome text\n\n## 2.2 Router\n\n", content, "\n\n## Next\n")
    chunks = chunk_leaf(node, doc, Config())
    assert len(chunks) >= 3
    for i, c in enumerate(chunks):
        assert isinstance(c, Chunk)
        assert c.chunk_id == f"0007_chunk_{i:02d}"
        assert c.text == doc[c.start_char:c.end_char]
        assert c.source_node_id == "0007" and c.heading_path == "Method > 2.2 Router"
        assert c.doc_path == "papers/a.md"
        assert c.start_line == doc[:c.start_char].count("\n") + 1
        assert c.end_line == doc[:c.end_char].count("\n") + 1
    assert chunks[0].text.startswith("Intro line.\n\nSentence 0")
    assert chunks[-1].text.endswith("End.")
    assert chunk_leaf(node, doc, Config(), line_starts(doc)) == chunks


def test_chunk_leaf_uses_config_and_rejects_mismatched_content() -> None:
    doc, node = _doc_and_leaf("# T\n\n", "x" * 100, "")
    assert [c.end_char - c.start_char for c in chunk_leaf(node, doc, Config(chunk_size=40, chunk_overlap=10))] \
        == [40, 40, 40]
    node.content_start += 1
    with pytest.raises(ValueError):
        chunk_leaf(node, doc, Config())


@settings(max_examples=100, deadline=None)
@given(text=_TEXT)
def test_property_span_lines_match_counting(text: str) -> None:
    starts = line_starts(text)
    for s, e in chunk_spans(text, 50, 10, 5):
        assert span_lines(starts, s, e) == (text[:s].count("\n") + 1, text[:e].count("\n") + 1)


def test_packing_joins_short_paragraphs_up_to_chunk_size() -> None:
    """Packed: a statute's short clauses share a chunk until the next would pass chunk_size."""
    clauses = ["第六条 凡在中华人民共和国领域内犯罪的，除法律有特别规定的以外，都适用本法。",
               "凡在中华人民共和国船舶或者航空器内犯罪的，也适用本法。",
               "犯罪的行为或者结果有一项发生在中华人民共和国领域内的，就认为是在中华人民共和国领域内犯罪。"]
    text = "\n\n".join(clauses * 3)
    paragraph = chunk_spans(text, 120, 30, 20)
    packed = chunk_spans(text, 120, 30, 20, pack=True)
    assert len(paragraph) == 9 and len(packed) < len(paragraph)
    for (s, e), (s2, e2) in zip(packed, packed[1:]):
        assert e - s <= 120
        assert e2 - s > 120, "the next paragraph would have fitted: packing stopped early"
    assert "".join(text[s:e] for s, e in packed).replace("\n", "") == text.replace("\n", "")


def test_packing_leaves_long_paragraphs_to_windows_and_joins_a_scrap() -> None:
    long_par = "词" * 250
    text = "表一：\n\n" + long_par + "\n\n短句一。\n\n短句二。"
    spans = chunk_spans(text, 200, 50, 20, pack=True)
    assert spans[0][0] == 0, "a scrap before a long paragraph joins its first window"
    assert all(e - s <= 200 + 20 for s, e in spans)
    assert text[spans[-1][0]:spans[-1][1]].endswith("短句二。")


def test_config_default_packs_and_paragraph_mode_keeps_the_spec_rule() -> None:
    text = "Accuracy is 93.1% on the test set.\n\nRecall is 88.0% on the test set."
    node = TreeNode(node_id="0001", heading="H", level=1, content=text, heading_path="H", doc_path="d.md",
                    content_start=0, content_end=len(text))
    assert len(chunk_leaf(node, text, Config())) == 1
    assert len(chunk_leaf(node, text, Config().replace(chunk_units="paragraph"))) == 2
