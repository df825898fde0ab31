"""The offline answer's sentences for a question that asks for a figure: a label fragment (a table
header's few words) loses to a sentence stating the figure, and another company's figure gets no
credit for naming the asked period."""
from __future__ import annotations

from pathlib import Path

from retrieval.extractive import (FIGURE_SENTENCE_BONUS, LABEL_FRAGMENT_PENALTY, Passage, Sentence, is_label_fragment,
                                  weigh_for_figures)
from retrieval.query import Query
from tests.test_figure_rows_layouts import two_companies


def test_a_label_fragment_is_not_a_statement() -> None:
    assert is_label_fragment("Total\nShareholders’\nEquity")
    assert not is_label_fragment("Dividends were $0.55 per share.")  # states a figure
    assert not is_label_fragment("We paid dividends.")  # a sentence, however short
    assert not is_label_fragment("Cash dividends declared per common share of the company in the year")  # long


def test_figure_sentences_of_the_named_company_gain_and_label_fragments_lose(tmp_path: Path) -> None:
    index, emb = two_companies(tmp_path)
    chunk = {c.doc_path: c for c in index.chunks}
    passages = [Passage(chunk[d], 0, 0, "", [(1, 0, 0)], (0, 1)) for d in ("acme.md", "northwind.md")]
    texts = [(0, "Total\nShareholders’ Equity"), (0, "During 2022 the quarterly cash dividend was $0.55 per share."),
             (1, "In 2022 the dividends paid were $932 million."), (1, "Dividends are set by the board.")]

    def weighed(question: str) -> list[float]:
        sentences = [Sentence(p, 0, 0, t, score=0.5) for p, t in texts]
        weigh_for_figures(sentences, passages, Query.build(question, emb), index)
        return [round(s.score, 4) for s in sentences]

    fragment, stated = 0.5 - LABEL_FRAGMENT_PENALTY, 0.5 + FIGURE_SENTENCE_BONUS
    assert weighed("What dividends did Acme Rockets pay to shareholders in FY2022?") == [fragment, stated, 0.5, 0.5]
    # no company named: every filing's figure for the period counts
    assert weighed("What dividends were paid to shareholders in FY2022?") == [fragment, stated, stated, 0.5]
    assert weighed("Who sets the dividend policy?") == [0.5, 0.5, 0.5, 0.5]  # no quantity asked: nothing moves
