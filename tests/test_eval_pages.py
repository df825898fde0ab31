"""Page-labelled evidence (FinanceBench-style sets): placement, page@B, doc@1, label slices, one read."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.dataset import (Evidence, find_ignoring_space, load_eval_set, page_span, place_item,
                                place_on_page)
from evaluation.metrics import PAGE_KEYS, PAGE_READ_CHARS, doc_at_1, page_figures, page_read, read_context


# --------------------------------------------------------------------------- page@B, doc@1 by hand

def test_page_read_counts_a_page_read_for_200_characters_or_all_of_a_short_page() -> None:
    pages = [("a.pdf", (0, 1000)), ("a.pdf", (1000, 1100)), ("b.pdf", (0, 5000))]
    # reads 199 chars of page 1, all 100 of short page 2, nothing of b.pdf
    ctx = read_context([("a.pdf", (801, 1000)), ("a.pdf", (1000, 1100))], 10_000)
    assert page_read(pages, ctx) == pytest.approx(1 / 3)
    ctx = read_context([("a.pdf", (800, 1000)), ("b.pdf", (4000, 4300))], 10_000)
    assert page_read(pages, ctx) == pytest.approx(2 / 3)  # exactly 200 of page 1; 300 of b's page
    ctx = read_context([("a.pdf", (1050, 1100))], 10_000)  # half of the short page is not all of it
    assert page_read(pages, ctx) == 0.0


def test_page_figures_cut_the_context_at_each_budget() -> None:
    pages = [("a.pdf", (10_000, 14_000))]
    passages = [("a.pdf", (0, 3000)), ("b.pdf", (0, 4000)), ("a.pdf", (10_000, 14_000))]
    got = page_figures({b: passages for b in (2000, 4000, 8000, 16000)}, pages)
    # the page starts after 7,000 characters of other text: 7,200 are needed to read 200 of it
    assert got == {"page@2k": 0.0, "page@4k": 0.0, "page@8k": 1.0, "page@16k": 1.0}
    assert page_figures({b: passages for b in (2000, 16000)}, []) == {"page@2k": None, "page@16k": None}


def test_the_same_page_twice_is_one_page_and_empty_pages_do_not_count() -> None:
    pages = [("a.pdf", (0, 500)), ("a.pdf", (0, 500)), ("a.pdf", (500, 500))]
    assert page_read(pages, read_context([("a.pdf", (0, 300))], 1000)) == 1.0
    assert page_read([("a.pdf", (5, 5))], read_context([("a.pdf", (0, 300))], 1000)) is None


def test_doc_at_1() -> None:
    assert doc_at_1("a.pdf", ["b.pdf", "a.pdf"]) == 1.0
    assert doc_at_1("c.pdf", ["b.pdf", "a.pdf"]) == 0.0
    assert doc_at_1(None, ["a.pdf"]) == 0.0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 600), st.integers(1, 300)), max_size=8),
       st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 600), st.integers(0, 400)),
                min_size=1, max_size=4),
       st.integers(1, 1500))
def test_page_read_re_derived_character_by_character(passages, pages, budget) -> None:
    """page@B as the definition reads: walk the passages, a character read once, until B are read;
    a page counts when min(200, its length) of its characters were read."""
    spans = [(d, (s, s + n)) for d, s, n in passages]
    page_list = [(d, (s, s + n)) for d, s, n in pages]
    seen: set[tuple[str, int]] = set()
    left = budget
    for d, (s, e) in spans:
        for i in range(s, e):
            if left == 0:
                break
            if (d, i) not in seen:
                seen.add((d, i))
                left -= 1
    distinct = [p for p in dict.fromkeys(page_list) if p[1][1] > p[1][0]]
    want = None if not distinct else sum(
        1 for d, (s, e) in distinct
        if sum((d, i) in seen for i in range(s, e)) >= min(PAGE_READ_CHARS, e - s)) / len(distinct)
    assert page_read(page_list, read_context(spans, budget)) == want


# --------------------------------------------------------------------------- placement

def test_find_ignoring_space_maps_back_to_the_document() -> None:
    text = "Total revenues   66,608\n62,286  \nNet income 3,000"
    span = find_ignoring_space(text, "revenues 66,608 62,286")
    assert span is not None and text[span[0]:span[1]] == "revenues   66,608\n62,286"
    assert find_ignoring_space(text, "Total  revenues\n\n66,608") == (0, 23)
    assert find_ignoring_space(text, "Total revenues 66,609") is None
    assert find_ignoring_space(text, "  \n ") is None


def test_place_on_page_prefers_the_text_then_source_text_then_the_page() -> None:
    doc = "page one text\nPAGE TWO a b c\nsecond row 12 34\npage three"
    p2 = (14, 47)
    spans, which = place_on_page(doc, p2, ["second  row 12\n34", "a b c"])
    assert which == 0 and doc[spans[0][0]:spans[0][1]] == "second row 12 34"
    spans, which = place_on_page(doc, p2, ["not here", "abc"])
    assert which == 1 and doc[spans[0][0]:spans[0][1]] == "a b c"
    spans, which = place_on_page(doc, p2, ["page three", "page one"])  # on other pages only
    assert which == 2 and spans == (p2,)


def _doc(text: str, page_starts: list[int]):
    from tree_builder.documents import document_from_parts

    return document_from_parts(text, "f.pdf", "pdf", [], page_starts, "F")


def test_place_item_keeps_verbatim_text_and_names_its_page() -> None:
    text = "Cover page\nRevenue 10\nCost 4\nNotes\n"
    doc = _doc(text, [0, 11, 29])
    assert page_span(doc.page_starts, len(doc.text), 2) == (11, 29)
    assert page_span(doc.page_starts, len(doc.text), 3) == (29, len(doc.text))
    assert page_span(doc.page_starts, len(doc.text), 4) is None
    ev = place_item(doc, {"doc": "f.pdf", "text": "Revenue 10", "page": 2})
    assert ev == Evidence("f.pdf", ((11, 21),), page=2, page_span=(11, 29), placed="verbatim")
    ev = place_item(doc, {"doc": "f.pdf", "text": "Revenue  10 (old reader)", "source_text": "Cost\n4", "page": 2})
    assert ev is not None and ev.placed == "source-text" and doc.text[ev.spans[0][0]:ev.spans[0][1]] == "Cost 4"
    ev = place_item(doc, {"doc": "f.pdf", "text": "gone", "source_text": "gone too", "page": 2})
    assert ev is not None and ev.placed == "page" and ev.spans == ((11, 29),)
    assert place_item(doc, {"doc": "f.pdf", "text": "gone", "page": 9}) is None  # no such page
    assert place_item(doc, {"doc": "f.pdf", "text": "gone"}) is None  # no page given: not placed


# --------------------------------------------------------------------------- a generated PDF set, end to end

PAGES = {
    "acme_2021.pdf": [
        "Acme Corporation Annual Report 2021. Acme makes anvils and rockets for desert customers.",
        "Consolidated statement of operations. Total revenues were 66,608 million dollars in fiscal 2021, "
        "against 62,286 million dollars in fiscal 2020. Cost of goods sold rose with anvil demand.",
        "Risk factors. Coyote related liabilities may affect results. Weather delays rocket launches.",
    ],
    "bolt_2022.pdf": [
        "Bolt Incorporated quarterly report 2022. Bolt sells lightning rods to utilities.",
        "Balance sheet. Cash and equivalents were 1,234 million dollars at the end of the quarter, "
        "and long term debt stood at 5,678 million dollars after the bond issue.",
    ],
}


def _render(pages: list[str], path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_font("Helvetica", "", 11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))


def _item(doc: str, text: str, page: int, source_text: str | None = None) -> dict:
    return {"doc": doc, "text": text, "page": page, "anchor": "exact", "source_text": source_text or text}


@pytest.fixture(scope="module")
def pdf_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pdfset")
    (root / "docs").mkdir()
    for name, pages in PAGES.items():
        _render(pages, root / "docs" / name)
    qs = [
        {"id": "r1", "query": "What were Acme total revenues in fiscal 2021?", "lang": "en",
         "question_type": "metrics-generated", "question_reasoning": "Information extraction",
         "evidence": [_item("acme_2021.pdf", "Total revenues were 66,608 million dollars in fiscal 2021", 2)]},
        # the text an older reader gave (its line breaks elsewhere) is not verbatim any more:
        # the annotators' source_text places it on its page
        {"id": "r2", "query": "How much cash did Bolt hold at the end of the quarter?", "lang": "en",
         "question_type": "domain-relevant", "question_reasoning": None,
         "evidence": [_item("bolt_2022.pdf", "Cash and equivalents were 1,234 million\n\ndollars [old reader]", 2,
                            source_text="Cash and equivalents were\n1,234 million dollars")]},
        # neither text is on the page: the whole page is the evidence
        {"id": "r3", "query": "Which risks could delay Acme rocket launches?", "lang": "en",
         "question_type": "domain-relevant",
         "evidence": [_item("acme_2021.pdf", "this sentence was never on the page", 3,
                            source_text="nor was this one")]},
    ]
    (root / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in qs) + "\n", encoding="utf-8")
    return root


def test_the_set_places_every_item_and_counts_how(pdf_set: Path) -> None:
    s = load_eval_set(pdf_set)
    assert s.placements == {"verbatim": 1, "source-text": 1, "page": 1} and s.missing_evidence == 0
    assert s.has_pages and "1 source-text, 1 page" in s.summary_line()
    by_id = {q.id: q for q in s.questions}
    bolt = next(d for d in s.documents if d.path == "bolt_2022.pdf")
    ev = by_id["r2"].evidence[0]
    assert " ".join(bolt.text[ev.spans[0][0]:ev.spans[0][1]].split()) == \
        "Cash and equivalents were 1,234 million dollars"
    assert ev.page_span == page_span(bolt.page_starts, len(bolt.text), 2)
    assert by_id["r1"].labels == (("question_type", "metrics-generated"),
                                  ("question_reasoning", "Information extraction"))
    assert by_id["r2"].labels == (("question_type", "domain-relevant"),)  # a null label is no slice


def test_bad_page_field_is_a_one_line_error(tmp_path: Path) -> None:
    from utils.errors import InputError

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text here.\n", encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text(json.dumps({"id": "x", "query": "q", "evidence": [
        {"doc": "a.md", "text": "Some text", "page": "two"}]}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: evidence item 1: 'page' must be a page number"):
        load_eval_set(tmp_path)


def test_eval_reports_page_figures_label_slices_and_reads_each_pdf_once(pdf_set: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import tree_builder.loader as loader
    from evaluation.report import format_table, run_to_dict
    from evaluation.runner import EvalOptions, run_eval

    reads: list[str] = []
    real = loader.read_document

    def counting(path, rel, *a, **kw):
        reads.append(rel)
        return real(path, rel, *a, **kw)

    monkeypatch.setattr(loader, "read_document", counting)
    opts = EvalOptions(data=pdf_set, cache_root=tmp_path, progress=False, notice=lambda m: None, resamples=200,
                       embedder="hash", arms=["flat-bm25", "flat-hybrid", "tree-hybrid"])
    run = run_eval(opts)
    assert sorted(reads) == sorted(PAGES)  # placed the evidence and built the index from one read
    assert set(PAGE_KEYS) <= set(run.slice_keys)
    for r in run.results:
        for name, scores in r.scores.items():
            top = run.index.chunks[r.outputs[name].rows[0]].doc_path if r.outputs[name].rows else None
            assert scores["doc@1"] == float(top in {e.doc for e in r.question.evidence})
            assert all(scores[k] is not None for k in PAGE_KEYS)
            # contexts were assembled up to 16k, so page@16k reads the arm's own context
            assert "16000" in r.outputs[name].contexts
    assert set(run.label_slices) == {"question_type=metrics-generated", "question_type=domain-relevant",
                                     "question_reasoning=Information extraction"}
    assert run.label_slices["question_type=domain-relevant"].n == 2
    text = format_table(run)
    assert "page@16k" in text and "slice question_type=domain-relevant: 2 question(s)" in text
    assert "evidence items placed: 1 verbatim, 1 source-text, 1 page" in text
    d = run_to_dict(run)
    row = next(t for t in d["table"] if t["arm"] == "tree-hybrid")
    assert all(k in row for k in ("page@2k", "page@4k", "page@8k", "page@16k", "doc@1"))
    assert d["evidence_placed"] == {"verbatim": 1, "source-text": 1, "page": 1}
    assert "page@8k" in d["slices"]["all"]["vs_baseline"]["tree-hybrid"]
    assert "question_type=domain-relevant" in d["label_slices"]

    reads.clear()  # a rerun reads nothing: the documents come from the cache (JSON), the results too
    again = run_eval(opts)
    assert reads == [] and again.computed == 0
    assert [s.means for s in again.summaries] == [s.means for s in run.summaries]
    assert list((tmp_path / "eval" / "documents").glob("*.json"))
    assert not list((tmp_path / "eval" / "documents").glob("*.pkl"))


def test_an_index_rebuilt_after_a_text_change_embeds_only_the_changed_chunks(tmp_path: Path) -> None:
    """A reader change gives documents new content hashes, so a new cache key and an empty folder:
    the build lends the vectors of the earlier cached index by text instead of embedding all again."""
    import re

    from evaluation.runner import EvalOptions, run_eval

    data = tmp_path / "set"
    (data / "docs").mkdir(parents=True)
    for i in range(4):
        (data / "docs" / f"d{i}.md").write_text(
            f"# Doc {i}\n\n" + "\n\n".join(f"## Part {j}\n\nDocument {i} part {j} is about gears number {j}."
                                          for j in range(20)) + "\n", encoding="utf-8")
    (data / "qa.jsonl").write_text(json.dumps({"id": "q", "query": "gears number 7 of document 2", "evidence": [
        {"doc": "d2.md", "text": "Document 2 part 7 is about gears number 7."}]}) + "\n", encoding="utf-8")
    notices: list[str] = []
    opts = EvalOptions(data=data, cache_root=tmp_path / "cache", progress=False, notice=notices.append,
                       resamples=50, embedder="hash", arms=["flat-bm25"])
    first = run_eval(opts)
    chunks = first.index.metadata["counts"]["chunks"]
    with open(data / "docs" / "d3.md", "a", encoding="utf-8") as fh:  # as if a reader now read more of it
        fh.write("\n## Appendix\n\nA new paragraph the reader did not give before.\n")
    notices.clear()
    second = run_eval(opts)
    assert second.index_info["path"] != first.index_info["path"]  # a new cache key: a new folder
    assert any(n.startswith("lending the vectors of ") for n in notices), notices
    line = next(n for n in notices if "re-embedded" in n)
    assert 0 < int(re.search(r"re-embedded (\d+) chunks", line).group(1)) < chunks // 2
    assert second.index.metadata["counts"]["chunks"] == chunks + 1
    assert (Path(first.index_info["path"]) / "metadata.json").is_file()  # the lender is left as it was


def test_the_document_cache_reads_again_when_the_file_the_reader_or_a_limit_changes(tmp_path: Path) -> None:
    from evaluation.doc_cache import DocumentCache, document_from_dict, document_to_dict, reader_digest
    from tree_builder.readers.limits import ReadLimits

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha text.\n", encoding="utf-8")
    (docs / "b.md").write_text("# B\n\nBeta text.\n", encoding="utf-8")
    folder = tmp_path / "cache"

    def read(code: str = "v1", limits: ReadLimits = ReadLimits()) -> DocumentCache:
        c = DocumentCache(folder, limits, code)
        got, _ = c.read(docs)
        assert [d.path for d in got] == ["a.md", "b.md"]
        return c

    assert read().reads == 2
    assert (read().reads, read().hits) == (0, 2)
    (docs / "b.md").write_text("# B\n\nBeta text, edited.\n", encoding="utf-8")
    assert read().reads == 1
    assert read("v2").reads == 2  # another reader
    assert read("v2", ReadLimits(max_headings=10)).reads == 2  # another limit
    for f in folder.glob("*.json"):
        f.write_text("{not json", encoding="utf-8")  # a damaged entry is read again, not trusted
    assert read().reads == 2
    doc = read().read(docs)[0][1]
    assert document_from_dict(json.loads(json.dumps(document_to_dict(doc)))) == doc
    root = Path(__file__).resolve().parent.parent
    assert reader_digest(root) == reader_digest(root) and len(reader_digest(root)) == 20


def test_the_lender_is_an_index_of_the_same_embedder(tmp_path: Path) -> None:
    """An index of another embedder lends no vector, however many documents it shares: one of the asked
    embedder is copied first (an ONNX cut of a set beside the set's hash index)."""
    import os
    from types import SimpleNamespace

    from evaluation.eval_index import seed_from_earlier

    def cached(name: str, embedder: str, docs: list[str], mtime: float) -> None:
        (tmp_path / name).mkdir()
        meta = tmp_path / name / "metadata.json"
        meta.write_text(json.dumps({"embedder": {"name": embedder}, "documents": [{"path": d} for d in docs]}),
                        encoding="utf-8")
        os.utime(meta, (mtime, mtime))

    cached("hash-all", "hash", ["a.pdf", "b.pdf", "c.pdf", "d.pdf"], 2_000_000)
    cached("onnx-cut", "onnx", ["a.pdf", "b.pdf"], 1_000_000)
    docs = [SimpleNamespace(path=p) for p in ("a.pdf", "b.pdf")]
    assert seed_from_earlier(tmp_path / "new-any", docs, False) == tmp_path / "hash-all"  # most shared, newest
    assert seed_from_earlier(tmp_path / "new-onnx", docs, False, "onnx") == tmp_path / "onnx-cut"
    assert json.loads((tmp_path / "new-onnx" / "metadata.json").read_text())["embedder"]["name"] == "onnx"
