"""The real OpenAI client path end to end through the CLI, against a stub server on 127.0.0.1."""
from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import TEST_PAPER, run_cli
from tests.stub_servers import StubResponse, StubServer, openai_chat_body


def _responder(req) -> StubResponse:
    body = req.json()
    prompt = body["messages"][-1]["content"]
    if "文档结构:" in prompt:  # node locating
        ids = [line.split("]")[0].strip("[ ") for line in prompt.splitlines()
               if "(叶子节点)" in line and "Performance" in line]
        return StubResponse(200, openai_chat_body(
            "```json\n" + json.dumps({"thinking": "accuracy lives in Performance",
                                      "results": [{"node_id": int(ids[0]), "sub_query": "EUR/USD accuracy"}]})
            + "\n```", prompt_tokens=900, completion_tokens=40))
    if "检索到的证据" in prompt:
        return StubResponse(200, openai_chat_body(
            "AdaRouter reaches 73.2% on EUR/USD [来源: 4 Experiments > 4.2 Performance].",
            prompt_tokens=500, completion_tokens=30))
    return StubResponse(200, openai_chat_body("An LLM summary of this section.", prompt_tokens=300,
                                              completion_tokens=12))


def test_index_and_query_through_the_openai_wire_format(tmp_path: Path) -> None:
    env = {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": "sk-test"}
    with StubServer(_responder) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        idx = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx"), "--mock",
                      "--summaries", "llm", "--llm", "openai:gpt-4o-mini", "--quiet", env=env)
        assert idx.returncode == 0, idx.stderr
        assert "summaries:" in idx.stdout and "by LLM" in idx.stdout
        n_index_calls = len(srv.requests)
        tree = json.loads((tmp_path / "idx" / "tree.json").read_text())
        assert "An LLM summary of this section." in json.dumps(tree)

        q = run_cli("query", "--index", str(tmp_path / "idx"), "--query", "What is AdaRouter's accuracy on EUR/USD?",
                    "--llm", "openai:gpt-4o-mini", "--json", env=env)
        assert q.returncode == 0, q.stderr
        res = json.loads(q.stdout)
        assert res["step1_locator"] == "llm"
        assert res["step1_nodes"][0]["heading_path"].endswith("4.2 Performance")
        assert res["answer"].startswith("AdaRouter reaches 73.2%")
        assert res["usage"]["input_tokens"] == 1400 and res["usage"]["calls"] == 2
        assert res["usage"]["cost_usd"] and res["usage"]["cost_usd"] > 0
        assert [f["used"] for f in res["fallbacks"]] == ["repaired LLM output"] or res["fallbacks"] == []
        calls = srv.requests[n_index_calls:]
        assert calls[0].path == "/v1/chat/completions"
        assert calls[0].json()["response_format"] == {"type": "json_object"}

        # the same query again is answered from the LLM cache: no new request
        before = len(srv.requests)
        again = run_cli("query", "--index", str(tmp_path / "idx"), "--query", "What is AdaRouter's accuracy on EUR/USD?",
                        "--llm", "openai:gpt-4o-mini", "--json", env=env)
        assert again.returncode == 0 and len(srv.requests) == before
        assert json.loads(again.stdout)["usage"]["cached_calls"] == 2

        # re-indexing unchanged sections costs nothing either
        before = len(srv.requests)
        run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx"), "--mock",
                "--summaries", "llm", "--llm", "openai:gpt-4o-mini", "--quiet", env=env)
        assert len(srv.requests) == before


def test_server_down_falls_back_and_query_still_answers(tmp_path: Path, paper_index_dir: Path) -> None:
    env = {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": "sk-test"}
    with StubServer([], default=StubResponse(500, {"error": {"message": "boom"}})) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        q = run_cli("query", "--index", str(paper_index_dir), "--query", "How many epochs did the training procedure use?", "--llm",
                    "openai:gpt-4o-mini", "--json", "--no-cache", env=env, timeout=240)
    assert q.returncode == 0, q.stderr
    res = json.loads(q.stdout)
    assert [f["step"] for f in res["fallbacks"]] == ["locate", "synthesis"]
    assert res["step1_locator"] == "hybrid"
