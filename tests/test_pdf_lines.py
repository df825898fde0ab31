"""PDF text lines where every text object is placed by a down-scaling matrix (some filing generators).

A text extractor that tests line breaks in unscaled text space fails on such objects (pypdf's did):
it breaks them inside words and, worse, runs the next line onto the end of the last one
("...practice.ITEM 3. LEGAL PROCEEDINGS"), so a heading never starts a line. The reader's lines
(PDFium's, by where the page draws them) must keep them apart.
"""
from __future__ import annotations

from pathlib import Path

from config import Config
from tests.doc_factory import render_scaled_text_pdf
from tree_builder.heading_schemes import scheme_of
from tree_builder.loader import load_document
from tree_builder.readers.pdf_text import read_pdf_content
from tree_builder.tree import build_tree


def _lines(path: Path) -> list[str]:
    return [ln.text for ln in read_pdf_content(path.read_bytes(), path.name).pages[0]]


def test_an_object_on_the_next_baseline_starts_a_line(tmp_path: Path) -> None:
    path = tmp_path / "runon.pdf"
    render_scaled_text_pdf(path, [[
        (72, 700, "(The water industry pract) -13 (ice.)", False),  # pypdf breaks it inside a word
        (72, 676, "(ITEM 3. LEGAL PROCEEDINGS)", True),  # ... and runs this onto it
        (72, 662, "(None of note.)", False),
    ]])
    assert _lines(path) == ["The water industry practice.", "ITEM 3. LEGAL PROCEEDINGS", "None of note."]


def test_objects_on_one_baseline_are_one_line_with_words_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "row.pdf"
    render_scaled_text_pdf(path, [[
        # a contents row: number, title and page number in columns, no space in the text between them
        (72, 700, "(Item 1.)", False), (150, 700, "(Business)", False), (500, 700, "(4)", False),
        # a word set apart from the last object, then a word part set right after it (Helvetica-Bold
        # "Company" is 41.004 pt wide at 9 pt)
        (72, 680, "(Revenue grew in the)", False), (170, 680, "(Company)", True), (211.004, 680, "(\\222s markets.)", False),
        # a footnote mark raised 3 pt, right after "Sales rose" (42.516 pt) and 5.004 pt wide
        (72, 666, "(Sales rose)", False), (114.516, 669, "(1)", False), (119.52, 666, "( in every region.)", False),
        # two rows starting at one x: the second row's first object is not the first row's
        (72, 640, "(Part III)", False), (72, 626, "(Item 10)", False), (120, 626, "(Directors)", False),
    ]])
    assert _lines(path) == ["Item 1. Business 4", "Revenue grew in the Company\u2019s markets.",
                            "Sales rose1 in every region.", "Part III", "Item 10 Directors"]


def _filing_page(lines: list[tuple[str, bool]], top: float = 740) -> list[tuple[float, float, str, bool]]:
    """One page of 9 pt lines 14 pt apart; a body line's last words are a kerned second string."""
    out = []
    for k, (text, bold) in enumerate(lines):
        head, _, tail = text.rpartition(" ")
        operand = f"({text})" if bold or not head else f"({head} ) -13 ({tail})"
        out.append((72, top - 14 * k, operand, bold))
    return out


def test_items_run_onto_body_lines_become_sections(tmp_path: Path) -> None:
    items = [("1", "BUSINESS"), ("1A", "RISK FACTORS"), ("2", "PROPERTIES"), ("3", "LEGAL PROCEEDINGS")]
    pages = [_filing_page([("ANNUAL REPORT ON FORM 10-K", True), ("Acme Widgets makes widgets for customers.", False)]),
             _filing_page([("PART I", True)])]
    for n, title in items:
        pages[-1] += _filing_page([(f"ITEM {n}. {title}", True),
                                   *[(f"Paragraph {k} about {title.lower()} sits in this item.", False)
                                     for k in range(3)]], top=pages[-1][-1][1] - 24)
    pages.append(_filing_page([("PART II", True), ("ITEM 7. MANAGEMENT'S DISCUSSION", True),
                               ("Revenue grew on volume and price.", False)]))
    path = tmp_path / "filing.pdf"
    render_scaled_text_pdf(path, pages)
    doc_node = build_tree([load_document(path, path.name)], Config(), folder_mode=True).children[0]
    items_found = {n.heading: n for n in doc_node.iter_preorder() if n.kind == "section" and scheme_of(n.heading) and
                   scheme_of(n.heading).name == "item"}
    assert list(items_found) == [f"ITEM {n}. {t}" for n, t in items] + ["ITEM 7. MANAGEMENT'S DISCUSSION"]
    for node in items_found.values():
        assert [a.heading for a in node.ancestors() if a.kind == "section"][-1:] in (["PART I"], ["PART II"])
    assert "sits in this item" in items_found["ITEM 3. LEGAL PROCEEDINGS"].content \
        and "PROPERTIES" not in items_found["ITEM 1A. RISK FACTORS"].content


def test_a_word_split_where_a_ligature_lost_its_letters_is_joined_by_the_documents_own_words() -> None:
    """A bold font's "ff", "fi" or "ffi" glyph whose text is one "f", then a space: "af ect", "dif icult",
    "of ices". The document spells the words whole elsewhere, and those decide the lost letters. Where
    it spells no such word, or the second part is a word of its own, nothing is joined ("one of ten"
    stays, though "often" is a word; a space alone is never dropped). A run-in title's end moves with
    the text."""
    from tree_builder.readers.pdf_ligatures import mend_ligatures
    from tree_builder.readers.pdf_lines import Line

    texts = ["Risks that may adversely af ect us – The markets are dif icult to predict.",
             "Conditions affect us and affect them; it is difficult and difficult, and offices, offices and offices stay.",
             "One of ten directors often said so, often; a chief executive of all our of ices.",
             "Af ect on staff",  # spelled whole once only: no word to join to
             "Our of ces",  # "offices" lost its "ffi": "of" + "fi" + "ces"
             "Storms of ice, ice and ice; the office and office.",  # "ice" is a word of its own here
             "A right of set-off is met; offset, offset and offset, a set and a set."]
    lines = [Line(t, 10.0, False, 700.0 - 12 * k, 0) for k, t in enumerate(texts)]
    lines[0].bold_end = len("Risks that may adversely af ect us")
    lines[4].bold_end = len("Our of ces")
    mend_ligatures([lines])
    assert lines[0].text == "Risks that may adversely affect us – The markets are difficult to predict."
    assert lines[0].bold_end == len("Risks that may adversely affect us")
    assert lines[1].text == texts[1]
    assert lines[2].text == "One of ten directors often said so, often; a chief executive of all our offices."
    assert lines[3].text == "Affect on staff"
    assert lines[4].text == "Our offices" and lines[4].bold_end == len("Our offices")
    assert lines[5].text == texts[5] and lines[6].text == texts[6]
