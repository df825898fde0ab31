"""PDF, Word, HTML and plain-text readers: structure, pages, honest spans, bad files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import Config
from indexing.representation import chunk_documents
from pipeline import citation
from tests.conftest import TEST_PAPER, run_cli
from tests.doc_factory import Block, Source, render_docx, render_html, render_pdf, source_from_markdown
from tree_builder.documents import document_from_text
from tree_builder.loader import load_document
from tree_builder.markdown_headings import parse_headings
from tree_builder.tree import build_tree
from utils.errors import InputError

pypdf = pytest.importorskip("pypdf")
pytest.importorskip("fpdf")


@pytest.fixture(scope="module")
def paper() -> Source:
    return source_from_markdown(TEST_PAPER.read_text(encoding="utf-8"), "test_paper.md")


def _squash(text: str) -> str:
    return "".join(text.split())


def _heading_texts(doc) -> list[str]:
    return [h.text for h in parse_headings(doc)]


# --------------------------------------------------------------------------- PDF

@pytest.mark.parametrize("outline", [True, False])
def test_pdf_sections_match_the_source(tmp_path: Path, paper: Source, outline: bool) -> None:
    path = tmp_path / "report.pdf"
    render_pdf(paper, path, outline=outline, running_header="AdaRouter technical report")
    doc = load_document(path, "report.pdf")
    assert doc.kind == "pdf"
    assert _heading_texts(doc) == [b.text for b in paper.headings]
    root = build_tree([doc], Config(), folder_mode=False)
    serial = [(n.heading, n.level) for n in root.iter_preorder() if n.kind == "section"]
    md = build_tree([document_from_text(TEST_PAPER.read_text(encoding="utf-8"), "test_paper.md")],
                    Config(), folder_mode=False)
    assert serial == [(n.heading, n.level) for n in md.iter_preorder() if n.kind == "section"]


def test_pdf_outline_without_numbers_matches_numbered_printed_headings(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    for level, number, name in ((0, "1", "Overview"), (1, "1.1", "Scope"), (0, "2", "Design")):
        pdf.start_section(name, level=level)  # the outline says "Scope", the page says "1.1 Scope"
        pdf.set_font("Helvetica", "B", 14 - 2 * level)
        pdf.multi_cell(0, 7, f"{number} {name}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)
        pdf.multi_cell(0, 5, f"Body text of the {name.lower()} section.", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "spec.pdf"))
    doc = load_document(tmp_path / "spec.pdf", "spec.pdf")
    assert [(h.text, h.marker_level) for h in parse_headings(doc)] == [
        ("1 Overview", 1), ("1.1 Scope", 2), ("2 Design", 1)]
    assert doc.text.count("Scope") == 1  # the printed line became the heading, nothing inserted


def test_pdf_running_header_and_page_numbers_are_removed(tmp_path: Path, paper: Source) -> None:
    path = tmp_path / "report.pdf"
    render_pdf(paper, path, outline=False, running_header="AdaRouter technical report")
    doc = load_document(path, "report.pdf")
    assert len(doc.page_starts) >= 2
    assert "AdaRouter technical report" not in doc.text
    assert not [ln for ln in doc.text.splitlines() if ln.strip().isdigit()]
    # ... while every body sentence is still there
    for b in paper.blocks:
        if b.kind == "para":
            assert _squash(b.text) in _squash(doc.text), b.text[:60]


def test_pdf_link_back_to_the_contents_atop_every_page_is_no_section(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    for n, heading in enumerate(["Business", "Risk Factors", "Properties", "Legal Proceedings"], 1):
        pdf.add_page()
        pdf.set_font("Helvetica", "", 12)  # larger than the body, as a filing's link is
        pdf.cell(0, 6, "Table of Contents", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 8, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)
        pdf.multi_cell(0, 5, f"Paragraph zq{n}x tells what the {heading.lower()} section says. " * 4)
    path = tmp_path / "linked.pdf"
    pdf.output(str(path))
    doc = load_document(path, path.name)
    root = build_tree([doc], Config(), folder_mode=True)
    headings = [n.heading for n in root.iter_preorder() if n.kind == "section"]
    assert headings == ["Business", "Risk Factors", "Properties", "Legal Proceedings"]
    assert "Table of Contents" not in doc.text


def _paged_source(pages: int) -> Source:
    src = Source(title="Paged")
    for n in range(1, pages + 1):
        src.blocks.append(Block("heading", f"{n} Section {n}", 1))
        src.blocks.append(Block("para", f"Marker sentence zq{n}x sits on page {n} of the report. " * 3))
    return src


def test_pdf_pages_on_nodes_chunks_and_citations(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    for n in range(1, 6):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 16)
        pdf.multi_cell(0, 8, f"{n} Section {n}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)
        pdf.multi_cell(0, 5, f"Marker sentence zq{n}x sits on page {n} of the report. " * 4,
                       new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "report.pdf"))
    doc = load_document(tmp_path / "report.pdf", "report.pdf")
    root = build_tree([doc], Config(), folder_mode=False)
    sections = [n for n in root.iter_preorder() if n.kind == "section"]
    assert [(n.heading, n.page_start, n.page_end) for n in sections] == [
        (f"{n} Section {n}", n, n) for n in range(1, 6)]
    chunks = chunk_documents(root, [doc], Config())
    reader = pypdf.PdfReader(str(tmp_path / "report.pdf"))
    page_text = [_squash(p.extract_text()) for p in reader.pages]
    for c in chunks:
        n = int(c.text.split("zq")[1].split("x")[0])
        assert c.page_start == c.page_end == n
        assert citation(c) == f"report.pdf:p{n}"
        # the quoted text is on the cited page of the original file
        assert _squash(c.text) in page_text[n - 1]


def test_pdf_chunk_spanning_pages_cites_both(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(0, 5, "Opening words.")  # two short paragraphs: merged into one chunk
    pdf.add_page()
    pdf.multi_cell(0, 5, "Closing words.")
    pdf.output(str(tmp_path / "two.pdf"))
    doc = load_document(tmp_path / "two.pdf", "two.pdf")
    root = build_tree([doc], Config(), folder_mode=False)
    chunks = chunk_documents(root, [doc], Config())
    assert len(chunks) == 1 and (chunks[0].page_start, chunks[0].page_end) == (1, 2)
    assert citation(chunks[0]) == "two.pdf:p1-p2"


def test_pdf_paragraph_running_over_a_page_break_stays_one(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", "", 10)
    pdf.add_page()
    pdf.multi_cell(0, 5, "The adaptive router keeps")
    pdf.add_page()
    pdf.multi_cell(0, 5, "learning from every fill it sees.")
    pdf.output(str(tmp_path / "run.pdf"))
    doc = load_document(tmp_path / "run.pdf", "run.pdf")
    assert "The adaptive router keeps\nlearning from every fill it sees." in doc.text
    assert doc.page_starts[1] == doc.text.index("learning from")  # page 2 begins mid-paragraph
    chunks = chunk_documents(build_tree([doc], Config(), folder_mode=False), [doc], Config())
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 2)]


def test_pdf_query_json_and_terminal_cite_pages(tmp_path: Path, paper: Source) -> None:
    src = tmp_path / "report.pdf"
    render_pdf(paper, src, outline=True)
    idx = tmp_path / "idx"
    proc = run_cli("index", "--input", str(src), "--output", str(idx), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "(1 pdf)" in proc.stdout
    q = run_cli("query", "--index", str(idx), "--mock", "--no-log", "--json", "-q", "routing accuracy EUR/USD")
    assert q.returncode == 0, q.stderr
    hits = json.loads(q.stdout)["step2_retrieved"]
    assert hits and all(h["page_start"] >= 1 and h["page_end"] >= h["page_start"] for h in hits)
    assert all(h["citation"].startswith("report.pdf:p") for h in hits)
    reader = pypdf.PdfReader(str(src))
    for h in hits:
        pages = "".join(_squash(reader.pages[p - 1].extract_text())
                        for p in range(h["page_start"], h["page_end"] + 1))
        assert _squash(h["text"]) in pages
    t = run_cli("query", "--index", str(idx), "--mock", "--no-log", "-q", "routing accuracy EUR/USD")
    assert t.returncode == 0 and "(report.pdf:p" in t.stdout


def test_encrypted_and_scanned_pdfs_are_one_line_errors(tmp_path: Path) -> None:
    from fpdf import FPDF

    enc = FPDF()
    enc.add_page()
    enc.set_font("Helvetica", "", 12)
    enc.cell(0, 10, "Secret text")
    enc.set_encryption(owner_password="owner", user_password="user")
    enc.output(str(tmp_path / "secret.pdf"))
    scan = FPDF()
    scan.add_page()
    scan.rect(10, 10, 100, 100, style="F")
    scan.output(str(tmp_path / "scan.pdf"))
    for name, needle in (("secret.pdf", "encrypted"), ("scan.pdf", "no text layer")):
        with pytest.raises(InputError, match=needle):
            load_document(tmp_path / name, name)
        proc = run_cli("tree", "--input", str(tmp_path / name))
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and needle in proc.stderr


def test_damaged_pdf_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage")
    with pytest.raises(InputError, match="broken.pdf"):
        load_document(path, "broken.pdf")


def test_pdf_given_directly_is_not_indexed_as_raw_bytes(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 12)
    pdf.cell(0, 10, "Plain words inside a PDF file")
    pdf.output(str(tmp_path / "report"))  # no extension: recognised by its bytes
    doc = load_document(tmp_path / "report", "report")
    assert doc.kind == "pdf" and "%PDF" not in doc.text and "Plain words inside a PDF file" in doc.text


# --------------------------------------------------------------------------- Word

def test_docx_headings_outline_levels_and_tables(tmp_path: Path, paper: Source) -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    path = tmp_path / "guide.docx"
    render_docx(paper, path, table_rows=[["Model", "Accuracy"], ["AdaRouter", "73.2%"], ["Static", "65.1%"]])
    doc = load_document(path, "guide.docx")
    assert doc.kind == "docx" and _heading_texts(doc) == [b.text for b in paper.headings]
    assert "AdaRouter | 73.2%" in doc.text and "Model | Accuracy" in doc.text

    d = docx.Document()
    style = d.styles.add_style("Chapter Title", WD_STYLE_TYPE.PARAGRAPH)
    lvl = OxmlElement("w:outlineLvl")
    lvl.set(qn("w:val"), "0")
    style.element.get_or_add_pPr().append(lvl)
    d.add_paragraph("Custom Chapter", style="Chapter Title")
    d.add_paragraph("Body under the custom chapter.")
    d.add_heading("Sub Part", level=2)
    d.add_paragraph("Body under the sub part.")
    d.save(str(tmp_path / "custom.docx"))
    doc = load_document(tmp_path / "custom.docx", "custom.docx")
    assert [(h.text, h.marker_level) for h in parse_headings(doc)] == [("Custom Chapter", 1), ("Sub Part", 2)]


# --------------------------------------------------------------------------- HTML

def test_html_headings_and_chrome_dropped(tmp_path: Path, paper: Source) -> None:
    path = tmp_path / "page.html"
    render_html(paper, path)
    doc = load_document(path, "page.html")
    assert doc.kind == "html" and _heading_texts(doc) == [b.text for b in paper.headings]
    for chrome in ("var nav", "About us", "Copyright footer", "font:1em"):
        assert chrome not in doc.text
    raw = ("<html><body><nav>Menu Home</nav><div role='navigation'>Skip links</div>"
           "<h1>Title</h1><p>First &amp; only <b>para</b>.</p><table><tr><th>a</th><th>b</th></tr>"
           "<tr><td>1</td><td>2</td></tr></table><script>alert(1)</script></body></html>")
    (tmp_path / "t.htm").write_text(raw, encoding="utf-8")
    doc = load_document(tmp_path / "t.htm", "t.htm")
    assert doc.title == "Title" and "First & only para." in doc.text and "1 | 2" in doc.text
    assert "Menu" not in doc.text and "Skip links" not in doc.text and "alert" not in doc.text


# --------------------------------------------------------------------------- plain text

def test_plain_statute_lines_become_sections(tmp_path: Path) -> None:
    text = ("中华人民共和国测试法\n\n第一章 总则\n\n第一条 为了保护民事主体的合法权益，制定本法。\n"
            "第二条 本法调整平等主体之间的人身关系和财产关系。\n\n第二章 自然人\n\n第一节 民事权利能力\n\n"
            "第三条 自然人从出生时起到死亡时止，具有民事权利能力。\n\n第二节 监护\n\n第四条 父母是未成年子女的监护人。\n")
    (tmp_path / "law.txt").write_text(text, encoding="utf-8")
    doc = load_document(tmp_path / "law.txt", "law.txt")
    assert doc.title == "中华人民共和国测试法"
    root = build_tree([doc], Config(), folder_mode=False)
    assert [(n.heading, n.level) for n in root.iter_preorder() if n.kind == "section"] == [
        ("第一章 总则", 1), ("第二章 自然人", 1), ("第一节 民事权利能力", 2), ("第二节 监护", 2)]
    assert "第一条 为了保护" in root.children[0].content  # articles stay body text


def test_plain_text_numbered_headings_but_not_lists_or_sentences() -> None:
    text = ("Routing Report\n\n1 Introduction\n\nWe study routing of orders across many venues in detail.\n\n"
            "Steps we took:\n1. Download the data\n2. Clean the data\n\n12 apples were sold on Monday\n\n"
            "2 Method\n\nShort body line\n\nThe method section explains the adaptive router in enough detail.\n")
    doc = document_from_text(text, "r.txt", "txt")
    assert _heading_texts(doc) == ["Routing Report", "1 Introduction", "2 Method"]
    assert doc.title == "Routing Report"


def test_markdown_with_real_headings_is_not_second_guessed() -> None:
    text = ("# Guide\n\n## Setup\n\nInstall it.\n\nShort Title Like Line\n\n"
            "A long paragraph follows here with plenty of words to look like body text.\n\n1 Thing\n\nmore\n")
    assert _heading_texts(document_from_text(text, "g.md")) == ["Guide", "Setup"]


def test_word_file_without_heading_styles_falls_back_to_numbering(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    for number, name in (("1", "Scope"), ("2", "Terms"), ("2.1", "Venue")):
        d.add_paragraph(f"{number} {name}")  # typed by hand in the Normal style
        d.add_paragraph(f"The {name.lower()} clause explains what the {name.lower()} covers in this guide.")
    d.save(str(tmp_path / "manual.docx"))
    doc = load_document(tmp_path / "manual.docx", "manual.docx")
    root = build_tree([doc], Config(), folder_mode=False)
    assert [(n.heading, n.level) for n in root.iter_preorder() if n.kind == "section"] == [
        ("1 Scope", 1), ("2 Terms", 1), ("2.1 Venue", 2)]
