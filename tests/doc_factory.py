"""Render Markdown with known headings to PDF / .docx / HTML (tests and benchmarks/bench_formats.py).

The source tree is the truth the readers are measured against: headings come
from the project's own Markdown parser, the body is the raw text between them
split into paragraphs, so every rendered word is a word of the source.
fpdf2 and python-docx are only needed here, never by the readers.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tree_builder.documents import document_from_text
from tree_builder.markdown_headings import parse_headings

FONT_DIRS = (Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/truetype/wqy"))
_CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


@dataclass
class Block:
    kind: str
    """heading | para"""
    text: str
    level: int = 0


@dataclass
class Source:
    title: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def headings(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "heading"]


def _clean_para(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("```", "~~~", "|---", "<!--"))]
    return " ".join(lines)


def source_from_markdown(text: str, name: str = "doc.md") -> Source:
    doc = document_from_text(text, name)
    hs = parse_headings(doc)
    src = Source(title=doc.title)
    pos = doc.body_start
    for h in hs + [None]:
        end = h.start_char if h is not None else len(doc.text)
        for para in re.split(r"\n\s*\n", doc.text[pos:end]):
            cleaned = _clean_para(para)
            if cleaned:
                src.blocks.append(Block("para", cleaned))
        if h is not None:
            src.blocks.append(Block("heading", h.text, h.marker_level))
            pos = h.end_char
    return src


# --------------------------------------------------------------------------- PDF

def _font_paths(cjk: bool) -> tuple[Path, Path] | None:
    if cjk:
        ttc = FONT_DIRS[1] / "wqy-microhei.ttc"
        return (ttc, ttc) if ttc.exists() else None
    regular, bold = FONT_DIRS[0] / "DejaVuSans.ttf", FONT_DIRS[0] / "DejaVuSans-Bold.ttf"
    return (regular, bold) if regular.exists() and bold.exists() else None


HEADING_SIZES = {1: 18, 2: 15, 3: 13, 4: 12, 5: 11.5, 6: 11}
BODY_SIZE = 10


def render_pdf(src: Source, path: Path, outline: bool, running_header: str | None = None,
               page_numbers: bool = True) -> None:
    """Headings larger and bold, 10 pt body; optional outline, running header and page footer."""
    from fpdf import FPDF

    cjk = bool(_CJK.search(" ".join(b.text for b in src.blocks[:50])))
    fonts = _font_paths(cjk)
    if cjk and fonts is None:
        raise RuntimeError("no CJK font to render this document (apt-get install fonts-wqy-microhei)")

    class _PDF(FPDF):
        def header(self) -> None:  # noqa: D401 - fpdf2 hook
            if running_header:
                self.set_font(family, "", 8)
                self.cell(0, 5, running_header, align="C")
                self.ln(8)

        def footer(self) -> None:
            if page_numbers:
                self.set_y(-12)
                self.set_font(family, "", 8)
                self.cell(0, 5, str(self.page_no()), align="C")

    pdf = _PDF(format="A4")
    if fonts is not None:
        family = "Body"
        pdf.add_font(family, "", str(fonts[0]))
        if cjk:  # one face: bold is faked by the size alone (the reader must cope)
            pdf.add_font(family, "B", str(fonts[1]))
        else:
            pdf.add_font(family, "B", str(fonts[1]))
    else:
        family = "Helvetica"
    pdf.set_auto_page_break(True, margin=18)
    pdf.add_page()
    prev_level = 0
    for b in src.blocks:
        if b.kind == "heading":
            size = HEADING_SIZES.get(b.level, 11)
            pdf.set_font(family, "B", size)
            if outline:
                level = min(b.level - 1, prev_level)  # fpdf2 outlines may not skip a level
                pdf.start_section(b.text, level=max(level, 0))
                prev_level = max(level, 0) + 1
            pdf.ln(2)
            pdf.multi_cell(0, size * 0.5, b.text)
            pdf.ln(1)
        else:
            pdf.set_font(family, "", BODY_SIZE)
            pdf.multi_cell(0, 5, b.text)
            pdf.ln(3)
    pdf.output(str(path))


# --------------------------------------------------------------------------- docx / HTML

def render_docx(src: Source, path: Path, table_rows: list[list[str]] | None = None) -> None:
    import docx

    d = docx.Document()
    for b in src.blocks:
        if b.kind == "heading":
            d.add_heading(b.text, level=min(b.level, 9))
        else:
            d.add_paragraph(b.text)
    if table_rows:
        table = d.add_table(rows=len(table_rows), cols=len(table_rows[0]))
        for r, row in enumerate(table_rows):
            for c, cell in enumerate(row):
                table.cell(r, c).text = cell
    d.save(str(path))


def render_html(src: Source, path: Path) -> None:
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>",
             html.escape(src.title), "</title><style>body{font:1em serif}</style>",
             "<script>var nav = 'Home | About';</script></head><body>",
             "<nav><a href='/'>Home</a> <a href='/about'>About us</a></nav><main>"]
    for b in src.blocks:
        if b.kind == "heading":
            n = min(b.level, 6)
            parts.append(f"<h{n}>{html.escape(b.text)}</h{n}>\n")
        else:
            parts.append(f"<p>{html.escape(b.text)}</p>\n")
    parts.append("</main><footer>Copyright footer chrome</footer></body></html>")
    path.write_text("".join(parts), encoding="utf-8")


# --------------------------------------------------------------------------- a filing-like PDF

FILING_PAGES: list[list[tuple[str, str]]] = [
    # (style, text); style: title | field | h (bold body size) | p (body) | row (bold table row)
    [("title", "ACME WIDGETS CORPORATION"), ("h", "FORM 10-K"), ("field", "Delaware 12-3456789"),
     ("field", "100 Main Street Springfield, IL 62701"), ("p", "Annual report for the fiscal year ended December 31, 2022.")],
    [],  # the contents page (drawn by render_filing_pdf)
    [("h", "PART I"), ("h", "Item 1. Business"),
     ("p", "Acme makes widgets for industrial customers in many countries and sells them directly."),
     ("h", "Our Products"), ("p", "Widgets come in three sizes and are sold with a service plan.")],
    [("h", "Item 1A. Risk Factors"), ("p", "Demand for widgets may fall when industrial output declines.")],
    [("h", "PART II"), ("h", "Item 7. Management's Discussion and Analysis"),
     ("p", "Revenues grew on higher widget volumes and better prices in every region."),
     ("h", "Results of Operations"), ("row", "2022 2021"), ("row", "Total revenues 1,234 1,100"),
     ("row", "Cost of sales (800) (760)"), ("p", "Gross margin improved by two points.")],
    [("h", "Item 8. Financial Statements and Supplementary Data"),
     ("h", "Note 1 - Basis of Presentation"), ("p", "The statements are prepared under US GAAP."),
     ("h", "Note 2 - Revenue"), ("p", "Revenue is recognised when widgets are delivered.")],
]
FILING_CONTENTS: list[tuple[str, int | None]] = [
    ("PART I", None), ("Item 1. Business", 1), ("Item 1A. Risk Factors", 2), ("PART II", None),
    ("Item 7. Management's Discussion and Analysis", 3), ("Item 8. Financial Statements and Supplementary Data", 4),
    ("Item 9. Controls and Procedures", 4),  # listed but never printed: must be dropped
]


def render_filing_pdf(path: Path, contents: bool = True, leaders: bool = False, bare_numbers: bool = False,
                      bookmarks: Sequence[tuple[int, str]] = ()) -> None:
    """A small annual-report-like PDF: cover, contents page (titles left, page numbers in a right
    column, optionally dot leaders), running header, printed page numbers that start after the
    contents, PART/Item/Note headings in bold body size, a bold table inside Item 7.

    ``bare_numbers``: the contents names the division word once, in a column header ("Item   Page"),
    its rows only the numbers ("1A. Risk Factors"), and lists Item 1's subsection indented.
    ``bookmarks``: (index into ``FILING_PAGES``, title) of each outline entry, set atop that page."""
    from fpdf import FPDF

    printed_from = 3 if contents else 2  # physical page that prints "1"

    class _PDF(FPDF):
        def header(self) -> None:  # noqa: D401 - fpdf2 hook
            if self.page_no() > 1:
                self.set_font("Helvetica", "", 8)
                self.cell(0, 5, "Acme Widgets Corporation", align="C")
                self.ln(8)

        def footer(self) -> None:
            if self.page_no() >= printed_from:
                self.set_y(-12)
                self.set_font("Helvetica", "", 8)
                self.cell(0, 5, str(self.page_no() - printed_from + 1), align="C")

    pdf = _PDF(format="A4")
    pdf.set_auto_page_break(True, margin=18)
    for n, page in enumerate(FILING_PAGES):
        if n == 1:
            if not contents:
                continue
            pdf.add_page()
            pdf.set_font("Helvetica", "B", 10)
            pdf.cell(0, 6, "Table of Contents", new_x="LMARGIN", new_y="NEXT")
            rows = FILING_CONTENTS
            if bare_numbers:
                pdf.cell(150, 6, "Item")
                pdf.cell(20, 6, "Page", align="R", new_x="LMARGIN", new_y="NEXT")
                rows = [(t.removeprefix("Item "), n) for t, n in rows]
                rows.insert(2, ("    Our Products", 1))
            for title, printed in rows:
                pdf.set_font("Helvetica", "B" if printed is None else "", 10)
                label = title + (" " + "." * 20 if leaders and printed is not None else "")
                if label.startswith(" "):
                    pdf.set_x(pdf.l_margin + 12)
                    label = label.strip()
                pdf.cell(150 - (pdf.get_x() - pdf.l_margin), 6, label)
                pdf.cell(20, 6, "" if printed is None else str(printed), align="R", new_x="LMARGIN", new_y="NEXT")
            continue
        pdf.add_page()
        for title in (t for k, t in bookmarks if k == n):
            pdf.start_section(title)
        for style, text in page:
            if style == "title":
                pdf.set_font("Helvetica", "B", 16)
            elif style == "field":
                pdf.set_font("Helvetica", "B", 9)
            elif style in ("h", "row"):
                pdf.set_font("Helvetica", "B", 10)
            else:
                pdf.set_font("Helvetica", "", 10)
            pdf.multi_cell(0, 6, text)
            pdf.ln(2)
    pdf.output(str(path))


# --------------------------------------------------------------------------- text placed by a down-scaling matrix

SCALED_TEXT = 0.025
"""The matrix scale some filing generators place every text object with (a "360 pt" font drawn at 9 pt)."""


def render_scaled_text_pdf(path: Path, pages: list[list[tuple[float, float, str, bool]]]) -> None:
    """A PDF written by hand whose every text object is placed the way some filing generators do:
    ``q s 0 0 s x y cm BT /F 9/s Tf [...] TJ ET Q`` (the position only in the matrix, text space
    scaled down). ``pages`` holds (x, y, TJ operand, bold) per object, the operand in PDF syntax
    (``(practice) -13 (s.)``: a kerning step inside one object). Helvetica, so no font file."""
    objects: list[bytes] = [
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
    ]
    pages_id = len(objects) + 2 * len(pages) + 1
    kids: list[int] = []
    for runs in pages:
        ops = [f"q {SCALED_TEXT} 0 0 {SCALED_TEXT} {x:g} {y:g} cm BT /{'F2' if bold else 'F1'} "
               f"{9 / SCALED_TEXT:g} Tf [{operand}] TJ ET Q" for x, y, operand, bold in runs]
        data = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n%b\nendstream" % (len(data), data))
        objects.append((f"<< /Type /Page /Parent {pages_id} 0 R /MediaBox [0 0 612 792] "
                        f"/Contents {len(objects)} 0 R /Resources << /Font << /F1 1 0 R /F2 2 0 R >> >> >>").encode())
        kids.append(len(objects))
    objects.append(f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>".encode())
    objects.append(f"<< /Type /Catalog /Pages {pages_id} 0 R >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets: list[int] = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%b\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, len(objects), xref)
    path.write_bytes(bytes(out))
