"""Extractive quotes of a statute and of Markdown with HTML comments: a quote runs to "。" (not
"；"), names the article (第X条) it lies in, and never shows an author's <!-- comment -->."""
from __future__ import annotations

from pathlib import Path

from config import Config
from indexing.chunker import Chunk
from retrieval.extractive import Passage, article_of, select_quotes, split_sentences
from retrieval.synthesizer import extractive_text
from tests.conftest import run_cli

STATUTE = ("第十条 当事人订立合同，有书面形式、口头形式和其他形式。\n\n"
           "法律、行政法规规定采用书面形式的，应当采用书面形式；当事人约定采用书面形式的，应当采用书面形式。\n\n"
           "第十一条 书面形式是指合同书、信件和数据电文等可以有形地表现所载内容的形式。")


def _passage(text: str) -> Passage:
    chunk = Chunk(chunk_id="c0", text=text, source_node_id="n1", heading_path="第二章 合同的订立",
                  doc_path="law.md", start_char=0, end_char=len(text), start_line=1, end_line=text.count("\n") + 1)
    return Passage(chunk, 0, len(text), text, [(1, 0, len(text))], (0, 1), content=text, content_start=0)


def _best(sentences: list, wanted: str) -> None:
    for s in sentences:
        s.score = 1.0 if s.text.startswith(wanted) else 0.01


def test_statute_quote_ends_at_the_full_stop_and_names_its_article() -> None:
    p = _passage(STATUTE)
    sentences = split_sentences(p, 0)
    assert not any(s.text.endswith("；") for s in sentences)
    _best(sentences, "法律、行政法规")
    (quote,) = select_quotes(sentences, [p], Config().tuning.answer)
    assert quote.text.endswith("应当采用书面形式。") and "；当事人约定" in quote.text
    assert quote.article == "第十条"
    shown = extractive_text("书面形式？", [{"ranks": [1], "text": quote.text, "citation": "law.md:L3",
                                         "heading_path": "第二章 合同的订立", "article": quote.article}])
    assert "(law.md:L3, 第二章 合同的订立 > 第十条)" in shown


def test_a_quote_that_starts_with_its_article_does_not_repeat_it() -> None:
    p = _passage(STATUTE)
    sentences = split_sentences(p, 0)
    _best(sentences, "第十一条")
    (quote,) = select_quotes(sentences, [p], Config().tuning.answer)
    assert quote.text.startswith("第十一条") and quote.article is None
    assert article_of(p, STATUTE.index("第十一条")) == "第十一条"
    assert article_of(p, 0) == "第十条"


def test_html_comments_are_never_quoted() -> None:
    text = ("AdaRouter reaches 73.2% accuracy on EUR/USD.\n\n<!-- TODO: check this number. Ask Bob. -->\n\n"
            "The baseline reaches 65.1% <!-- old figure --> on the same pair.")
    p = _passage(text)
    sentences = split_sentences(p, 0)
    assert all("TODO" not in s.text and "Bob" not in s.text for s in sentences)
    for s in sentences:
        s.score = 1.0
    quotes = select_quotes(sentences, [p], Config().tuning.answer)
    assert quotes and all("<!--" not in q.text and "old figure" not in q.text for q in quotes)
    assert any("65.1%" in q.text for q in quotes)
    for q in quotes:  # the offsets still cite the document's own characters
        assert text[q.chunk.start_char:q.chunk.end_char].startswith(q.text[:10])


def test_comments_are_not_shown_in_printed_passages(tmp_path: Path) -> None:
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\n## Results\n\nAdaRouter reaches 73.2% accuracy on EUR/USD. "
                   "<!-- reviewer: secret remark --> The baseline reaches 65.1%.\n", encoding="utf-8")
    out = tmp_path / "idx"
    assert run_cli("index", "--input", str(doc), "--output", str(out), "--mock", "--quiet").returncode == 0
    proc = run_cli("query", "--index", str(out), "--query", "What accuracy does AdaRouter reach?", "--no-log",
                   "--mock", "--answer", "extractive")
    assert proc.returncode == 0, proc.stderr
    assert "73.2%" in proc.stdout and "secret remark" not in proc.stdout and "<!--" not in proc.stdout
