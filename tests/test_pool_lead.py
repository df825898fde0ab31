"""What the context reads first: each named statement from its top, and the table row that states the
asked figure before everything."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import Index, load_index
from retrieval.query import Query
from retrieval.pool_lead import named_starts, row_lead
from retrieval.types import RetrievedChunk

ROW = "Effective tax rate 23% 20%"


def filing(company: str) -> str:
    """An annual report whose MD&A talks about the effective tax rate in many sentences (each sharing
    more words with the question than the row does) and states it once, in a table row."""
    talk = "".join(
        f"### {why.capitalize()}\n\nThe effective tax rate of {company} changed in {year} because of {why}; the "
        f"effective tax rate between 2021 and 2022 is discussed with the tax authorities.\n\n"
        for year, why in (("2022", "tax reserves"), ("2021", "tax credits"), ("2022", "foreign earnings"),
                          ("2021", "share-based compensation"), ("2022", "valuation allowances")))
    business = "".join(f"### {topic}\n\nOur {topic.lower()} segment {what}.\n\n" for topic, what in (
        ("Optical", "makes fiber and cable for carrier networks and data centers"),
        ("Display", "supplies glass substrates to panel makers in Asia"),
        ("Specialty", "sells cover glass for phones, tablets and watches"),
        ("Environmental", "produces ceramic substrates for gasoline and diesel engines"),
        ("Life sciences", "provides lab ware, cell culture and bioprocess vessels")))
    return (f"# {company} annual report 2022\n\nFORM 10-K\n\nFor the fiscal year ended December 31, 2022\n\n"
            f"{company.upper()} INCORPORATED\n(Exact name of registrant as specified in its charter)\n\n"
            f"## Item 1. Business\n\n{business}"
            "## Item 7. Management's discussion and analysis\n\n### Results of operations\n\n"
            "The following table presents selected highlights from our operations (in millions):\n\n"
            "Year ended December 31, 2022 2021\nNet sales $ 14,189 $ 14,082\n"
            f"Provision for income taxes $ (411) $ (491)\n{ROW}\n\n{talk}"
            "## Item 8. Financial statements\n\n" + statement("Operations", ["Net sales", "Cost of sales",
                                                                         "Gross margin", "Research costs"])
            + statement("Cash Flows", ["Net income", "Depreciation", "Capital expenditures", "Dividends paid"])
            + "### Notes\n\n#### Statement of Cash Flows\n\nSupplemental cash flow information: interest paid "
              "and income taxes paid, and the capital expenditures accrued but not yet paid, 2022 2021.\n\n")


FOOTER = "The accompanying notes are an integral part of these consolidated financial statements."


def statement(name: str, rows: list[str]) -> str:
    """A statement as a filing prints it: title, column header, rows, and the footer every statement
    repeats (whose words a question naming the statement shares)."""
    lines = "".join(f"{row} {1000 + 37 * i:,} {990 + 29 * i:,}\n" for i, row in enumerate(rows * 3))
    return (f"### Consolidated Statements of {name}\n\nYears ended December 31, 2022 2021\n{lines}\n"
            f"{FOOTER}\n\n")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    docs = tmp_path_factory.mktemp("rows") / "docs"
    docs.mkdir()
    (docs / "corning.md").write_text(filing("Corning"), encoding="utf-8")
    (docs / "northwind.md").write_text(filing("Northwind"), encoding="utf-8")
    out = docs.parent / "index"
    build_index(docs, out, Config(), make_embedder("hash", Config()))
    return load_index(out)


QUESTION = "How much has the effective tax rate of Corning changed between FY2021 and FY2022?"


def _pool(index: Index, first: str = "corning.md") -> list[RetrievedChunk]:
    """The MD&A's chunks, ``first``'s document first, its talk about the rate before its table (the order
    a ranking by the question's words gives: the row shares three of them, each sentence many more)."""
    mdna = [c for c in index.chunks if "> Item 7." in c.heading_path]
    chunks = sorted(mdna, key=lambda c: (c.doc_path != first, ROW in c.text, c.start_char))
    return [RetrievedChunk(c, 1.0 / (i + 1), {}) for i, c in enumerate(chunks)]


def _row_position(pool: list[RetrievedChunk], doc: str = "corning.md") -> int:
    return next(i for i, rc in enumerate(pool) if ROW in rc.chunk.text and rc.chunk.doc_path == doc)


def _asked(question: str) -> Query:
    return Query.build(question, make_embedder("hash", Config()))


def test_the_row_that_states_the_asked_figure_is_read_first(index: Index) -> None:
    pool = _pool(index)
    assert _row_position(pool) > 3
    led = row_lead(_asked(QUESTION), pool, index, Config())
    assert ROW in led[0].chunk.text and led[0].chunk.doc_path == "corning.md"
    assert sorted(id(rc) for rc in led) == sorted(id(rc) for rc in pool)  # moved, nothing added or lost
    rest = [rc for rc in pool if rc is not led[0]]
    assert led[1:] == rest  # the others keep their order


@pytest.mark.parametrize("question", [
    "Why did the effective tax rate of Corning change?",  # asks for no quantity
    "Who sets the effective tax rate of Corning in FY2022?",  # asks who
])
def test_no_row_leads_where_the_question_asks_no_figure_of_this_document(index: Index, question: str) -> None:
    pool = _pool(index)
    assert row_lead(_asked(question), pool, index, Config()) == pool


def test_only_the_named_company_s_row_is_read(index: Index) -> None:
    """Both filings state the row in the same words; the better-ranked one is the other company's."""
    pool = _pool(index)
    assert _row_position(pool, "corning.md") < _row_position(pool, "northwind.md") < 20
    asked = _asked("How much has the effective tax rate of Northwind changed between FY2021 and FY2022?")
    led = row_lead(asked, pool, index, Config())
    assert ROW in led[0].chunk.text and led[0].chunk.doc_path == "northwind.md"


def test_a_row_below_the_depth_looked_at_is_left_where_it_is(index: Index) -> None:
    pool = _pool(index)
    at = _row_position(pool)
    assert row_lead(_asked(QUESTION), pool, index, Config(), depth=at) == pool
    assert row_lead(_asked(QUESTION), pool, index, Config(), depth=at + 1)[0] is pool[at]


def test_the_answer_reads_the_row_and_says_which_row_and_column(index: Index, monkeypatch) -> None:
    """Through the query pipeline: the answer's first quote is the row, read under the asked years;
    without the lead the rate's talk fills the context and no row is quoted."""
    from pipeline import make_backends, run_pipeline
    import pipeline

    cfg = Config(context_budget_chars=600)
    rec = run_pipeline(QUESTION, index, cfg, make_backends(index, cfg, None))
    first = rec.answer.quotes[0]
    assert first.text.startswith("Effective tax rate, 2021: 20%; 2022: 23%")
    assert first.doc_path == "corning.md"
    monkeypatch.setattr(pipeline, "lead_pool", lambda q, pool, *a, **k: list(pool))
    rec = run_pipeline(QUESTION, index, cfg, make_backends(index, cfg, None))
    assert not rec.answer.quotes[0].text.startswith("Effective tax rate, 2021")


NAMING = ("Using the statement of cash flows and the income statement, what was Corning's capital "
          "expenditure as a share of net sales in 2022?")


def _statements_pool(index: Index, with_firsts: bool = True) -> list[RetrievedChunk]:
    """Corning's statement chunks as a ranking by shared words lists them: each statement's footer
    first, then the rows from the bottom up (the first chunks, title and header, last or not at all)."""
    chunks = [c for c in index.chunks if c.doc_path == "corning.md" and "> Item 8." in c.heading_path]
    firsts = {min((c for c in chunks if c.source_node_id == n), key=lambda c: c.start_char).chunk_id
              for n in {c.source_node_id for c in chunks}}
    ordered = sorted(chunks, key=lambda c: (FOOTER not in c.text, -c.start_char))
    if not with_firsts:
        ordered = [c for c in ordered if c.chunk_id not in firsts]
    return [RetrievedChunk(c, 1.0 / (i + 1), {}) for i, c in enumerate(ordered)]


def _is_first(index: Index, rc: RetrievedChunk) -> bool:
    rows = index.leaf_rows[rc.chunk.source_node_id]
    return index.chunks[rows[0]].chunk_id == rc.chunk.chunk_id


def test_each_named_statement_is_read_from_its_top(index: Index) -> None:
    pool = _statements_pool(index)
    assert not _is_first(index, pool[0]) and FOOTER in pool[0].chunk.text
    led = named_starts(_asked(NAMING), pool, index)
    heads = [rc.chunk.heading_path.rsplit(" > ", 1)[-1] for rc in led[:2]]
    order = list(dict.fromkeys(rc.chunk.heading_path.rsplit(" > ", 1)[-1] for rc in pool))
    assert heads == order[:2]  # both statements, in the order the list reaches them
    assert all(_is_first(index, rc) and rc.chunk.text.startswith("Years ended December 31, 2022 2021")
               for rc in led[:2])
    assert sorted(rc.chunk.chunk_id for rc in led) == sorted(rc.chunk.chunk_id for rc in pool)
    assert led[2:] == [rc for rc in pool if rc not in led[:2]]


def test_a_statement_s_top_the_list_lacks_is_read_from_the_index(index: Index) -> None:
    pool = _statements_pool(index, with_firsts=False)
    led = named_starts(_asked(NAMING), pool, index)
    assert len(led) == len(pool) + 2 and all(_is_first(index, rc) for rc in led[:2])
    best = {rc.chunk.source_node_id: rc.score for rc in reversed(pool)}
    assert all(rc.score == best[rc.chunk.source_node_id] for rc in led[:2])  # its section's best standing


@pytest.mark.parametrize("question, depth", [
    ("What were Corning's research costs in 2022?", 20),  # names no statement, nor a measure of one
    ("Using the balance sheet, what were Corning's total assets in 2022?", 20),  # names one it lacks
    (NAMING, 0),  # the statements lie below the depth looked at
])
def test_no_statement_is_led_that_the_question_does_not_name_or_the_list_does_not_reach(
        index: Index, question: str, depth: int) -> None:
    pool = _statements_pool(index)
    assert named_starts(_asked(question), pool, index, depth=depth) == pool


def test_a_measure_read_from_a_statement_leads_that_statement(index: Index) -> None:
    """"Capital expenditure" is read from the cash flow statement: its top leads, the income statement's
    does not."""
    led = named_starts(_asked("What was Corning's capital expenditure in 2022?"), _statements_pool(index), index)
    assert _is_first(index, led[0]) and led[0].chunk.heading_path.endswith("> Consolidated Statements of Cash Flows")
    assert not _is_first(index, led[1])


def test_the_statement_itself_leads_not_a_note_of_the_same_name(index: Index) -> None:
    """A note titled "Statement of Cash Flows" (its supplemental information) ranked before the
    consolidated statement: the statement's top is read, once, and the note keeps its place."""
    pool = _statements_pool(index)
    note = [rc for rc in pool if rc.chunk.heading_path.endswith("> Statement of Cash Flows")]
    assert note
    pool = note + [rc for rc in pool if rc not in note]
    led = named_starts(_asked("What was Corning's capital expenditure in 2022?"), pool, index)
    assert led[0].chunk.heading_path.endswith("> Consolidated Statements of Cash Flows") and _is_first(index, led[0])
    assert led[1:] == [rc for rc in pool if rc is not led[0]]
