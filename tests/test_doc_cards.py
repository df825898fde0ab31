"""Document cards: read from the cover, stored in the index, shown in the locator's TOC, and used by
the hybrid locator to pick the named document among look-alikes."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index
from pipeline import run_pipeline, make_backends
from retrieval.doc_cards import EARLIER, card_match, latest_first
from retrieval.node_locator import hybrid_leaf_scores, hybrid_locate, toc_for_prompt
from retrieval.query import Query
from tests.conftest import run_cli
from tree_builder.doc_card import CardSet, DocumentCard, card_terms, read_card

COVER = """UNITED STATES SECURITIES AND EXCHANGE COMMISSION
Washington, D.C. 20549

FORM 10-K

ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the fiscal year ended
December 31, {year}

Commission file number 1-442

NORTHWIND TRADING CORPORATION
(Exact name of registrant as specified in its charter)

Delaware 91-0425694
"""


def filing(year: int, capex: int, prior: int) -> str:
    """A small annual report: every year's has the same Items, only the cover and figures differ."""
    return (f"# Northwind annual report\n\n{COVER.format(year=year)}\n"
            "## Item 7. Management's discussion and analysis\n\n"
            "Capital expenditures were spent on warehouses and trucks in the year.\n\n"
            f"Years ended December 31, {year} {year - 1}\nCapital expenditures {capex:,} {prior:,}\n\n"
            "## Item 8. Financial statements\n\nThe statements follow the notes.\n")


def test_the_card_is_read_from_the_cover_not_the_file_name() -> None:
    card = read_card(COVER.format(year=2018), "Northwind annual report", "WHATEVER_2022_10Q.md")
    assert card == DocumentCard("Northwind annual report", "NORTHWIND TRADING CORPORATION", "10-K",
                                "fiscal year ended December 31, 2018")
    assert card.years == ("2018",) and card.file_name == ""  # the file name's 2022 is never read
    # a registrant name on the line of the label, as a PDF extraction may put it
    flat = read_card("THE ACME COMPANY (Exact name of registrant as specified in its charter) Delaware",
                     "Form", "a.pdf")
    assert flat.issuer == "THE ACME COMPANY"
    eight_k = read_card("FORM 8-K\nCURRENT REPORT\nDate of Report (Date of earliest event reported): July 1, 2022\n"
                        "AMCOR PLC\n(Exact name of registrant as specified in its charter)\n", "x", "x.pdf")
    assert (eight_k.form, eight_k.period, eight_k.issuer) == ("8-K", "July 1, 2022", "AMCOR PLC")
    paper = read_card("Pump Maintenance Manual\n\nRevision C, March 3, 2021\n\n1 Safety\n", "Pump Maintenance Manual",
                      "manual_v3.md")
    assert paper.period == "March 3, 2021" and paper.issuer == "" and paper.file_name == "manual v3"
    statute = read_card("# 中华人民共和国劳动法\n\n第一章 总则\n\n第一条 为了保护劳动者的合法权益，制定本法。\n",
                        "中华人民共和国劳动法", "中华人民共和国劳动法.md")
    assert statute.title == "中华人民共和国劳动法" and statute.file_name == ""  # the name adds nothing
    # a title the reader took from the file name is not the document's statement: shown as the file name
    fallback = read_card("Some body text without a title.\n", "ACME_2022_8K", "ACME_2022_8K.pdf")
    assert fallback.title == "" and fallback.file_name == "ACME 2022 8K"
    assert DocumentCard.from_record(card.record()) == card and DocumentCard.from_record(None) is None


def test_a_press_release_card_names_its_listed_issuer_and_no_form_it_only_mentions() -> None:
    release = read_card("PepsiCo Reports First-Quarter 2023 Results\n\nPURCHASE, N.Y. - April 25, 2023 - PepsiCo, Inc. "
                        "(NASDAQ: PEP) today reported results for\nthe first quarter 2023. Please refer to our "
                        "Quarterly Report on Form 10-Q for the 12 weeks ended March 25, 2023.\n",
                        "Q1 2023 8-K - Exhibit 99.1", "PEPSICO_2023Q1_EARNINGS.pdf")
    assert (release.issuer, release.symbols, release.form) == ("PepsiCo, Inc.", ("PEP",), "")
    assert release.period == "first quarter 2023" and release.file_name == ""
    wire = read_card("SAN JOSE, Calif.--(BUSINESS WIRE)--Adobe Inc. (Nasdaq:ADBE) today reported record revenue.\n",
                     "x", "x.pdf")
    assert (wire.issuer, wire.symbols) == ("Adobe Inc.", ("ADBE",))
    # a filing's cover keeps its registrant and its form, whatever the text quotes later
    filing = read_card(COVER.format(year=2022) + "\nAcme Corp. (NYSE: ACME) is a customer.\n", "x", "x.pdf")
    assert filing.issuer == "NORTHWIND TRADING CORPORATION" and filing.form == "10-K"
    assert read_card("Washington, D.C. 20549 ______ FORM 10-K/A\n(Amendment No. 1)\n", "x", "x.pdf").form == "10-K"


def test_card_match_picks_the_named_issuer_and_year() -> None:
    cards = [card_terms(f"{name}_{y}.md", read_card(COVER.replace("NORTHWIND TRADING CORPORATION", name)
                                                    .format(year=y), name, f"{name}_{y}.md"))
             for name, y in (("NORTHWIND", 2021), ("NORTHWIND", 2022), ("CONTOSO", 2022))]

    def match(q: str) -> list[float]:
        return [round(float(x), 2) for x in card_match(q, Query.build(q, None).tokens, cards)]

    # the asked year's filing first, the next year's (which restates it) second
    assert match("What were Northwind's capital expenditures in FY2021?") == [1.0, 0.5, 0.0]
    assert match("Contoso capital expenditures 2022") == [0.0, 0.0, 1.0]
    assert match("How did Northwind's revenue change from 2021 to 2022?") == [0.5, 1.0, 0.0]  # the later filing
    assert match("capital expenditures in 2021") == [1.0, 0.5, 0.5]  # the year alone tells them apart
    assert match("What capital expenditures does Northwind forecast for 2023?") == [0.0, 0.25, 0.0]  # its outlook
    assert match("Northwind's capital expenditures in 2019") == [0.25, 0.0, 0.0]  # two years on: restated
    assert match("What are the capital expenditures?") == [0.0, 0.0, 0.0]  # nothing named: no preference


def _card(path: str, issuer: str = "", period: str = "", title: str = "", form: str = "10-K",
          file_name: str = ""):
    return card_terms(path, DocumentCard(title, issuer, form, period, file_name))


def test_no_period_asked_prefers_the_named_issuers_latest_filing() -> None:
    """"Is Boeing's business subject to cyclicality?" asks about now: the latest filing says what now is."""
    cards = [_card("b18.pdf", "THE BOEING COMPANY", "fiscal year ended December 31, 2018"),
             _card("b22.pdf", "THE BOEING COMPANY", "fiscal year ended December 31, 2022"),
             _card("mgm.pdf", "MGM RESORTS INTERNATIONAL", "fiscal year ended December 31, 2022")]

    def match(q: str) -> list[float]:
        return [round(float(x), 3) for x in card_match(q, Query.build(q, None).tokens, cards)]

    assert match("Is Boeing's business subject to cyclicality?") == [EARLIER, 1.0, 0.0]
    assert match("Was Boeing's business cyclical in FY2018?") == [1.0, 0.0, 0.0]  # a period asked decides
    assert latest_first(np.array([1.0, 1.0, 0.0]), cards).tolist() == [EARLIER, 1.0, 0.0]
    assert latest_first(np.array([1.0, 0.5, 0.0]), cards).tolist() == [1.0, 0.5, 0.0]  # the name decides first
    # not one issuer's series: statutes that share the question's words are no versions of each other
    laws = [_card("a.md", "", "2012年12月28日", "中华人民共和国劳动合同法", form=""),
            _card("b.md", "", "1994年7月5日", "中华人民共和国劳动法", form="")]
    assert latest_first(np.array([1.0, 1.0]), laws).tolist() == [1.0, 1.0]
    two = [cards[0], cards[2]]  # two issuers' filings of one name match are not one series either
    assert latest_first(np.array([1.0, 1.0]), two).tolist() == [1.0, 1.0]
    # nor an annual and a later quarterly report: each is the latest of its own series
    q3 = _card("b23q.pdf", "THE BOEING COMPANY", "quarterly period ended March 31, 2023", form="10-Q")
    assert latest_first(np.array([1.0, 1.0, 1.0]), cards[:2] + [q3]).tolist() == [EARLIER, 1.0, 1.0]


def test_a_quarter_asked_prefers_the_report_of_that_quarter() -> None:
    cards = [_card("annual.pdf", "AMCOR PLC", "fiscal year ended June 30, 2023"),
             _card("q2.pdf", "AMCOR PLC", "Quarterly Period Ended December 31, 2022", form="10-Q"),
             _card("release.pdf", "", "fiscal 2023", "Amcor 4Q 2023 Exhibit 99.1", form=""),
             _card("8k.pdf", "AMCOR PLC", "July 1, 2023", form="8-K")]

    def match(q: str) -> list[float]:
        return [round(float(x), 3) for x in card_match(q, Query.build(q, None).tokens, cards)]

    # Q2 of FY2023 ended in December 2022: the quarterly report; the fourth quarter's release is not it
    q2 = match("What is the nature of AMCOR's restructuring liability as of Q2 of FY2023?")
    assert q2.index(max(q2)) == 1 and q2[2] < q2[1] and q2[0] < q2[1]
    # a year asked: the documents covering a year, not the dated current report
    year = match("What was Amcor's adjusted EBITDA for FY2023?")
    assert year[0] == year[2] == 1.0 and year[3] < 1.0 and year[1] < year[3]
    assert match("Amcor revenue in Q22023")[1] > 0  # a quarter glued to its year is still read
    half = match("What were Amcor's sales in H1 FY2023?")  # a quarterly report's year-to-date columns
    assert half.index(max(half)) == 1


def test_a_form_the_question_names_prefers_the_filing_of_that_form() -> None:
    """"The 8k filing dated 1st July 2022": the issuer's 8-K, not its annual report or earnings release of
    the same year. A form is no issuer: a "10-Q" the question names lifts none of another issuer's
    quarterly reports above the named issuer's other filings. A question naming no form is unchanged."""
    cards = [_card("annual.pdf", "AMCOR PLC", "fiscal year ended June 30, 2023"),
             _card("q2.pdf", "AMCOR PLC", "Quarterly Period Ended December 31, 2022", form="10-Q"),
             _card("release.pdf", "", "fiscal 2023", "Amcor 4Q 2023 Exhibit 99.1", form=""),
             _card("8k.pdf", "AMCOR PLC", "July 1, 2022", form="8-K"),
             _card("other-q.pdf", "PFIZER INC.", "quarterly period ended July 2, 2023", form="10-Q"),
             _card("other-8k.pdf", "FOOT LOCKER, INC.", "May 20, 2022", form="8-K")]

    def match(q: str) -> list[float]:
        return [round(float(x), 3) for x in card_match(q, Query.build(q, None).tokens, cards)]

    for q in ("What was the key agenda of the AMCOR's 8k filing dated 1st July 2022?",
              "What did Amcor's Form 8-K of July 2022 announce?"):
        m = match(q)
        assert m.index(max(m)) == 3 and m[3] > m[0] and m[3] > m[2], q
    quarterly = match("What does Amcor's 10-Q say about its debt?")
    assert quarterly.index(max(quarterly)) == 1 and quarterly[4] < min(quarterly[0], quarterly[3])
    plain = "What does Amcor say about its debt?"
    no_forms = [replace(c, forms=frozenset()) for c in cards]
    assert match(plain) == [round(float(x), 3) for x in card_match(plain, Query.build(plain, None).tokens, no_forms)]


def test_a_date_the_question_writes_out_picks_the_current_report_of_that_day() -> None:
    """Two 8-Ks of one issuer in one year: "the 8-K dated May 20, 2022" (or "20th May 2022") is the one
    reporting that day. An annual report's period ends on a day too, but "as of December 31, 2021" is
    answered by the next year's report as well: only a report that is its day is judged by the date."""
    cards = [_card("may.pdf", "FOOT LOCKER, INC.", "May 20, 2022", form="8-K"),
             _card("aug.pdf", "FOOT LOCKER, INC.", "August 19, 2022", form="8-K"),
             _card("k21.pdf", "FOOT LOCKER, INC.", "fiscal year ended January 29, 2022"),
             _card("k22.pdf", "FOOT LOCKER, INC.", "fiscal year ended January 28, 2023")]

    def match(q: str) -> list[float]:
        return [round(float(x), 3) for x in card_match(q, Query.build(q, None).tokens, cards)]

    for q in ("Who did Foot Locker's 8-K dated May 20, 2022 say was elected?",
              "What did Foot Locker report on 20th May 2022?"):
        m = match(q)
        assert m[0] > m[1], q
    assert match("What did Foot Locker's 8-K dated August 19, 2022 announce?")[1] > match(
        "What did Foot Locker's 8-K dated August 19, 2022 announce?")[0]
    undated = match("What did Foot Locker's 8-K of 2022 announce?")
    assert undated[0] == undated[1]
    from retrieval.doc_cards import OTHER_DATE, date_match

    assert list(date_match("What were Foot Locker's inventories as of January 29, 2022?", cards)) == [
        OTHER_DATE, OTHER_DATE, 1.0, 1.0]


def test_a_word_every_document_uses_names_none() -> None:
    """A press release's title ("... Financial and Operating Results") shares words with any question;
    only the documents' texts tell that "operating" names nothing and "Adobe" does."""
    cards = [_card("adobe.pdf", "ADOBE INC.", "fiscal year ended December 2, 2022"),
             _card("mgm.pdf", "", "Fourth Quarter 2022",
                   "MGM RESORTS INTERNATIONAL REPORTS FOURTH QUARTER AND FULL YEAR 2022 FINANCIAL AND OPERATING RESULTS",
                   form=""),
             _card("amex.pdf", "American Express Company", "fiscal year ended December 31, 2022")]
    q = "Does Adobe have an improving operating margin profile as of FY2022?"
    tokens = Query.build(q, None).tokens
    assert card_match(q, tokens, cards)[1] == 1.0  # by the cards alone, "operating" names the release
    spread = {"adobe": 0.6, "operating": 0.0}  # what name_spread says of a collection's texts
    assert card_match(q, tokens, cards, spread).tolist() == [1.0, 0.0, 0.0]
    # with no name left, a near-zero word is no name at all (nothing is scaled up to a full match)
    q = "Does AMEX have an improving operating margin profile as of 2022?"
    got = card_match(q, Query.build(q, None).tokens, cards, {"operating": 0.0})
    assert got[1] == 0.0
    # a name of common words, written whole, counts whole
    q = "What is American Express's net interest income for FY2022?"
    got = card_match(q, Query.build(q, None).tokens, cards, {"american": 0.0, "express": 0.0})
    assert int(np.argmax(got)) == 2 and got[2] == 1.0


def test_a_file_name_glues_the_words_a_question_writes_apart() -> None:
    cards = [_card("COCACOLA_2017_10K.pdf", "", "fiscal year ended December 31, 2017", file_name="COCACOLA 2017 10K"),
             _card("ADOBE_2017_10K.pdf", "ADOBE SYSTEMS INCORPORATED", "fiscal year ended December 1, 2017")]
    q = "What is the FY2017 return on assets for Coca Cola?"
    assert card_match(q, Query.build(q, None).tokens, cards).tolist() == [1.0, 0.0]
    # not counted twice where the question names the card's own word inside the glued one
    cards = [_card("MGM_10K.pdf", "MGM Resorts International", "fiscal year ended December 31, 2022"),
             _card("MGM_Q4.pdf", "", "Fourth Quarter 2022", "MGM Resorts International reports fourth quarter and "
                   "full year 2022 results", form="", file_name="MGMRESORTS 2022Q4 EARNINGS"),
             _card("CONTOSO_10K.pdf", "Contoso Ltd", "fiscal year ended December 31, 2022")]
    q = "Has MGM Resorts paid dividends to common shareholders in FY2022?"
    assert card_match(q, Query.build(q, None).tokens, cards).tolist() == [1.0, 1.0, 0.0]


def test_name_spread_reads_how_many_documents_hold_a_word(tmp_path: Path) -> None:
    from retrieval.doc_cards import name_spread

    docs = tmp_path / "docs"
    docs.mkdir()
    for i, company in enumerate(("Northwind", "Contoso", "Fabrikam", "Tailspin")):
        (docs / f"{company}.md").write_text(
            COVER.replace("NORTHWIND TRADING CORPORATION", f"{company.upper()} OPERATING CORPORATION")
            .format(year=2022) + f"\n## Results\n\n{company} operating results were strong in {2020 + i}.\n",
            encoding="utf-8")
    cfg = Config(chunk_size=120, chunk_overlap=20)
    build_index(docs, tmp_path / "idx", cfg, make_embedder("hash", cfg))
    index = load_index(tmp_path / "idx")
    cards = list(index.card_terms.by_path.values())
    q = "What were Contoso's operating results?"
    spread = name_spread(index, Query.build(q, None).tokens, cards)
    assert spread["operating"] == 0.0 and spread["contoso"] == 1.0  # in every text; in one of four


def test_a_chinese_name_counts_only_whole() -> None:
    cards = [card_terms(p, read_card(f"# {t}\n\n第一章 总则\n", t, p)) for p, t in
             (("劳动合同法.md", "中华人民共和国劳动合同法"), ("劳动法.md", "中华人民共和国劳动法"))]

    def match(q: str) -> list[float]:
        return [round(float(x), 2) for x in card_match(q, Query.build(q, None).tokens, cards)]

    assert match("劳动合同解除后工资怎么算？") == [0.0, 0.0]  # topic words, not a name
    assert match("根据劳动合同法，试用期最长多久？") == [1.0, 0.0]  # the file's name, whole
    assert match("中华人民共和国劳动法规定的工作时间是多少？") == [0.0, 1.0]  # the title, whole


@pytest.fixture(scope="module")
def look_alikes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = tmp_path_factory.mktemp("lookalike") / "docs"
    docs.mkdir()
    # the files' names say nothing (and the later year's file sorts first)
    (docs / "b.md").write_text(filing(2021, 300, 280), encoding="utf-8")
    (docs / "a.md").write_text(filing(2022, 410, 300), encoding="utf-8")
    out = docs.parent / "index"
    build_index(docs, out, Config(), make_embedder("hash", Config()))
    return out


def _top_doc(index, question: str) -> str:
    emb = make_embedder("hash", Config())
    res = hybrid_locate(index, Query.build(question, emb), Config())
    return index.nodes[res.nodes[0].node_id].doc_path


def test_the_index_stores_cards_and_the_locator_reads_the_asked_year(look_alikes: Path) -> None:
    meta = json.loads((look_alikes / "metadata.json").read_text(encoding="utf-8"))
    cards = {d["path"]: d["card"] for d in meta["documents"]}
    assert cards["b.md"]["period"] == "fiscal year ended December 31, 2021"
    assert cards["a.md"]["issuer"] == "NORTHWIND TRADING CORPORATION"
    index = load_index(look_alikes)
    assert _top_doc(index, "What were Northwind's capital expenditures in FY2021?") == "b.md"
    assert _top_doc(index, "What were Northwind's capital expenditures in FY2022?") == "a.md"
    # the LLM locator's TOC shows each document's card under its heading
    emb = make_embedder("hash", Config())
    toc, _ = toc_for_prompt(index, Query.build("capital expenditures 2021", emb), Config())
    assert "文档卡片: 发行人 NORTHWIND TRADING CORPORATION; 文件类型 10-K; 期间 fiscal year ended December 31, 2021" in toc
    # and the offline answer reads the asked year's column
    backends = make_backends(index, Config(), None)
    rec = run_pipeline("What were Northwind's capital expenditures in FY2021?", index, Config(), backends)
    figures = [q for q in rec.answer.quotes if q.read]
    assert figures and figures[0].text == "Capital expenditures, 2021: 300"


def test_an_index_built_before_cards_loads_and_upgrade_adds_them(look_alikes: Path, tmp_path: Path) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(look_alikes, old)
    meta = json.loads((old / "metadata.json").read_text(encoding="utf-8"))
    for d in meta["documents"]:
        d.pop("card")
    (old / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    index = load_index(old)
    assert not index.card_terms
    emb = make_embedder("hash", Config())
    q = Query.build("What were Northwind's capital expenditures in FY2021?", emb)
    _, before = hybrid_leaf_scores(index, q, Config())
    _, with_cards = hybrid_leaf_scores(load_index(look_alikes), q, Config())
    assert not np.allclose(np.asarray(before), np.asarray(with_cards))
    r = run_cli("upgrade", "--index", str(old))
    assert r.returncode == 0 and "added the cards of 2 document(s)" in r.stdout
    upgraded = json.loads((old / "metadata.json").read_text(encoding="utf-8"))
    assert {d["path"]: d["card"]["period"] for d in upgraded["documents"]} == {
        "a.md": "fiscal year ended December 31, 2022", "b.md": "fiscal year ended December 31, 2021"}
    assert _top_doc(load_index(old), "What were Northwind's capital expenditures in FY2021?") == "b.md"
    again = run_cli("upgrade", "--index", str(old))
    assert again.returncode == 0 and "already up to date" in again.stdout


def test_one_document_is_scored_as_without_cards(tmp_path: Path) -> None:
    src = tmp_path / "one.md"
    src.write_text(filing(2021, 300, 280), encoding="utf-8")
    build_index(src, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    assert index.card_terms  # stored ...
    emb = make_embedder("hash", Config())
    q = Query.build("What were Northwind's capital expenditures in FY2021?", emb)
    _, with_cards = hybrid_leaf_scores(index, q, Config())
    index.__dict__["card_terms"] = CardSet({}, frozenset())  # ... and ignored: the same scores as an index without them
    _, without = hybrid_leaf_scores(index, q, Config())
    assert np.array_equal(np.asarray(with_cards), np.asarray(without))


def test_the_issuer_is_a_name_not_a_suffix_or_a_file_number() -> None:
    wrapped = read_card("SQUARE,\nINC.\n(Exact name of registrant as specified in its charter)\n", "t", "a.pdf")
    assert wrapped.issuer == "SQUARE, INC."
    number = read_card("Commission File Number 001-02217\n(Exact name of registrant as specified in its charter)\n",
                       "t", "b.pdf")
    assert number.issuer == "" and number.file_name == "b"  # no issuer stated: the file name is shown as such


def test_the_cover_lists_the_issuers_trading_symbols() -> None:
    cover = ("FORM 10-K\nFor the fiscal year ended December 31, 2022\nCommission File Number 001-37622 "
             "______________________ SQUARE, INC.\n(Exact name of registrant as specified in its charter)\n"
             "Securities registered pursuant to Section 12(b) of the Act:\n"
             "Title of each class Trading Symbol(s) Name of each exchange on which registered\n"
             "Class A Common Stock, $0.0000001 par value per share SQ New York Stock Exchange\n"
             "2.625% Senior Notes Due 2026 SQ26 The Nasdaq Stock Market LLC\n"
             "Securities registered pursuant to Section 12(g) of the Act: None\n")
    card = read_card(cover, "t", "BLOCK_2020_10K.pdf")
    assert card.issuer == "SQUARE, INC."  # after the rule of underscores, not the file number before it
    assert read_card("SQUARE, INC. ________\n(Exact name of registrant as specified in its charter)\n",
                     "t", "a.pdf").issuer == "SQUARE, INC."  # a rule after the name
    assert card.symbols == ("SQ",)  # a note's symbol ("SQ26") names no issuer
    assert DocumentCard.from_record(card.record()) == card
    assert "trading symbols SQ" in card.line({"issuer": "issuer", "symbols": "trading symbols", "form": "form",
                                              "period": "period", "file_name": "file name"})
    # the values may come before the column header, as a PDF's extraction may put them
    above = read_card("Common Stock, $5.00 Par Value BA New York Stock Exchange\n"
                      "(Title of each class) (Trading Symbol) (Name of each exchange on which registered)\n", "t", "b.pdf")
    assert above.symbols == ("BA",)
    # a cover without the column (before 2019): capitals before an exchange's name are not read as symbols
    old = read_card("Title of Each Class Name of Each Exchange on Which Registered\n"
                    "Common Stock NASDAQ The NASDAQ Stock Market LLC\n", "t", "c.pdf")
    assert old.symbols == ()
    assert DocumentCard.from_record({"issuer": "X", "symbols": ["AXP", "not one", 3]}).symbols == ("AXP",)


def test_a_symbol_or_an_abbreviation_names_the_issuer() -> None:
    """A question may name a company as the market does ("AXP") or as people shorten it ("AmEx"); it
    counts as naming the issuer whole, but only where no issuer is named by its words."""
    cards = [_card("axp.pdf", "American Express Company", "fiscal year ended December 31, 2022"),
             _card("amd.pdf", "ADVANCED MICRO DEVICES, INC.", "fiscal year ended December 31, 2022"),
             _card("it.pdf", "GARTNER, INC.", "fiscal year ended December 31, 2022"),
             _card("mgm.pdf", "MGM RESORTS INTERNATIONAL", "fiscal year ended December 31, 2022")]
    cards = [replace(c, symbols=frozenset(s)) for c, s in zip(cards, (["AXP"], ["AMD"], ["IT"], ["MGM"]))]

    def match(q: str) -> list[float]:
        return [round(float(x), 2) for x in card_match(q, Query.build(q, None).tokens, cards)]

    assert match("Does AMEX have an improving operating margin profile as of 2022?") == [1.0, 0.0, 0.0, 0.0]
    assert match("Amex revenue in 2022?") == [1.0, 0.0, 0.0, 0.0]
    assert match("What was AXP's revenue in 2022?") == [1.0, 0.0, 0.0, 0.0]
    assert match("What is AMD's gross margin?") == [0.0, 1.0, 0.0, 0.0]  # a symbol and initials alike
    assert match("How much did IT spending grow in 2022?") == [0.0, 0.0, 0.0, 0.0]  # a stop-word is no symbol
    assert match("How many MRI scans were there in 2022?") == [0.0, 0.0, 0.0, 1.0]  # initials of MGM R. I.
    # ... but a name written out decides: the abbreviation is a fallback
    assert match("Did MRI scans at Gartner rise in 2022?") == [0.0, 0.0, 1.0, 0.0]
    assert match("What does axp stand for?") == [0.0, 0.0, 0.0, 0.0]  # a symbol is written in capitals
    # a word of an issuer's name not written as a name leaves the abbreviation its say ("advanced" is a
    # word of Advanced Micro Devices, and counts only as any shared word does)
    advanced = match("What were AmEx's advanced payments in 2022?")
    assert advanced[0] == 1.0 and max(advanced[1:]) < 1.0
    pg = [_card("pg.pdf", "THE PROCTER & GAMBLE COMPANY", "fiscal year ended June 30, 2022"),
          _card("jj.pdf", "JOHNSON & JOHNSON", "fiscal year ended January 1, 2023")]
    assert [float(x) for x in card_match("What was P&G's net sales?", Query.build("P&G", None).tokens, pg)] == [1.0, 0.0]
    assert [float(x) for x in card_match("Is J&J's talc litigation material?", [], pg)] == [0.0, 1.0]
    lumber = [_card("pl.pdf", "PACIFIC LUMBER INC.", "fiscal year ended June 30, 2022"), pg[1]]
    assert not card_match("Using the P&L, what was the operating margin?", [], lumber).any()  # a term, no name


def test_union_candidates_carry_their_documents_card_match(look_alikes: Path) -> None:
    from retrieval.doc_cards import candidate_card_match

    index = load_index(look_alikes)
    emb = make_embedder("hash", Config())
    rows = np.arange(len(index.chunks), dtype=np.int64)
    docs = [index.chunks[int(r)].doc_path for r in rows]
    asked = candidate_card_match(index, Query.build("Northwind capital expenditures in FY2021?", emb), rows, None)
    assert [float(m) for m, d in zip(asked, docs) if d == "b.md"] == [1.0] * docs.count("b.md")
    assert [float(m) for m, d in zip(asked, docs) if d == "a.md"] == [0.5] * docs.count("a.md")  # restates 2021
    # the shipped union model reads it: the asked year's filing leads step 2's list
    backends = make_backends(index, Config(), None)
    for year, doc in (("2021", "b.md"), ("2022", "a.md")):
        rec = run_pipeline(f"What were Northwind's capital expenditures in FY{year}?", index, Config(), backends)
        assert rec.retrieve.order == "union" and rec.retrieve.hits[0].doc_path == doc
    # the honest flat baseline reads the cards too: the named filing first, the fusion within it
    from evaluation.variants import FlatOrdering
    from retrieval.ordering import Ask

    for year, doc in (("2021", "b.md"), ("2022", "a.md")):
        q = Query.build(f"What were Northwind's capital expenditures in FY{year}?", emb)
        hits = FlatOrdering("hybrid-card", 10).order(index, emb, Config(), Ask(q, []))
        assert {h.chunk.doc_path for h in hits[:docs.count(doc)]} == {doc}
    # the flat ranking's part of step 2's union (and the context's pool) leads with the named filing too
    from retrieval.candidates import collection_top

    for year, doc in (("2021", "b.md"), ("2022", "a.md")):
        q = Query.build(f"What were Northwind's capital expenditures in FY{year}?", emb)
        top = collection_top(index, q, Config(), None, len(docs))
        assert [h.chunk.doc_path for h in top[:docs.count(doc)]] == [doc] * docs.count(doc)
        assert all(h.retrieval_detail["fused_score"] < 2 for h in top)  # shown: the fused score, not the lead
    # step 1 and step 2 match the cards of the same documents once a question, and the documents the
    # question names (read by the context's row lead and the answer's figures, names only) are matched
    # once more (each match counts words in the store: on an engine, a scan of its chunks)
    from pipeline import run_retrieval

    calls: list[tuple[str, ...]] = []
    counts = index.search.document_counts

    def counted(tokens):
        calls.append(tuple(tokens))
        return counts(tokens)

    index.search.document_counts = counted
    try:
        run_retrieval("What were Northwind's capital expenditures in FY2021?", index, Config(),
                      make_backends(index, Config(), None))
        assert len(calls) == 2
        calls.clear()
        run_pipeline("What were Northwind's capital expenditures in FY2021?", index, Config(),
                     make_backends(index, Config(), None))
        assert len(calls) == 2
    finally:
        del index.search.document_counts
    # a scope of one document tells nothing apart; a question naming no year or card word neither
    only = candidate_card_match(index, Query.build("Northwind capital expenditures in FY2021?", emb), rows, {"a.md"})
    plain = candidate_card_match(index, Query.build("warehouses and trucks", emb), rows, None)
    assert not only.any() and not plain.any()


def test_a_file_name_word_the_text_confirms_counts_as_a_name(tmp_path: Path) -> None:
    """A release whose cover names no registrant has only its file name as a hint (half weight); when
    its own text names the company too, the word is a name like an issuer's."""
    from retrieval.doc_cards import confirmed

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "FABRIKAM_2023Q1_EARNINGS.md").write_text(
        "# First quarter 2023 results\n\nFabrikam reported revenue growth in the first quarter 2023.\n", encoding="utf-8")
    (docs / "CONTOSO_2023Q1_EARNINGS.md").write_text(
        "# First quarter 2023 results\n\nThe company reported revenue growth in the first quarter 2023.\n",
        encoding="utf-8")
    cfg = Config(chunk_size=120, chunk_overlap=20)
    build_index(docs, tmp_path / "idx", cfg, make_embedder("hash", cfg))
    index = load_index(tmp_path / "idx")
    fabrikam = index.card_terms.by_path["FABRIKAM_2023Q1_EARNINGS.md"]
    contoso = index.card_terms.by_path["CONTOSO_2023Q1_EARNINGS.md"]
    assert "fabrikam" in fabrikam.hint_names and "fabrikam" not in fabrikam.names
    tokens = Query.build("What was Fabrikam's revenue growth? Did Contoso grow?", None).tokens
    assert "fabrikam" in confirmed(index, fabrikam, tokens).names  # its text says it
    assert "contoso" not in confirmed(index, contoso, tokens).names  # only its file name does


def test_the_answer_names_documents_by_words_the_texts_do_not_all_share(tmp_path: Path) -> None:
    """The answer reads rows only from the documents the question names; a release titled "... Financial
    Results" must not be named by a question's "financial" when every filing's text says it."""
    from retrieval.extractive import named_documents

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(filing(2022, 410, 300) + "\nFinancial results were strong.\n", encoding="utf-8")
    (docs / "b.md").write_text(filing(2021, 300, 280) + "\nFinancial results were strong.\n", encoding="utf-8")
    (docs / "c.md").write_text("# Contoso Reports Fourth Quarter Financial Results\n\nFinancial results of Contoso "
                               "Ltd, a maker of kites, for the fourth quarter.\n", encoding="utf-8")
    build_index(docs, tmp_path / "index", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "index")
    q = "Using the financial statements, what were Northwind's capital expenditures in FY2022?"
    assert named_documents(Query.build(q, None), index) == {"a.md", "b.md"}  # names, not years
    assert named_documents(Query.build("What did Contoso report for the fourth quarter?", None), index) == {"c.md"}
