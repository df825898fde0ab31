"""The offline answer reads a figure from a table row: the asked quantity, the asked period, and
which row and column it read; and the answer check's number normalisation."""
from __future__ import annotations

from pathlib import Path

from config import Config
from evaluation.answer_check import CheckQuestion, check_one, checkable_figures
from evaluation.figures import contains_figure, figures, reference_figures
from indexing.embedders.factory import make_embedder
from retrieval.extractive import extract
from retrieval.figure_rows import asked_periods, figures_in, header_periods, parse_row
from retrieval.query import Query
from retrieval.synthesizer import extractive_text
from retrieval.types import RetrievedChunk
from utils.tokenizer import tokenize

STATEMENT = """Segment results

2022 2021 2020
Boeing Capital $2 $23 $32
Other Boeing 5 8 (8)
Total $7 $31 $24

Consolidated Statements of Operations
(Dollars in millions, except per share data)
Years ended December 31, 2022 2021 2020
Sales of products $55,893 $51,386 $47,142
Sales of services 10,715 10,900 11,016

Total revenues 66,608 62,286 58,158

Cost of products (53,969) (49,954) (54,568)
Research and development expense, net (2,852) (2,249) (2,476)
Net loss attributable to shareholders ($4,935) ($4,202) ($11,873)
"""
REVENUE_Q = "What was Boeing's total revenue in 2022, and how did it compare with 2021?"


def test_a_row_is_a_label_and_numbers_and_a_header_names_periods() -> None:
    row = parse_row("Total current assets.............. 4,821,892 4,602,328")
    assert row is not None and row.label == "Total current assets" and row.cells == ("4,821,892", "4,602,328")
    assert parse_row("Net loss ($4,935) ($4,202) ($11,873)").cells == ("($4,935)", "($4,202)", "($11,873)")
    assert parse_row("Revenues increased by $4,322 million in 2022 compared with 2021.") is None  # prose
    assert parse_row("Years ended December 31, 2022 2021 2020") is None  # a header, not a row
    assert header_periods("Years ended December 31, 2022 2021 2020") == ["2022", "2021", "2020"]
    assert header_periods("Three months ended July 2, 2023 July 3, 2022") == ["2023", "2022"]
    assert header_periods("Total revenues 66,608 62,286") == []
    assert asked_periods("capex in FY2018 vs FY17 and fiscal 2016") == ["2018", "2017", "2016"]


def test_the_asked_row_and_columns_are_read_not_the_first_table() -> None:
    found = figures_in(STATEMENT, REVENUE_Q)
    best = found[0]
    assert best.label == "Total revenues" and best.columns == ("2022", "2021")
    assert best.values == ("66,608", "62,286")
    assert best.text == ("Total revenues, 2022: 66,608; 2021: 62,286; change from 2021 to 2022: +4,322, +6.9% (computed)")
    assert best.read == "row 'Total revenues', columns '2022', '2021', in millions"  # the scale the table states
    assert STATEMENT[best.start:best.end] == "Total revenues 66,608 62,286 58,158"


def test_the_period_picks_the_column_and_no_period_reads_the_latest() -> None:
    rd = figures_in(STATEMENT, "What was the research and development expense in 2020?")[0]
    assert rd.values == ("(2,476)",) and rd.columns == ("2020",)
    latest = figures_in(STATEMENT, "How much were the sales of services?")[0]
    assert latest.label == "Sales of services" and latest.columns == ("2022",) and latest.values == ("10,715",)


def test_no_figure_when_nothing_matches_or_nothing_is_asked() -> None:
    assert figures_in(STATEMENT, "Who are the primary customers?") == []
    assert figures_in(STATEMENT, "What was the total revenue in 2015?") == []  # no such column
    assert figures_in("Total revenues 66,608 62,286\n", REVENUE_Q) == []  # no header: the column is unknown
    # a span limits the rows to the part the answer may quote; the header above it is still read
    cut = STATEMENT.index("Cost of products")
    assert all(f.start >= cut for f in figures_in(STATEMENT, "research and development expense 2021",
                                                 span=(cut, len(STATEMENT))))


def _index(tmp_path: Path, text: str):
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    src = tmp_path / "filing.md"
    src.write_text(text, encoding="utf-8")
    build_index(src, tmp_path / "index", Config(), make_embedder("hash", Config()))
    return load_index(tmp_path / "index")


def test_the_offline_answer_leads_with_the_figure_and_says_where_it_read_it(tmp_path: Path) -> None:
    text = ("# Annual report\n\n## Item 7. Management's discussion\n\n" + STATEMENT.split("Consolidated")[0]
            + "\n## Item 8. Financial statements\n\nConsolidated" + STATEMENT.split("Consolidated")[1])
    index = _index(tmp_path, text)
    emb = make_embedder("hash", Config())
    ranked = [RetrievedChunk(index.chunks[r], 1.0 - r / 10, {}, row=r) for r in range(len(index.chunks))]
    ex = extract(Query.build(REVENUE_Q, emb), ranked, index, emb, Config())
    first = ex.quotes[0]
    assert first.read == "row 'Total revenues', columns '2022', '2021', in millions"
    assert first.text.startswith("Total revenues, 2022: 66,608; 2021: 62,286; change from 2021 to 2022")
    assert text[first.chunk.start_char:first.chunk.end_char] == "Total revenues 66,608 62,286 58,158"
    assert first.chunk.heading_path.endswith("Item 8. Financial statements")
    line = extractive_text(REVENUE_Q, [{"ranks": first.ranks, "text": first.text, "citation": "filing.md:L20",
                                        "heading_path": "Item 8", "read": first.read}]).splitlines()[1]
    assert ("Total revenues, 2022: 66,608; 2021: 62,286; change from 2021 to 2022: +4,322, +6.9% (computed) "
            "(row 'Total revenues', columns '2022', '2021', in millions;") in line


def test_a_question_without_a_matching_row_gets_no_figure_quote(tmp_path: Path) -> None:
    index = _index(tmp_path, "# Report\n\nThe company sells airplanes to airlines around the world.\n")
    emb = make_embedder("hash", Config())
    ranked = [RetrievedChunk(index.chunks[0], 1.0, {}, row=0)]
    ex = extract(Query.build("Who are the customers?", emb), ranked, index, emb, Config())
    assert ex.quotes and all(q.read is None for q in ex.quotes)


# --------------------------------------------------------------------------- the answer check's numbers

def test_numbers_are_one_figure_whatever_their_units() -> None:
    ref = reference_figures("Restructuring costs amounted to $1,577 million in FY2022.")
    assert [f.literal for f in ref] == ["$1,577 million"]  # the year is not a figure
    for said in ("1577", "1,577", "1.577 billion", "$1,577 million", "1,577,000 thousand"):
        assert contains_figure(said, ref[0]), said
    assert not contains_figure("1,578", ref[0])
    # rounding as the reference prints it; a short figure must match in the same units
    assert contains_figure("12,645", reference_figures("$12645.00")[0])
    assert not contains_figure("690 and 6,900", reference_figures("0.69")[0])
    assert contains_figure("ratio 0.69", reference_figures("0.69")[0])
    assert [f.value for f in figures("FY2021 Q2 2023 (4,187)")] == [4187.0]


def test_a_question_is_checked_only_when_its_evidence_states_the_figure() -> None:
    q = CheckQuestion("q1", "total revenue 2022?", ("a.pdf",), "Total revenues 66,608 62,286", ("$66,608 million",))
    assert [f.literal for f in checkable_figures(q)] == ["$66,608 million"]
    said = {"answer_quotes": [{"text": "Total revenues, 2022: 66,608", "doc_path": "a.pdf", "read": "row"}]}
    res = check_one(q, said)
    assert res.answered and res.quote_in_evidence_doc and res.first_read == "row"
    # the citation's page and year are not read as figures
    miss = check_one(q, {"answer": "see a.pdf:p66608", "answer_quotes": [{"text": "Revenue grew.", "doc_path": "b.pdf"}]})
    assert miss.figures and not miss.answered and not miss.quote_in_evidence_doc
    computed = CheckQuestion("q2", "ratio?", ("a.pdf",), "Total revenues 66,608 62,286", ("1.07",))
    assert checkable_figures(computed) == []


def test_a_sentence_stating_a_figure_for_the_asked_period_is_preferred(tmp_path: Path) -> None:
    from retrieval.figure_rows import states_figure_for

    assert states_figure_for("Revenues increased by $4,322 million in 2022 compared with 2021.", ["2022"])
    assert not states_figure_for("In 2022 we hired engineers in 2021 offices.", ["2022"])  # years only
    assert not states_figure_for("Revenues increased by $4,322 million.", ["2022"])  # no period
    prose = ("# Report\n\n## Results\n\nRevenue in 2022 came from deliveries. "
             "Revenue increased by $4,322 million in 2022 compared with the year before. "
             "Our offices moved twice. The board met in spring. Revenue in 2022 reflects demand.\n")
    index = _index(tmp_path, prose)
    emb = make_embedder("hash", Config())
    ranked = [RetrievedChunk(index.chunks[r], 1.0, {}, row=r) for r in range(len(index.chunks))]
    ex = extract(Query.build("What was the revenue in 2022?", emb), ranked, index, emb, Config())
    a, b = ex.quotes[0].best_span  # the quote's best sentence
    assert prose[a:b].startswith("Revenue increased by $4,322 million in 2022")


def test_a_total_row_is_read_with_its_section_heading() -> None:
    table = ("(Dollars in millions)\nYears ended December 31, 2022 2021 2020\nCommercial Airplanes $25,867 $19,493 $16,162\n"
             "Global Services 17,611 16,328 15,543\nTotal $66,608 $62,286 $58,158\n")
    assert figures_in(table, REVENUE_Q) == []  # "Total" alone does not say what it counts
    best = figures_in(table, REVENUE_Q, section="Revenues")[0]
    assert best.values == ("$66,608", "$62,286") and best.under == "Revenues"
    assert best.text.startswith("Total (Revenues), 2022: $66,608; 2021: $62,286; change from 2021 to 2022")
    assert best.read == "row 'Total' of the table under 'Revenues', columns '2022', '2021', in millions"
    # a label that says it alone is not re-read with its section
    own = figures_in(STATEMENT, REVENUE_Q, section="Consolidated Statements of Operations")[0]
    assert own.label == "Total revenues" and own.under == ""
    # a statement's title names the table, not what a row of it counts: "Other, net" of the cash flow
    # statement is not "free cash flow"
    cash = "Years ended December 31, 2020 2019\nOther, net 45.9 (19.8)\n"
    fcf = "What is the FY2020 free cash flow of General Mills?"
    weights = {t: 0.2 if t == "free" else 2.0 for t in tokenize(fcf)}  # "free": in many of the filing's chunks
    names = {"general", "mill"}  # the card's: they name the filing, not a row
    assert figures_in(cash, fcf, weights, None, names, "Cash flow items")[0].under == "Cash flow items"
    assert figures_in(cash, fcf, weights, None, names, "Consolidated Statements of Cash Flows") == []
