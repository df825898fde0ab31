"""LLM client: real openai/anthropic SDKs against stub servers on 127.0.0.1.

The SDKs do the retrying. Failing stubs send ``retry-after-ms: 1`` (``FAST``) so the
SDK's waits are a millisecond; the few tests that need its own backoff (0.5 s,
jittered) or a timeout use ``max_retries`` of 0 or 1 and sub-second timeouts.
Each retry test counts the requests the stub received.
"""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.stub_servers import (
    StubResponse,
    StubServer,
    anthropic_error_body,
    anthropic_message_body,
    openai_chat_body,
    openai_error_body,
    refusing_url,
)
from utils.errors import BackendError
from utils.llm.response_cache import CACHE_FILENAME, CacheEntry, LLMCache, cache_key
from utils.llm.anthropic_llm import AnthropicLLM
from utils.llm.cached import CachedLLM
from utils.llm.factory import default_cache_dir, make_llm, parse_llm_spec, resolve_llm_spec
from utils.llm.mock import MockExhaustedError, MockLLM
from utils.llm.openai_llm import OpenAILLM
from utils.llm.retry import RetryPolicy, parse_retry_after
from utils.llm.settings import DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL, JSON_ONLY_INSTRUCTION, NO_LLM_NOTICE
from utils.llm.types import LLMCallError, LLMClient, LLMUsage, UsageMeter
from utils.llm.pricing import estimate_cost, price_for

REPO = Path(__file__).resolve().parents[1]


FAST = {"retry-after-ms": "1"}
"""A Retry-After both SDKs honour: their retries of this reply wait a millisecond."""


def retry_counts(srv: StubServer) -> list[str]:
    """The SDK's own count of each request's retries, as it sent them: proof that the SDK retried."""
    return [r.headers.get("x-stainless-retry-count", "?") for r in srv.requests]


# --- provider harness: the same scenarios run against both wire formats --------------
@dataclass
class Provider:
    name: str
    key_env: str
    ok: Callable[..., dict[str, Any]]
    error: Callable[..., dict[str, Any]]
    build: Callable[..., Any]
    path: str


def _build_openai(url: str, **kw: Any) -> OpenAILLM:
    return OpenAILLM(api_key="sk-test", base_url=url + "/v1", **kw)


def _build_anthropic(url: str, **kw: Any) -> AnthropicLLM:
    return AnthropicLLM(api_key="sk-ant-test", base_url=url, **kw)


OPENAI = Provider("openai", "OPENAI_API_KEY", openai_chat_body, openai_error_body, _build_openai,
                  "/v1/chat/completions")
ANTHROPIC = Provider("anthropic", "ANTHROPIC_API_KEY", anthropic_message_body, anthropic_error_body,
                     _build_anthropic, "/v1/messages")


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    return request.param


def make_client(p: Provider, srv: StubServer, *, max_retries: int = 4, timeout: float = 5.0,
                max_retry_after: float = 60.0, notice: Callable[[str], None] | None = None) -> Any:
    retry = RetryPolicy(max_retries=max_retries, max_retry_after=max_retry_after)
    return p.build(srv.url, timeout=timeout, retry=retry, notice=notice)


# =============================================================================
# Wire format and success
# =============================================================================
def test_openai_success_wire_format_and_usage() -> None:
    with StubServer([StubResponse(200, openai_chat_body('{"results": []}', prompt_tokens=1000,
                                                        completion_tokens=200))]) as srv:
        llm = make_client(OPENAI, srv)
        resp = llm.generate("Find the node.", json_mode=True, max_tokens=300, system="You locate sections.")
    assert resp.text == '{"results": []}'
    assert (resp.provider, resp.model, resp.cached) == ("openai", DEFAULT_OPENAI_MODEL, False)
    assert resp.usage.input_tokens == 1000 and resp.usage.output_tokens == 200
    assert resp.usage.calls == 1 and resp.usage.cached_calls == 0
    assert resp.usage.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)
    [req] = srv.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.json()
    assert body["model"] == DEFAULT_OPENAI_MODEL
    assert body["response_format"] == {"type": "json_object"}
    assert body["max_tokens"] == 300 and body["temperature"] == 0
    assert body["messages"][0]["role"] == "system"
    assert "You locate sections." in body["messages"][0]["content"]
    assert JSON_ONLY_INSTRUCTION in body["messages"][0]["content"]  # OpenAI requires "JSON" in the messages
    assert body["messages"][1] == {"role": "user", "content": "Find the node."}


def test_openai_text_mode_sends_no_response_format_or_system() -> None:
    with StubServer([StubResponse(200, openai_chat_body("Answer [来源: 2 Method]"))]) as srv:
        resp = make_client(OPENAI, srv).generate("Question?")
    assert resp.text == "Answer [来源: 2 Method]"
    body = srv.requests[0].json()
    assert "response_format" not in body
    assert body["messages"] == [{"role": "user", "content": "Question?"}]


def test_anthropic_success_wire_format_prefill_and_usage() -> None:
    continuation = '"thinking": "t", "results": [{"node_id": "0007", "sub_query": "q"}]}'
    with StubServer([StubResponse(200, anthropic_message_body(continuation, input_tokens=2000,
                                                              output_tokens=100))]) as srv:
        llm = make_client(ANTHROPIC, srv)
        resp = llm.generate("Find the node.", json_mode=True, max_tokens=400, system="You locate sections.")
    assert resp.text == "{" + continuation
    json.loads(resp.text)
    assert (resp.provider, resp.model) == ("anthropic", DEFAULT_ANTHROPIC_MODEL)
    assert resp.usage.input_tokens == 2000 and resp.usage.output_tokens == 100
    assert resp.usage.cost_usd == pytest.approx((2000 * 3.0 + 100 * 15.0) / 1e6)
    [req] = srv.requests
    assert (req.method, req.path) == ("POST", "/v1/messages")
    assert req.headers.get("anthropic-version")
    # The SDK sends the key as x-api-key (classic) or as a bearer token (current releases).
    assert req.headers.get("x-api-key") == "sk-ant-test" or req.headers.get("authorization") == "Bearer sk-ant-test"
    body = req.json()
    assert body["model"] == DEFAULT_ANTHROPIC_MODEL and body["max_tokens"] == 400
    assert body["messages"] == [{"role": "user", "content": "Find the node."},
                                {"role": "assistant", "content": "{"}]
    assert "You locate sections." in body["system"] and JSON_ONLY_INSTRUCTION in body["system"]
    assert body["temperature"] == 0


def test_anthropic_text_mode_has_no_prefill() -> None:
    with StubServer([StubResponse(200, anthropic_message_body("Plain answer."))]) as srv:
        resp = make_client(ANTHROPIC, srv).generate("Question?")
    assert resp.text == "Plain answer."
    body = srv.requests[0].json()
    assert body["messages"] == [{"role": "user", "content": "Question?"}]
    assert "system" not in body


FENCED = '```json\n{"thinking": "x", "results": [{"node_id": "0003", "sub_query": "q"}]}\n```'
MALFORMED = '{"thinking": "x", "results": [{"node_id": 7, '


@pytest.mark.parametrize("reply", [FENCED, MALFORMED, "Sure! Here it is: {\"results\": []} hope it helps"],
                         ids=["fenced", "malformed", "prose-around"])
def test_messy_json_is_returned_verbatim(provider: Provider, reply: str) -> None:
    """Parsing and repair are the locator's job; the client must not mangle the text."""
    with StubServer([StubResponse(200, provider.ok(reply))]) as srv:
        resp = make_client(provider, srv).generate("locate", json_mode=True)
    assert resp.text == reply


def test_anthropic_malformed_continuation_keeps_the_prefill_brace() -> None:
    continuation = '"thinking": "x", "results": ['  # truncated mid-object
    with StubServer([StubResponse(200, anthropic_message_body(continuation, stop_reason="max_tokens"))]) as srv:
        resp = make_client(ANTHROPIC, srv).generate("locate", json_mode=True, max_tokens=10)
    assert resp.text == "{" + continuation
    assert any("truncated" in n for n in resp.notes)


# =============================================================================
# Retries (the SDK's) and errors
# =============================================================================
def test_retry_after_is_honoured_by_the_sdk(provider: Provider) -> None:
    with StubServer([
        StubResponse(429, provider.error("slow down", type_="rate_limit_error"), headers={"retry-after-ms": "300"}),
        StubResponse(200, provider.ok("ok")),
    ]) as srv:
        llm = make_client(provider, srv)
        llm.generate("warm-up")  # SDK import and client creation are not part of the wait measured
        srv.push(StubResponse(429, provider.error("slow down"), headers={"retry-after-ms": "300"}),
                 StubResponse(200, provider.ok("ok")))
        t0 = time.monotonic()
        resp = llm.generate("hi")
        elapsed = time.monotonic() - t0
    assert resp.text == "ok" and resp.usage.calls == 1
    assert retry_counts(srv) == ["0", "1", "0", "1"]
    assert elapsed >= 0.3  # waited as long as asked (no upper bound: a loaded machine is slow)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_retryable_statuses_are_retried(provider: Provider, status: int) -> None:
    with StubServer([StubResponse(status, provider.error("try again"), headers=FAST),
                     StubResponse(200, provider.ok("ok"))]) as srv:
        assert make_client(provider, srv).generate("hi").text == "ok"
    assert retry_counts(srv) == ["0", "1"]


def test_500_until_retries_run_out(provider: Provider) -> None:
    with StubServer(default=StubResponse(500, provider.error("boom", type_="api_error"), headers=FAST)) as srv:
        llm = make_client(provider, srv, max_retries=4)
        with pytest.raises(LLMCallError) as info:
            llm.generate("hi")
    assert str(info.value) == f"{provider.name}: server error 500 after 5 attempts"
    assert isinstance(info.value, BackendError) and info.value.retryable and info.value.attempts == 5
    assert retry_counts(srv) == ["0", "1", "2", "3", "4"]


def test_a_server_saying_x_should_retry_false_is_not_retried(provider: Provider) -> None:
    with StubServer(default=StubResponse(503, provider.error("overloaded"),
                                         headers={**FAST, "x-should-retry": "false"})) as srv:
        with pytest.raises(LLMCallError) as info:
            make_client(provider, srv).generate("hi")
    assert str(info.value) == f"{provider.name}: server error 503 after 1 attempts"
    assert srv.request_count == 1


def test_retry_after_longer_than_the_cap_is_not_waited_for(provider: Provider) -> None:
    """Without the cap the SDK would wait the 60 s asked for and get the 200."""
    with StubServer([StubResponse(503, provider.error("overloaded"), headers={"retry-after-ms": "60000"}),
                     StubResponse(200, provider.ok("ok"))]) as srv:
        llm = make_client(provider, srv, max_retry_after=0.2)
        t0 = time.monotonic()
        with pytest.raises(LLMCallError) as info:
            llm.generate("hi")
        assert time.monotonic() - t0 < 30  # did not wait the 60 s asked for (slack for a loaded machine)
        assert srv.request_count == 1
    assert str(info.value) == f"{provider.name}: server error 503 after 1 attempts"
    assert RetryPolicy().max_retry_after == 60.0


def test_timeout_is_retried_then_fails(provider: Provider) -> None:
    # 1.5 s, not less: the SDK's own read timeout must fire (and be retried) before the call's hard cut
    # at twice the limit; on a loaded 2-core machine 0.5 s of slack was not always enough
    with StubServer(default=StubResponse(200, provider.ok("late"), delay=10.0)) as srv:
        llm = make_client(provider, srv, max_retries=1, timeout=1.5)
        with pytest.raises(BackendError, match=rf"^{provider.name}: request timed out after 1.5 s \(2 attempts\)$"):
            llm.generate("hi")
        assert srv.request_count == 2
        assert retry_counts(srv) == ["0", "1"]


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_names_the_variable_and_is_not_retried(provider: Provider, status: int) -> None:
    with StubServer(default=StubResponse(status, provider.error("invalid x-api-key",
                                                                type_="authentication_error"), headers=FAST)) as srv:
        with pytest.raises(BackendError) as info:
            make_client(provider, srv).generate("hi")
    assert str(info.value) == f"authentication failed for {provider.name}: check {provider.key_env}"
    assert "\n" not in str(info.value)
    assert srv.request_count == 1


def test_404_model_not_found(provider: Provider) -> None:
    with StubServer(default=StubResponse(404, provider.error("model 'nope' not found",
                                                             type_="not_found_error"), headers=FAST)) as srv:
        llm = provider.build(srv.url, model="nope")
        with pytest.raises(BackendError, match=r"model 'nope' not found .*check --llm / model name"):
            llm.generate("hi")
        assert srv.request_count == 1


def test_plain_400_is_not_retried_and_message_is_one_line(provider: Provider) -> None:
    with StubServer(default=StubResponse(400, provider.error("prompt is too long:\n 300000 tokens"),
                                         headers=FAST)) as srv:
        with pytest.raises(LLMCallError) as info:
            make_client(provider, srv).generate("hi")
        assert srv.request_count == 1
    assert str(info.value) == f"{provider.name}: request rejected (400): prompt is too long: 300000 tokens"
    assert info.value.status == 400 and not info.value.retryable


def test_connection_refused_is_retried_then_fails(provider: Provider) -> None:
    with refusing_url() as url:
        llm = provider.build(url, timeout=1.0, retry=RetryPolicy(max_retries=1))
        with pytest.raises(BackendError, match=rf"^{provider.name}: cannot connect to .* after 2 attempts \(.*refused"):
            llm.generate("hi")


# =============================================================================
# Servers that reject parameters
# =============================================================================
def test_openai_response_format_unsupported_falls_back_once() -> None:
    notices: list[str] = []
    with StubServer([
        StubResponse(400, openai_error_body("'response_format' of type 'json_object' is not supported")),
        StubResponse(200, openai_chat_body('{"a": 1}')),
        StubResponse(200, openai_chat_body('{"b": 2}')),
    ]) as srv:
        llm = make_client(OPENAI, srv, notice=notices.append)
        first = llm.generate("x", json_mode=True)
        second = llm.generate("y", json_mode=True)
        bodies = [r.json() for r in srv.requests]
    assert (first.text, second.text) == ('{"a": 1}', '{"b": 2}')
    assert "response_format" in bodies[0]
    assert "response_format" not in bodies[1] and "response_format" not in bodies[2]
    assert JSON_ONLY_INSTRUCTION in bodies[1]["messages"][0]["content"]
    assert len(notices) == 1 and "response_format" in notices[0]
    assert any("response_format" in n for n in first.notes) and any("response_format" in n for n in second.notes)


def test_openai_max_completion_tokens_rename() -> None:
    with StubServer([
        StubResponse(400, openai_error_body("Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens'.")),
        StubResponse(200, openai_chat_body("ok")),
    ]) as srv:
        make_client(OPENAI, srv).generate("x", max_tokens=77)
        second = srv.requests[1].json()
    assert second["max_completion_tokens"] == 77 and "max_tokens" not in second


def test_anthropic_prefill_unsupported_falls_back_to_instruction() -> None:
    notices: list[str] = []
    with StubServer([
        StubResponse(400, anthropic_error_body("Prefilling assistant messages is not supported for this model.")),
        StubResponse(200, anthropic_message_body('{"results": []}')),
    ]) as srv:
        resp = make_client(ANTHROPIC, srv, notice=notices.append).generate("x", json_mode=True)
        second = srv.requests[1].json()
    assert resp.text == '{"results": []}'
    assert second["messages"] == [{"role": "user", "content": "x"}]
    assert JSON_ONLY_INSTRUCTION in second["system"]
    assert len(notices) == 1 and "prefill" in notices[0]


def test_anthropic_temperature_rejected_is_dropped() -> None:
    with StubServer([
        StubResponse(400, anthropic_error_body("temperature: Extra inputs are not permitted")),
        StubResponse(200, anthropic_message_body("ok")),
    ]) as srv:
        resp = make_client(ANTHROPIC, srv).generate("x")
        assert "temperature" not in srv.requests[1].json()
    assert resp.text == "ok"


REJECTED_PARAMETER = {
    "openai": ("'response_format' of type 'json_object' is not supported", "response_format"),
    "anthropic": ("Prefilling assistant messages is not supported for this model.", "prefill"),
}


def test_a_parameter_fix_up_is_not_counted_as_an_attempt(provider: Provider) -> None:
    message, noticed = REJECTED_PARAMETER[provider.name]
    notices: list[str] = []
    with StubServer([StubResponse(400, provider.error(message))],
                    default=StubResponse(500, provider.error("boom"), headers=FAST)) as srv:
        llm = make_client(provider, srv, max_retries=1, notice=notices.append)
        with pytest.raises(LLMCallError) as info:
            llm.generate("x", json_mode=True)
        assert srv.request_count == 3  # the rejected request, then the fixed one and its retry
    assert str(info.value) == f"{provider.name}: server error 500 after 2 attempts"
    assert len(notices) == 1 and noticed in notices[0]


def test_openai_missing_usage_is_estimated() -> None:
    body = openai_chat_body("four words right here")
    del body["usage"]
    with StubServer([StubResponse(200, body)]) as srv:
        resp = make_client(OPENAI, srv).generate("a prompt of some length")
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0
    assert any("estimated" in n for n in resp.notes)


def test_unknown_model_has_tokens_but_no_cost() -> None:
    with StubServer([StubResponse(200, openai_chat_body("ok", model="qwen2.5:1.5b"))]) as srv:
        resp = OPENAI.build(srv.url, model="qwen2.5:1.5b").generate("x")
    assert resp.usage.cost_usd is None and resp.usage.input_tokens == 11


# =============================================================================
# Selection
# =============================================================================
@pytest.mark.parametrize("spec, env, expected", [
    ("mock", {}, ("mock", None)),
    ("anthropic", {}, ("anthropic", None)),
    ("Anthropic:claude-haiku-4-5", {}, ("anthropic", "claude-haiku-4-5")),
    ("openai:qwen2.5:1.5b", {}, ("openai", "qwen2.5:1.5b")),  # Ollama tags keep their colon
    ("openai:", {}, ("openai", None)),
    (" openai : gpt-4.1 ", {}, ("openai", "gpt-4.1")),
    ("auto", {}, ("mock", None)),
    (None, {}, ("mock", None)),
    ("auto", {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, ("anthropic", None)),
    ("auto", {"OPENAI_API_KEY": "o"}, ("openai", None)),
    ("auto", {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, ("openai", None)),
    ("auto", {"ANTHROPIC_API_KEY": "  "}, ("mock", None)),  # blank is unset
])
def test_parse_llm_spec(spec: str | None, env: dict[str, str], expected: tuple[str, str | None]) -> None:
    assert parse_llm_spec(spec, env) == expected


@pytest.mark.parametrize("spec", ["gemini", "gpt-4o", "auto:foo", ":", "auto:", "mock:xyz"])
def test_parse_llm_spec_rejects_unknown(spec: str) -> None:
    with pytest.raises(BackendError, match="unknown LLM"):
        parse_llm_spec(spec, {})


def test_resolve_llm_spec_precedence() -> None:
    env = {"TREERAG_LLM": "openai:gpt-4.1"}
    assert resolve_llm_spec("anthropic", env, "mock") == "anthropic"
    assert resolve_llm_spec(None, env, "mock") == "openai:gpt-4.1"
    assert resolve_llm_spec(None, {}, "mock") == "mock"
    assert resolve_llm_spec(None, {"TREERAG_LLM": " "}, None) == "auto"  # a blank variable is unset
    with pytest.raises(BackendError, match="--llm is empty"):  # a blank flag was typed: say so
        resolve_llm_spec(" ", {}, None)


def test_make_llm_auto_without_keys_is_mock_with_one_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-os-environ-must-be-ignored")
    notices: list[str] = []
    llm = make_llm("auto", {}, cache_dir=None, notice=notices.append)
    assert isinstance(llm, MockLLM) and isinstance(llm, LLMClient)
    assert notices == [NO_LLM_NOTICE]
    assert make_llm("mock", {}, cache_dir=None, notice=notices.append).provider == "mock"
    assert len(notices) == 1  # explicit mock: no notice


def test_make_llm_explicit_provider_without_key() -> None:
    with pytest.raises(BackendError, match="ANTHROPIC_API_KEY"):
        make_llm("anthropic", {"OPENAI_API_KEY": "x"}, cache_dir=None)
    with pytest.raises(BackendError, match="OPENAI_API_KEY.*OPENAI_BASE_URL"):
        make_llm("openai:gpt-4o", {"ANTHROPIC_API_KEY": "x"}, cache_dir=None)


def test_make_llm_local_server_uses_dummy_key_and_env_dict_only(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # must not be used
    monkeypatch.setenv("OPENAI_API_KEY", "os-environ-key")
    with StubServer([StubResponse(200, openai_chat_body("hi", model="qwen2.5:1.5b"))]) as srv:
        llm = make_llm("openai:qwen2.5:1.5b", {"OPENAI_BASE_URL": srv.url + "/v1"}, cache_dir=None)
        assert not isinstance(llm, CachedLLM)
        assert llm.generate("x").text == "hi"
        [req] = srv.requests
    assert req.headers["authorization"] == "Bearer not-needed"
    assert req.json()["model"] == "qwen2.5:1.5b"


def test_make_llm_anthropic_uses_env_base_url_and_defaults(tmp_path: Path) -> None:
    with StubServer([StubResponse(200, anthropic_message_body("hello"))]) as srv:
        env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": srv.url}
        llm = make_llm("auto", env, cache_dir=tmp_path, max_retries=0)
        assert isinstance(llm, CachedLLM) and llm.provider == "anthropic" and llm.model == DEFAULT_ANTHROPIC_MODEL
        assert llm.generate("x").text == "hello"
        assert srv.request_count == 1


def test_default_cache_dir_from_env() -> None:
    assert default_cache_dir({"TREERAG_CACHE_DIR": "/x/y"}) == Path("/x/y")
    assert default_cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/treerag")
    assert default_cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/treerag")


def test_sdks_are_not_imported_for_mock_runs() -> None:
    code = (
        "import sys\nfrom utils.llm import factory as m\nfrom utils.llm.openai_llm import OpenAILLM\nfrom utils.llm.anthropic_llm import AnthropicLLM\n"
        "c = m.make_llm('auto', {}, cache_dir=None)\n"
        "c.generate('x', json_mode=True)\n"
        "OpenAILLM(api_key='k'); AnthropicLLM(api_key='k')\n"  # constructing is lazy too
        "bad = [n for n in ('openai', 'anthropic', 'httpx2', 'httpx') if n in sys.modules]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


# =============================================================================
# MockLLM
# =============================================================================
def test_mock_scripted_replies_exceptions_and_exhaustion() -> None:
    llm = MockLLM(['{"results": []}', BackendError("scripted outage"), "third"])
    assert llm.generate("a", json_mode=True).text == '{"results": []}'
    with pytest.raises(BackendError, match="scripted outage"):
        llm.generate("b")
    resp = llm.generate("c", system="s", max_tokens=5)
    assert resp.text == "third" and resp.usage.cost_usd == 0.0 and resp.usage.calls == 1
    with pytest.raises(MockExhaustedError):
        llm.generate("d")
    assert [r.prompt for r in llm.requests] == ["a", "b", "c", "d"]
    assert llm.requests[0].json_mode and llm.requests[2].system == "s" and llm.requests[2].max_tokens == 5


def test_mock_callable_and_echo() -> None:
    llm = MockLLM(lambda req: req.prompt.upper() + ("!" if req.json_mode else ""))
    assert llm.generate("ab", json_mode=True).text == "AB!"
    echo = MockLLM()
    assert echo.generate("hello").text == "hello"
    assert json.loads(echo.generate("hello", json_mode=True).text) == {"echo": "hello"}


# =============================================================================
# Cache
# =============================================================================
def test_cache_hit_on_second_call(provider: Provider, tmp_path: Path) -> None:
    with StubServer(default=StubResponse(200, provider.ok("answer", ))) as srv:
        llm = CachedLLM(make_client(provider, srv), LLMCache(tmp_path / CACHE_FILENAME))
        first = llm.generate("q", json_mode=False, system="s")
        second = llm.generate("q", json_mode=False, system="s")
        assert srv.request_count == 1
        assert (first.cached, second.cached) == (False, True)
        assert second.text == first.text == "answer"
        assert second.usage == LLMUsage(cost_usd=0.0, cached_calls=1)
        # any parameter change is a different key
        llm.generate("q", json_mode=False, system="other")
        llm.generate("q", json_mode=False, system="s", max_tokens=99)
        llm.generate("q", json_mode=False, system="s", temperature=0.7)
        assert srv.request_count == 4
        # a fresh process (new cache object) sees the stored answers
        again = CachedLLM(make_client(provider, srv), LLMCache(tmp_path / CACHE_FILENAME))
        assert again.generate("q", system="s").cached
        assert srv.request_count == 4


def test_no_cache_skips_reads_but_refreshes_the_cache(tmp_path: Path) -> None:
    with StubServer([StubResponse(200, openai_chat_body("old")), StubResponse(200, openai_chat_body("new")),
                     StubResponse(200, openai_chat_body("other"))]) as srv:
        env = {"OPENAI_BASE_URL": srv.url + "/v1"}
        cached = make_llm("openai", env, cache_dir=tmp_path)
        assert cached.generate("q").text == "old"
        fresh = make_llm("openai", env, cache_dir=tmp_path, use_cache=False)
        r = fresh.generate("q")
        assert not r.cached and r.text == "new"  # asked the model although "q" was cached
        assert not fresh.generate("new prompt").cached
        assert srv.request_count == 3
        again = make_llm("openai", env, cache_dir=tmp_path).generate("q")
        assert again.cached and again.text == "new"  # the refreshed reply, not the stale one
    assert len(LLMCache(tmp_path / CACHE_FILENAME)) == 2


def test_an_unusable_locate_reply_is_not_served_again(tmp_path: Path, paper_index) -> None:
    """A reply with no valid leaf falls back and is dropped from the cache; a usable one stays."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from retrieval.node_locator import llm_locate
    from retrieval.query import Query

    bad = openai_chat_body('{"results": [{"node_id": "9999"}]}')
    good = openai_chat_body('{"results": [{"node_id": "0010", "sub_query": "router"}]}')
    q = Query.build("q", make_embedder("hash", Config()))
    with StubServer([StubResponse(200, bad), StubResponse(200, good)]) as srv:
        env = {"OPENAI_BASE_URL": srv.url + "/v1"}
        first = llm_locate(paper_index, make_llm("openai", env, cache_dir=tmp_path), q, Config())
        assert first.locator == "hybrid"  # unusable: fell back
        second = llm_locate(paper_index, make_llm("openai", env, cache_dir=tmp_path), q, Config())
        assert second.locator == "llm" and srv.request_count == 2  # asked again, not the cached bad reply
        third = llm_locate(paper_index, make_llm("openai", env, cache_dir=tmp_path), q, Config())
        assert third.locator == "llm" and srv.request_count == 2  # the usable reply is served from cache


def test_failed_calls_are_not_cached(tmp_path: Path) -> None:
    with StubServer([StubResponse(500, openai_error_body("boom")),
                     StubResponse(200, openai_chat_body("fine"))]) as srv:
        llm = CachedLLM(make_client(OPENAI, srv, max_retries=0), LLMCache(tmp_path / CACHE_FILENAME))
        with pytest.raises(BackendError):
            llm.generate("q")
        assert llm.generate("q").text == "fine"
        assert srv.request_count == 2


def test_base_url_is_part_of_the_key() -> None:
    common = dict(provider="openai", model="m", system=None, prompt="p", json_mode=True,
                  max_tokens=10, temperature=0.0)
    assert cache_key(base_url="http://a/v1", **common) != cache_key(base_url="http://b/v1", **common)


def test_every_input_that_can_change_the_answer_changes_the_key() -> None:
    """One key per distinct request: changing any single input gives a key no other request has."""
    base = dict(provider="openai", model="m", base_url="http://a/v1", system=None, prompt="p", json_mode=True,
                max_tokens=10, temperature=0.0)
    other = dict(provider="anthropic", model="m2", base_url=None, system="s", prompt="p2", json_mode=False,
                 max_tokens=11, temperature=0.5)
    keys = [cache_key(**base)] + [cache_key(**{**base, name: value}) for name, value in other.items()]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("breakage", ["corrupt", "unwritable"])
def test_broken_cache_warns_once_and_calls_still_work(tmp_path: Path, breakage: str) -> None:
    if breakage == "corrupt":
        tmp_path.joinpath(CACHE_FILENAME).write_bytes(b"this is not a sqlite database" * 100)
        cache_dir = tmp_path
    else:
        cache_dir = tmp_path / "a-file"
        cache_dir.write_text("blocks mkdir")  # cache_dir exists as a file: cannot create the DB
    notices: list[str] = []
    with StubServer(default=StubResponse(200, openai_chat_body("ok"))) as srv:
        llm = make_llm("openai", {"OPENAI_BASE_URL": srv.url + "/v1"}, cache_dir=cache_dir,
                       notice=notices.append)
        assert [llm.generate("q").text for _ in range(3)] == ["ok", "ok", "ok"]
        assert srv.request_count == 3
    assert len(notices) == 1 and "continuing without cache" in notices[0]


def test_cache_concurrent_threads_and_processes(tmp_path: Path) -> None:
    """Two processes and six threads write and read the same cache file at the same time."""
    path = tmp_path / CACHE_FILENAME
    writer = (
        "import sys\n"
        "from pathlib import Path\n"
        "from utils.llm.response_cache import LLMCache, CacheEntry\n"
        "c = LLMCache(Path(sys.argv[1]), notice=lambda m: sys.exit('notice: ' + m))\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"  # start line: wait until everyone is ready
        "for i in range(100):\n"
        "    c.put(f'{sys.argv[2]}-{i}', CacheEntry(f'text {i}', i, 1), provider='p', model='m')\n"
        "    assert c.get(f'{sys.argv[2]}-{i}') is not None\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(path), f"proc{n}"], cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for n in range(2)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    notices: list[str] = []
    cache = LLMCache(path, notice=notices.append)
    errors: list[BaseException] = []
    go = threading.Event()

    def work(t: int) -> None:
        go.wait()
        try:
            for i in range(40):
                key = f"thread{t}-{i}"
                cache.put(key, CacheEntry(f"t{t} {i} 中文", i, 2), provider="p", model="m")
                assert cache.get(key) == CacheEntry(f"t{t} {i} 中文", i, 2)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    go.set()
    for th in threads:
        th.join()
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert not errors and not notices
    assert len(cache) == 2 * 100 + 6 * 40
    cache.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        row = conn.execute("SELECT response FROM llm_responses WHERE key = 'proc1-99'").fetchone()
    assert json.loads(row[0]) == {"text": "text 99", "input_tokens": 99, "output_tokens": 1}


# =============================================================================
# Usage, cost, retry policy
# =============================================================================
def test_price_table_and_cost() -> None:
    assert estimate_cost("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert price_for("gpt-4o-mini") != price_for("gpt-4o")  # longest prefix wins
    assert price_for("gpt-4o-2024-08-06") == price_for("gpt-4o")
    assert price_for("claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    assert price_for("gpt-4oz") is None
    assert estimate_cost("llama3.1:8b", 10, 10) is None
    assert estimate_cost("deepseek-chat", 0, 0) == 0.0


def test_usage_sum_and_unknown_cost() -> None:
    a = LLMUsage(10, 5, 0.01, 1, 0)
    b = LLMUsage(0, 0, 0.0, 0, 1)
    total = LLMUsage.sum([a, b, a])
    assert total == LLMUsage(20, 10, pytest.approx(0.02), 2, 1)
    assert (a + LLMUsage(1, 1, None, 1, 0)).cost_usd is None
    assert "cost unknown" in LLMUsage(1, 1, None, 1).describe()
    assert total.describe() == "20 in / 10 out tokens, $0.0200, 3 calls (1 cached)"
    assert total.to_dict()["cached_calls"] == 1


def test_usage_meter_is_thread_safe() -> None:
    meter = UsageMeter()

    def add() -> None:
        for _ in range(500):
            meter.add(LLMUsage(1, 2, 0.001, 1, 0))

    threads = [threading.Thread(target=add) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert meter.to_dict()["calls"] == 4000
    total = meter.reset()
    assert (total.input_tokens, total.output_tokens, total.calls) == (4000, 8000, 4000)
    assert total.cost_usd == pytest.approx(4.0)
    assert meter.total() == LLMUsage()


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "1.5", "retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"},
                             now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_keys_never_appear_in_repr() -> None:
    assert "sk-secret" not in repr(OpenAILLM(api_key="sk-secret"))
    assert "sk-secret" not in repr(AnthropicLLM(api_key="sk-secret"))


# =============================================================================
# Deadlines, budgets, breaker, hostile responses
# =============================================================================
from utils.llm.budget import BudgetedLLM, LLMBudget, with_budget  # noqa: E402


def timed(llm: Any, **kw: Any) -> tuple[str, float]:
    """The one-line error of ``llm.generate`` and the seconds it took (the SDK imported beforehand)."""
    __import__(llm.provider)
    t0 = time.monotonic()
    with pytest.raises(LLMCallError) as info:
        llm.generate("hi", **kw)
    return str(info.value), time.monotonic() - t0


def test_a_dripping_response_ends_at_the_wall_clock_deadline(provider: Provider) -> None:
    """One byte every 0.1 s never trips a per-read timeout; the request must still end at 0.6 s
    (not at the 1.2 s of the watchdog for dripped headers, nor after the ~24 s of the whole body)."""
    body = json.dumps(provider.ok("x" * 40)).encode()
    with StubServer(default=StubResponse(200, body, drip=0.1)) as srv:
        message, elapsed = timed(make_client(provider, srv, max_retries=0, timeout=0.6))
        assert srv.request_count == 1
    assert message == f"{provider.name}: request timed out after 0.6 s (1 attempts)"
    assert 0.6 <= elapsed < 12  # the message names the 0.6 s limit; the whole body would take ~24 s


def test_the_sdk_retries_a_request_cut_at_its_wall_clock_limit(provider: Provider) -> None:
    body = json.dumps(provider.ok("x" * 40)).encode()
    with StubServer([StubResponse(200, body, drip=0.2), StubResponse(200, provider.ok("quick"))]) as srv:
        llm = make_client(provider, srv, max_retries=1, timeout=0.4)
        assert llm.generate("hi").text == "quick"
    assert retry_counts(srv) == ["0", "1"]


def test_a_server_dripping_its_headers_is_cut_at_twice_the_timeout(provider: Provider) -> None:
    """No body to check as it arrives: the call is abandoned, and its SDK sends nothing more."""
    with StubServer(default=StubResponse(200, provider.ok("late"), head_drip=0.2)) as srv:
        message, elapsed = timed(make_client(provider, srv, max_retries=2, timeout=0.3))
        time.sleep(0.5)
        assert srv.request_count == 1
    assert message == f"{provider.name}: request timed out after 0.3 s (1 attempts)"
    assert 0.6 <= elapsed < 15  # the headers alone would take ~30 s


def test_budget_bounds_all_attempts_of_a_silent_server(provider: Provider) -> None:
    with StubServer(default=StubResponse(200, provider.ok("late"), delay=30)) as srv:
        llm = BudgetedLLM(make_client(provider, srv, max_retries=4, timeout=0.4), LLMBudget(1.0))
        t0 = time.monotonic()
        messages = []
        for _ in range(4):
            with pytest.raises(LLMCallError) as info:
                llm.generate("hi")
            messages.append(str(info.value))
        assert time.monotonic() - t0 < 20  # four calls of a server that answers after 30 s each
        assert "timed out" in messages[0]
        # a server that never answered is not called again after its first timeout (else: budget spent)
        assert "not called again" in messages[-1] or "budget" in messages[-1]
        assert srv.request_count <= 4


def test_budget_ending_while_the_sdk_waits_to_retry(provider: Provider) -> None:
    """The SDK's own backoff (no Retry-After: 0.375-0.5 s) outlasts a 0.25 s budget: the call ends at
    the deadline with the failure it was waiting to retry, and the SDK never sends the retry."""
    with StubServer([StubResponse(200, provider.ok("ok"))], default=StubResponse(500, provider.error("boom"))) as srv:
        llm = make_client(provider, srv, max_retries=4)
        # a warm client (SDK imported, connection pool made) before the deadline is set: on a loaded
        # machine building them took the whole 0.25 s and the request was never sent
        assert llm.generate("warm-up").text == "ok"
        message, elapsed = timed(llm, deadline=time.monotonic() + 0.25)
        time.sleep(0.6)
        assert srv.request_count == 2  # the warm-up and the one failed request: no retry was sent
    assert message == f"{provider.name}: server error 500 after 1 attempts"
    assert elapsed >= 0.2  # ended at the deadline: the request count above shows no retry was sent


def test_budget_ending_while_the_sdk_waits_to_reconnect(provider: Provider) -> None:
    with refusing_url() as url:
        # a refused connect fails at once; a 1 s timeout was seen to expire first on a machine
        # running ~50 processes on 2 cores, so the timeout is far from what is being tested
        llm = provider.build(url, timeout=10.0, retry=RetryPolicy(max_retries=8))
        __import__(provider.name)  # before the deadline is set
        message, elapsed = timed(llm, deadline=time.monotonic() + 0.25)
    assert re.fullmatch(rf"{provider.name}: cannot connect to \S+ after 1 attempts \(.*refused\)", message), message
    assert 0.2 <= elapsed < 12  # the SDK's eight reconnects would back off for about 30 s


def test_retry_after_longer_than_the_budget_is_not_waited_for(provider: Provider) -> None:
    """50 s is under the 60 s cap but over the 30 s budget: fail now, not when the budget ends."""
    with StubServer(default=StubResponse(503, provider.error("overloaded"), headers={"Retry-After": "50"})) as srv:
        message, elapsed = timed(BudgetedLLM(make_client(provider, srv), LLMBudget(30.0)))
        assert srv.request_count == 1
    assert message == f"{provider.name}: server error 503 after 1 attempts"
    assert elapsed < 20  # failed before the 30 s budget could run out


@pytest.mark.parametrize("status", [401, 403, 404])
def test_permanent_error_stops_further_calls(provider: Provider, status: int) -> None:
    with StubServer(default=StubResponse(status, provider.error("nope", type_="authentication_error"))) as srv:
        llm = BudgetedLLM(make_client(provider, srv), LLMBudget(30))
        with pytest.raises(LLMCallError):
            llm.generate("first")
        for _ in range(5):
            with pytest.raises(LLMCallError, match="not called again"):
                llm.generate("next")
        assert srv.request_count == 1


def test_repeated_failures_open_the_breaker(provider: Provider) -> None:
    with StubServer(default=StubResponse(500, provider.error("boom", type_="api_error"), headers=FAST)) as srv:
        llm = BudgetedLLM(make_client(provider, srv, max_retries=1), LLMBudget(30, max_failures=3))
        for _ in range(6):
            with pytest.raises(LLMCallError):
                llm.generate("hi")
        assert srv.request_count == 3 * 2  # three calls of two attempts, then no more
        assert "3 failed calls in a row" in llm.budget.open_reason


def test_success_resets_the_failure_count() -> None:
    budget = LLMBudget(30, max_failures=2)
    err = LLMCallError("x: server error 500", provider="x", status=500)
    budget.record_failure(err)
    budget.record_success()
    budget.record_failure(err)
    assert budget.open_reason is None
    budget.record_failure(err)
    assert budget.open_reason


@pytest.mark.parametrize("body", ["<html><body>502 Bad Gateway</body></html>", '{"id": "chatcmpl-1", "choi',
                                  "[" * 100_000], ids=["html", "truncated", "deeply-nested"])
def test_200_with_a_body_that_is_not_json_is_a_call_error(provider: Provider, body: str) -> None:
    with StubServer(default=StubResponse(200, body)) as srv:
        with pytest.raises(LLMCallError, match="not valid JSON|nested too deeply") as info:
            make_client(provider, srv).generate("hi")
    assert "\n" not in str(info.value) and srv.request_count == 1


def test_answer_longer_than_max_tokens_is_cut_and_not_cached(provider: Provider, tmp_path: Path) -> None:
    from utils.llm.retry import answer_char_cap

    huge = "A" * 5_000_000
    with StubServer([StubResponse(200, provider.ok(huge)), StubResponse(200, provider.ok("short"))]) as srv:
        llm = CachedLLM(make_client(provider, srv), LLMCache(tmp_path / CACHE_FILENAME))
        first = llm.generate("hi", max_tokens=100)
        assert len(first.text) == answer_char_cap(100) < 5_000
        assert any("not cached" in n for n in first.notes)
        second = llm.generate("hi", max_tokens=100)  # not served from the cache
        assert second.text == "short" and not second.cached
    assert srv.request_count == 2


def test_with_budget_leaves_mock_clients_alone() -> None:
    mock = MockLLM()
    assert with_budget(mock, 1) is mock and with_budget(None, 1) is None
