"""Query routing (overview / detail / multi-part) and the breadth of multi-part questions."""
from __future__ import annotations

from indexing.chunker import Chunk
from retrieval.breadth import aspect_pool, interleave, sub_questions
from retrieval.query_plan import QueryPlan, aspects_of, plan_query
from retrieval.types import LocatedNode, RetrievedChunk


def _hit(row: int) -> RetrievedChunk:
    c = Chunk(chunk_id=f"c{row}", text=f"text {row}", source_node_id="0001", heading_path="H")
    return RetrievedChunk(chunk=c, score=1.0, retrieval_detail={}, row=row)


def test_overview_questions_in_both_languages() -> None:
    for q in ("What is this paper about?", "Summarize the main contributions", "这篇文章的主要内容是什么？",
              "请概述本法"):
        assert plan_query(q).route == "overview", q


def test_a_summary_as_a_topic_is_not_an_overview() -> None:
    assert plan_query("How are sentences selected from the summary graph?").route == "detail"


def test_multi_part_questions_split_into_parts_with_words_of_their_own() -> None:
    p = plan_query("Which datasets and which metrics do they use?")
    assert p.route == "multi-part"
    assert p.aspects == ("Which datasets", "which metrics do they use")
    assert plan_query("How does AdaRouter compare to the Static Router?").route == "detail"
    assert aspects_of("Is the model fast, accurate, or cheap?") == ["Is the model fast", "accurate", "cheap"]


def test_a_line_item_named_by_a_list_is_one_thing() -> None:
    """"Property, plant, and equipment" is one quantity, not three parts to search apart."""
    q = "Using the balance sheet, what is Boeing's year end FY2018 net property, plant, and equipment?"
    assert plan_query(q).route == "detail"
    assert plan_query("How did depreciation and amortization change?").route == "detail"
    p = plan_query("What is the selling, general and administrative expense and the cost of sales?")
    assert p.aspects == ("What is the selling, general and administrative expense", "the cost of sales")
    assert aspects_of("Is the model fast, accurate, or cheap?") == ["Is the model fast", "accurate", "cheap"]


def test_a_year_or_fiscal_period_is_no_part_of_its_own() -> None:
    """"Between FY2021 and FY2022" asks one thing of two periods: "FY2022" searched alone is no question,
    and a split question reads each part in short units."""
    for q in ("How much has the effective tax rate of Corning changed between FY2021 and FY2022?",
              "Did Pfizer grow its PPNE between FY20 and FY21?",
              "Has CVS Health reported any ongoing legal battles from 2022, 2021 and 2020?",
              "What were sales in Q1 and Q2 2023?"):
        assert plan_query(q).route == "detail", q
    p = plan_query("What was revenue in 2021 and net income in 2022?")  # two things, each in its year
    assert p.aspects == ("What was revenue in 2021", "net income in 2022")


def test_a_clause_comma_is_not_a_list() -> None:
    assert plan_query("In the proposed metric, how is content relevance measured?").route == "detail"


def test_chinese_conjunctions_split_but_words_containing_them_do_not() -> None:
    assert plan_query("土地承包经营权与土地经营权有什么区别？").aspects == ("土地承包经营权", "土地经营权有什么区别")
    # 合同 contains 同, 和解 contains 和: neither is a conjunction
    assert plan_query("违反民主议定程序的承包合同是否有效？").route == "detail"
    assert plan_query("当事人达成和解协议后能否反悔？").route == "detail"


def test_routing_off_makes_every_question_a_detail_question() -> None:
    assert plan_query("What is this paper about?", routing=False).route == "detail"


def test_leaf_share_by_route() -> None:
    assert QueryPlan("detail", ("q",), "").leaf_share(0.5) == 0.7
    assert QueryPlan("overview", ("q",), "").leaf_share(0.5) == 0.25
    assert QueryPlan("multi-part", ("a", "b"), "").leaf_share(0.5) == 1 / 3


def test_interleave_takes_turns_and_keeps_each_chunk_once() -> None:
    whole = [_hit(1), _hit(2), _hit(3)]
    part = [_hit(2), _hit(9)]
    assert [h.row for h in interleave([whole, part], 10)] == [1, 2, 3, 9]
    assert [h.row for h in interleave([whole, [_hit(9), _hit(8)]], 3)] == [1, 9, 2]


def test_aspect_pool_retrieves_each_part_and_leaves_single_questions_alone() -> None:
    asked: list[str] = []

    def retrieve_for(text: str) -> list[RetrievedChunk]:
        asked.append(text)
        return [_hit(100 + len(asked))]

    whole = [_hit(1), _hit(2)]
    assert [h.row for h in aspect_pool(whole, ["a", "b"], retrieve_for, 10)] == [1, 101, 102, 2]
    assert asked == ["a", "b"]
    assert aspect_pool(whole, ["only"], retrieve_for, 10) == whole and asked == ["a", "b"]


def test_the_parts_lists_take_turns_with_the_whole_question() -> None:
    """Taking turns keeps the whole question first in every round; each chunk is listed once, as its
    first list gave it."""
    whole = [_hit(1), _hit(2), _hit(3), _hit(4)]
    parts = {"a": [_hit(3), _hit(7), _hit(8)], "b": [_hit(3), _hit(9)]}
    turns = aspect_pool(whole, ["a", "b"], parts.__getitem__, 10)
    assert [h.row for h in turns] == [1, 3, 9, 2, 7, 4, 8]
    assert [h.row for h in aspect_pool(whole, ["a", "b"], parts.__getitem__, 3)] == [1, 3, 9]


def test_sub_questions_come_from_the_plan_or_from_an_llm_locators_sub_queries() -> None:
    detail = QueryPlan("detail", ("q",), "")
    same = [LocatedNode("1", "q"), LocatedNode("2", "q")]
    assert sub_questions(detail, same, "q") == []
    llm = [LocatedNode("1", "router design"), LocatedNode("2", "EUR/USD accuracy"), LocatedNode("3", "router design")]
    assert sub_questions(detail, llm, "q") == ["router design", "EUR/USD accuracy"]
    multi = QueryPlan("multi-part", ("a", "b"), "")
    assert sub_questions(multi, llm, "q") == ["a", "b"]


def test_a_multi_part_question_over_several_documents_can_be_read_as_one() -> None:
    from retrieval.query_plan import read_as_one

    q = "法人、非法人组织的简称是否受到保护？"
    multi = plan_query(q)
    assert multi.route == "multi-part" and len(multi.aspects) == 2
    one = read_as_one(multi, q, 139)
    assert one.route == "detail" and one.aspects == (q,) and "139 documents" in one.reason
    assert read_as_one(multi, q, 1) is multi, "within one document the parts are searched on their own"
    detail = plan_query("当事人达成和解协议后能否反悔？")
    assert read_as_one(detail, "当事人达成和解协议后能否反悔？", 139) is detail


def test_the_pipeline_reads_a_multi_part_collection_question_as_one(tmp_path) -> None:
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from pipeline import Backends, question_plan, run_retrieval

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 甲法\n\n第一条 法人的名称受法律保护。\n\n第二条 非法人组织可以依法登记。\n", encoding="utf-8")
    (docs / "b.md").write_text("# 乙法\n\n第一条 企业名称的简称受保护。\n\n第二条 本法自公布之日起施行。\n", encoding="utf-8")
    build_index(docs, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    q = "法人、非法人组织的简称是否受到保护？"
    breadth = Config().tuning.breadth
    assert question_plan(q, index, breadth, None).route == "detail"
    assert question_plan(q, index, breadth, {"a.md"}).route == "multi-part", "one document: the parts stay"
    unrouted = Config().replace(query_routing=False)
    assert question_plan(q, index, unrouted.tuning.breadth, {"a.md"}).route == "detail"
    b = Backends(make_embedder("hash", Config()), None, None)
    r = run_retrieval(q, index, Config(), b)
    assert r.plan is not None and r.plan.route == "detail" and r.pool
    assert run_retrieval(q, index, Config(), b, {"a.md"}).plan.route == "multi-part"
