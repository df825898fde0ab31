"""Long-PDF structure: contents page, division words, table lines and cover fields (fpdf2-made filings)."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config
from tests.doc_factory import render_filing_pdf
from tree_builder.heading_schemes import run_in_split, scheme_of, scheme_ranks
from tree_builder.loader import load_document
from tree_builder.readers.pdf_tables import is_table_line
from tree_builder.readers.pdf_toc import parse_rows, title_key
from tree_builder.tree import TreeNode, build_tree

pytest.importorskip("pypdf")
pytest.importorskip("fpdf")


def _tree(path: Path) -> TreeNode:
    doc = load_document(path, path.name)
    return build_tree([doc], Config(), folder_mode=True).children[0]


def _find(node: TreeNode, heading: str) -> TreeNode:
    for n in node.iter_preorder():
        if n.heading == heading:
            return n
    raise AssertionError(f"no section {heading!r} in {[n.heading for n in node.iter_preorder()]}")


def _headings(node: TreeNode) -> list[str]:
    return [n.heading for n in node.iter_preorder() if n.kind == "section"]


# --------------------------------------------------------------------------- rules

@pytest.mark.parametrize("text, name", [
    ("PART II", "part"), ("Part I - Financial Information", "part"), ("Item 1A. Risk Factors", "item"),
    ("ITEM 7. MANAGEMENT'S DISCUSSION", "item"), ("Items 1 and 2. Business and Properties", "item"),
    ("Note 12 - Debt", "note"), ("Note5– Earnings Per Share", "note"), ("NOTE 3. LEASES", "note"), ("ARTICLE IV - Termination", "article"),
    ("Chapter 3 Installation", "chapter"), ("第二章 总则", "cn_zhang"), ("第一节 一般规定", "cn_jie"),
    ("Consolidated Statement of Cash Flows", "statement"), ("CONSOLIDATED BALANCE SHEETS", "statement"),
    ("Condensed Consolidated Statements of Shareholders’ Equity", "statement"),
    ("Notes to Consolidated Financial Statements", "statement"), ("NOTES TO THE FINANCIAL STATEMENTS", "statement"),
    ("Report of Independent Registered Public Accounting Firm", "statement"),
    ("Independent Auditors’ Report", "statement"), ("REPORT OF MANAGEMENT", "statement"),
    ("Section 3(a) Definitions", "section"), ("Item 7(a). Quantitative Disclosures", "item"),
    ("ARTICLE ONE", "article"), ("Chapter Twelve Maintenance", "chapter"),
])
def test_division_words_are_recognised(text: str, name: str) -> None:
    assert scheme_of(text).name == name


@pytest.mark.parametrize("text", [
    "Part III incorporates information by reference to the proxy statement",
    "Item 7 of this report discusses liquidity", "Notes to the consolidated financial statements describe them",
    "Report of Independent Registered Public Accounting Firm on page 45",
    "Consolidated statements of income are prepared in accordance with GAAP",
    "Partners and customers",
    "Section 8.1(b), payment of Supplemental Benefits shall be made as follows",
    "Section 3(a)(i) in the event of the death of the Participant",
    "Article one of the agreement sets out the definitions",
    "SECTION 302 OF THE SARBANES-OXLEY ACT OF 2002", "PART III OF THIS ANNUAL REPORT",
    "Consolidated Statements of Income:",  # a note's lead-in to the rows a change restated
])
def test_sentences_opening_with_a_division_word_are_not_divisions(text: str) -> None:
    assert scheme_of(text) is None


def test_scheme_ranks_leave_no_empty_level() -> None:
    assert scheme_ranks({"item", "note"}) == {"item": 1, "note": 2}
    assert scheme_ranks({"part", "item", "note"}) == {"part": 1, "item": 2, "note": 3}


@pytest.mark.parametrize("text, table", [
    ("Total revenues 66,608 62,286 58,158", True), ("2022 2021", True), ("December 31, 2022 2021", True),
    ("Years ended December 31,", True), ("Three Months Ended", True), ("Boeing Capital $2 $23 $32", True),
    ("737 747 767 777X 787 Total", True), ("10,898 10,265 10,298Total revenues", True), ("2022 Compared with 2021", False), ("Item 1. Business", False),
    ("Results of Operations", False), ("Note 22 - Segment and Revenue Information", False),
    ("Year Ended December 31, 2018 vs. 2017 2017 vs. 2016", True),
    ("Year Ended December 31, 2015 to 2016 2014 to 2015", True),
])
def test_table_rows_and_column_headers(text: str, table: bool) -> None:
    assert is_table_line(text) is table


def test_contents_rows_parse_with_leaders_wrapped_titles_and_group_rows() -> None:
    rows = [("Table of Contents", 50.0), ("PART I Page", 50.0), ("Item 1. Business .......... 1", 60.0),
            ("Item 5. Market for Registrant's Common Equity, Related Stockholder Matters and", 60.0),
            ("Purchases of Equity Securities 19", 60.0), ("Signatures 132", 60.0)]
    entries = parse_rows(rows)
    assert [(e.title, e.printed, e.scheme) for e in entries] == [
        ("PART I", None, "part"), ("Item 1. Business", 1, "item"),
        ("Item 5. Market for Registrant's Common Equity, Related Stockholder Matters and "
         "Purchases of Equity Securities", 19, "item"),
        ("Signatures", 132, None)]
    assert title_key("ITEM 1A. RISK FACTORS") == title_key("Item 1A  Risk Factors")


def test_a_contents_row_that_opens_a_part_and_its_first_item_is_both() -> None:
    from tree_builder.heading_schemes import split_divisions

    rows = [("Table of Contents", 50.0), ("Part I Item 1 Business 3", 60.0), ("Item 1A Risk Factors 8", 60.0),
            ("Part II - Item 5. Market for Equity 20", 60.0)]
    assert [(e.title, e.printed, e.scheme) for e in parse_rows(rows)] == [
        ("Part I", None, "part"), ("Item 1 Business", 3, "item"), ("Item 1A Risk Factors", 8, "item"),
        ("Part II", None, "part"), ("Item 5. Market for Equity", 20, "item")]
    # a title that merely names a narrower division later, or the same kind twice, is not split
    assert split_divisions("Part I Financial Information Item 1") is None
    assert split_divisions("Item 7 Item 7A") is None and split_divisions("Item 1 Business") is None


# --------------------------------------------------------------------------- whole filings

@pytest.mark.parametrize("leaders", [False, True])
def test_filing_tree_follows_its_contents_page(tmp_path: Path, leaders: bool) -> None:
    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=True, leaders=leaders)
    doc = _tree(path)
    part1, part2 = _find(doc, "PART I"), _find(doc, "PART II")
    assert [c.heading for c in part1.children if c.kind == "section"] == ["Item 1. Business", "Item 1A. Risk Factors"]
    assert _find(doc, "Our Products").parent.heading == "Item 1. Business"
    item8 = _find(doc, "Item 8. Financial Statements and Supplementary Data")
    assert item8.parent is part2
    assert [c.heading for c in item8.children if c.kind == "section"] == [
        "Note 1 - Basis of Presentation", "Note 2 - Revenue"]
    # printed page 2 is physical page 4; sections run to the page where the next one starts
    risk = _find(doc, "Item 1A. Risk Factors")
    assert (risk.page_start, risk.page_end) == (4, 4)
    assert (part1.page_start, part1.page_end) == (3, 4)
    headings = _headings(doc)
    assert "Item 9. Controls and Procedures" not in headings  # listed, never printed: dropped
    assert headings.count("Item 1. Business") == 1  # the contents rows are no sections
    for not_a_heading in ("2022 2021", "Total revenues 1,234 1,100", "Cost of sales (800) (760)",
                          "Delaware 12-3456789", "Table of Contents", "Acme Widgets Corporation"):
        assert not_a_heading not in headings
    # the table's rows stay in their section's text
    assert "Total revenues 1,234 1,100" in _find(doc, "Results of Operations").content


def test_contents_rows_under_a_division_column_header_get_its_word() -> None:
    rows = [("Table of Contents", 50.0), ("Item Number Page", 50.0), ("PART I", 200.0), ("1. Business 1", 60.0),
            ("Competition 9", 90.0), ("1A. Risk Factors 22", 60.0), ("6. [Reserved] 39", 60.0)]
    assert [(e.title, e.printed, e.scheme) for e in parse_rows(rows)] == [
        ("PART I", None, "part"), ("Item 1. Business", 1, "item"), ("Competition", 9, None),
        ("Item 1A. Risk Factors", 22, "item"), ("Item 6. [Reserved]", 39, "item")]
    # without such a header a numbered row is what it says
    rows = [("Contents", 50.0), ("1. Introduction and scope 1", 60.0), ("2. Methods of study 4", 60.0)]
    assert [(e.title, e.scheme) for e in parse_rows(rows)] == [("1. Introduction and scope", None),
                                                                ("2. Methods of study", None)]


def test_filing_contents_without_division_words_nests_its_subentries(tmp_path: Path) -> None:
    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=True, bare_numbers=True)
    doc = _tree(path)
    part1 = _find(doc, "PART I")
    assert [c.heading for c in part1.children if c.kind == "section"] == ["Item 1. Business", "Item 1A. Risk Factors"]
    assert _find(doc, "Our Products").parent.heading == "Item 1. Business"
    assert _find(doc, "Item 7. Management's Discussion and Analysis").parent.heading == "PART II"
    headings = _headings(doc)
    assert "Item 9. Controls and Procedures" not in headings and "1. Business" not in headings


def test_filing_without_contents_page_nests_by_division_words(tmp_path: Path) -> None:
    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=False)
    doc = _tree(path)
    item7 = _find(doc, "Item 7. Management's Discussion and Analysis")
    assert item7.parent.heading == "PART II"
    assert _find(doc, "Results of Operations").parent is item7
    assert _find(doc, "Note 2 - Revenue").parent.heading == "Item 8. Financial Statements and Supplementary Data"
    headings = _headings(doc)
    assert "Delaware 12-3456789" not in headings and "2022 2021" not in headings


def test_bookmarks_that_mark_only_the_bound_parts_yield_to_the_contents_page(tmp_path: Path) -> None:
    """A filing bound from its parts, bookmarked "Annual Report" and "Financial Statements" only:
    two bookmarks against seven contents entries are no outline of it, so its contents page nests
    the Items under their PARTs, as for the same filing without bookmarks."""
    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=True, bookmarks=((0, "Annual Report"), (5, "Financial Statements")))
    doc = _tree(path)
    assert _find(doc, "Item 7. Management's Discussion and Analysis").parent.heading == "PART II"
    assert _find(doc, "Item 1A. Risk Factors").parent.heading == "PART I"
    assert "Financial Statements" not in _headings(doc)


def test_filing_citations_name_the_physical_page(tmp_path: Path) -> None:
    from indexing.representation import chunk_documents
    from pipeline import citation

    path = tmp_path / "acme.pdf"
    render_filing_pdf(path, contents=True)
    doc = load_document(path, path.name)
    root = build_tree([doc], Config(), folder_mode=True)
    chunks = [c for c in chunk_documents(root, [doc], Config()) if "Revenue is recognised" in c.text]
    assert chunks and citation(chunks[0]).endswith(":p6")
    for c in chunk_documents(root, [doc], Config()):
        assert doc.text[c.start_char:c.end_char] == c.text


@pytest.mark.parametrize("text, split", [
    ("Section 2.2 Qualified Plan Definitions. Capitalized terms not otherwise defined in the Plan",
     ("Section 2.2 Qualified Plan Definitions.", "Capitalized terms not otherwise defined in the Plan")),
    ("Section 3.02. Authorization. Seller has all requisite power",
     ("Section 3.02. Authorization.", "Seller has all requisite power")),
    ("Section 9.1 Change in Control. “Change in Control” means any of the following:",
     ("Section 9.1 Change in Control.", "“Change in Control” means any of the following:")),
    ("Section 5.1 Benefits Under the U.S. Plan. If a Participant retires early",
     ("Section 5.1 Benefits Under the U.S. Plan.", "If a Participant retires early")),
    ("Item 5.07. Submission of Matters to a Vote of Security Holders.", None),
    ("ITEM 4(a). Information about our Executive Officers", None),
    ("Item 1. Business. General", None),  # three words at least run in
    ("Section 8.1 Supplemental Account Payments (Other than Payments Due to Death or Disability).", None),
    ("Note 3. Restructuring and Impairment Charges", None),
    ("第一条 为了规范合同。本法适用于合同。", None),
    ("Section 4.1 Participation in this Plan shall be limited to the Employees who meet the requirements "
     "of Section 4.2. The Committee decides.", None),  # no title: the sentence itself
])
def test_a_division_line_whose_paragraph_runs_in_is_cut_after_its_title(
        text: str, split: tuple[str, str] | None) -> None:
    assert run_in_split(text) == split


def _render_lines(path: Path, pages: list[list[tuple[str, str]]]) -> None:
    """Pages of (style, text): b = bold 10 pt, i = italic 10 pt, p = regular 10 pt; a style ending in
    "-" sets the next line right below (a wrapped line's spacing), else a gap follows; "^" in it centres
    the line, ">" starts it at the page's right third (over a table's figure columns), "L" sets it in
    12 pt."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    for page in pages:
        pdf.add_page()
        for style, text in page:
            pdf.set_font("Helvetica", {"b": "B", "i": "I"}.get(style[:1], ""), 12 if "L" in style else 10)
            tight = style.endswith("-")
            if ">" in style:
                pdf.set_x(140)
            elif "+" in style:
                pdf.set_x(pdf.l_margin + 10)
            pdf.multi_cell(0, 4 if tight else 6, text, align="C" if "^" in style else "L")
            pdf.ln(0 if tight else 2)
    pdf.output(str(path))


def test_headings_in_capitals_count_where_no_font_marks_them(tmp_path: Path) -> None:
    body = "Widgets are made in three plants and sold to industrial customers in many countries."
    pages = [[("p", "COMPANY OVERVIEW"), ("p", body), ("p", "RESEARCH AND DEVELOPMENT"), ("p", body)],
             [("p", "SEASONALITY"), ("p", body), ("p", "A short line in COVID-19 times"), ("p", body)],
             [("p", "EMPLOYEES"), ("p", body)], [("p", body)], [("p", body)], [("p", body)]]
    path = tmp_path / "caps.pdf"
    _render_lines(path, pages)
    headings = _headings(_tree(path))
    assert headings == ["COMPANY OVERVIEW", "RESEARCH AND DEVELOPMENT", "SEASONALITY", "EMPLOYEES"]


def test_items_in_the_body_font_are_found_by_their_capital_division_word(tmp_path: Path) -> None:
    """A filing that sets "ITEM 7 - Management's Discussion ..." in the body font, and whose contents
    page is not found: the division word in capitals marks each Item, and the PARTs hold them. A
    sentence that opens with a division word in capitals at a line's start is no Item."""
    def body(n: int) -> str:
        return f"Paragraph {n} describes the business, its plants and its customers in many countries."

    pages = [[("p", "PART I"), ("p", "ITEM 1 - Business"), ("p", body(1)),
              ("p", "ITEM 1A - Risk Factors"), ("p", body(2))],
             [("p", "ITEM 2 - Properties"), ("p", body(3)),
              ("p", "ITEM 7 of this report discusses the results of operations for each segment.")],
             [("p", "PART II"), ("p", "ITEM 7 - Management's Discussion and Analysis"), ("p", body(4)),
              ("p", "ITEM 8 - Financial Statements and Supplementary Data"), ("p", body(5))],
             [("p", body(6))]]
    path = tmp_path / "filing.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _find(doc, "ITEM 1A - Risk Factors").parent.heading == "PART I"
    assert _find(doc, "ITEM 2 - Properties").parent.heading == "PART I"
    item7 = _find(doc, "ITEM 7 - Management's Discussion and Analysis")
    assert item7.parent.heading == "PART II" and "Paragraph 4" in item7.content
    assert _find(doc, "ITEM 8 - Financial Statements and Supplementary Data").parent is item7.parent
    assert "discusses the results" in _find(doc, "ITEM 2 - Properties").content


def test_an_item_printed_over_its_index_of_statements_is_found_without_a_contents_page(tmp_path: Path) -> None:
    """Item 8 heads the page that lists the financial statements with their page numbers: that page
    is a list (its rows are no sections), but the PART and Item above the list are its headings,
    even where the PART's title fills the page's short measure and the Item reads on from it, and the
    statements after it are Item 8's. A company line centred under a left-set Item is no part of
    the Item's title."""
    def body(n: int) -> str:
        return (f"Paragraph {n} describes the business, its plants and its customers in many countries, "
                "and it runs on over more than one line of the page, as a filing's paragraphs do.")

    statement = [("p", "Net sales 3,642 3,507"), ("p", "Cost of sales 2,960 2,801")]
    pages = [[("b", "PART I"), ("b", "Item 1. Business"), *[("p", body(n)) for n in range(1, 9)]],
             [("b", "Item 2. Properties"), *[("p", body(n)) for n in range(9, 17)]],
             [("b-", "PART II - Financial Information"), ("b-", "Item 8. Financial Statements and Supplementary Data"),
              ("b^", "Acme Widgets Corporation"),
              ("b", "Index to Consolidated Financial Statements"), ("p", "Consolidated Statements of Income 4"),
              ("p", "Consolidated Balance Sheets 5"), ("p", "Consolidated Statements of Cash Flows 6")],
             [("b", "Consolidated Statements of Income"), *statement],
             [("b", "Consolidated Balance Sheets"), *statement],
             [("b", "Consolidated Statements of Cash Flows"), *statement]]
    path = tmp_path / "filing.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    item8 = _find(doc, "Item 8. Financial Statements and Supplementary Data")
    assert item8.parent.heading == "PART II - Financial Information"
    assert [c.heading for c in item8.children if c.kind == "section"] == [
        "Consolidated Statements of Income", "Consolidated Balance Sheets", "Consolidated Statements of Cash Flows"]
    assert "Consolidated Balance Sheets 5" not in _headings(doc)


def test_bold_row_labels_of_a_statement_page_are_no_sections(tmp_path: Path) -> None:
    body = "The notes below explain the figures of the statement and how they were measured."
    statement = [("b", "Consolidated Statements of Cash Flows"), ("p", "(In millions) 2022 2021"),
                 ("b", "Operating activities"), ("p", "Net earnings 1,234 1,100"), ("p", "Depreciation 300 280"),
                 ("b", "Investing activities"), ("p", "Capital expenditures (500) (450)"),
                 ("p", "Acquisitions (20) (35)")]
    pages = [[("b", "Overview"), ("p", body)], statement, [("b", "Basis of Presentation"), ("p", body)]]
    path = tmp_path / "statement.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc) == ["Overview", "Consolidated Statements of Cash Flows", "Basis of Presentation"]
    assert "Operating activities" in _find(doc, "Consolidated Statements of Cash Flows").content


def test_a_period_cell_over_a_table_is_no_section_and_prose_under_the_table_keeps_its_titles(
        tmp_path: Path) -> None:
    def prose(topic: str) -> str:  # each paragraph its own: a line on every page is a running header
        return (f"{topic} rose in every segment as deliveries recovered, and the margin widened as the costs of "
                "the plants fell with the volume they made.")
    table = [("b", "Segment Results"), ("b", "Fiscal Year"), ("p", "In Millions 2022 2021"),
             ("p", "Net sales 1,234 1,100"), ("p", "Cost of sales (800) (760)"), ("p", "Operating profit 434 340"),
             ("p", "Interest expense (20) (25)"), ("p", "Income taxes (90) (70)"), ("p", "Net earnings 324 245"),
             ("b", "Revenues"), ("p", prose("Revenues")), ("b", "Commercial Paper"), ("p", prose("Borrowing"))]
    pages = [[("b", "Results of Operations"), ("p", prose("Sales"))], table,
             [("b", "Outlook"), ("p", prose("Demand"))]]
    path = tmp_path / "summary.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc) == ["Results of Operations", "Segment Results", "Revenues", "Commercial Paper", "Outlook"]
    assert "Fiscal Year" in _find(doc, "Segment Results").content


def test_a_cell_over_a_table_s_columns_is_no_section_and_a_centred_title_is(tmp_path: Path) -> None:
    prose = ("Deliveries rose on every program as the supply chain recovered, and the backlog grew with the "
             "orders placed late in the year by airlines in every region.")
    more = ("The backlog stands at five years of production at today's rates, and most of it is for the "
            "smaller airplanes that airlines fly on short routes within one region.")
    pages = [[("b", "Program Highlights"), ("p", prose), ("b>", "Program"), ("p>", "737 747 767 787"),
              ("p", "Deliveries 387 5 33 31"), ("p", "Backlog 3,975 6 102 476"), ("p", "Orders 561 2 32 18"),
              ("b", "Backlog"), ("p", more), ("p", more.replace("five", "six")), ("p", more.replace("five", "four"))],
             [("b^", "SUPPLEMENTAL PENSION PLAN"), ("p^", "(As Amended and Restated Effective January 1, 2023)"),
              ("p", "The plan pays the benefits the tax code keeps the qualified plan from paying to employees.")],
             # a cell stacked a word group a line over its column
             [("b", "Restructuring Charges"), ("p", more.replace("backlog", "plan")),
              ("b>-", "Total"), ("b>-", "Restructuring"), ("b>", "Costs"), ("p", "Balance at June 30, 2022 $ 97 $ 18"),
              ("p", "Charges 45 12"), ("p", more.replace("backlog", "program")), ("p", more.replace("five", "two"))]]
    path = tmp_path / "cells.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc) == ["Program Highlights", "Backlog", "SUPPLEMENTAL PENSION PLAN", "Restructuring Charges"]
    assert "Program\n" in _find(doc, "Program Highlights").content


def test_a_division_word_a_sentence_runs_onto_is_no_section(tmp_path: Path) -> None:
    """An exhibit set in bold: a sentence that breaks before "Section 6.1." carries on, no section opens."""
    prose = ("The plan pays each participant the balance of the account in the form the participant chose "
             "when the deferral was made.")
    pages = [[("b", "ARTICLE V - Contributions"), ("p", prose.replace("pays", "credits")),
              ("b", "ARTICLE VI - Distributions"), ("p", prose),
              ("b-", "A rehired participant keeps the election made before, and the account is paid under"),
              ("b-", "Section 6.1. The account is paid in January after the participant leaves again."),
              ("b", "Section 6.2 Forms of Payment"), ("p", prose.replace("balance", "rest"))]]
    path = tmp_path / "plan.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc)[-2:] == ["ARTICLE VI - Distributions", "Section 6.2 Forms of Payment"]
    assert "Section 6.1. The account is paid" in _find(doc, "ARTICLE VI - Distributions (intro)").content


def test_a_line_opening_in_lower_case_is_no_section_unless_lettered(tmp_path: Path) -> None:
    """A sentence's tail left alone by a page break, in a heading's font, opens no section; a title
    numbered "a." does."""
    def prose(topic: str) -> str:
        return (f"{topic} are credited to each account at the end of every quarter, and the balance earns "
                "interest at the rate the committee sets for the year.")
    pages = [[("b", "Contributions"), ("p", prose("Deferrals")), ("b", "Dividend Equivalents"),
              ("p", prose("Dividends")), ("b", "multiplied by the number of units held")],
             [("p", prose("Units")), ("b", "a. Elections To Receive Units"), ("p", prose("Elections"))]]
    path = tmp_path / "plan.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc)[-2:] == ["Dividend Equivalents", "a. Elections To Receive Units"]
    assert "multiplied by the number of units held" in _find(doc, "Dividend Equivalents").content


def test_a_chunk_cut_inside_a_table_is_represented_with_its_column_header() -> None:
    from indexing.chunker import Chunk
    from indexing.representation import chunk_representation, column_header_above

    text = ("Results of Operations\n\nRevenue grew on higher volumes and better prices in every region this year.\n"
            "(Dollars in millions) 2022 2021\nRevenues 1,234 1,100\nCost of sales (800) (760)\nGross margin 434 340\n")
    start = text.index("Cost of sales")
    header = column_header_above(text, start)
    assert header == "(Dollars in millions) 2022 2021"
    assert column_header_above(text, text.index("Revenue grew")) == ""  # prose: no table
    assert column_header_above(text, start, floor=text.index("Revenues")) == ""  # not above the section
    chunk = Chunk("0001_chunk_01", text[start:], "0001", "Item 7 > Results of Operations", start_char=start,
                  end_char=len(text))
    rep = chunk_representation(chunk, "", "headings", header)
    assert rep == "Item 7 > Results of Operations\n(Dollars in millions) 2022 2021\n" + text[start:]
    assert chunk.text == text[start:]  # the stored, cited text stays the exact span


def test_nested_bookmarks_raise_a_division_nested_deeper_than_its_word_says() -> None:
    from tree_builder.readers.pdf_structure import relevel_flat_outline

    outline = [(1, "Part II", 1, None), (2, "Item 8. Financial Statements", 2, None),
               (3, "Consolidated Balance Sheets", 3, None), (3, "Notes to Consolidated Financial Statements", 4, None),
               (4, "NOTE 1. BASIS OF PRESENTATION", 4, None), (5, "Revenue Recognition", 4, None),
               (4, "NOTE 2. ACQUISITIONS", 5, None), (3, "Report of Independent Registered Public Accounting Firm", 6, None),
               (2, "Item 9. Changes in Accountants", 7, None), (3, "Results of Operations", 8, None),
               (4, "Revenue", 8, None)]
    # the notes beside the statements, as a contents page places them, and what they hold with them;
    # an entry without a division word keeps the depth the author gave it
    assert [lv for lv, *_ in relevel_flat_outline(outline)] == [1, 2, 3, 3, 3, 4, 3, 3, 2, 3, 4]
    shallow = [(1, "Item 8. Financial Statements", 1, None), (2, "Note 1 - Basis", 1, None)]
    assert relevel_flat_outline(shallow) == shallow  # never deeper
    # only a division the entry lies in counts: a note in an exhibit after the last Item is placed by
    # the exhibit (a division of the PARTs' rank), not by that Item; an entry under no division is left
    exhibit = outline + [(1, "Exhibit 13", 9, None), (2, "Annual Report", 9, None), (3, "Notes", 10, None),
                         (4, "Note 1 - Basis", 10, None)]
    assert [lv for lv, *_ in relevel_flat_outline(exhibit)][-4:] == [1, 2, 3, 3]
    appendix = outline + [(1, "Appendix", 9, None), (2, "Annual Report", 9, None), (3, "Notes", 10, None),
                          (4, "Note 1 - Basis", 10, None)]
    assert [lv for lv, *_ in relevel_flat_outline(appendix)][-4:] == [1, 2, 3, 4]


def test_a_flat_outline_of_divisions_is_nested_by_its_division_words() -> None:
    from tree_builder.readers.pdf_structure import relevel_flat_outline

    flat = [(1, "Part I", 2, None), (1, "Item 1. Business", 2, None), (1, "Overview", 3, None),
            (1, "Part II", 9, None), (1, "Item 8. Financial Statements", 9, None), (1, "Note 1 - Basis", 10, None)]
    assert [lv for lv, *_ in relevel_flat_outline(flat)] == [1, 2, 3, 1, 2, 3]
    nested = [(1, "Part I", 2, None), (2, "Item 1. Business", 2, None)]
    assert relevel_flat_outline(nested) == nested
    plain = [(1, "Introduction", 1, None), (1, "Methods", 2, None)]
    assert relevel_flat_outline(plain) == plain


def test_the_last_line_of_a_bold_caption_is_no_section(tmp_path: Path) -> None:
    body = "Demand may fall when industrial output declines, and prices may not cover higher costs in time."
    caption = ("Our results could suffer if demand for widgets falls in the regions where we sell most of "
               "our products, or if our largest customers buy less")  # wraps: a long line, a short bold tail
    pages = [[("b", "Risk Factors"), ("p", body), ("b", caption), ("p", "Customers may also delay orders.")],
             [("b", "Properties"), ("p", "We own three plants and lease two warehouses near them.")]]
    path = tmp_path / "risks.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc) == ["Risk Factors", "Properties"]
    assert "largest customers buy less" in _find(doc, "Risk Factors").content


def test_prose_set_larger_than_the_tables_is_no_section(tmp_path: Path) -> None:
    """A press release: prose in 12 points, tables in 10 carrying most of the text (the body size)."""
    from fpdf import FPDF

    prose = ("Acme Corporation (NYSE: ACME) today reported financial results for the quarter and the year, "
             "with net revenues up in every segment and a record operating margin in its largest one, "
             "driven by higher volumes and prices that more than offset higher costs of materials.")
    rows = [f"Segment {k} revenue {1000 + 37 * k:,} {900 + 31 * k:,} {k + 3}%" for k in range(45)]
    pdf = FPDF(format="A4")
    pdf.add_page()
    for size, bold, text in [(16, True, "ACME REPORTS FOURTH QUARTER RESULTS"), (12, False, prose),
                             (12, True, "Segment Results"), (12, False, prose), (12, True, "Outlook"), (12, False, prose)]:
        pdf.set_font("Helvetica", "B" if bold else "", size)
        pdf.multi_cell(0, 5, text)
        pdf.ln(3)
    for _ in range(2):
        pdf.add_page()
        pdf.set_font("Helvetica", "", 10)
        for row in rows:
            pdf.cell(0, 5, row, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "release.pdf"
    pdf.output(str(path))
    doc = _tree(path)
    assert _headings(doc)[-2:] == ["Segment Results", "Outlook"]
    assert not any("today reported" in h or "driven by" in h for h in _headings(doc))
    assert "driven by higher volumes" in " ".join(_find(doc, "Outlook").content.split())


def test_the_titles_of_a_release_s_table_pages_are_its_sections(tmp_path: Path) -> None:
    """Statements and reconciliations after a release's prose, titled in a font smaller than the body,
    under the company's name repeated atop each table page."""
    from fpdf import FPDF

    prose = ("Acme Corporation today reported financial results for the quarter and the year, with net "
             "revenues up in every segment and a record operating margin in its largest one. ")
    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 12)
    pdf.multi_cell(0, 6, "Conference Call Details", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 10)
    for _ in range(6):
        pdf.multi_cell(0, 5, prose * 3, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    titles = ["CONSOLIDATED STATEMENTS OF OPERATIONS", "RECONCILIATION OF NET INCOME TO ADJUSTED EBITDA",
              "SUPPLEMENTAL DATA - NET REVENUES"]
    for title in titles:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 8)
        for line in ["ACME CORPORATION AND SUBSIDIARIES", title, "(In thousands)", "Three months ended 2022 2021"]:
            pdf.cell(0, 4, line, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 8)
        for k in range(25):
            pdf.cell(0, 4, f"Line item {k} {1000 + 37 * k:,} {900 + 31 * k:,}", new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "release.pdf"
    pdf.output(str(path))
    doc = _tree(path)
    assert _headings(doc) == ["Conference Call Details", *titles]
    assert "Line item 3 1,111" in _find(doc, titles[1]).content


def test_a_bulleted_line_is_no_heading_whatever_its_font() -> None:
    from tree_builder.readers.pdf_lines import Line
    from tree_builder.readers.pdf_structure import layout_candidate

    assert layout_candidate(Line("Segment Results", 12.0, True, 700.0, 0), 10.0, False)
    assert not layout_candidate(Line("\u2022 Share buybacks of $2.8 billion in 2022", 12.0, True, 700.0, 0), 10.0, False)


@pytest.mark.parametrize("text, heading", [
    ("Fourth Quarter 2022 Financial Highlights:", True), ("Overview.", True),
    ("Reconciliation of Net Income to Adjusted EBITDA by Segment and Region:", True),
    ("The following table shows key gaming statistics for MGM China:", False),
    ("The notes are not entitled to the benefit of a sinking fund.", False),
    ("License fee expense was $3 Million in the Current Quarter and $6 Million in the Prior Year Quarter.", False),
    ("Ltd.", False), ("Inc.", False),  # the wrapped end of a name in a table's cell ("... Enterprises Pte." / "Ltd.")
    ("Subsidiary Guarantors", True),
])
def test_a_sentence_set_larger_than_the_body_is_no_heading(text: str, heading: bool) -> None:
    from tree_builder.readers.pdf_lines import Line
    from tree_builder.readers.pdf_structure import layout_candidate

    assert layout_candidate(Line(text, 12.0, False, 700.0, 0), 10.0, False) is heading


def test_numbered_notes_nest_their_subheadings_and_continued_headings_are_no_sections(tmp_path: Path) -> None:
    body = "The figures are measured at cost and reviewed each quarter by the audit committee."
    pages = [[("b", "Item 8. Financial Statements"), ("p", body),
              ("b", "1. Summary of Significant Accounting Policies"), ("p", body), ("b", "Organization"), ("p", body)],
             [("b", "1. Summary of Significant Accounting Policies (Continued)"), ("b", "Revenue Recognition"),
              ("p", body + " More text.")],
             [("b", "2.Inventories"), ("p", body + " Inventories."), ("b", "Raw Materials"), ("p", "Steel and resin.")],
             [("b", "3. Leases"), ("p", "Leases run for five years."), ("b", "Lessee"), ("p", "We lease offices.")]]
    path = tmp_path / "notes.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    note1 = _find(doc, "1. Summary of Significant Accounting Policies")
    assert [c.heading for c in note1.children if c.kind == "section"] == ["Organization", "Revenue Recognition"]
    assert _find(doc, "Raw Materials").parent.heading == "2.Inventories"  # a number run into its title
    assert "1. Summary of Significant Accounting Policies (Continued)" not in _headings(doc)


def test_the_column_header_walk_reads_a_bounded_window_of_a_one_line_document(monkeypatch) -> None:
    # a document of one very long line: each chunk's "first line" is the rest of the document, and
    # reading it whole for every chunk made chunking quadratic in the line's length
    from indexing import representation

    seen: list[int] = []
    real = representation.is_table_row

    def spy(text: str) -> bool:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(representation, "is_table_row", spy)
    text = "word 12 " * 100_000
    for start in range(0, len(text), 150_000):
        assert representation.column_header_above(text, start) == ""
    assert max(seen, default=0) <= representation._ROW_MAX_CHARS + 1
    row = "Revenues 1,234 1,100\n"  # a short last line with no newline after it is still read
    assert representation.column_header_above("2022 2021\n" + row.rstrip("\n"), len("2022 2021\n")) == "2022 2021"


def _item8(path: Path, pages: list[list[tuple[str, str]]]) -> tuple[TreeNode, TreeNode]:
    """The tree of a rendered filing and its "Item 8" section."""
    _render_lines(path, pages)
    doc = _tree(path)
    return doc, _find(doc, "Item 8. Financial Statements and Supplementary Data")


def _body(n: int) -> str:  # a different text on each page: a line on every page is a running header
    return f"Paragraph {n} explains the figures of the statements and how they were measured this year."


def _statement_pages() -> list[list[tuple[str, str]]]:
    """A filing's Items 1 and 8 and the two statements Item 8 opens with, each atop its page."""
    return [[("b", "PART I"), ("b", "Item 1. Business"), ("p", _body(1))],
            [("b", "PART II"), ("b", "Item 8. Financial Statements and Supplementary Data"), ("p", _body(2))],
            [("b", "Consolidated Statement of Income"), ("p", "(In millions) 2022 2021"),
             ("p", "Net revenue 1,234 1,100"), ("p", "Cost of sales (800) (760)")],
            [("b", "Consolidated Balance Sheet"), ("p", "(In millions) 2022 2021"), ("p", "Cash 100 90"),
             ("p", "Inventories 300 280")]]


def test_statement_titles_divide_an_items_financial_statements(tmp_path: Path) -> None:
    """A filing whose contents list no statements: each statement's title at the top of its page is a
    section under the Item, beside the notes (not a layout heading below them, cut by the depth cap)."""
    pages = _statement_pages() + [
        [("b", "Note 1 - Basis of Presentation"), ("p", _body(3)), ("b", "Revenue Recognition"), ("p", _body(4))],
        [("b", "Note 2 - Revenue"), ("p", _body(5))]]
    path = tmp_path / "filing.pdf"
    doc, item8 = _item8(path, pages)
    assert [c.heading for c in item8.children if c.kind == "section"][-4:] == [
        "Consolidated Statement of Income", "Consolidated Balance Sheet", "Note 1 - Basis of Presentation",
        "Note 2 - Revenue"]
    assert "Inventories 300 280" in _find(doc, "Consolidated Balance Sheet").content
    assert item8.parent.heading == "PART II"
    # the titles are marked as the notes are, a division below the Item, not a layout heading that
    # nests under whatever subsection comes before (a filing printing its statements inside Item 7)
    from tree_builder.readers.pdf_reader import strip_furniture
    from tree_builder.readers.pdf_structure import mark_structure_headings
    from tree_builder.readers.pdf_text import read_pdf_content

    lines = strip_furniture(read_pdf_content(path.read_bytes(), path.name).pages)
    mark_structure_headings(lines)
    marker = {ln.text: ln.heading for page in lines for ln in page}
    assert marker["Consolidated Balance Sheet"] == marker["Note 2 - Revenue"] == marker["Item 1. Business"] + 1


def test_the_notes_and_the_auditors_report_are_the_statements_siblings(tmp_path: Path) -> None:
    """A filing that numbers its notes "1.", "2." under a bold "Notes to Consolidated Financial
    Statements" and prints the auditors' report after the last note, its title wrapped, in the italic
    of the notes' subsections: the notes' title and the report sit beside the statements, the notes
    under their title. Read by font alone, the notes nested under the balance sheet and the report
    under the last note's last subsection."""
    pages = _statement_pages() + [
        [("b", "Notes to Consolidated Financial Statements"), ("b", "1. Significant Accounting Policies"),
         ("p", _body(3)), ("i", "Use of Estimates"), ("p", _body(4))],
        [("b", "2. Revenue"), ("p", _body(5)), ("i", "Segments"), ("p", _body(6))],
        [("i-", "Report of Independent Registered Public Accounting Firm"), ("i", "on the Financial Statements"),
         ("p", _body(7))],
        [("b", "Item 9. Changes in and Disagreements with Accountants"), ("p", _body(8))]]
    path = tmp_path / "filing.pdf"
    _render_lines(path, pages)
    doc = build_tree([load_document(path, path.name)], Config().replace(max_depth=5), folder_mode=True).children[0]
    item8 = _find(doc, "Item 8. Financial Statements and Supplementary Data")
    assert [c.heading for c in item8.children if c.kind == "section"][-4:] == [
        "Consolidated Statement of Income", "Consolidated Balance Sheet", "Notes to Consolidated Financial Statements",
        "Report of Independent Registered Public Accounting Firm on the Financial Statements"]  # its wrapped title whole
    notes = _find(doc, "Notes to Consolidated Financial Statements")
    assert [c.heading for c in notes.children] == ["1. Significant Accounting Policies", "2. Revenue"]
    assert [c.heading for c in _find(doc, "2. Revenue").children] == ["2. Revenue (intro)", "Segments"]
    assert _body(7) in _find(doc, "Report of Independent Registered Public Accounting Firm on the Financial Statements").content


def test_a_statement_title_in_the_body_font_atop_its_page_is_its_section(tmp_path: Path) -> None:
    """A filing that prints each statement's title at the top of its page in the body font and the company
    line below it in bold: the title, not the company line, heads the statement, and a second page under
    the same title continues it. A title inside a sentence, or not opening its page, heads nothing."""
    def body(n: int) -> str:
        return f"Paragraph {n} explains the figures of the statements and how they were measured this year."

    company = ("b", "ACME INC. AND SUBSIDIARIES (In Millions)")
    pages = [[("b", "PART I"), ("b", "Item 1. Business"), ("p", body(1))],
             [("b", "PART II"), ("b", "Item 8. Financial Statements and Supplementary Data"), ("p", body(2)),
              ("p", "Consolidated Statements of Earnings")],
             [("p", "Consolidated Statements of Earnings"), company, ("p", "Fiscal Year 2020 2019"),
              ("p", "Net sales 17,626.6 16,865.2"), ("p", "Cost of sales (11,496.7) (11,108.4)")],
             [("p-", "Consolidated Statements of Comprehensive Income"), ("p", "ACME INC. AND SUBSIDIARIES"),
              ("p", "Fiscal Year 2020 2019"), ("p", "Net earnings 2,210.8 1,786.2")],
             [("p", "Consolidated Balance Sheets"), company, ("p", "May 31, 2020 May 26, 2019"),
              ("p", "Cash and cash equivalents 1,677.8 450.0"), ("p", "Receivables 1,615.1 1,679.7")],
             [("p", "Consolidated Balance Sheets"), company, ("p", "May 31, 2020 May 26, 2019"),
              ("p", "Total liabilities and equity 30,806.7 30,111.2")],
             [("b", "Note 1 - Basis of Presentation"), ("p", body(3)),
              ("p", "Consolidated Statements of Earnings were restated for the change described below.")],
             [("b", "Note 2 - Revenue"), ("p", body(4))]]
    doc, item8 = _item8(tmp_path / "filing.pdf", pages)
    # a long title takes no wrapped line: the company line under it, in the same font, is no part of it
    assert [c.heading for c in item8.children if c.kind == "section"][-5:] == [
        "Consolidated Statements of Earnings", "Consolidated Statements of Comprehensive Income",
        "Consolidated Balance Sheets", "Note 1 - Basis of Presentation", "Note 2 - Revenue"]
    sheet = _find(doc, "Consolidated Balance Sheets")
    assert "Receivables 1,615.1" in sheet.content and "Total liabilities and equity" in sheet.content


def test_exhibits_bound_after_the_report_are_divisions_of_their_own(tmp_path: Path) -> None:
    """A 10-K's exhibits follow its signatures, each opening with its mark atop its first page: each is a
    section beside the PARTs (its Articles inside it), named by its mark and title; the mark repeated atop
    its next page, a reference to an exhibit, an index row and a page of subsidiaries in bold are none."""
    def body(n: int) -> str:
        return f"Paragraph {n} sets out the terms of the plan and how they apply to each participant."

    subsidiaries = [("b", f"Acme Subsidiary Number {k} LLC Delaware") for k in range(14)]
    pages = [[("b", "PART I"), ("b", "Item 1. Business"), ("p", body(1))],
             [("b", "PART IV"), ("b", "Item 15. Exhibits"), ("p", "Exhibit 10.13 Acme Deferred Compensation Plan"),
              ("p", body(2))],
             [("b", "SIGNATURES"), ("p", body(3))],
             [("p", "Exhibit 10.13"), ("b", "ACME DEFERRED COMPENSATION PLAN"), ("p", body(4)),
              ("b", "ARTICLE I"), ("b", "Introduction"), ("p", body(5))],
             [("p", "Exhibit 10.13"), ("b", "ARTICLE II"), ("b", "Definitions"), ("p", body(6))],
             [("p", "Exhibit 3.1 of the Company's Quarterly Report is incorporated by reference."), ("p", body(7))],
             [("p", "EXHIBIT 21"), ("p", "Subsidiaries of Acme Inc."), *subsidiaries]]
    path = tmp_path / "filing.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    tops = [c.heading for c in doc.children if c.kind == "section"]
    assert tops == ["PART I", "PART IV", "Exhibit 10.13 — ACME DEFERRED COMPENSATION PLAN", "EXHIBIT 21"]
    plan = _find(doc, "Exhibit 10.13 — ACME DEFERRED COMPENSATION PLAN")
    assert [c.heading for c in plan.children if c.kind == "section"] == ["ARTICLE I — Introduction",
                                                                          "ARTICLE II — Definitions"]
    assert "incorporated by reference" in _find(doc, "ARTICLE II — Definitions").content
    subs = _find(doc, "EXHIBIT 21")  # its first line runs on into the list: no title of its own
    assert subs.is_leaf and "Acme Subsidiary Number 13 LLC Delaware" in subs.content
    assert "Exhibit 10.13 Acme Deferred Compensation Plan" in _find(doc, "Item 15. Exhibits (intro)").content


def test_a_run_in_section_is_named_by_its_title_and_its_paragraph_is_its_text(tmp_path: Path) -> None:
    """A plan prints each section's title at the head of its first paragraph: the section is named
    "Section 2.2 Qualified Plan Definitions." and its text opens with the paragraph's first words."""
    pages = [[("b", "ARTICLE 2 DEFINITIONS"),
              ("b-", "Section 2.1 Definitions. As used in the Plan, the following terms have the meanings"),
              ("p", "indicated below, unless the context clearly requires another meaning."),
              ("b-", "Section 2.2 Qualified Plan Definitions. Capitalized terms not otherwise defined in"),
              ("p", "the Plan shall have the same meaning set forth in the related Qualified Retirement Plan.")],
             [("b", "ARTICLE 3 ADMINISTRATION"),
              ("p", "The Plan shall be administered by the Administrator, who may delegate any of the duties.")]]
    path = tmp_path / "plan.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc) == ["ARTICLE 2 DEFINITIONS", "Section 2.1 Definitions.",
                              "Section 2.2 Qualified Plan Definitions.", "ARTICLE 3 ADMINISTRATION"]
    assert _find(doc, "Section 2.2 Qualified Plan Definitions.").content.startswith(
        "Capitalized terms not otherwise defined in\nthe Plan shall have the same meaning")


def test_an_exhibit_set_in_a_larger_font_is_read_against_its_own_body(tmp_path: Path) -> None:
    """A contract filed after a report in a larger font: its paragraphs are no headings (against the
    report's body every line of it was larger), its bold clause titles are."""
    prose = ("Revenue rose in every segment as deliveries recovered, and the margin widened as the costs of "
             "the plants fell with the volume they made.")
    report = [[("b", "PART I"), ("b", "Item 1. Business"), *[("p", prose)] * 10],
              [("b", "Item 7. Management's Discussion and Analysis"), *[("p", prose.replace("Revenue", "Cash"))] * 10],
              [("b", "Item 8. Financial Statements"), *[("p", prose.replace("Revenue", "Income"))] * 10]]
    clause = ("The Concessionaire shall pay the premium to the Government each year, in the amounts and on the "
              "dates this contract sets, for as long as the concession is in force.")
    exhibit = [[("bL", "EXHIBIT 10.1"), ("pL", "The Government and the Concessionaire agree as follows. " + clause),
                ("bL", "Clause 1"), ("pL", "One. " + clause), ("pL", "Two. " + clause),
                ("pL", " "),  # a paragraph's gap as wide as the contract's: a short paragraph stood alone
                ("pL-", "Three. The Concessionaire shall also pay a premium for each gaming table"),
                ("pL", "in its casinos."), ("bL", "Clause 2"), ("pL", "One. " + clause.replace("premium", "tax")),
                ("pL", "Two. " + clause.replace("premium", "levy")), ("pL", "Three. " + clause.replace("each", "every"))],
               [("bL", "Clause 3"), *[("pL", f"{n}. " + clause.replace("premium", "fee"))
                                      for n in ("One", "Two", "Three", "Four", "Five", "Six")]]]
    path = tmp_path / "report.pdf"
    _render_lines(path, report + exhibit)
    headings = _headings(_tree(path))
    assert headings[-4:] == ["EXHIBIT 10.1", "Clause 1", "Clause 2", "Clause 3"]


def test_italic_subheadings_are_sections_below_the_bold_ones(tmp_path: Path) -> None:
    """A filing sets its MD&A's subheadings in italic body type under bold ones: each opens a section
    one level down; an italic sentence or formula in the text does not."""
    def prose(topic: str) -> str:
        return (f"{topic} was tested at the end of the year, and the fair value of each reporting unit "
                "exceeded its carrying amount by a wide margin in every segment.")
    pages = [[("b", "Critical Accounting Estimates"), ("p", prose("The estimate")),
              ("i", "Goodwill"), ("p", prose("Goodwill")), ("i", "Indefinite-Lived Intangible Assets"),
              ("p", prose("Each brand")), ("i", "All amounts are in millions of dollars."), ("p", prose("Each note"))],
             [("b", "Liquidity and Capital Resources"), ("p", prose("Liquidity")),
              ("i", "Cash Flows"), ("p", prose("Cash")), ("i", "Y = W x + U h + b"), ("p", prose("Debt"))]]
    path = tmp_path / "mdna.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc) == ["Critical Accounting Estimates", "Goodwill", "Indefinite-Lived Intangible Assets",
                              "Liquidity and Capital Resources", "Cash Flows"]
    assert _find(doc, "Goodwill").level == _find(doc, "Critical Accounting Estimates").level + 1


def test_numbered_titles_in_the_body_font_are_sections_and_list_rows_are_not(tmp_path: Path) -> None:
    """A grant agreement numbers its sections' titles in the body font ("3. Performance Goals."): each
    opens a section. An exhibit list's rows ("31.1 Certification ..." over "31.2 ..."), a contents row
    with its page number and a signatory's initial open none."""
    def prose(topic: str) -> str:
        return (f"{topic} are measured over the three-year period, and the committee determines after its "
                "end how many of the units the participant has earned under this grant.")
    pages = [[("b", "PERFORMANCE STOCK UNIT GRANT"), ("p", "1. Grant of Units."), ("p", prose("Units")),
              ("p", "2. Dividend Equivalents."), ("p", prose("Dividends")),
              ("p", "3. Performance Goals."), ("p", prose("The goals")), ("p", prose("The results"))],
             [("p", "4. Termination of Employment or Service."), ("p", prose("Terminations")),
              ("p", "8.6 Withholding and Employment Taxes. 27"), ("p", prose("Taxes")),
              ("p-", "31.1 Certification by the Chief Executive Officer."),
              ("p", "31.2 Certification by the Chief Financial Officer."), ("p", prose("Certifications")),
              ("p", "R. Kerry Clark Director"), ("p", prose("Signatures"))]]
    path = tmp_path / "grant.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    assert _headings(doc)[-4:] == ["1. Grant of Units.", "2. Dividend Equivalents.", "3. Performance Goals.",
                                   "4. Termination of Employment or Service."]
    assert "31.1 Certification by the Chief Executive Officer." in _find(doc, "4. Termination of Employment or Service.").content


def test_an_exhibit_whose_titles_are_only_in_capitals_keeps_them_and_a_signature_s_labels_are_none(
        tmp_path: Path) -> None:
    """The report marks its headings in bold, so a line in capitals in its body font is text there; a plan
    filed as an exhibit sets its titles in capitals in the body font, and they are its sections (each
    exhibit decides how its headings are marked). The party named above a signature ("APPROVED" over
    "By: /s/ ...") and the signer's name and title under it are labels, not titles; a title set apart
    after them is one."""
    prose = ("Revenue rose in every segment as deliveries recovered, and the margin widened as the costs of "
             "the plants fell with the volume they made.")
    report = [[("b", "PART I"), ("b", "Item 1. Business"), ("b", "Overview"), *[("p", prose)] * 4,
               ("p", "NEW YORK STOCK EXCHANGE"), *[("p", prose)] * 4],
              [("b", "Item 7. Management's Discussion and Analysis"), ("b", "Results of Operations"),
               *[("p", prose.replace("Revenue", "Cash"))] * 10],
              [("b", "Signatures and Powers"), ("p", prose.replace("Revenue", "The report")),
               ("p-", "By: /s/ John Doe"), ("b-", "John Doe"), ("b", "Chief Executive Officer"),
               ("b", "Power of Attorney"), *[("p", prose.replace("Revenue", "Each director"))] * 3]]
    term = ("The Plan pays each Participant the amount this Plan sets for the year, in the form and at the "
            "time the Committee decides, as long as the Participant remains employed.")
    exhibit = [[("b", "EXHIBIT 10.2"), ("p", "DEFINITIONS"), *[("p", term)] * 5,
                ("p", "ELIGIBILITY"), *[("p", term.replace("amount", "bonus"))] * 4],
               [("p", "VESTING"), *[("p", term.replace("year", "period"))] * 5,
                ("p", "APPROVED"), ("p", "By: /s/ Jane Roe"), ("p", "Jane Roe, Chief Human Resources Officer")]]
    path = tmp_path / "report.pdf"
    _render_lines(path, report + exhibit)
    doc = _tree(path)
    headings = _headings(doc)
    assert headings[-4:] == ["EXHIBIT 10.2", "DEFINITIONS", "ELIGIBILITY", "VESTING"]
    assert "NEW YORK STOCK EXCHANGE" not in headings
    assert "APPROVED" in _find(doc, "VESTING").content
    assert "Power of Attorney" in headings
    assert "Chief Executive Officer" in _find(doc, "Signatures and Powers").content


def test_a_heading_in_capitals_by_its_spelling_ranks_with_the_mixed_case_ones(tmp_path: Path) -> None:
    """Bold titles in capitals rank above bold titles in mixed case; a segment named by an abbreviation
    the text spells in capitals ("FLNA makes ...", "APAC sells ...") is capitals by its spelling: it
    stands beside the mixed-case segment "Europe", and the section after it ("Other Consolidated
    Results") is no part of it."""
    def prose(topic: str) -> str:
        return (f"Either alone or with partners, {topic} makes, markets and sells snacks, and its revenue "
                "grew in every quarter as volume recovered.")
    pages = [[("b", "OUR BUSINESS"), ("p", prose("the company")), ("p", prose("each division"))],
             [("b", "OUR FINANCIAL RESULTS"), ("p", prose("every division")),
              ("b", "FLNA"), ("p", prose("FLNA")), ("p", prose("FLNA in Canada")),
              ("b", "Europe"), ("p", prose("Europe")),
              ("b", "APAC"), ("p", prose("APAC")), ("p", prose("APAC in China"))],
             [("b", "Other Consolidated Results"), ("p", prose("the group")),
              ("b", "OUR CRITICAL ACCOUNTING POLICIES"), ("p", prose("management"))]]
    path = tmp_path / "segments.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    results = _find(doc, "OUR FINANCIAL RESULTS")
    assert [c.heading for c in results.children] == ["OUR FINANCIAL RESULTS (intro)", "FLNA", "Europe", "APAC",
                                                    "Other Consolidated Results"]
    assert _find(doc, "APAC").level == _find(doc, "Europe").level == results.level + 1


_RISKS = ["We face intense competition in every market we serve, and if we cannot compete effectively, our revenue, "
          "margins and market share could decline.",
          "Price changes for the commodities we depend on may adversely affect our profitability.",
          "Disruption of our supply chain could adversely affect our business.",
          "Our international operations are subject to political and economic risks, including changes in trade "
          "policy, sanctions and the exchange rates of the currencies we sell in.",
          "We have a substantial amount of indebtedness, which could limit our financing options.",
          "Our information technology systems could fail or be breached."]


def _risk_pdf(path: Path, risks: list[str], outline: bool) -> None:
    """A filing's Item 1A: a bold category title, then each risk as a bold sentence over regular prose."""
    from fpdf import FPDF

    prose = ("Such an event would reduce our sales and raise our costs, and we may not be able to pass those costs "
             "on to customers in the periods in which they arise.")
    pdf = FPDF(format="A4")
    pdf.add_page()

    def line(style: str, text: str, tight: bool = False, section: int | None = None) -> None:
        if outline and section is not None:
            pdf.start_section(text, level=section)
        pdf.set_font("Helvetica", style, 10)
        pdf.multi_cell(0, 4 if tight else 6, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(0 if tight else 2)

    line("B", "PART I", section=0)
    line("B", "Item 1A. Risk Factors", section=1)
    line("", "The risks below could harm our business. " + prose)
    line("B", "Risks Related to Our Business")
    for risk in risks:  # each risk explained at a filing's length: the Item runs past 20,000 characters
        line("B", risk, tight=True)
        for _ in range(12):
            line("", f"{prose} Any of these could also reduce the value of our shares. {prose}")
    line("B", "Item 2. Properties", section=1)
    line("", "We own our headquarters and lease our plants. " + prose)
    pdf.output(str(path))


@pytest.mark.parametrize("outline", [False, True])
def test_each_risk_factor_titled_by_a_bold_sentence_is_a_section(tmp_path: Path, outline: bool) -> None:
    """A filing heads each risk with a bold sentence over regular prose: each is a section under its
    category title, under the Item, holding its own explanation. Bookmarks that stop at the PARTs and
    Items add nothing the division words do not find, so such a file is read as one without them
    (read by its bookmarks, the category title was lost and its risks sat beside it). One or two
    bold sentences are emphasis."""
    path = tmp_path / "risks.pdf"
    _risk_pdf(path, _RISKS, outline)
    doc = _tree(path)
    owner = _find(doc, "Risks Related to Our Business")
    assert owner.parent is _find(doc, "Item 1A. Risk Factors")
    assert [c.heading for c in owner.children if c.kind == "section"] == _RISKS
    first = _find(doc, _RISKS[0])
    assert first.content.startswith("Such an event would reduce our sales") and not first.children
    assert "We own our headquarters" in _find(doc, "Item 2. Properties").content
    assert "Item 2. Properties" not in [n.heading for n in first.iter_preorder()]

    few = tmp_path / "few.pdf"
    _risk_pdf(few, _RISKS[:2], outline)
    assert not set(_RISKS) & {h.text for h in load_document(few, few.name).headings}


_POLICIES = ["Principles of consolidation", "Use of estimates", "Revenue recognition", "Income taxes",
             "Cash and cash equivalents", "Receivables"]


def _run_in_pdf(path: Path, titles: list[str], opening: str) -> None:
    """A note whose topics are bold titles run into their paragraphs ("**Income taxes** – We ..."), then
    an Item 1A whose risks are bold sentences that end on a line their explanation runs on."""
    from fpdf import FPDF

    prose = ("We measure these amounts at the end of each reporting period and review them whenever events "
             "indicate that the carrying amount may not be recoverable. ")
    pdf = FPDF(format="A4")
    pdf.add_page()

    def block(text: str, style: str = "", tight: bool = True) -> None:
        pdf.set_font("Helvetica", style, 10)
        pdf.multi_cell(0, 4 if tight else 6, text, new_x="LMARGIN", new_y="NEXT", markdown=True)
        pdf.ln(3)

    block("PART I", "B", tight=False)
    block("Item 1A. Risk Factors", "B", tight=False)
    block("The risks below could harm our business. " + prose)
    for risk in _RISKS:
        block(f"**{risk}** Such an event would reduce our sales and raise our costs. " + prose * 24)
    block("PART II", "B", tight=False)
    block("Item 8. Financial Statements and Supplementary Data", "B", tight=False)
    block("Note 1 - Significant Accounting Policies", "B", tight=False)
    for title in titles:
        block(opening.format(title) + "We apply this policy consistently. " + prose * 24)
    block("Note 2 - Revenue", "B", tight=False)
    block("Revenue is recognised when control passes to the customer. " + prose)
    pdf.output(str(path))


@pytest.mark.parametrize("opening", ["**{}** - ", "**{}.** ", "**{}:** "])
def test_bold_titles_run_into_their_paragraphs_are_sections(tmp_path: Path, opening: str) -> None:
    """A note's topics in bold run into their paragraphs ("Income taxes – We apply ..."), and risks whose
    bold sentence ends on a line its explanation runs on: each is a section whose text is its paragraph
    (the title's words are no longer the text's opening), the risks under the Item and the topics under
    the note."""
    path = tmp_path / "notes.pdf"
    _run_in_pdf(path, _POLICIES, opening)
    doc = _tree(path)
    note = _find(doc, "Note 1 - Significant Accounting Policies")
    want = [t + "." if "." in opening else t for t in _POLICIES]
    assert [c.heading for c in note.children if c.kind == "section"] == want
    taxes = _find(doc, want[3])
    assert taxes.content.startswith("We apply this policy consistently.")
    risks = _find(doc, "Item 1A. Risk Factors")
    assert [c.heading for c in risks.children if c.kind == "section"] == _RISKS
    assert _find(doc, _RISKS[2]).content.startswith("Such an event would reduce our sales")
    assert "Revenue is recognised" in _find(doc, "Note 2 - Revenue").content


def test_italic_run_in_titles_are_sections_a_level_below_bold_ones(tmp_path: Path) -> None:
    """A note's policies run in after bold titles and, inside the first, its topics after italic ones
    ("Equity investments. Fair value ..."): each topic is a section under its policy, not beside it."""
    from fpdf import FPDF

    prose = ("We measure these amounts at the end of each reporting period and review them whenever events "
             "indicate that the carrying amount may not be recoverable. ")
    topics = ["Equity investments", "Debt investments", "Derivatives", "Leases", "Contract liabilities"]
    pdf = FPDF(format="A4")
    pdf.add_page()

    def block(text: str, style: str = "") -> None:
        pdf.set_font("Helvetica", style, 10)
        pdf.multi_cell(0, 4, text, new_x="LMARGIN", new_y="NEXT", markdown=True)
        pdf.ln(3)

    block("Note 1 - Significant Accounting Policies", "B")
    for k, policy in enumerate(_POLICIES):
        block(f"**{policy}.** We apply this policy consistently. " + prose * 2)
        for topic in topics if k == 0 else []:
            block(f"__{topic}.__ The Company measures them at fair value. " + prose * 30)
    block("Note 2 - Revenue", "B")
    block("Revenue is recognised when control passes to the customer. " + prose)
    path = tmp_path / "topics.pdf"
    pdf.output(str(path))
    doc = _tree(path)
    note = _find(doc, "Note 1 - Significant Accounting Policies")
    assert [c.heading for c in note.children if c.kind == "section"] == [p + "." for p in _POLICIES]
    first = _find(doc, _POLICIES[0] + ".")
    assert [c.heading for c in first.children if c.kind == "section"] == [t + "." for t in topics]
    assert _find(doc, "Debt investments.").content.startswith("The Company measures them at fair value.")


def test_a_footer_numbered_with_its_page_is_no_section_though_set_above_the_body() -> None:
    """A filing set in 7 pt prints "Acme Inc. 2021 Form 10-K 15" in bold 8 pt at each page's foot (roman
    figures before page 1): furniture, not a heading. The same line repeated word for word, or a title
    well above the body's size, stays, as a heading that opens every page would."""
    from tree_builder.readers.pdf_lines import Line
    from tree_builder.readers.pdf_reader import strip_furniture

    numbers = ["i", "ii"] + [str(n) for n in range(1, 9)]
    topics = ["sales", "costs", "plants", "staff", "taxes", "debt", "cash", "risks", "leases", "rates"]
    pages = []
    for p, (number, topic) in enumerate(zip(numbers, topics)):
        lines = [Line("ACME INC.", 8.0, True, 780.0, p), Line(f"Chapter {p + 1}", 11.0, True, 760.0, p)]
        lines += [Line(f"This paragraph says what the company did with its {topic}, part {part}.", 7.0, False,
                       700.0 - 12 * k, p) for k, part in enumerate(("one", "two", "three", "four"))]
        lines.append(Line(f"Acme Inc. 2021 Form 10-K {number}", 8.0, True, 40.0, p))
        pages.append(lines)
    kept = [[ln.text for ln in lines] for lines in strip_furniture(pages)]
    assert not any("Form 10-K" in text for texts in kept for text in texts)
    assert all(texts[:2] == ["ACME INC.", f"Chapter {p + 1}"] for p, texts in enumerate(kept))
    assert all(len(texts) == 6 for texts in kept)


def test_a_contents_entry_printed_only_further_on_is_no_section_there(tmp_path: Path) -> None:
    """The contents list "Research" under Item 1, but the text layer lacks that heading on its page; a risk
    of the same name comes pages later. Taking it there would skip the entries in between ("Markets") and
    hang the risk beside the Items: the entry is dropped, its neighbours stay where the contents put them."""
    def body(topic: str) -> str:
        return f"This paragraph explains our {topic} and how it changed during the year, with its figures."

    pages = [[("b", "ACME CORP"), ("p", "Annual report on Form 10-K for the fiscal year ended December 31, 2022.")],
             [("b", "Table of Contents"), ("b", "PART I"), ("p", "Item 1. Business 1"), ("p+", "Our Products 1"),
              ("p+", "Research 2"), ("p+", "Markets 3"), ("p", "Item 1A. Risk Factors 4"), ("b", "PART II"),
              ("p", "Item 7. Management's Discussion and Analysis 5")],
             [("b", "PART I"), ("b", "Item 1. Business"), ("p", body("business")), ("b", "Our Products"),
              ("p", body("products"))],
             [("p", body("research programmes")), ("p", body("laboratories"))],
             [("b", "Markets"), ("p", body("markets"))],
             [("b", "Item 1A. Risk Factors"), ("p", body("risks")), ("b", "Research"), ("p", body("research risks"))],
             [("b", "PART II"), ("b", "Item 7. Management's Discussion and Analysis"), ("p", body("results"))]]
    path = tmp_path / "filing.pdf"
    _render_lines(path, pages)
    doc = _tree(path)
    item1 = _find(doc, "Item 1. Business")
    assert [c.heading for c in item1.children if c.kind == "section"][-2:] == ["Our Products", "Markets"]
    assert _find(doc, "Item 1A. Risk Factors").parent.heading == "PART I"
    assert "Research" not in [c.heading for c in _find(doc, "PART I").children]


def test_a_title_atop_each_page_of_its_section_heads_it_once() -> None:
    """"Notes to Consolidated Financial Statements" opens each page of the notes: it heads the notes on its
    first page and is text on the others, so the notes' subsections do not nest under each repeat. A title
    on two pages in a row, or returning after other pages, stays a heading each time."""
    from tree_builder.readers.pdf_lines import Line
    from tree_builder.readers.pdf_reader import unmark_running_titles

    def page(p: int, *titles: str) -> list[Line]:
        lines = [Line(t, 9.5, True, 750.0 - 12 * k, p, heading=levels.get(t, 5)) for k, t in enumerate(titles)]
        return lines + [Line(f"Text of page {p}.", 7.0, False, 600.0, p)]

    notes = "Notes to Consolidated Financial Statements"
    levels = {"Note 1. Basis": 3, "Note 2. Revenue": 3, "Exhibit 99.3": 1, "Separation Agreement": 2, "And Release": 2}
    pages = [page(0, notes, "Note 1. Basis"), page(1, notes), page(2, notes, "Note 2. Revenue"), page(3, notes),
             page(4, "Exhibit 99.3", "CITYCENTER HOLDINGS"), page(5, "Exhibit 99.3", "CITYCENTER HOLDINGS"),
             page(6, "Exhibit 99.3", "CITYCENTER HOLDINGS"),
             page(7, "Separation Agreement", "And Release"), page(8, "Separation Agreement", "And Release"),
             page(9, "Separation Agreement", "And Release"),
             page(10, "Report of Independent Auditors"), page(11, "Report of Independent Auditors"),
             page(12, "ARTICLE V"), page(13, "Benefits"), page(14, "ARTICLE V"), page(15, "ARTICLE V")]
    unmark_running_titles(pages)
    headed = [[ln.text for ln in lines if ln.heading] for lines in pages]
    assert headed[:4] == [[notes, "Note 1. Basis"], [], ["Note 2. Revenue"], []]
    assert headed[4:7] == [["Exhibit 99.3", "CITYCENTER HOLDINGS"], [], []]
    assert headed[7:10] == [["Separation Agreement", "And Release"], [], []]  # a title wrapped onto two lines
    assert headed[10:] == [["Report of Independent Auditors"]] * 2 + [["ARTICLE V"], ["Benefits"]] + [["ARTICLE V"]] * 2


def test_short_titles_in_bold_or_italic_body_type_fill_in_below_the_bookmarks(tmp_path: Path) -> None:
    """A filing bookmarks its Items and notes, not a note's topics: those are a few words in italic (its
    policies) or bold on their own line over regular prose, and are headings below the deepest bookmark. A "(Continued)" line atop a page, a column's "Page" and the bold
    row labels of a statement's page are none; nor is a topic the document sets only once or twice."""
    from fpdf import FPDF

    prose = ("The company applies this policy to every period presented, and the amounts it reports are "
             "measured on the same basis each year.")
    policies = ["Use of Estimates", "Fiscal Year", "Revenue Recognition", "Deferred Revenue", "Income Taxes",
                "Treasury Stock"]
    streams = ["Subscription Revenue", "Product Revenue", "Services and Support", "Consulting Services",
               "Training Services"]

    def render(path: Path, topics: list[str]) -> None:
        pdf = FPDF(format="A4")
        pdf.add_page()

        def line(style: str, text: str, section: int | None = None) -> None:
            if section is not None:
                pdf.start_section(text, level=section)
            pdf.set_font("Helvetica", style, 10)
            pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)

        line("B", "PART II", section=0)
        line("B", "Item 8. Financial Statements", section=1)
        line("B", "Consolidated Balance Sheets", section=2)
        rows = [("B", "Page"), ("B", "Current assets"), ("", "Cash 1,200 1,100"), ("", "Receivables 800 760"),
                ("", "Total current assets 2,300 2,140"), ("B", "Other assets"), ("", "Goodwill 900 900"),
                ("", "Total assets 3,200 3,040"), ("B", "Earnings per share"), ("", "Basic and diluted, as restated"),
                ("", "Basic 1.20 1.10"), ("", "Diluted 1.18 1.08")]
        for style, row in rows:
            if row == "Earnings per share":
                pdf.ln(8)  # a row group set apart by a gap, as a paragraph would be
            line(style, row)
        pdf.add_page()
        line("B", "Note 1. Significant Accounting Policies", section=2)
        line("", prose)
        for topic in topics:
            line("I", topic)
            line("", prose + " " + prose)
        pdf.add_page()
        line("B", "NOTES TO CONSOLIDATED FINANCIAL STATEMENTS (Continued)")
        line("", prose)
        line("B", "Note 2. Revenue", section=2)
        line("", prose)
        for stream in streams:
            line("B", stream)
            line("", prose)
        pdf.output(str(path))

    path = tmp_path / "filing.pdf"
    render(path, policies)
    levels = {h.text: h.marker_level for h in load_document(path, path.name).headings}
    note = levels["Note 1. Significant Accounting Policies"]
    assert all(levels[p] == note + 2 for p in policies)  # a level below the bold titles
    assert all(levels[t] == note + 1 for t in streams)
    for none in ("NOTES TO CONSOLIDATED FINANCIAL STATEMENTS (Continued)", "Page", "Current assets", "Other assets",
                 "Earnings per share"):
        assert none not in levels
    few = tmp_path / "few.pdf"
    render(few, policies[:2])
    assert not set(policies) & {h.text for h in load_document(few, few.name).headings}
