"""The PDFium reading layer (tree_builder/readers/pdf_text.py): lines with their layout signals."""
from __future__ import annotations

from pathlib import Path

import pytest

from tree_builder.readers import read_document
from tree_builder.readers.pdf_text import page_lines, read_pdf_content
from utils.errors import InputError


def _pdf(content: str) -> bytes:
    """A one-page PDF drawing ``content`` with Helvetica as /F1 and Helvetica-Bold as /F2."""
    objs = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R /F2 6 0 R >> >> >>",
        f"<< /Length {len(content.encode())} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_lines_carry_drawn_size_weight_baseline_and_left_edge() -> None:
    scale = 9 / 416  # a "416 pt" font drawn at 9 pt by a down-scaling matrix, as some filings do
    content = (f"q {scale:.6f} 0 0 {scale:.6f} 250 700 cm BT /F2 416 Tf 0 0 Td (Contents) Tj ET Q\n"
               "BT /F1 10 Tf 72 680 Td (Item 1. Business) Tj ET\n"
               "BT /F1 10 Tf 90 668 Td (Body text of the business section.) Tj ET\n")
    lines = read_pdf_content(_pdf(content), "t.pdf").pages[0]
    got = [(ln.text, ln.size, ln.bold, round(ln.y), round(ln.x), ln.page) for ln in lines]
    assert got == [("Contents", 9.0, True, 700, 250, 1),
                   ("Item 1. Business", 10.0, False, 680, 72, 1),
                   ("Body text of the business section.", 10.0, False, 668, 90, 1)]


def test_a_newline_the_pdf_prints_between_words_is_a_space_not_a_line_break() -> None:
    # a generator that maps the word space to U+000A: PDFium's own line breaks are CR LF
    content = "BT /F2 12 Tf 250 700 Td (TABLE\\nOF\\nCONTENTS) Tj ET\nBT /F1 10 Tf 72 680 Td (PART I) Tj ET\n"
    lines = read_pdf_content(_pdf(content), "t.pdf").pages[0]
    assert [ln.text for ln in lines] == ["TABLE OF CONTENTS", "PART I"]


def test_a_line_mixing_fonts_takes_the_style_of_most_of_its_characters() -> None:
    content = ("BT /F2 10 Tf 72 700 Td (Note:) Tj /F1 10 Tf "
               "( the figures below are unaudited and in millions of dollars) Tj ET\n")
    (line,) = read_pdf_content(_pdf(content), "t.pdf").pages[0]
    assert line.text.startswith("Note: the figures") and not line.bold


def test_a_page_without_text_has_no_lines() -> None:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(_pdf("0 0 m 100 100 l S\n"))
    try:
        page = pdf[0]
        text_page = page.get_textpage()
        assert page_lines(text_page, 1) == []
        text_page.close()
        page.close()
    finally:
        pdf.close()


def test_an_owner_password_alone_does_not_lock_the_text(tmp_path: Path) -> None:
    fpdf = pytest.importorskip("fpdf")
    doc = fpdf.FPDF()
    doc.add_page()
    doc.set_font("Helvetica", "", 12)
    doc.cell(0, 10, "Readable text under an owner password")
    doc.set_encryption(owner_password="owner")  # no user password: any reader may open it
    doc.output(str(tmp_path / "owner.pdf"))
    assert "Readable text under an owner password" in read_document(tmp_path / "owner.pdf", "owner.pdf").text


@pytest.mark.parametrize("data", [b"", b"%PDF-1.7\n%%EOF\n", b"not a pdf at all" * 10])
def test_unreadable_bytes_are_one_line_input_errors(data: bytes) -> None:
    with pytest.raises(InputError, match=r"^x\.pdf: ") as err:
        read_pdf_content(data, "x.pdf")
    assert "\n" not in str(err.value)
