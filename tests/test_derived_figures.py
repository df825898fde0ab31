"""The offline answer computes a measure no row prints (working capital, the current ratio, a margin,
free cash flow) from the two rows of one statement that define it, and says which rows it read."""
from __future__ import annotations

from pathlib import Path

from config import Config
from indexing.embedders.factory import make_embedder
from retrieval.derived_figures import asked_measure, derive, read_periods
from retrieval.extractive import extract
from retrieval.query import Query
from retrieval.types import RetrievedChunk

SHEET = """(In millions) December 31, 2022 2021
Cash and cash equivalents 1,671 2,148
Total current assets 8,730 9,234
Accounts payable 1,804 1,612
Total current liabilities 6,452 5,927
Total assets 29,499 30,154
"""
INCOME = """($ in millions) Years ended June 30, 2023 2022 2021
Net sales 14,694 14,544 12,861
Cost of sales (11,969) (11,724) (10,129)
Gross profit 2,725 2,820 2,732
"""
CASH = """(In millions) Fiscal Year 2020 2019
Net cash provided by operating activities 3,676.2 2,807.0
Purchases of property, plant and equipment (460.8) (537.6)
"""


def _derive(question: str, text: str):
    measure = asked_measure(question)
    assert measure is not None, question
    return derive(measure, question, [(text, 0, [(0, len(text))])])


def test_working_capital_and_the_current_ratio_from_the_balance_sheets_rows() -> None:
    d = _derive("Does Corning have positive working capital based on FY2022 data?", SHEET)
    assert d.values == ("2,278",)
    assert d.text == ("Working capital (computed: Total current assets less Total current liabilities), "
                      "2022: 2,278 (8,730 less 6,452)")
    assert d.read == "rows 'Total current assets' and 'Total current liabilities', column '2022', in millions"
    ratio = _derive("What is the FY2021 working capital ratio? Define it as total current assets divided by "
                    "total current liabilities.", SHEET)
    assert ratio.measure.name == "Current ratio" and ratio.values == ("1.56",)
    # a change asked of one year reads the year before too
    assert _derive("Has the working capital improved in FY2022?", SHEET).change == \
        "change from 2021 to 2022: -1,029, -31.1% (computed)"


def test_a_margin_and_its_change_in_points_from_unrounded_values() -> None:
    d = _derive("Does AMCOR have an improving gross margin profile as of FY2023?", INCOME)
    assert d.values == ("18.5%", "19.4%")
    assert d.change == "change from 2022 to 2023: -0.8 points (computed)"  # 18.545% - 19.389%, not 18.5 - 19.4


def test_free_cash_flow_takes_capital_expenditure_as_the_outflow_it_is() -> None:
    d = _derive("What is the FY2020 free cash flow?", CASH)
    assert d.values == ("3,215.4",) and d.second.label == "Purchases of property, plant and equipment"


def test_no_measure_is_computed_from_a_guess() -> None:
    # only one of the two rows: nothing (the liabilities row is not a row of "total current assets")
    half = "\n".join(ln for ln in SHEET.splitlines() if "Total current assets" not in ln)
    assert _derive("What was the FY2022 working capital?", half) is None
    # a margin from a printed gross profit row only, never from revenue less some cost rows
    no_gross = "\n".join(ln for ln in INCOME.splitlines() if "Gross profit" not in ln)
    assert _derive("What was the FY2023 gross margin?", no_gross) is None
    # a quarter asked: a year-to-date table's columns are not the quarter's
    assert read_periods("What was the Q2 FY2023 working capital?") is None
    assert read_periods("What is the working capital?") is None  # no year: the column is not known
    assert asked_measure("What were the total revenues in 2022?") is None


def _index(tmp_path: Path, text: str):
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "filing.md"
    src.write_text(text, encoding="utf-8")
    build_index(src, tmp_path / "index", Config(), make_embedder("hash", Config()))
    return load_index(tmp_path / "index")


def test_the_offline_answer_leads_with_the_computed_measure_from_the_statement(tmp_path: Path) -> None:
    """The company's own balance sheet, not the same-titled statement a note prints for a part of the
    group, even when the note's ranks first; and a row that prints the measure is read as printed."""
    part = SHEET.replace("8,730", "1,001").replace("6,452", "577")
    text = ("# Annual report\n\n## Item 8. Financial statements\n\n### Consolidated Balance Sheets\n\n" + SHEET
            + "\n### Note 22 - Deed of Cross Guarantee\n\nThe closed group's statements follow.\n\n"
            "### Consolidated Balance Sheets\n\n" + part)
    index = _index(tmp_path, text)
    emb = make_embedder("hash", Config())
    question = "Does the company have positive working capital based on FY2022 data?"
    ranked = [RetrievedChunk(index.chunks[r], 1.0, {}, row=r) for r in reversed(range(len(index.chunks)))]
    first = extract(Query.build(question, emb), ranked, index, emb, Config()).quotes[0]
    assert first.text.startswith("Working capital (computed: Total current assets less Total current liabilities), "
                                 "2022: 2,278 (8,730 less 6,452)")
    assert first.label == "Working capital" and first.read.startswith("rows 'Total current assets'")
    printed = _index(tmp_path / "printed", "# Report\n\n## Liquidity\n\n(In millions) 2022 2021\n"
                     "Working capital 2,278 3,307\n\n## Consolidated Balance Sheets\n\n" + SHEET)
    ranked = [RetrievedChunk(printed.chunks[r], 1.0, {}, row=r) for r in range(len(printed.chunks))]
    first = extract(Query.build(question, emb), ranked, printed, emb, Config()).quotes[0]
    assert first.text.startswith("Working capital, 2022: 2,278") and "computed:" not in first.text


ASSETS = """(In millions) December 31, 2022 2021
Cash and cash equivalents 85 116
Total current assets 1,250 1,554
Property, plant and equipment, net 24,000 22,500
Total assets 26,075 24,766
"""
LIABILITIES = """(In millions) December 31, 2022 2021
Short-term debt 1,175 584
Accounts payable 1,636 1,176
Total current liabilities 2,811 2,760
Long-term debt 11,936 10,341
Total liabilities 19,200 18,000
"""


def test_a_statement_continued_on_its_next_page_and_the_rows_the_context_reads(tmp_path: Path) -> None:
    """A balance sheet whose liabilities page the reader made a section of its own (the same title
    twice): working capital is computed across the two, and the context reads the two rows first,
    though the list ranks neither (the liabilities lie far below the statement's title)."""
    from retrieval.pool_lead import measure_rows

    filler = "\n".join(f"Other asset line {i} {i * 10} {i * 9}" for i in range(1, 40))
    text = ("# Annual report\n\n## Item 8. Financial statements\n\n### Consolidated Balance Sheets\n\n"
            + ASSETS.replace("Property, plant", filler + "\nProperty, plant")
            + "\n### Consolidated Balance Sheets\n\n" + LIABILITIES
            + "\n### Note 1 - Basis of presentation\n\nWorking capital is managed centrally across the group.\n")
    index = _index(tmp_path, text)
    emb = make_embedder("hash", Config())
    question = Query.build("Does the company have positive working capital based on FY2022 data?", emb)
    note = [r for r, c in enumerate(index.chunks) if "Note 1" in c.heading_path]
    top = [r for r, c in enumerate(index.chunks) if "(In millions)" in c.text][:1]
    pool = [RetrievedChunk(index.chunks[r], 1.0, {}, row=r) for r in note + top]
    led = measure_rows(question, pool, index)
    assert [t for rc in led[:2] for t in ("Total current assets", "Total current liabilities") if t in rc.chunk.text] \
        == ["Total current assets", "Total current liabilities"]
    first = extract(question, led, index, emb, Config()).quotes[0]
    assert first.text.startswith("Working capital (computed: Total current assets less Total current liabilities), "
                                 "2022: -1,561 (1,250 less 2,811)")
    # the list reaching no section titled as the balance sheet: nothing is led
    assert measure_rows(question, pool[:1], index) == pool[:1]
