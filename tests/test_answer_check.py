"""``python -m evaluation.answer_check``: the offline answer's reference figure, measured end to end on a
generated set of two look-alike filings."""
from __future__ import annotations

import json
from pathlib import Path

from config import Config
from evaluation.answer_check import CheckQuestion, check_one, format_summary, main, summarise
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from tests.test_doc_cards import filing


def test_answer_check_scores_the_offline_answers_of_a_set(tmp_path: Path, capsys) -> None:
    data = tmp_path / "set"
    (data / "docs").mkdir(parents=True)
    (data / "docs" / "n2021.md").write_text(filing(2021, 312, 295), encoding="utf-8")
    (data / "docs" / "n2022.md").write_text(filing(2022, 418, 312), encoding="utf-8")
    rows = [
        {"id": "capex21", "query": "What were Northwind's capital expenditures in FY2021?", "answers": ["$312 million"],
         "evidence": [{"doc": "n2021.md", "text": "Capital expenditures 312 295"}], "question_type": "metrics"},
        {"id": "capex22", "query": "What were Northwind's capital expenditures in FY2022?", "answers": ["$418"],
         "evidence": [{"doc": "n2022.md", "text": "Capital expenditures 418 312"}], "question_type": "metrics"},
        {"id": "ratio", "query": "What is Northwind's capex growth in FY2022?", "answers": ["36.7%"],
         "evidence": [{"doc": "n2022.md", "text": "Capital expenditures 418 312"}], "question_type": "derived"},
    ]
    (data / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    build_index(data / "docs", tmp_path / "index", Config(), make_embedder("hash", Config()))
    out = tmp_path / "check.json"
    assert main(["--data", str(data), "--index", str(tmp_path / "index"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "checkable (reference figure on the evidence page) 2; answer states it 2 (100%)" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    by_id = {q["id"]: q for q in report["questions"]}
    assert by_id["capex21"]["answered"] and by_id["capex21"]["first_read"].startswith("row 'Capital expenditures'")
    assert by_id["capex21"]["quote_in_evidence_doc"]  # the FY2021 filing, not its look-alike
    assert by_id["ratio"]["figures"] == []  # a computed figure the page does not state is not checked
    assert report["summary"]["by_question_type"] == {"metrics": {"checkable": 2, "answered": 2}}


def test_answer_check_refuses_bad_input_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["--data", str(tmp_path), "--index", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}: no qa.jsonl (an evaluation set directory holds docs/ and qa.jsonl)"
    (tmp_path / "qa.jsonl").write_text("{not json\n", encoding="utf-8")
    assert main(["--data", str(tmp_path), "--index", str(tmp_path)]) == 2
    assert "qa.jsonl line 1: not a question record" in capsys.readouterr().err


def test_the_figure_is_split_by_whether_the_context_read_an_evidence_page() -> None:
    q = CheckQuestion("q", "What were capital expenditures in FY2022?", ("a.pdf",), "Capital expenditures 418 312",
                      ("$418",), "metrics", (("a.pdf", 7),))
    on_page = {"answer_quotes": [{"text": "Capital expenditures, 2022: 418", "doc_path": "a.pdf"}],
               "context": {"passages": [{"doc_path": "b.pdf", "page_start": 7, "page_end": 7},
                                        {"doc_path": "a.pdf", "page_start": 6, "page_end": 8}]}}
    elsewhere = {"answer_quotes": [{"text": "Revenue 900", "doc_path": "a.pdf"}],
                 "context": {"passages": [{"doc_path": "a.pdf", "page_start": 9, "page_end": None},
                                          {"doc_path": "b.pdf", "page_start": 7, "page_end": 7}]}}
    read, missed = check_one(q, on_page), check_one(q, elsewhere)
    assert read.context_on_evidence_page is True and read.answered
    assert missed.context_on_evidence_page is False and not missed.answered  # page 7 of another filing
    no_pages = check_one(CheckQuestion("m", q.query, ("a.md",), q.evidence_text, q.answers), on_page)
    assert no_pages.context_on_evidence_page is None  # a Markdown set names no pages: in neither share
    s = summarise([read, missed, no_pages])
    assert s["context_on_evidence_page"] == {"checkable": 1, "answered": 1}
    assert s["context_off_evidence_page"] == {"checkable": 1, "answered": 0}
    assert "the context read an evidence page: 1 of 1; it did not (retrieval's miss): 0 of 1" in format_summary(s)
