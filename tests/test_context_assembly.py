"""Between steps 2 and 3: the ranked hits become the passages the answer reads (retrieval.context_assembly).

Built on the bundled test paper (hash embeddings, ``paper_index``): each leaf there is one or two
paragraphs of 100-600 characters, cut into 200-character windows that overlap by 50.
"""
from __future__ import annotations

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from pipeline import Backends, run_retrieval
from retrieval.context_assembly import AssembledContext, assemble_context
from retrieval.extractive import widen_to_sentences
from retrieval.types import RetrievedChunk
from tests.conftest import TEST_PAPER

QUERIES = ("What is AdaRouter's accuracy on EUR/USD?", "Why does AdaRouter beat the static baseline?",
           "How many epochs was the model trained for?", "What algorithm does the router use?",
           "AdaRouter在EUR/USD上的准确率是多少？")
DOC = TEST_PAPER.read_text(encoding="utf-8")


def pool_of(index, query: str) -> list[RetrievedChunk]:
    """Step 2's ranked pool for ``query``, as run_pipeline assembles from it."""
    b = Backends(embedder=make_embedder("hash", Config()), reranker=None, llm=None)
    return run_retrieval(query, index, Config(), b).pool


def hits(index, *chunk_ids: str) -> list[RetrievedChunk]:
    """A ranked list by hand: the chunks named, rank 1 first."""
    rows = {c.chunk_id: i for i, c in enumerate(index.chunks)}
    return [RetrievedChunk(index.chunks[rows[cid]], 1.0, {}, row=rows[cid]) for cid in chunk_ids]


def chunk(index, chunk_id: str):
    return next(c for c in index.chunks if c.chunk_id == chunk_id)


def section(index, heading: str) -> str:
    """The node id of the fixture paper's section titled ``heading`` (ids follow the tree's numbering,
    which a change to the parser may shift; the headings are the paper's own)."""
    return next(leaf.node_id for leaf in index.leaves if leaf.heading == heading)


def window(index, heading: str, k: int) -> str:
    """The chunk id of the ``k``-th window (0 first) of the section titled ``heading``."""
    return [c.chunk_id for c in index.chunks if c.source_node_id == section(index, heading)][k]


def line_of(offset: int) -> int:
    return DOC.count("\n", 0, offset) + 1


def check_context(ctx: AssembledContext, ranked: list[RetrievedChunk], budget: int) -> None:
    """What every assembled context must be, whatever the hits and the budget."""
    assert sum(len(p.text) for p in ctx.passages) <= budget and ctx.used <= budget
    assert 0 <= ctx.hits_read <= len(ranked)
    keys = [(p.doc_path, p.start) for p in ctx.passages]
    assert keys == sorted(keys), "reading order: document, then position"
    for p, q in zip(ctx.passages, ctx.passages[1:]):
        assert p.doc_path != q.doc_path or p.end <= q.start, f"overlap {p.start}-{p.end} / {q.start}-{q.end}"
    for p in ctx.passages:
        assert p.text and p.text == DOC[p.start:p.end] and p.text.strip() == p.text
        # the citation record is the passage's own span and lines
        c = p.chunk
        assert c is not None and (c.text, c.start_char, c.end_char) == (p.text, p.start, p.end)
        assert (c.start_line, c.end_line) == (line_of(p.start), line_of(p.end - 1))
        assert (c.doc_path, c.source_node_id, c.heading_path) == (p.doc_path, p.node_id, p.heading_path)
        # ranks name hits of this leaf that lie (at least partly) inside the passage
        assert p.ranks == sorted(set(p.ranks)) and all(1 <= r <= len(ranked) for r in p.ranks)
        for r in p.ranks:
            h = ranked[r - 1].chunk
            assert h.source_node_id == p.node_id and h.start_char < p.end and h.end_char > p.start


@pytest.mark.parametrize("budget", [200, 1000, 2000, 4000, 6000])
@pytest.mark.parametrize("query", QUERIES)
def test_context_is_the_documents_text_within_budget_in_reading_order(paper_index, query: str, budget: int) -> None:
    pool = pool_of(paper_index, query)
    ctx = assemble_context(paper_index, pool, budget, leaf_share=Config().tuning.context.context_leaf_share)
    assert ctx.passages and ctx.budget == budget
    check_context(ctx, pool, budget)


@pytest.mark.parametrize("case", ["two windows, later one first", "a real pool at 5,000 characters"])
def test_a_hit_cut_to_the_budget_stays_within_it(paper_index, case: str) -> None:
    if case.startswith("two"):
        ranked, budget, query = hits(paper_index, window(paper_index, "Abstract", 1), window(paper_index, "Abstract", 0)), 221, ""
    else:
        query = "How many epochs was the model trained for?"
        ranked, budget = pool_of(paper_index, query), 5000
    ctx = assemble_context(paper_index, ranked, budget)
    assert ctx.used <= budget and sum(len(p.text) for p in ctx.passages) <= budget


def test_whitespace_joining_two_units_is_charged(paper_index) -> None:
    ctx = assemble_context(paper_index, hits(paper_index, window(paper_index, "4.1 Dataset", 0), window(paper_index, "4.1 Dataset", 2)), 424)
    assert sum(len(p.text) for p in ctx.passages) <= 424


def test_a_hit_is_read_as_its_paragraph_when_that_fits_the_unit(paper_index) -> None:
    # rank 1 starts mid-paragraph (4.2 Performance, first paragraph: 279 characters); the other leaves'
    # hits use up the budget, so nothing grows afterwards
    first = chunk(paper_index, window(paper_index, "4.2 Performance", 1))
    leaf = paper_index.get_node(first.source_node_id)
    para_end = leaf.content.index("\n\n")
    others = [c.chunk_id for c in paper_index.chunks if c.source_node_id != leaf.node_id]
    ranked = hits(paper_index, first.chunk_id, *others)

    def passage_of_rank1(units_per_budget: int):
        ctx = assemble_context(paper_index, ranked, 1800, units_per_budget=units_per_budget)
        check_context(ctx, ranked, 1800)
        return next(p for p in ctx.passages if 1 in p.ranks)

    whole = passage_of_rank1(6)  # unit 300 >= 279: the whole paragraph
    assert first.start_char > leaf.content_start
    assert (whole.start, whole.end) == (leaf.content_start, leaf.content_start + para_end)
    cut = passage_of_rank1(12)  # unit 150 < 279: the hit's own sentences, not the paragraph's start
    assert leaf.content_start < cut.start <= first.start_char and cut.end == whole.end


def test_overlapping_hits_of_one_leaf_are_one_passage_paid_once(paper_index) -> None:
    a, b = chunk(paper_index, window(paper_index, "2 Related Work", 1)), chunk(paper_index, window(paper_index, "2 Related Work", 2))
    assert a.source_node_id == b.source_node_id and b.start_char < a.end_char
    ranked = hits(paper_index, a.chunk_id, b.chunk_id)
    ctx = assemble_context(paper_index, ranked, 450)  # less than the leaf (570): nothing grows to it
    check_context(ctx, ranked, 450)
    assert len(ctx.passages) == 1
    p = ctx.passages[0]
    assert p.ranks == [1, 2] and p.start <= a.start_char and b.end_char <= p.end
    assert p.text.count(DOC[b.start_char:a.end_char]) == 1  # the overlap is read once
    assert ctx.used == len(p.text)  # each character paid for once


def test_one_leaf_takes_at_most_its_share_while_other_leaves_wait(paper_index) -> None:
    # four hits of one leaf (570 characters, more than the budget) ranked above one hit of another leaf
    crowd = [c.chunk_id for c in paper_index.chunks if c.source_node_id == section(paper_index, "2 Related Work")]
    ranked = hits(paper_index, *crowd, window(paper_index, "4.2 Performance", 0))
    other = len(ranked)
    shared = assemble_context(paper_index, ranked, 500, leaf_share=0.5)
    greedy = assemble_context(paper_index, ranked, 500, leaf_share=1.0)
    for ctx in (shared, greedy):
        check_context(ctx, ranked, 500)
    assert any(other in p.ranks for p in shared.passages), "the other leaf's hit is read"
    assert not any(other in p.ranks for p in greedy.passages), "without the share the first leaf takes it all"
    crowd_chars = sum(len(p.text) for p in shared.passages if p.node_id == section(paper_index, "2 Related Work"))
    assert crowd_chars < sum(len(p.text) for p in greedy.passages if p.node_id == section(paper_index, "2 Related Work"))


def test_leftover_budget_grows_a_passage_to_its_paragraph_then_its_leaf(paper_index) -> None:
    first = chunk(paper_index, window(paper_index, "4.2 Performance", 1))
    leaf = paper_index.get_node(first.source_node_id)
    ranked = hits(paper_index, first.chunk_id)
    small = assemble_context(paper_index, ranked, 300)  # the sentences (233), then the paragraph (279)
    big = assemble_context(paper_index, ranked, 6000)  # the whole leaf (532)
    for ctx, budget in ((small, 300), (big, 6000)):
        check_context(ctx, ranked, budget)
        assert len(ctx.passages) == 1 and ctx.passages[0].ranks == [1]
    assert (small.passages[0].start, small.passages[0].end) == (leaf.content_start,
                                                                leaf.content_start + leaf.content.index("\n\n"))
    text = leaf.content.strip()
    assert big.passages[0].text == text and big.used == len(text) < 6000


def test_a_tiny_budget_still_reads_the_best_hits_window(paper_index) -> None:
    best = chunk(paper_index, window(paper_index, "4.2 Performance", 1))
    ranked = hits(paper_index, best.chunk_id, window(paper_index, "Abstract", 0))
    fits = assemble_context(paper_index, ranked, len(best.text))
    check_context(fits, ranked, len(best.text))
    assert [(p.start, p.end, p.ranks) for p in fits.passages] == [(best.start_char, best.end_char, [1])]
    tiny = assemble_context(paper_index, ranked, 100)
    check_context(tiny, ranked, 100)
    assert len(tiny.passages) == 1 and tiny.passages[0].ranks == [1]
    assert tiny.passages[0].start == best.start_char and best.text.startswith(tiny.passages[0].text)
    assert len(tiny.passages[0].text) > 90
    # on a real pool, the smallest budget allowed still holds step 2's #1
    pool = pool_of(paper_index, QUERIES[0])
    ctx = assemble_context(paper_index, pool, 200)
    top = pool[0].chunk
    assert any(p.start <= top.start_char and top.end_char <= p.end and 1 in p.ranks for p in ctx.passages)


# --------------------------------------------------------------------------- ranked pool order

def test_each_paragraph_s_best_window_comes_first(paper_index) -> None:
    from retrieval.breadth import paragraph_first

    # three windows of one long paragraph (0011, 3.3 Training Procedure), then one of another leaf
    same = [c.chunk_id for c in paper_index.chunks if c.source_node_id == section(paper_index, "3.3 Training Procedure")][:3]
    other = next(c.chunk_id for c in paper_index.chunks if c.source_node_id == section(paper_index, "4.2 Performance"))
    ranked = hits(paper_index, *same, other)
    assert "\n\n" not in paper_index.get_node(section(paper_index, "3.3 Training Procedure")).content.strip()  # the leaf is one paragraph
    out = paragraph_first(ranked, paper_index)
    assert [h.chunk.chunk_id for h in out] == [same[0], other, same[1], same[2]]
    assert paragraph_first([], paper_index) == []


def test_a_short_pool_is_continued_by_the_flat_ranking(paper_index) -> None:
    from retrieval.ordering import Ask
    from retrieval.query import Query
    from retrieval.retriever import Retriever

    class Fixed:
        """An ordering that returns the hits it was given."""

        def __init__(self, given):
            self.given = given

        def order(self, index, embedder, config, ask):
            return list(self.given)

    b = Backends(embedder=make_embedder("hash", Config()), reranker=None, llm=None)
    config = Config().replace(context_pool=10)
    question = Query.build(QUERIES[0], b.embedder)

    def pool_of(given):
        r = Retriever(paper_index, config, b.embedder, None, Fixed(given), Fixed(given))
        return r.retrieve(Ask(question, []), [], fill=True).pool

    head = hits(paper_index, window(paper_index, "4.2 Performance", 0), window(paper_index, "Abstract", 0))
    out = pool_of(head)
    assert out[:2] == head and len(out) == 10
    assert len({h.row for h in out}) == 10, "no chunk twice"
    assert all(h.source == "net" for h in out[2:])
    full = hits(paper_index, *[c.chunk_id for c in paper_index.chunks[:10]])
    assert {h.row for h in pool_of(full)} == {h.row for h in full}


def test_a_packed_chunk_is_read_whole_not_as_its_middle_paragraph(tmp_path) -> None:
    # the default build packs short consecutive paragraphs into one chunk: the reader must get all of
    # them (the evidence may be any one), not only the paragraph under the chunk's middle
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    clauses = "\n\n".join(f"第{n}条 第{n}款的规定内容，适用于本章所列的各种情形。" for n in range(1, 13))
    doc = tmp_path / "law.md"
    doc.write_text(f"# 某法\n\n## 第一章 总则\n\n{clauses}\n\n## 第二章 附则\n\n本法自公布之日起施行。\n",
                   encoding="utf-8")
    build_index(doc, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    packed = next(c for c in index.chunks if c.text.count("\n\n") >= 2)
    others = [c.chunk_id for c in index.chunks if c.chunk_id != packed.chunk_id]
    ranked = hits(index, packed.chunk_id, *others)
    budget = len(packed.text) + 10  # no room to grow: what the hit is read as is all there is
    ctx = assemble_context(index, ranked, budget, units_per_budget=1)
    first = next(p for p in ctx.passages if 1 in p.ranks)
    assert first.start <= packed.start_char and first.end >= packed.end_char


def _long_paragraph_index(tmp_path):
    """An index of one leaf holding one 1,800-character paragraph of numbered sentences."""
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    sentences = [f"Sentence {n:02d} reports that the measured value of setting {n} stays near {n * 7}." for n in range(1, 26)]
    para = " ".join(sentences)
    doc = tmp_path / "long.md"
    doc.write_text(f"# A report\n\n## Results\n\n{para}\n\n## Other\n\nA short closing note.\n", encoding="utf-8")
    build_index(doc, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    mid = next(c for c in index.chunks if "Sentence 12" in c.text and c.start_char > 600)
    leaf = index.get_node(mid.source_node_id)
    return index, mid, leaf, para


def _is_sentence_start(text: str, off: int) -> bool:
    return text[off:].startswith("Sentence")


def test_a_hit_in_a_long_paragraph_is_read_with_the_sentences_around_it(tmp_path) -> None:
    # the unit (800) around the match, in whole sentences, inside the paragraph (1,800)
    index, mid, leaf, para = _long_paragraph_index(tmp_path)
    assert len(para) > 1600
    ranked = hits(index, mid.chunk_id)
    # a budget of one unit (800 characters): the first pass alone, nothing left to grow
    ctx = assemble_context(index, ranked, 800, units_per_budget=1)
    win = next(p for p in ctx.passages if 1 in p.ranks)
    assert win.start <= mid.start_char and mid.end_char <= win.end, "the match is inside what is read"
    text = leaf.content
    own_a, own_b = widen_to_sentences(text, mid.start_char - leaf.content_start, mid.end_char - leaf.content_start)
    assert own_b - own_a < len(win.text) <= 800, "more than the hit's own sentences"
    assert len(win.text) > 800 - 100, "grown until the next sentence would not fit"
    a, b = win.start - leaf.content_start, win.end - leaf.content_start
    assert _is_sentence_start(text, a) and text[b - 1] == "."
    assert win.start > leaf.content_start, "the paragraph is longer than the unit: not read from its start"
    # read on both sides of the match, not only forward
    assert a < own_a and b > own_b


def test_the_unit_is_a_share_of_the_budget_and_a_short_paragraph_is_read_whole(tmp_path) -> None:
    index, mid, leaf, para = _long_paragraph_index(tmp_path)
    ranked = hits(index, mid.chunk_id)
    for budget, upb in ((1200, 3), (1200, 6), (6000, 3)):
        unit = budget // upb
        # a budget of one unit: the first pass alone
        ctx = assemble_context(index, ranked, unit, units_per_budget=1)
        p = next(p for p in ctx.passages if 1 in p.ranks)
        if unit >= len(para):
            assert p.text == para
        else:
            assert len(p.text) <= unit and p.start <= mid.start_char and mid.end_char <= p.end


def test_a_detail_question_reads_larger_units_than_a_multi_part_one(tmp_path) -> None:
    from retrieval.context_assembly import assemble_planned
    from retrieval.query_plan import QueryPlan

    index, mid, leaf, para = _long_paragraph_index(tmp_path)
    other = [c.chunk_id for c in index.chunks if c.source_node_id != leaf.node_id]
    ranked = hits(index, mid.chunk_id, *other)
    cfg = Config()
    detail = QueryPlan("detail", ("q",), "one thing")
    multi = QueryPlan("multi-part", ("a", "b"), "two parts")
    assert detail.units_per_budget(cfg.tuning.context.context_units_per_budget) == cfg.tuning.context.context_units_per_budget == 3
    assert multi.units_per_budget(cfg.tuning.context.context_units_per_budget) == 6
    assert QueryPlan("overview", ("q",), "gist").units_per_budget(3) == 6
    budget = 1500

    def rank1(plan):
        ctx = assemble_planned(index, ranked, budget, plan, cfg.tuning.context)
        check = [p for p in ctx.passages if 1 in p.ranks]
        assert len(check) == 1 and ctx.used <= budget
        return check[0]

    # the paragraph (1,800) costs more than what is left after the first pass, so nothing grows:
    # rank 1's passage is its first-pass unit, a third of the budget or a sixth
    d, m = rank1(detail), rank1(multi)
    assert m.start <= mid.start_char and mid.end_char <= m.end
    assert len(m.text) <= budget // 6 < len(d.text) <= budget // 3


def test_units_per_budget_is_validated() -> None:
    from utils.errors import InputError

    with pytest.raises(InputError, match="context_units_per_budget must be in"):
        Config().replace(context_units_per_budget=0)


@pytest.mark.parametrize("text, listing", [
    ("Page No.\nConsolidated Balance Sheets 53\nConsolidated Statements of Income 54\n"
     "Consolidated Statements of Cash Flows 55\nNotes to Consolidated Financial Statements 57", True),
    ("Income Tax Expense and Accruals 57\nPension and Retiree Medical Plans 58\nOur Liquidity . . . 61\n"
     "CONSOLIDATED STATEMENT OF CASH FLOWS 62", True),
    ("Americas 120\nEurope 85\nAsia 40\nOther 12", False),  # figures that fall
    ("Depreciation 300\nAmortization 320\nTotal 620\nTaxes 700", False),  # figures that leap
    ("Net revenue 1,234 1,100\nCost of sales 800 760\nGross profit 434 340\nOther 12 10", False),
    ("Overview 3\nRisks 5\nThe Company sells widgets in many countries and reports in dollars.", False),
])
def test_a_contents_listing_is_told_from_a_table(text: str, listing: bool) -> None:
    from retrieval.context_assembly import contents_listing

    assert contents_listing(text) is listing


def test_a_contents_listing_is_read_after_the_other_hits(tmp_path) -> None:
    """A contents list shares every word of a question that names the sections it lists; it is read
    only when the budget remains after the sections' own text."""
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    listing = "\n".join(f"Consolidated Statement of {name} {page}" for name, page in
                        (("Income", 53), ("Cash Flows", 54), ("Equity", 55), ("Comprehensive Income", 56)))
    doc = tmp_path / "filing.md"
    doc.write_text(f"# Filing\n\n## Index to Financial Statements\n\n{listing}\n\n## Consolidated Statement of "
                   "Income\n\nNet revenue grew to 1,234 million from 1,100 million.\n", encoding="utf-8")
    build_index(doc, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    toc = next(c for c in index.chunks if "Cash Flows 54" in c.text)
    income = next(c for c in index.chunks if "Net revenue grew" in c.text)
    ranked = hits(index, toc.chunk_id, income.chunk_id)
    ctx = assemble_context(index, ranked, 80, units_per_budget=1)
    assert [p.ranks for p in ctx.passages] == [[2]]  # the statement's text, not the listing ranked above it
    ctx = assemble_context(index, ranked, 2000)
    assert sorted(r for p in ctx.passages for r in p.ranks) == [1, 2]  # with room, both


def test_a_table_row_is_read_from_its_column_header_down(tmp_path) -> None:
    """A row read alone ("Effective tax rate 23% 20%") does not say which year each figure is: a hit on
    a table's rows is read from the table's column header down when that fits the unit, and as its own
    rows when it does not."""
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    groups = [f"Line item {n} $ {n},100 $ {n},000 {n}%\n(as a % of net sales) {n}% {n + 1}%" for n in range(1, 9)]
    table = "Year ended December 31, % change\n2022 2021 22 vs. 21\n\n" + "\n\n".join(groups)
    rate = "Provision for income taxes $ (411) $ (491) 16%\nEffective tax rate 23% 20%"
    doc = tmp_path / "filing.md"
    doc.write_text("# Filing\n\n## Results of Operations\n\nThe following table presents selected highlights from "
                   f"our operations (in millions):\n\n{table}\n\n{rate}\n\n## Net Sales\n\nNet sales grew.\n",
                   encoding="utf-8")
    build_index(doc, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    hit = next(c for c in index.chunks if "Effective tax rate" in c.text)
    assert "2022 2021" not in hit.text
    text = doc.read_text(encoding="utf-8")
    from_header = text[text.index("Year ended"):hit.end_char]
    ctx = assemble_context(index, hits(index, hit.chunk_id), len(from_header) + 10, units_per_budget=1)
    assert [p.text for p in ctx.passages] == [from_header]
    line_down = text[text.index("2022 2021"):hit.end_char]  # room for the header's line, not its paragraph
    ctx = assemble_context(index, hits(index, hit.chunk_id), len(line_down) + 10, units_per_budget=1)
    assert [p.text for p in ctx.passages] == [line_down]
    ctx = assemble_context(index, hits(index, hit.chunk_id), len(hit.text) + 20, units_per_budget=1)
    assert [p.text for p in ctx.passages] == [hit.text]  # too far down for the unit: the rows alone
