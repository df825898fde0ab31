"""evaluation/tree_check.py: the four checks of a filing's tree, on an fpdf2-made filing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import Config
from evaluation.tree_check import check_file, form_of, main

pytest.importorskip("pypdf")
pytest.importorskip("fpdf")


def test_form_is_read_from_the_cover_not_the_name() -> None:
    assert form_of("UNITED STATES ... FORM 10-K\nANNUAL REPORT") == "10-K"
    assert form_of("FORM 10-Q\nQuarterly report ... our Annual Report on Form 10-K") == "10-Q"
    assert form_of("Press release: record quarter") == "other"
    assert form_of("Please refer to our Quarterly Report on Form 10-Q for the quarter.") == "other"


def test_filing_checks_and_evidence_misses(tmp_path: Path) -> None:
    from tests.doc_factory import render_filing_pdf

    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=True)
    check = check_file(path, [1, 4, 6], Config())
    assert check.form == "10-K" and check.parts == 2 and check.items == 4
    assert check.shape_ok and check.max_children <= 5
    assert [(m.page, m.why) for m in check.misses] == [(1, "before the first Item (cover or contents)")]
    assert not check.passes and check.failures()[0] == "items 4"


def test_cli_writes_json_and_refuses_a_missing_folder(tmp_path: Path, capsys) -> None:
    from tests.doc_factory import render_filing_pdf

    docs = tmp_path / "set" / "docs"
    docs.mkdir(parents=True)
    render_filing_pdf(docs / "acme.pdf", contents=False)
    (tmp_path / "set" / "qa.jsonl").write_text(
        json.dumps({"id": "q1", "evidence": [{"doc": "acme.pdf", "page": 5}]}) + "\n", encoding="utf-8")
    out = tmp_path / "checks.json"
    assert main(["--data", str(tmp_path / "set"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert rows[0]["file"] == "acme.pdf" and rows[0]["evidence"] == 1 and rows[0]["misses"] == []
    assert "10-K passing all four checks: 0 of 1" in capsys.readouterr().out
    assert main(["--data", str(tmp_path / "nowhere")]) == 2
    assert main(["--data", str(tmp_path / "set"), "--files", "*.docx"]) == 2


def test_an_evidence_page_in_an_exhibit_says_which() -> None:
    from evaluation.tree_check import evidence_miss
    from tree_builder.tree import TreeNode

    doc = TreeNode(node_id="0001", heading="Acme 10-K", level=0, content="", kind="document", page_start=1, page_end=4)
    item = TreeNode(node_id="0002", heading="Item 8. Financial Statements", level=1, content="x", parent=doc,
                    page_start=1, page_end=2)
    exhibit = TreeNode(node_id="0003", heading="Exhibit 13.1 — Annual Report", level=1, content="", parent=doc,
                       page_start=3, page_end=4)
    sheet = TreeNode(node_id="0004", heading="Consolidated Balance Sheets", level=2, content="y", parent=exhibit,
                     page_start=3, page_end=4)
    exhibit.children.append(sheet)
    doc.children.extend([item, exhibit])
    assert evidence_miss(doc, 2) is None
    assert evidence_miss(doc, 4) == "in an exhibit (Exhibit 13.1 — Annual Report)"


def test_without_a_signal_the_tree_is_the_fallbacks(tmp_path: Path, capsys) -> None:
    """``--without``: the bookmarks are not read, and the contents page anchors nothing yet is still
    no section; an unknown signal is refused."""
    from fpdf import FPDF

    from tests.doc_factory import render_filing_pdf
    from tree_builder.readers.pdf_reader import read_pdf

    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=True)
    full, fallback = check_file(path, [4], Config()), check_file(path, [4], Config(), frozenset({"contents"}))
    assert (fallback.parts, fallback.items, fallback.leaves) == (full.parts, full.items, full.leaves)

    pdf = FPDF()
    pdf.add_page()
    for name in ("Overview", "Design"):
        pdf.start_section(name)
        pdf.set_font("Helvetica", "", 10)  # the body's font: only the outline makes these titles
        pdf.multi_cell(0, 5, name, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 5, f"Body text of the {name.lower()} section, long enough to be a paragraph.",
                       new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "spec.pdf"))
    data = (tmp_path / "spec.pdf").read_bytes()
    titled = read_pdf(tmp_path / "spec.pdf", "spec.pdf", data)
    plain = read_pdf(tmp_path / "spec.pdf", "spec.pdf", data, without=frozenset({"outline"}))
    assert [h.text for h in titled.headings] == ["Overview", "Design"] and not plain.headings
    assert main(["--data", str(tmp_path), "--without", "fonts"]) == 2
    assert "unknown signal(s) fonts" in capsys.readouterr().err
