"""An answer the server cut at its token limit is flagged and never cached."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.stub_servers import StubResponse, StubServer, anthropic_message_body, openai_chat_body
from tests.test_llm_client import ANTHROPIC, OPENAI, make_client
from utils.llm.cached import CachedLLM
from utils.llm.response_cache import CACHE_FILENAME, LLMCache


@pytest.mark.parametrize("provider, cut, whole", [
    (OPENAI, openai_chat_body("half an ans", finish_reason="length"), openai_chat_body("the whole answer")),
    (ANTHROPIC, anthropic_message_body("half an ans", stop_reason="max_tokens"),
     anthropic_message_body("the whole answer")),
], ids=["openai-length", "anthropic-max_tokens"])
def test_truncated_reply_is_flagged_and_not_cached(tmp_path: Path, provider, cut, whole) -> None:
    with StubServer([StubResponse(200, cut), StubResponse(200, whole)]) as srv:
        llm = CachedLLM(make_client(provider, srv), LLMCache(tmp_path / CACHE_FILENAME))
        first = llm.generate("hi", max_tokens=5)
        assert first.truncated and first.text == "half an ans"
        second = llm.generate("hi", max_tokens=5)  # the server is healthy now: asked again
        assert not second.cached and second.text == "the whole answer" and not second.truncated
        third = llm.generate("hi", max_tokens=5)
        assert third.cached and third.text == "the whole answer"
    assert srv.request_count == 2


def _responder(cut: bool):
    def respond(req) -> StubResponse:
        prompt = req.json()["messages"][-1]["content"]
        if "检索到的证据" in prompt:
            if cut:
                return StubResponse(200, openai_chat_body("AdaRouter reaches 73", finish_reason="length"))
            return StubResponse(200, openai_chat_body("AdaRouter reaches 73.2% on EUR/USD."))
        return StubResponse(200, openai_chat_body('{"thinking": "x", "results": []}'))
    return respond


def test_truncated_answer_is_said_in_terminal_and_json_and_not_served_later(tmp_path: Path,
                                                                           paper_index_dir: Path) -> None:
    env = {"TREERAG_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}
    q = ("query", "--index", str(paper_index_dir), "--no-log", "--llm", "openai:gpt-4o-mini", "--locator", "hybrid",
         "-q", "What is AdaRouter's accuracy on EUR/USD?")
    with StubServer(_responder(cut=True)) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        as_json = run_cli(*q, "--json", env=env)
        terminal = run_cli(*q, env=env)
    assert as_json.returncode == 0, as_json.stderr
    res = json.loads(as_json.stdout)
    assert res["answer"] == "AdaRouter reaches 73" and res["answer_truncated"] is True
    assert "cut short" in terminal.stdout
    with StubServer(_responder(cut=False)) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        healthy = run_cli(*q, "--json", env=env)
    res = json.loads(healthy.stdout)
    assert res["answer"] == "AdaRouter reaches 73.2% on EUR/USD." and res["answer_truncated"] is False


def test_api_result_says_the_answer_was_cut() -> None:
    from pipeline import QueryResult
    from utils.run_record import RunRecord

    raw = {"query": "q", "created_at": "t", "answer": "half", "evidence_found": True, "run_id": "r",
           "answer_truncated": True}
    assert QueryResult.from_record(RunRecord.from_dict(raw)).truncated
    assert not QueryResult.from_record(RunRecord.from_dict({**raw, "answer_truncated": False})).truncated
