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
        nodes = (tmp_path / "idx" / "nodes.jsonl").read_text()
        assert "An LLM summary of this section." in nodes

        q = run_cli("query", "--index", str(tmp_path / "idx"), "--query", "What is AdaRouter's accuracy on EUR/USD?",
                    "--llm", "openai:gpt-4o-mini", "--json", env=env)
        assert q.returncode == 0, q.stderr
        res = json.loads(q.stdout)
        assert res["step1_locator"] == "llm"
        assert res["step1_nodes"][0]["heading_path"].endswith("4.2 Performance")
        assert res["answer"].startswith("AdaRouter reaches 73.2%")
        assert res["usage"]["input_tokens"] == 1400 and res["usage"]["calls"] == 2
        assert res["usage"]["cost_usd"] and res["usage"]["cost_usd"] > 0
        assert res["fallbacks"] == []  # a fenced answer with an integer id is read as is: nothing to record
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
    # retry-after-ms: 1 keeps the SDK's retries of each failed call instant
    with StubServer([], default=StubResponse(500, {"error": {"message": "boom"}},
                                             headers={"retry-after-ms": "1"})) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        q = run_cli("query", "--index", str(paper_index_dir), "--query", "How many epochs did the training procedure use?", "--llm",
                    "openai:gpt-4o-mini", "--json", "--no-cache", env=env, timeout=240)
    assert q.returncode == 0, q.stderr
    res = json.loads(q.stdout)
    assert [f["step"] for f in res["fallbacks"]] == ["locate", "synthesis"]
    assert res["step1_locator"] == "hybrid"


# --------------------------------------------------------------------------- broken providers
import time  # noqa: E402

import pytest  # noqa: E402


def _env(tmp_path: Path, srv: StubServer, provider: str) -> dict[str, str]:
    env = {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "cache")}
    if provider == "openai":
        env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=srv.url + "/v1")
    else:
        env.update(ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=srv.url)
    return env


def test_silent_server_query_returns_within_its_budget(tmp_path: Path, paper_index_dir: Path) -> None:
    with StubServer(default=StubResponse(200, openai_chat_body("late"), delay=60)) as srv:
        t0 = time.monotonic()
        q = run_cli("query", "--index", str(paper_index_dir), "--query", "How many epochs?", "--llm", "openai",
                    "--json", "--no-cache", "--llm-timeout", "1", "--llm-budget", "2.5",
                    env=_env(tmp_path, srv, "openai"), timeout=120)
        elapsed = time.monotonic() - t0
    assert q.returncode == 0, q.stderr
    res = json.loads(q.stdout)
    assert [f["step"] for f in res["fallbacks"]] == ["locate", "synthesis"]
    assert res["step1_locator"] == "hybrid"
    assert elapsed < 50  # returned before the silent server would have answered (the fallbacks say why)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_html_body_with_json_content_type_is_a_recorded_fallback(tmp_path: Path, paper_index_dir: Path,
                                                                 provider: str) -> None:
    page = StubResponse(200, "<html><body><h1>502 Bad Gateway</h1></body></html>")
    with StubServer(default=page) as srv:
        env = _env(tmp_path, srv, provider)
        q = run_cli("query", "--index", str(paper_index_dir), "--query", "How many epochs?", "--llm", provider,
                    "--json", "--no-cache", env=env, timeout=300)
        assert q.returncode == 0 and "Traceback" not in q.stderr, q.stderr
        res = json.loads(q.stdout)
        assert [f["step"] for f in res["fallbacks"]] == ["locate", "synthesis"]
        assert "not valid JSON" in res["fallbacks"][0]["reason"]
        idx = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx"), "--mock",
                      "--summaries", "llm", "--llm", provider, "--quiet", "--no-cache", env=env, timeout=300)
    assert idx.returncode == 0 and "Traceback" not in idx.stderr, idx.stderr
    assert "stopped calling the LLM" in idx.stderr


@pytest.mark.parametrize("status", [401, 500])
def test_index_with_llm_summaries_stops_calling_a_failing_server(tmp_path: Path, status: int) -> None:
    """A 401 is never repeated per node; repeated 5xx failures stop the build's LLM calls early."""
    body = {"error": {"message": "invalid key" if status == 401 else "boom"}}
    doc = tmp_path / "long.md"
    words = "venue router latency spread regime market order fill slippage desk".split()
    lines = ["# Long report", ""]
    for ch in range(3):
        lines += [f"## Chapter {ch}", ""]
        for sec in range(4):
            text = " ".join(words[(i * 7 + ch * 3 + sec) % len(words)] for i in range(320))
            lines += [f"### Section {ch}.{sec}", "", text, ""]
    doc.write_text("\n".join(lines), encoding="utf-8")
    # retry-after-ms: 1 keeps the SDK's retries of each failed call instant (a Retry-After of 0 would not:
    # the SDKs take it as absent and back off 0.5-8 s)
    with StubServer(default=StubResponse(status, body, headers={"retry-after-ms": "1"})) as srv:
        idx = run_cli("index", "--input", str(doc), "--output", str(tmp_path / "idx"), "--mock",
                      "--summaries", "llm", "--llm", "openai", "--quiet", "--no-cache", "--summary-workers", "2",
                      env=_env(tmp_path, srv, "openai"), timeout=120)
        requests = srv.request_count
    assert idx.returncode == 0, idx.stderr
    assert "stopped calling the LLM during the build" in idx.stderr
    summaries = idx.stdout.split("summaries: ")[1]
    n_failed = int(summaries.split(" failed")[0].rsplit(" ", 1)[1])
    assert n_failed >= 12  # many nodes wanted the LLM ...
    if status == 401:
        assert requests <= 2  # ... but only the calls already in flight reached the server
    else:
        assert requests <= (3 + 1) * 5  # three failed calls in a row (+1 in flight), five attempts each


@pytest.mark.parametrize("flag", ["--llm-timeout", "--llm-budget"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_non_finite_or_negative_seconds_are_one_line_errors(paper_index_dir: Path, tmp_path: Path, flag: str,
                                                            value: str) -> None:
    q = run_cli("query", "--index", str(paper_index_dir), "--query", "epochs", "--no-log", f"{flag}={value}",
                timeout=300)
    assert q.returncode == 2 and "Traceback" not in q.stderr
    assert q.stderr.startswith("error: LLM ") and "positive, finite" in q.stderr and q.stderr.count("\n") == 1
