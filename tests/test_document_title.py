"""The document node's title: what the document states before what its file metadata says.

A filing's PDF metadata titles it by an accession number ("0000012927-23-000007"); its cover names
it (registrant, form, period). A real metadata title is kept where the document states none.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tree_builder.doc_card import cover_title, identifier_like, read_card
from tree_builder.loader import load_document

COVER_LINES = ["UNITED STATES SECURITIES AND EXCHANGE COMMISSION", "FORM 10-K",
               "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
               "For the fiscal year ended December 31, 2022", "Commission file number 1-442",
               "The Boeing Company", "(Exact name of registrant as specified in its charter)",
               "Delaware 91-0425694"]
BODY = [("Overview", "Widgets are sold in many markets and serviced for years after the sale."),
        ("Results", "Revenue grew in every region on higher volumes and better prices.")]


def _render(path: Path, metadata_title: str, cover: list[str] | None) -> None:
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF(format="A4")
    if metadata_title:
        pdf.set_title(metadata_title)
    if cover:
        pdf.add_page()
        pdf.set_font("Helvetica", "", 10)
        for line in cover:
            pdf.multi_cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    for heading, text in BODY:
        pdf.set_font("Helvetica", "B", 14)
        pdf.multi_cell(0, 8, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)
        pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))


@pytest.mark.parametrize("title, identifier", [
    ("0000012927-23-000007", True), ("3f2a9c1e-1234-5678-9abc-def012345678", True), ("a1b2c3d4e5f6a7b8", True),
    ("d123456d10k.htm", True), ("Microsoft Word - 10K_2022.docx", True), ("Untitled", True), ("", True),
    ("10-K", True), ("The Boeing Company 10-K", False), ("Attention Is All You Need", False),
    ("2022 Annual Report", False), ("UBS AG", False), ("劳动合同法", False), ("刑法", False),
])
def test_identifier_like_metadata_titles(title: str, identifier: bool) -> None:
    assert identifier_like(title) is identifier


def test_the_cover_names_a_filing() -> None:
    text = "\n".join(COVER_LINES) + "\n"
    assert cover_title(text) == "The Boeing Company \u2014 Form 10-K, fiscal year ended December 31, 2022"
    assert cover_title("A handbook of widgets\n\nChapter 1\n") == ""  # no registrant, no form: no stated name


def test_a_filing_is_titled_by_its_cover_not_its_accession_number(tmp_path: Path) -> None:
    path = tmp_path / "boeing.pdf"
    _render(path, "0000012927-23-000007", COVER_LINES)
    doc = load_document(path, path.name)
    assert doc.title == "The Boeing Company \u2014 Form 10-K, fiscal year ended December 31, 2022"
    card = read_card(doc.text, doc.title, doc.path, doc.page_starts)
    # the card keeps its fields; the title repeats them, so it adds no words of its own
    assert (card.issuer, card.form, card.period) == ("The Boeing Company", "10-K", "fiscal year ended December 31, 2022")
    assert card.title == ""


def test_a_real_metadata_title_is_kept_and_an_identifier_falls_back_to_the_file_name(tmp_path: Path) -> None:
    real, ident = tmp_path / "handbook.pdf", tmp_path / "widget-guide.pdf"
    _render(real, "Widget Handbook", None)
    _render(ident, "0000012927-23-000007", None)
    assert load_document(real, real.name).title == "Widget Handbook"
    assert load_document(ident, ident.name).title == "widget-guide"
