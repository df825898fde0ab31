"""Sections a question names by their common name: the balance sheet, the P&L, the cash flow statement."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index
from retrieval import named_sections, node_locator
from retrieval.candidates import NAMED_LEAD, flat_lead, named_lead, union_candidates
from retrieval.named_sections import KINDS, named_kinds, searched_text, titled_leaf
from retrieval.node_locator import hybrid_locate
from retrieval.query import Query
from retrieval.rankers import union_signals
from utils.tokenizer import tokenize

BALANCE, INCOME, CASH = KINDS


@pytest.mark.parametrize("question, kinds", [
    ("Please utilize information provided primarily within the balance sheet and the cash flow statement.",
     ["balance sheet", "cash flow statement"]),
    ("by relying on the details shown in the statement of financial position and the P&L statement",
     ["balance sheet", "income statement"]),
    ("Answer using the statement of income.", ["income statement"]),
    ("Use the income statement and the statement of cash flows.", ["income statement", "cash flow statement"]),
    ("根据合并资产负债表和利润表计算", ["balance sheet", "income statement"]),
    ("What drove operating income? Who audits the company?", []),
    ("Does the company have off-balance sheet arrangements?", []),
    # no statement named: the one whose lines the asked measure is read from
    ("Does Boeing have an improving gross margin profile as of FY2022?", ["income statement"]),
    ("Does Amcor have positive working capital based on FY2023 data?", ["balance sheet"]),
    ("What is the FY2021 capital expenditure amount (in USD millions) for 3M?", ["cash flow statement"]),
    ("What is the current ratio and the free cash flow?", ["balance sheet", "cash flow statement"]),
    ("这家公司的毛利率是多少？", ["income statement"]),
    # a statement named by name decides, whatever measures the question asks
    ("Using the balance sheet, what is the inventory turnover ratio (COGS / average inventory)?", ["balance sheet"]),
])
def test_the_question_names_a_statement(question: str, kinds: list[str]) -> None:
    assert [k.name for k in named_kinds(question)] == kinds


@pytest.mark.parametrize("heading, kind", [
    ("Consolidated Balance Sheets", BALANCE), ("CONDENSED CONSOLIDATED BALANCE SHEETS", BALANCE),
    ("Consolidated Statements of Financial Position", BALANCE), ("A-5 - Condensed Consolidated Balance Sheet", BALANCE),
    ("合并资产负债表", BALANCE), ("Consolidated Statements of Operations", INCOME),
    ("Consolidated Statements of Earnings GENERAL MILLS, INC. AND SUBSIDIARIES", INCOME),
    ("Consolidated Statement of Cash Flows (intro)", CASH),
    ("Consolidated Balance Sheet Data:", None), ("Consolidated Statements of Comprehensive Income", None),
    ("NOTE 9 - OTHER CONSOLIDATED BALANCE SHEET COMPONENTS", None), ("Off-Balance Sheet Arrangements", None),
    ("Analysis of the Consolidated Statements of Cash Flows", None),
])
def test_a_heading_is_a_statement_title(heading: str, kind: named_sections.SectionKind | None) -> None:
    assert [k for k in KINDS if k.titled.match(heading)] == ([kind] if kind else [])


def test_the_consolidated_statement_is_chosen_over_a_subsection_of_the_same_name() -> None:
    headings = [(1, "Statement of Cash Flows", 0.9), (2, "Consolidated Statement of Cash Flows", 0.2),
                (3, "Consolidated Statements of Cash Flows (intro)", 0.4), (4, "Liquidity", 1.0)]
    assert titled_leaf(CASH, headings) == 3
    assert titled_leaf(CASH, headings[:1]) == 1
    assert titled_leaf(BALANCE, headings) is None


def filing(year: int) -> str:
    """An annual report whose MD&A repeats the question's words in every subsection and whose balance sheet
    is titled as the company titles it, in words the question does not use."""
    mdna = "".join(
        f"### {topic}\n\nOur {topic.lower()} discussion of {year}: net property, plant and equipment on the "
        f"balance sheet grew with {topic.lower()} investment, and the balance sheet stayed strong.\n\n"
        for topic in ("Overview", "Liquidity", "Capital resources", "Segments", "Outlook", "Critical estimates"))
    return (f"# Northwind annual report {year}\n\nFORM 10-K\n\nFor the fiscal year ended December 31, {year}\n\n"
            "NORTHWIND TRADING CORPORATION\n(Exact name of registrant as specified in its charter)\n\n"
            f"## Item 7. Management's discussion and analysis\n\n{mdna}"
            "## Item 8. Financial statements\n\n### Consolidated Statements of Financial Position\n\n"
            f"December 31, {year} {year - 1}\nProperty, plant and equipment, net {year - 2000},645 10,672\n"
            "Total assets 117,359 112,011\n\n### Consolidated Statements of Operations\n\n"
            f"Years ended December 31, {year} {year - 1}\nTotal revenues 66,608 62,286\n")


@pytest.fixture(scope="module")
def filings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = tmp_path_factory.mktemp("named") / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(filing(2022), encoding="utf-8")
    (docs / "b.md").write_text(filing(2021), encoding="utf-8")
    out = docs.parent / "index"
    build_index(docs, out, Config(), make_embedder("hash", Config()))
    return out


QUESTION = "Using the balance sheet, what is Northwind's FY2022 net property, plant and equipment?"


def _asked(question: str, searched: bool = True) -> Query:
    """The question as retrieval searches it, or (``searched`` False) its own words alone."""
    emb = make_embedder("hash", Config())
    if searched:
        return Query.build(question, emb)
    return Query(question, tuple(tokenize(question)), emb.embed_query(question))


def _located(index, query: Query, scope: set[str] | None = None) -> list[tuple[str, str, float]]:
    res = hybrid_locate(index, query, Config(), scope)
    return [(index.nodes[n.node_id].doc_path, index.nodes[n.node_id].heading, n.score) for n in res.nodes]


def test_retrieval_searches_the_titles_of_the_statements_a_question_names() -> None:
    titles = "consolidated balance sheets statements of financial position"
    assert searched_text(QUESTION) == f"{QUESTION} {titles}"
    assert searched_text("根据资产负债表计算") == "根据资产负债表计算"  # the title's own words already
    assert searched_text("What is revenue?") == "What is revenue?"
    gross = "Does Boeing have an improving gross margin profile?"  # the statement its measure is read from
    assert searched_text(gross) == f"{gross} consolidated statements of income operations earnings"
    q = Query.build(QUESTION, None)
    assert q.text == QUESTION and "position" in q.tokens  # shown as asked, searched with the titles
    assert q.asked_tokens == tuple(tokenize(QUESTION)) and "position" not in q.asked_tokens  # cards, answer
    plain = Query.build("What is revenue?", None)
    assert plain.asked_tokens is plain.tokens


def test_an_abbreviation_is_also_searched_spelled_out(tmp_path: Path) -> None:
    # "PPNE" is no word of any filing and "PP&E" tokenises to letters: the question also searches the
    # words the statements spell it out in; "steps" or "deps" hold no "EPS"
    ppne = "Did Northwind grow its PPNE between FY21 and FY22?"
    assert searched_text(ppne) == f"{ppne} property, plant and equipment"
    assert searched_text("What were R&D and SG&A in 2022?") == \
        "What were R&D and SG&A in 2022? selling, general and administrative expenses research and development expense"
    assert searched_text("How many steps and deps?") == "How many steps and deps?"
    q = Query.build(ppne, None)
    assert {"property", "plant", "equipment"} <= set(q.tokens) and "property" not in q.asked_tokens
    notes = {"Leases": "Lease costs grew between FY21 and FY22 as Northwind opened stores.",
             "Property, Plant and Equipment": "Land 4,457 4,484\nBuildings 12,900 12,100\nMachinery and equipment "
                                              "9,800 9,300\nTotal 27,157 25,884",
             "Goodwill": "Goodwill grew between FY21 and FY22 with the Contoso acquisition."}
    doc = tmp_path / "northwind.md"
    doc.write_text("# Northwind 10-K\n\n" + "".join(f"## Note {n}. {title}\n\n{text}\n\n"
                                                  for n, (title, text) in enumerate(notes.items(), 8)), encoding="utf-8")
    build_index(doc, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    assert "Property" not in _located(index, _asked(ppne, searched=False))[0][1]
    assert "Property" in _located(index, _asked(ppne))[0][1]


def test_the_locator_places_the_statement_the_question_names(filings: Path, monkeypatch) -> None:
    index = load_index(filings)
    # by the question's own words the MD&A wins every place; the named statement is placed second
    found = _located(index, _asked(QUESTION, searched=False))
    assert len(found) == Config().tuning.locator.hybrid_top_leaves
    assert found[1] == ("a.md", "Consolidated Statements of Financial Position", found[0][2])  # the asked year's
    assert found[0][0] == "a.md"
    assert _located(index, _asked(QUESTION, searched=False), {"a.md", "b.md"}) == found  # the same through a scope
    res = hybrid_locate(index, _asked(QUESTION, searched=False), Config())
    assert "the sections the question names: Consolidated Statements of Financial Position" in res.thinking
    monkeypatch.setattr(node_locator, "named_kinds", lambda q: [])
    without = _located(index, _asked(QUESTION, searched=False))
    assert all(h != "Consolidated Statements of Financial Position" for _, h, _ in without)
    assert without[0] == found[0]
    # searched with the statement's titles, the words find it first themselves
    assert _located(index, _asked(QUESTION))[0][:2] == ("a.md", "Consolidated Statements of Financial Position")


def test_a_question_that_names_no_statement_is_located_as_before(filings: Path, monkeypatch) -> None:
    index = load_index(filings)
    plain = "What was Northwind's FY2022 net property, plant and equipment?"
    before = _located(index, _asked(plain))
    monkeypatch.setattr(node_locator, "named_kinds", lambda q: [])
    assert _located(index, _asked(plain)) == before


def _rows_of(index, doc: str, heading: str | None = None) -> list[int]:
    out = []
    for leaf in index.leaves:
        if leaf.doc_path == doc and (heading is None or leaf.heading == heading):
            a, b = index.leaf_rows[leaf.node_id]
            out.extend(range(a, b))
    return out


def test_a_flat_ranking_puts_the_named_statement_of_the_named_filing_first(filings: Path) -> None:
    """Step 2's flat part, the context's pool and the flat arm given the same cards read one lead: the
    named filing (cards), and in it the named statement; not another year's statement."""
    index = load_index(filings)
    sheet = "Consolidated Statements of Financial Position"
    rows = np.array(_rows_of(index, "a.md") + _rows_of(index, "b.md"), dtype=np.int64)
    asked, other = set(_rows_of(index, "a.md", sheet)), set(_rows_of(index, "b.md", sheet))
    assert asked and other
    lead = named_lead(index, _asked(QUESTION), rows, None)
    assert {int(r) for r, v in zip(rows, lead) if v} == asked and set(lead) == {0.0, NAMED_LEAD}
    both = flat_lead(index, _asked(QUESTION), rows, None)
    assert min(both[np.isin(rows, list(asked))]) > max(both[~np.isin(rows, list(asked))])
    assert not named_lead(index, _asked("What was Northwind's FY2022 net property?"), rows, None).any()
    # no year asked: the cards name no one filing, so no statement is preferred, unless the scope is one
    unnamed = "Using the balance sheet, what is net property, plant and equipment?"
    assert not named_lead(index, _asked(unnamed), rows, None).any()
    b_rows = np.array(_rows_of(index, "b.md"), dtype=np.int64)
    assert {int(r) for r, v in zip(b_rows, named_lead(index, _asked(unnamed), b_rows, {"b.md"})) if v} == other


def test_the_union_marks_candidates_of_the_named_statement(filings: Path) -> None:
    index = load_index(filings)
    query = _asked(QUESTION)
    loc = hybrid_locate(index, query, Config())
    cands, believed = union_candidates(index, make_embedder("hash", Config()), query, loc.nodes, Config(),
                                       beliefs=loc.candidates)
    sig = union_signals(index, query, cands, believed, Config())
    title = "Consolidated Statements of Financial Position"
    sheet = set(_rows_of(index, "a.md", title))
    assert sheet & set(sig.rows.tolist())
    # the title, in whichever filing: which filing is asked is the card feature's (u_card) to say
    sheets = sheet | set(_rows_of(index, "b.md", title))
    assert [bool(v) for v in sig.named] == [int(r) in sheets for r in sig.rows]


def test_within_one_filing_the_named_statement_leads_step_2_and_the_answer(filings: Path,
                                                                                    monkeypatch) -> None:
    """A user who indexed one filing asks it: the section ordering puts the named statement first, as
    the card-led flat ranking does across a collection, and the answer quotes it first."""
    from pipeline import make_backends, run_pipeline
    from retrieval import ordering

    index = load_index(filings)
    question = "Using the balance sheet, what was the net property, plant and equipment at December 31, 2022?"
    rec = run_pipeline(question, index, Config(), make_backends(index, Config(), None), doc_paths={"a.md"})
    assert rec.locate.route.route == "detail"  # "property, plant and equipment": one thing, not three parts
    top = rec.retrieve.hits[0]
    assert top.doc_path == "a.md" and top.heading_path.endswith("> Consolidated Statements of Financial Position")
    assert "Property, plant and equipment, net 22,645" in rec.answer.quotes[0].text  # the statement, first
    # the lead alone (nothing located, the question's own words searched), for a question whose words
    # the MD&A repeats and the statement does not
    section = ordering.SectionOrdering()
    ask = ordering.Ask(_asked("Using the balance sheet, how strong was it in 2022?", searched=False), [], {"a.md"})
    first = section.order(index, make_embedder("hash", Config()), Config(), ask)[0]
    assert first.chunk.heading_path == top.heading_path
    monkeypatch.setattr(ordering, "named_lead", lambda *a: np.zeros(len(a[2])))
    first = section.order(index, make_embedder("hash", Config()), Config(), ask)[0]
    assert first.chunk.heading_path != top.heading_path  # the MD&A's words win without it


@pytest.mark.parametrize("question, title", [
    ("Does Northwind have positive working capital based on FY2022 data?",
     "Consolidated Statements of Financial Position"),
    ("Does Northwind have an improving gross margin profile as of FY2022?", "Consolidated Statements of Operations"),
])
def test_a_measure_leads_to_its_statement_and_the_statement_is_evidence(filings: Path, monkeypatch,
                                                                        question: str, title: str) -> None:
    """A question that names no statement but asks a measure read from one: step 2 puts that statement
    first, and the relevance floor, whose words and vectors a table of figures barely meets, does not
    refuse the very section asked for (the record says which section it was)."""
    from pipeline import make_backends, run_pipeline
    from retrieval import relevance

    index = load_index(filings)
    rec = run_pipeline(question, index, Config(), make_backends(index, Config(), None))
    assert rec.retrieve.hits[0].heading_path.endswith(f"> {title}")
    assert rec.answer.evidence_found and rec.answer.evidence.named_section == title
    assert rec.answer.evidence.lift_score < rec.answer.evidence.floor  # the floor alone would refuse
    monkeypatch.setattr(relevance, "named_section_found", lambda *a: "")
    assert not run_pipeline(question, index, Config(), make_backends(index, Config(), None)).answer.evidence_found


def test_only_a_named_section_at_the_top_of_the_list_counts(filings: Path) -> None:
    from retrieval.relevance import named_section_found
    from retrieval.types import RetrievedChunk

    index = load_index(filings)
    hit = {c.heading_path.rsplit(" > ", 1)[-1]: RetrievedChunk(c, 1.0, {}) for c in index.chunks}
    sheet, mdna = hit["Consolidated Statements of Financial Position"], hit["Liquidity"]
    asked = _asked("Does Northwind have positive working capital?")
    assert named_section_found(asked, [sheet, mdna]) == "Consolidated Statements of Financial Position"
    assert named_section_found(asked, [mdna, sheet]) == ""  # the best hit decides
    assert named_section_found(_asked("How did Northwind's liquidity change?"), [sheet]) == ""  # names none
    assert named_section_found(asked, []) == ""
