"""``--structure llm``: an LLM checks the rules' outline (levels, keep/drop), never the text; failures keep the rules."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import Config
from tests.conftest import run_cli
from tests.stub_servers import StubResponse, StubServer, openai_chat_body
from tree_builder.documents import document_from_parts
from tree_builder.llm_structure import StructureChecker, parse_answer
from tree_builder.readers.builder import TextBuilder
from tree_builder.tree import build_tree
from utils.errors import BackendError
from utils.llm.mock import MockLLM


def _doc():
    b = TextBuilder()
    b.new_page()
    for text, marker in [("Item 1. Business", 1), ("Products", 2), ("Total revenues 1,234 1,100", 2),
                         ("Item 2. Properties", 2)]:
        b.heading(text, marker)
        b.paragraph(f"Text under {text}.")
    return document_from_parts(b.text(), "f.pdf", "pdf", b.headings, b.page_starts)


def _reply(levels_keep: list[tuple[int, bool]]) -> str:
    return json.dumps({"headings": [{"id": i, "level": lv, "keep": k} for i, (lv, k) in enumerate(levels_keep)]})


def test_llm_corrects_levels_and_drops_non_headings() -> None:
    llm = MockLLM([_reply([(1, True), (2, True), (2, False), (1, True)])])
    checker = StructureChecker(llm)
    doc = checker.check(_doc())
    root = build_tree([doc], Config(), folder_mode=True)
    tops = [c.heading for c in root.children[0].children]
    assert tops == ["Item 1. Business", "Item 2. Properties"]
    products = [n for n in root.iter_preorder() if n.heading == "Products"][0]
    assert products.parent.heading == "Item 1. Business"
    assert "Total revenues 1,234 1,100" in products.content  # a dropped heading's line stays text
    assert (checker.stats.checked, checker.stats.changed_levels, checker.stats.dropped) == (1, 1, 1)
    prompt = llm.requests[0].prompt
    assert "0\t1\tItem 1. Business" in prompt and "Text under" not in prompt  # the outline only


@pytest.mark.parametrize("reply", [
    "not json", _reply([(1, True), (2, True)]),  # misses ids
    json.dumps({"headings": [{"id": 0, "level": 0, "keep": True}]}),
    BackendError("server down"),
])
def test_a_bad_or_missing_answer_keeps_the_rules_outline(reply) -> None:
    doc = _doc()
    checker = StructureChecker(MockLLM([reply]))
    assert checker.check(doc).headings == doc.headings
    assert checker.stats.failed == 1 and checker.stats.checked == 0


def test_parse_answer_needs_every_id_once() -> None:
    assert parse_answer(_reply([(1, True), (3, False)]), 2) == [(1, True), (3, False)]
    assert parse_answer("```json\n" + _reply([(1, True)]) + "\n```", 1) == [(1, True)]
    assert parse_answer(_reply([(1, True)]), 2) is None


def test_index_structure_llm_through_the_openai_wire_format(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    pytest.importorskip("fpdf")
    from tests.doc_factory import render_filing_pdf

    pdf = tmp_path / "acme.pdf"
    render_filing_pdf(pdf, contents=True)

    def responder(req) -> StubResponse:
        prompt = req.json()["messages"][-1]["content"]
        rows = [ln.split("\t") for ln in prompt.split("<outline>\n")[1].split("\n</outline>")[0].splitlines()]
        # keep the rules' levels, drop "Results of Operations"
        answer = {"headings": [{"id": int(i), "level": int(lv), "keep": title != "Results of Operations"}
                               for i, lv, title in rows]}
        return StubResponse(200, openai_chat_body(json.dumps(answer), prompt_tokens=200, completion_tokens=50))

    env = {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": "sk-test"}
    with StubServer(responder) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        idx = run_cli("index", "--input", str(pdf), "--output", str(tmp_path / "idx"), "--mock",
                      "--structure", "llm", "--llm", "openai:gpt-4o-mini", "--quiet", env=env)
        assert idx.returncode == 0, idx.stderr
        assert "structure: 1 outline(s) checked by LLM, 0 level(s) changed, 1 heading(s) dropped" in idx.stdout
        assert len(srv.requests) == 1 and srv.requests[0].json()["response_format"] == {"type": "json_object"}
    nodes = [json.loads(ln) for ln in (tmp_path / "idx" / "nodes.jsonl").read_text().splitlines()]
    headings = {n["heading"] for n in nodes}
    assert "Item 7. Management's Discussion and Analysis" in headings and "Results of Operations" not in headings


def test_structure_llm_without_an_llm_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    env = {"TREERAG_CACHE_DIR": str(tmp_path / "cache"), "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "",
           "OPENAI_BASE_URL": ""}
    r = run_cli("index", "--input", str(tmp_path / "a.md"), "--output", str(tmp_path / "idx"), "--mock",
                "--structure", "llm", env=env)
    assert r.returncode != 0 and "--structure llm needs an LLM" in r.stderr and "Traceback" not in r.stderr


def test_structure_mode_is_a_build_setting_only_when_not_the_default() -> None:
    from indexing.reuse import build_settings, settings_change

    rules = build_settings(Config(), {"model_id": "h", "dim": 8}, "extractive", False)
    llm = build_settings(Config(structure_mode="llm"), {"model_id": "h", "dim": 8}, "extractive", False)
    assert "structure_mode" not in rules["config"]  # indexes built before the setting keep lending
    assert settings_change(rules, llm) == "structure_mode changed ('rules' -> 'llm')"
    assert settings_change(rules, rules) is None
