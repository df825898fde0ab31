"""Figures read from tables as PDF extractions lay them out: rows split over two lines, headers of
years on lines of their own, cells printed apart from their "%", several kinds of period in one
release, a question wrapped in instructions, the scale a table states, and a quantity under the
name a statement gives it."""
from __future__ import annotations

from pathlib import Path

from retrieval.figure_rows import figures_in, parse_row

SHIFTED = """Consolidated Statements of Financial Position
(Dollars in millions, except per share data)
December 31,

2018 2017 Assets

Cash and cash equivalents
$7,637 $8,813 Short-term and other investments
927 1,179 Inventories
62,567 61,388 Total current assets

87,830 85,194 Customer financing, net
2,418 2,756 Property, plant and equipment, net
12,645 12,672 Goodwill
7,840 5,559 Total assets
"""
"""A reader that prints each row's numbers at the start of the next line, before the next label."""


def _extract(tmp_path: Path, text: str, question: str):
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from retrieval.extractive import extract
    from retrieval.query import Query
    from retrieval.types import RetrievedChunk

    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "filing.md").write_text(text, encoding="utf-8")
    emb = make_embedder("hash", Config())
    build_index(tmp_path / "filing.md", tmp_path / "index", Config(), emb)
    index = load_index(tmp_path / "index")
    ranked = [RetrievedChunk(index.chunks[r], 1.0 - r / 10, {}, row=r) for r in range(len(index.chunks))]
    return extract(Query.build(question, emb), ranked, index, emb, Config())


def test_a_row_whose_numbers_open_the_next_line_is_read_with_its_label() -> None:
    found = figures_in(SHIFTED, "What is the year end FY2018 net property, plant, and equipment?")
    best = found[0]
    assert best.label == "Property, plant and equipment, net" and best.values == ("12,645",)
    assert best.columns == ("2018",) and best.read.endswith("column '2018', in millions")
    assert SHIFTED[best.start:best.end] == "Property, plant and equipment, net\n12,645 12,672"
    cash = figures_in(SHIFTED, "How much cash and cash equivalents in 2017?")[0]
    assert cash.label == "Cash and cash equivalents" and cash.values == ("$8,813",)


def test_cells_glued_to_each_other_and_to_labels_are_taken_apart() -> None:
    glued = ("CONSOLIDATED BALANCE SHEETS\n(In thousands, except share data)\n\nDecember 31,\n20182017ASSETS\n\n"
             "Cash and cash equivalents$1,526,762$1,499,995Accounts receivable, net\n657,206542,273Inventories\n"
             "110,831102,292Total current assets\n2,526,7782,376,355\n\n"
             "Accounts payable$302,578$255,028Construction payable\n311,793474,807Other accrued liabilities\n"
             "2,151,0542,114,635Total current liabilities\n2,948,8823,138,297\n"
             "ehensive loss(8,556)(3,610)Total stockholders' equity\n")
    q = "Basing your judgments off of the balance sheet, what is the year end FY2018 amount of accounts payable?"
    payable = figures_in(glued, q)[0]
    assert payable.label == "Accounts payable" and payable.values == ("$302,578",)
    assert payable.read == "row 'Accounts payable', column '2018', in thousands"
    assert figures_in(glued, "What were accounts receivable, net in 2017?")[0].values == ("542,273",)
    assert figures_in(glued, "What were total current liabilities in 2018?")[0].values == ("2,948,882",)
    assert figures_in(glued, "What was the comprehensive loss in 2018?")[0].values == ("(8,556)",)
    assert parse_row("Form 10-K 2022 COVID-19 cases 1,000,000,000 2,000").label == "Form 10-K 2022 COVID-19 cases"


def test_a_header_whose_years_stand_on_lines_of_their_own_names_every_column() -> None:
    table = ("CONSOLIDATED STATEMENTS OF CASH FLOWS (In thousands)\nYear Ended December 31,\n2020\n"
             "2019 2018 Cash flows from operating activities:\nNet income (loss)\n"
             "$ 213,105 $ 375,446 $ (38,453) Net cash provided by operating activities\n"
             "381,603 465,699 295,080 Cash flows from investing activities:\n")
    best = figures_in(table, "How much cash did operating activities provide in FY2020?")[0]
    assert best.label == "Net cash provided by operating activities" and best.values == ("381,603",)
    assert best.columns == ("2020",) and best.read.endswith(", in thousands")
    loss = figures_in(table, "What was the net income (loss) in 2018?")[0]
    assert loss.values == ("$(38,453)",)  # "$ (38,453)" printed apart is one cell
    lone = "2022\n2021\n2020\nTotal revenues 66,608 62,286 58,158\n"  # one year a line
    assert figures_in(lone, "total revenues in 2021?")[0].values == ("62,286",)


def test_a_label_wrapped_onto_a_second_line_is_one_label() -> None:
    table = ("Twelve Months Ended June 30, 2022 Twelve Months Ended June 30, 2023\n"
             "Adjusted EBITDA 2,117 2,018\nPurchase of property, plant and equipment and\n"
             "other intangible assets (527) (526)\nMovement in working capital (154) (229)\n")
    best = figures_in(table, "What was the purchase of property, plant and equipment and other intangible assets "
                             "in FY2023?")[0]
    assert best.label == "Purchase of property, plant and equipment and other intangible assets"
    assert best.values == ("(526)",)


def test_cells_printed_apart_from_their_percent_sign_are_read() -> None:
    row = parse_row("Effective tax rate 21.6 % 24.6 % 27.0 %")
    assert row is not None and row.label == "Effective tax rate" and row.cells == ("21.6%", "24.6%", "27.0%")
    table = "(Millions, except percentages)\nYears Ended December 31, 2022 2021 2020\n" \
            "Pretax income 9,585 10,689 4,296\nEffective tax rate 21.6 % 24.6 % 27.0 %\n"
    best = figures_in(table, "How much has the effective tax rate changed between FY2021 and FY2022?")[0]
    assert best.text == "Effective tax rate, 2021: 24.6%; 2022: 21.6%; change from 2021 to 2022: -3.0 points (computed)"
    assert not best.read.endswith("millions")  # a rate is not an amount in the table's scale
    # a header printed a column a line, change columns ("2022 vs. 2021") after the years
    stacked = ("Years Ended December 31,\nChange\nChange\n(Millions, except percentages)\n2022\n2021\n2020\n"
               "2022 vs. 2021\n2021 vs. 2020\nNet income 7,514 8,060 3,135 (546) (7) 4,925 #\n"
               "Cash dividends declared per common share $ 2.08 $ 1.72 $ 1.72 $ 0.36 21 % $ — — %\n"
               "Effective tax rate 21.6 % 24.6 % 27.0 %\n")
    assert figures_in(stacked, "What was the net income in 2021?")[0].values == ("8,060",)
    rate = figures_in(stacked, "What was the effective tax rate in FY2020 and FY2022?")[0]
    assert rate.columns == ("2020", "2022") and rate.values == ("27.0%", "21.6%")
    assert figures_in(stacked, "What were cash dividends declared per common share in 2022?")[0].values == ("$2.08",)


RELEASE = """Reconciliation of Non-GAAP Measures
Three Months Ended June 30, 2022 Three Months Ended June 30, 2023
($ million)
Net income attributable to the company 109 181
Adjusted EBITDA 609 540

Twelve Months Ended June 30, 2022 Twelve Months Ended June 30, 2023
($ million)
Net income attributable to the company 805 1,048
Adjusted EBITDA 2,117 2,018
"""
"""A release that prints the fourth quarter's table first and the year's after it."""


def test_a_fiscal_year_question_reads_the_years_column_not_the_quarters() -> None:
    best = figures_in(RELEASE, "What was the adjusted EBITDA for FY 2023?")[0]
    assert best.values == ("2,018",) and best.columns == ("2023",)
    quarter = figures_in(RELEASE, "What was the adjusted EBITDA in the fourth quarter of 2023?")[0]
    assert quarter.values == ("540",) and quarter.columns == ("2023 (quarter)",)
    # a quarter's figure, when it is all there is, is read but named as the quarter's
    only = figures_in(RELEASE.split("\n\n")[0], "What was the adjusted EBITDA for FY 2023?")[0]
    assert only.values == ("540",) and only.text == "Adjusted EBITDA, 2023 (quarter): 540"
    both = ("Three Months Ended Twelve Months Ended\nJune 30,\n2023 2022 2023 2022\n"
            "Adjusted EBITDA 540 609 2,018 2,117\n")
    assert figures_in(both, "What was the adjusted EBITDA for FY 2023?")[0].values == ("2,018",)
    labelled = "Q4 2023 Q4 2022 FY2023 FY2022\nAdjusted EBITDA 540 609 2,018 2,117\n"  # each column says its kind
    assert figures_in(labelled, "What was the adjusted EBITDA for FY 2023?")[0].values == ("2,018",)
    assert figures_in(labelled, "What was the adjusted EBITDA in Q4 2023?")[0].values == ("540",)


def test_the_asking_clause_names_the_row_not_the_instructions_around_it() -> None:
    table = ("Years ended December 31, 2021 2020\nNet cash provided by operating activities 11,616 10,613\n"
             "Capital spending (4,625) (4,240)\nNet cash used for investing activities (3,269) (11,619)\n")
    q = ("Respond to the question by assuming the perspective of an investment analyst who can only use the "
         "details shown within the statement of cash flows from operating and investing activities. "
         "Here's the question: what is the FY2021 capital spending (in USD millions) for the company?")
    best = figures_in(table, q)[0]
    assert best.label == "Capital spending" and best.values == ("(4,625)",)
    # the statement named as where to look names no row
    income = ("Years ended 2022 2021\nIncome before income taxes 11,686 9,804\nRestructuring charges 411 247\n"
              "Net income 8,978 7,679\n")
    asked = ("What is the quantity of restructuring costs directly outlined in the company's income statements "
             "for FY2022? If restructuring costs are not explicitly outlined then state 0.")
    assert [f.values for f in figures_in(income, asked)] == [("411",)]


def test_a_quantity_is_found_under_the_name_the_statement_gives_it() -> None:
    table = ("Consolidated Statement of Cash Flows (Millions)\nYears ended December 31, 2018 2017 2016\n"
             "Net cash provided by operating activities 6,439 6,240 6,662\n"
             "Purchases of property, plant and equipment (PP&E) (1,577) (1,373) (1,420)\n"
             "Proceeds from sale of PP&E and other assets 262 49 58\n"
             "Net cash used in investing activities (222) (3,086) (1,403)\n")
    best = figures_in(table, "What is the FY2018 capital expenditure amount (in USD millions) for Northwind?")[0]
    assert best.label == "Purchases of property, plant and equipment (PP&E)" and best.values == ("(1,577)",)
    assert best.read == "row 'Purchases of property, plant and equipment (PP&E)', column '2018', in millions"
    cfo = figures_in(table, "What was the operating cash flow in FY2017?")[0]
    assert cfo.label == "Net cash provided by operating activities" and cfo.values == ("6,240",)
    assert figures_in(table, "What were the FY2018 dividends paid?") == []  # no row states them
    # a question that asks who or why names a period, not a quantity
    assert figures_in(table, "Who provided the net cash for operating activities in FY2018?") == []
    assert figures_in(table, "Why did the net cash provided by operating activities rise in FY2018?") == []


def test_a_change_the_question_asks_is_computed_from_the_row_and_marked_as_computed() -> None:
    table = ("(In millions)\nYears ended December 31, 2022 2021 2020\nNet sales 1,200 1,000 800\n"
             "Operating loss (50) 40 10\n")
    grew = figures_in(table, "What is the FY2020 - FY2022 net sales growth?")[0]
    assert grew.text == "Net sales, 2020: 800; 2022: 1,200; change from 2020 to 2022: +400, +50.0% (computed)"
    cagr = figures_in(table, "What is the 2 year net sales CAGR from FY2020 to FY2022?")[0]
    assert cagr.change == "compound annual growth from 2020 to 2022: +22.5% (computed)"
    loss = figures_in(table, "How did the operating loss change from 2021 to 2022?")[0]
    assert loss.change == "change from 2021 to 2022: -90, -225.0% (computed)"  # (50) is a loss: -50
    assert figures_in(table, "What were net sales in 2022 and 2021?")[0].change == ""  # no change asked
    assert figures_in(table, "How did net sales change in 2022?")[0].change == ""  # one period: nothing to compute


def test_a_figure_is_also_said_in_the_scale_the_question_asks_for() -> None:
    table = ("Consolidated Statement of Cash Flows\n(in millions)\n2021 2020 2019\n"
             "Capital spending (4,625) (4,240) (4,232)\nNet income $ 7,679 $ 7,175 $ 7,353\nEarnings per share $ 5.49 $ 5.12 $ 5.20\n")
    capex = figures_in(table, "What is the FY2021 capital spending (in USD billions)?")[0]
    assert capex.text == "Capital spending, 2021: (4,625) million = -4.625 billion"
    assert figures_in(table, "What was FY2020 net income? Answer in USD thousands.")[0].text == \
        "Net income, 2020: $7,175 million = 7,175,000 thousand"
    assert figures_in(table, "What was FY2020 net income in USD millions?")[0].text == "Net income, 2020: $7,175"
    eps = figures_in(table, "What were FY2020 earnings per share in USD billions?")[0]
    assert eps.text == "Earnings per share, 2020: $5.12"  # a per-share amount is not in the table's scale
    days = figures_in("(in millions)\n2021 2020\nDays payable outstanding 50 48\n", "What were days payable outstanding in 2020?")[0]
    assert days.values == ("48",) and days.scale == ""  # nor is a count of days


def test_the_offline_answer_leads_with_a_row_its_reader_split_over_two_lines(tmp_path: Path) -> None:
    text = "# Annual report\n\n## Item 8. Financial statements\n\n" + SHIFTED
    q = ("We need to calculate a financial metric by using information only provided within the balance sheet. "
         "Please answer the following question: what is the year end FY2018 net PP&E (in USD millions)?")
    first = _extract(tmp_path, text, q).quotes[0]
    assert first.text == "Property, plant and equipment, net, 2018: 12,645"
    assert first.read == "row 'Property, plant and equipment, net', column '2018', in millions"
    assert text[first.chunk.start_char:first.chunk.end_char] == "Property, plant and equipment, net\n12,645 12,672"


def test_a_figure_of_another_kind_of_period_does_not_lead_the_answer(tmp_path: Path) -> None:
    text = ("# Fourth quarter release\n\n## Results\n\nAdjusted EBITDA grew in the fourth quarter on higher volumes.\n\n"
            + RELEASE.split("\n\n")[0] + "\n")
    quotes = _extract(tmp_path, text, "What was the adjusted EBITDA for FY 2023?").quotes
    assert quotes[0].read is None  # a sentence leads: no column states the year's figure
    assert quotes[1].text == "Adjusted EBITDA, 2023 (quarter): 540"  # the quarter's, named as such
    year = _extract(tmp_path / "y", text.replace("Three Months", "Twelve Months"), "What was the adjusted EBITDA for "
                    "FY 2023?").quotes
    assert year[0].text == "Adjusted EBITDA, 2023: 540"


def test_sub_columns_under_each_year_make_a_figure_a_guess_but_change_columns_do_not() -> None:
    highlights = ("Adjusted non-GAAP results 2022 $ million 2023 $ million Reported ∆% Constant currency ∆%\n"
                  "EBITDA 2,117 2,018 (5) 1\n")
    ebitda = figures_in(highlights, "What was EBITDA for FY 2023?")[0]
    assert ebitda.values == ("2,018",) and ebitda.fits  # two years, then their change: one cell a year
    recon = ("Twelve Months Ended June 30, 2022 Twelve Months Ended June 30, 2023\n"
             "($ million) EBITDA EBIT Net Income EPS EBITDA EBIT Net Income EPS\n"
             "Adjusted EBITDA, EBIT, Net income and EPS 2,117 1,701 1,224 80.5 2,018 1,608 1,089 73.3\n")
    grouped = figures_in(recon, "What was adjusted EBITDA for FY 2023?")[0]
    assert not grouped.fits  # four cells a year: the second cell is not the year's EBITDA


def two_companies(tmp_path: Path):
    """An index of two companies' look-alike annual reports (Northwind's and Acme Rockets'), and its embedder."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from tests.test_doc_cards import filing

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "northwind.md").write_text(filing(2022, 418, 312), encoding="utf-8")
    (docs / "acme.md").write_text(filing(2022, 77, 66).replace("NORTHWIND TRADING", "ACME ROCKETS")
                                  .replace("Northwind", "Acme"), encoding="utf-8")
    emb = make_embedder("hash", Config())
    build_index(docs, tmp_path / "index", Config(), emb)
    return load_index(tmp_path / "index"), emb


def test_no_figure_is_read_from_another_companys_filing(tmp_path: Path) -> None:
    from config import Config
    from retrieval.extractive import extract
    from retrieval.query import Query
    from retrieval.types import RetrievedChunk

    index, emb = two_companies(tmp_path)

    def first_read(question: str, doc: str) -> str | None:
        ranked = [RetrievedChunk(c, 1.0, {}, row=r) for r, c in enumerate(index.chunks) if c.doc_path == doc]
        quotes = extract(Query.build(question, emb), ranked, index, emb, Config()).quotes
        return next((q.text for q in quotes if q.read), None)

    q = "What were Acme Rockets' capital expenditures in FY2022?"
    assert first_read(q, "acme.md") == "Capital expenditures, 2022: 77"
    assert first_read(q, "northwind.md") is None  # Northwind's row states Northwind's figure
    assert first_read("What were the capital expenditures in FY2022?", "northwind.md") == \
        "Capital expenditures, 2022: 418"  # no company named: any filing may answer


def test_a_header_stacked_one_piece_a_line_with_blank_lines_between() -> None:
    """A PDF extraction may give each piece of a column header its own line ("Years Ended" /
    "December 2," / "2022" / blank / "December 3," / "2021"): the pieces are one header."""
    text = ("(In millions, except per share data)\n\nYears Ended\nDecember 2,\n2022\n\nDecember 3,\n2021\n\n"
            "November 27,\n2020\nRevenue:\nTotal revenue 17,606 15,785 12,868\n\nOperating income 6,098 5,802 4,237\n")
    best = figures_in(text, "What was the operating income in FY2022 and FY2021?")[0]
    assert best.text == "Operating income, 2022: 6,098; 2021: 5,802"
    assert best.read == "row 'Operating income', columns '2022', '2021', in millions"
    # a blank line under a table's last row is no piece of the next table's header
    two = "Segment 2022 2021\nTotal 5 6\n\n2020 2019\nRevenue 10 9\n"
    assert figures_in(two, "What was the revenue in 2020?")[0].columns == ("2020",)
