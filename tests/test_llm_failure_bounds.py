"""An LLM provider that fails, drips or asks to wait an hour costs a bounded number of requests and never
a traceback: a query falls back to the no-LLM path within its budget, and a build with LLM summaries
stops calling after ``llm_max_failures`` failed calls in a row. Counted in requests, not seconds (a
shared CI machine may be slow)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import Config
from tests.conftest import run_cli
from tests.stub_servers import StubResponse, StubServer, openai_chat_body
from utils.llm.retry import RetryPolicy

WORDS = "venue router latency spread regime market order fill slippage desk".split()


def _env(tmp_path: Path, srv: StubServer) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.url + "/v1",
            "TREERAG_CACHE_DIR": str(tmp_path / "cache"), "TREERAG_LOG": str(tmp_path / "runs.sqlite3")}


@pytest.mark.parametrize("reply", [
    StubResponse(200, openai_chat_body("x" * 200), drip=2.0),  # one byte every two seconds
    StubResponse(503, {"error": {"message": "busy"}}, headers={"Retry-After": "3600"}),
], ids=["dripping", "retry-after-an-hour"])
def test_a_query_falls_back_within_its_budget(tmp_path: Path, paper_index_dir: Path, reply: StubResponse) -> None:
    with StubServer(default=reply) as srv:
        q = run_cli("query", "--index", str(paper_index_dir), "--query", "How many epochs?", "--llm", "openai",
                    "--json", "--no-cache", "--llm-timeout", "1", "--llm-budget", "3", env=_env(tmp_path, srv),
                    timeout=300, fresh_process=True)
        sent = srv.request_count
    assert q.returncode == 0 and "Traceback" not in q.stderr, q.stderr
    res = json.loads(q.stdout)
    assert [f["step"] for f in res["fallbacks"]] == ["locate", "synthesis"]
    assert res["answer"]
    # two steps, each at most one call of the SDK's attempts; an hour's Retry-After is not waited for
    assert sent <= 2 * (RetryPolicy().max_retries + 1), f"{sent} requests"


def _corpus(root: Path, documents: int = 20, sections: int = 4) -> Path:
    root.mkdir()
    for d in range(documents):
        lines = [f"# Report {d}", ""]
        for sec in range(sections):
            lines += [f"## Section {sec}", "", " ".join(WORDS[(i * 7 + d + sec) % 10] for i in range(320)), ""]
        (root / f"r{d:02d}.md").write_text("\n".join(lines), encoding="utf-8")
    return root


@pytest.mark.parametrize("reply", [
    StubResponse(500, {"error": {"message": "boom"}}),
    StubResponse(401, {"error": {"message": "bad key"}}),
    StubResponse(200, "<html>502 Bad Gateway</html>"),
], ids=["500", "401", "html-200"])
def test_llm_summaries_stop_calling_a_broken_server(tmp_path: Path, reply: StubResponse) -> None:
    corpus = _corpus(tmp_path / "corpus")
    with StubServer(default=reply) as srv:
        p = run_cli("index", "--input", str(corpus), "--output", str(tmp_path / "index"), "--mock",
                    "--summaries", "llm", "--llm", "openai", "--quiet", "--no-cache", env=_env(tmp_path, srv),
                    timeout=600)
        sent = srv.request_count
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "stopped calling the LLM" in p.stderr
    config = Config()
    # 100 nodes to summarise; the calls in flight when the breaker opens finish, no new one starts
    calls = config.llm_max_failures + config.summary_workers
    assert sent <= calls * (RetryPolicy().max_retries + 1), f"{sent} requests for at most {calls} calls"
