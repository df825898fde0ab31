"""Streamed answers (``generate(..., on_text=...)``): the real SDKs against stub servers speaking each
provider's streaming wire format on 127.0.0.1.

What must hold: the pieces arrive in order and join to the text; text, usage and the truncation flag
equal what the same reply gives unstreamed; a stream that breaks before any text is tried again, one
that breaks after some is an error (never a second copy); the cache stores only complete answers and
tells a hit in one piece; the budget's deadline bounds the whole stream.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.stub_servers import (
    StubResponse,
    StubServer,
    anthropic_message_body,
    anthropic_stream,
    openai_chat_body,
    openai_error_body,
    openai_stream,
)
from utils.llm.anthropic_llm import AnthropicLLM
from utils.llm.budget import BudgetedLLM, LLMBudget
from utils.llm.cached import CachedLLM
from utils.llm.mock import MockLLM
from utils.llm.openai_llm import OpenAILLM
from utils.llm.response_cache import CACHE_FILENAME, LLMCache
from utils.llm.retry import RetryPolicy
from utils.llm.types import LLMCallError

PIECES = ["The model ", "was trained ", "for 50 ", "epochs [1]", ".\n\n训练了 50 个周期。"]
TEXT = "".join(PIECES)


@dataclass
class Wire:
    name: str
    build: Callable[..., Any]
    whole: Callable[..., StubResponse]
    """The same reply unstreamed, (text, in, out, truncated)."""
    streamed: Callable[..., list[str]]
    """The reply as stream events, (pieces, in, out, truncated)."""


def _openai(url: str, **kw: Any) -> OpenAILLM:
    return OpenAILLM(api_key="sk-test", base_url=url + "/v1", **kw)


def _anthropic(url: str, **kw: Any) -> AnthropicLLM:
    return AnthropicLLM(api_key="sk-ant-test", base_url=url, **kw)


OPENAI = Wire(
    "openai", _openai,
    lambda text, i, o, cut: StubResponse(200, openai_chat_body(text, prompt_tokens=i, completion_tokens=o,
                                                               finish_reason="length" if cut else "stop")),
    lambda pieces, i, o, cut: openai_stream(pieces, prompt_tokens=i, completion_tokens=o,
                                            finish_reason="length" if cut else "stop"))
ANTHROPIC = Wire(
    "anthropic", _anthropic,
    lambda text, i, o, cut: StubResponse(200, anthropic_message_body(text, input_tokens=i, output_tokens=o,
                                                                     stop_reason="max_tokens" if cut else "end_turn")),
    lambda pieces, i, o, cut: anthropic_stream(pieces, input_tokens=i, output_tokens=o,
                                               stop_reason="max_tokens" if cut else "end_turn"))


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param


def client(w: Wire, srv: StubServer, *, max_retries: int = 2, timeout: float = 10.0) -> Any:
    return w.build(srv.url, timeout=timeout, retry=RetryPolicy(max_retries=max_retries))


@pytest.mark.parametrize("truncated", [False, True], ids=["complete", "cut-at-max-tokens"])
def test_pieces_arrive_in_order_and_the_reply_equals_the_unstreamed_one(wire: Wire, truncated: bool) -> None:
    with StubServer([wire.whole(TEXT, 1200, 80, truncated),
                     StubResponse(200, stream=wire.streamed(PIECES, 1200, 80, truncated))]) as srv:
        llm = client(wire, srv)
        whole = llm.generate("Q?", system="S", max_tokens=300)
        told: list[str] = []
        streamed = llm.generate("Q?", system="S", max_tokens=300, on_text=told.append)
        plain, asked = srv.requests[0].json(), srv.requests[1].json()
    assert told == PIECES  # each piece told once, in order
    assert streamed.text == whole.text == TEXT
    assert streamed.usage == whole.usage
    assert streamed.usage.input_tokens == 1200 and streamed.usage.output_tokens == 80
    assert streamed.truncated is whole.truncated is truncated
    assert streamed.cacheable is whole.cacheable is (not truncated)
    assert streamed.notes == whole.notes
    assert "stream" not in plain  # callers without on_text are not streamed
    assert asked["stream"] is True
    assert {k: v for k, v in asked.items() if k not in ("stream", "stream_options")} == plain
    if wire is OPENAI:
        assert asked["stream_options"] == {"include_usage": True}


def test_a_server_rejecting_stream_options_is_asked_again_without_them() -> None:
    notices: list[str] = []
    with StubServer([StubResponse(400, openai_error_body("Unrecognized request argument supplied: stream_options")),
                     StubResponse(200, stream=openai_stream(PIECES, prompt_tokens=None))]) as srv:
        llm = OpenAILLM(api_key="sk-test", base_url=srv.url + "/v1", timeout=10, notice=notices.append)
        told: list[str] = []
        resp = llm.generate("Q?", on_text=told.append)
        second = srv.requests[1].json()
    assert told == PIECES and resp.text == TEXT
    assert "stream_options" not in second and second["stream"] is True
    assert resp.usage.calls == 1 and resp.usage.output_tokens > 0  # estimated: the server sent none
    assert "token counts estimated (server sent no usage)" in resp.notes
    assert len(notices) == 1 and "stream_options" in notices[0]


def test_a_stream_that_breaks_after_some_text_is_an_error_not_a_retry(wire: Wire) -> None:
    events = wire.streamed(PIECES, 10, 5, False)
    first_text = next(i for i, ev in enumerate(events) if "epochs" in ev)  # the fourth piece
    with StubServer([StubResponse(200, stream=events, stream_cut=first_text)],
                    default=StubResponse(200, stream=events)) as srv:
        told: list[str] = []
        with pytest.raises(LLMCallError) as err:
            client(wire, srv, max_retries=3).generate("Q?", on_text=told.append)
        sent = srv.request_count
    assert told == PIECES[:3]  # what came, once; nothing of a second attempt
    assert sent == 1
    n = len("".join(PIECES[:3]))
    assert str(err.value).startswith(f"{wire.name}: the answer broke off after {n} characters (connection lost: ")


def test_a_stream_that_breaks_before_any_text_is_tried_again(wire: Wire) -> None:
    events = wire.streamed(PIECES, 10, 5, False)
    with StubServer([StubResponse(200, stream=events, stream_cut=1),
                     StubResponse(200, stream=events)]) as srv:
        told: list[str] = []
        resp = client(wire, srv).generate("Q?", on_text=told.append)
        sent = srv.request_count
    assert sent == 2
    assert told == PIECES and resp.text == TEXT


def test_a_stream_that_ends_early_without_its_end_marker_is_an_error(wire: Wire) -> None:
    events = wire.streamed(PIECES, 10, 5, False)[:-3]  # a clean end of body, but no finish / message_stop
    with StubServer([StubResponse(200, stream=events)]) as srv:
        told: list[str] = []
        with pytest.raises(LLMCallError, match=r"broke off after \d+ characters \(bad stream: the stream ended "
                                               r"before the answer was complete\)"):
            client(wire, srv).generate("Q?", on_text=told.append)
    assert told and TEXT.startswith("".join(told))


@pytest.mark.parametrize("w, error_event", [
    (OPENAI, 'data: {"error": {"message": "overloaded mid-answer", "type": "server_error"}}\n\n'),
    (ANTHROPIC, 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                '"message": "overloaded mid-answer"}}\n\n'),
], ids=["openai", "anthropic"])
def test_an_error_event_mid_stream_is_an_error_with_the_servers_message(w: Wire, error_event: str) -> None:
    events = w.streamed(PIECES, 10, 5, False)
    at = next(i for i, ev in enumerate(events) if "epochs" in ev)
    with StubServer([StubResponse(200, stream=events[:at] + [error_event])]) as srv:
        told: list[str] = []
        with pytest.raises(LLMCallError, match="broke off after .*overloaded mid-answer"):
            client(w, srv).generate("Q?", on_text=told.append)
        assert srv.request_count == 1
    assert told == PIECES[:3]


def test_a_failing_callback_ends_the_call_and_propagates(wire: Wire) -> None:
    class Gone(Exception):
        pass

    gate = threading.Event()
    events = wire.streamed(PIECES, 10, 5, False)
    with StubServer([StubResponse(200, stream=events, stream_gate=(len(events) - 2, gate))]) as srv:
        told: list[str] = []

        def on_text(piece: str) -> None:
            told.append(piece)
            raise Gone()

        with pytest.raises(Gone):
            client(wire, srv).generate("Q?", on_text=on_text)
        gate.set()
        assert srv.request_count == 1
    assert told == PIECES[:1]


def test_the_budget_deadline_bounds_the_whole_stream(wire: Wire) -> None:
    events = wire.streamed(PIECES, 10, 5, False)
    gate = threading.Event()  # the server stops after the first piece until the test ends
    first = next(i for i, ev in enumerate(events) if "The model" in ev)
    # an SDK's first request in a process builds its machinery lazily (~1 s on a busy machine): done
    # here, so that the 1 s budget under test times the stream alone, whatever ran before this test
    with StubServer([StubResponse(200, stream=wire.streamed(PIECES, 10, 5, False))]) as warm:
        client(wire, warm).generate("warm-up", on_text=lambda piece: None)
    with StubServer([StubResponse(200, stream=events, stream_gate=(first + 1, gate))]) as srv:
        llm = BudgetedLLM(client(wire, srv, timeout=30), LLMBudget(1.0))
        told: list[str] = []
        try:
            with pytest.raises(LLMCallError, match=r"the answer broke off after 10 characters \(timed out"):
                llm.generate("Q?", on_text=told.append)
        finally:
            gate.set()
    assert told == PIECES[:1]
    assert llm.failed == 1 and llm.answered == 0


def test_the_cache_stores_complete_answers_and_tells_a_hit_in_one_piece(wire: Wire, tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / CACHE_FILENAME)
    with StubServer([StubResponse(200, stream=wire.streamed(PIECES, 10, 5, True)),
                     StubResponse(200, stream=wire.streamed(PIECES, 10, 5, False))]) as srv:
        llm = CachedLLM(client(wire, srv), cache)
        told: list[str] = []
        cut = llm.generate("Q?", on_text=told.append)
        assert cut.truncated and told == PIECES
        told.clear()
        fresh = llm.generate("Q?", on_text=told.append)  # the truncated answer was not stored
        assert not fresh.cached and told == PIECES
        told.clear()
        hit = llm.generate("Q?", on_text=told.append)
        plain = llm.generate("Q?")
        assert srv.request_count == 2
    assert hit.cached and told == [TEXT] and hit.text == TEXT
    assert hit.usage.cached_calls == 1 and hit.usage.calls == 0
    assert plain.cached and plain.text == TEXT  # a streamed answer serves unstreamed callers too


def test_anthropic_json_prefill_is_put_back_in_front_of_the_streamed_text() -> None:
    continuation = ['  "results"', ': [{"node_id": "0007"}]', "}"]
    with StubServer([StubResponse(200, stream=anthropic_stream(continuation))]) as srv:
        told: list[str] = []
        resp = client(ANTHROPIC, srv).generate("Find.", json_mode=True, on_text=told.append)
        assert srv.requests[0].json()["messages"][-1] == {"role": "assistant", "content": "{"}
    assert "".join(told) == resp.text == "{" + "".join(continuation)
    assert json.loads(resp.text) == {"results": [{"node_id": "0007"}]}


def test_a_reply_past_the_character_cap_stops_being_read(wire: Wire) -> None:
    from utils.llm.retry import answer_char_cap

    cap = answer_char_cap(1)
    pieces = ["x" * 500] * (cap // 500 + 4)
    with StubServer([StubResponse(200, stream=wire.streamed(pieces, 10, 5, False))]) as srv:
        told: list[str] = []
        resp = client(wire, srv).generate("Q?", max_tokens=1, on_text=told.append)
        assert len("".join(told)) == len(resp.text) == cap
        assert not resp.cacheable and srv.request_count == 1
    assert any("ran past" in n for n in resp.notes)


def test_mock_llm_tells_its_reply_piece_by_piece() -> None:
    told: list[str] = []
    resp = MockLLM(["It was 50 epochs [1].\n训练了 50 个周期。"]).generate("Q?", on_text=told.append)
    assert len(told) > 1 and "".join(told) == resp.text
