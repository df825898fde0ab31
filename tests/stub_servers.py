"""Scriptable local HTTP servers that speak just enough of the OpenAI and
Anthropic wire formats for the real SDKs to talk to them.

Why a real socket instead of mocking the SDK: the point of the backend tests is
to prove that the request we put on the wire (path, headers, JSON body) and the
way we read status codes, Retry-After and timeouts match what the official SDKs
actually do. A stub on 127.0.0.1, port 0, in a daemon thread costs a few
milliseconds and needs no network.

Usage::

    with StubServer([StubResponse(429, headers={"Retry-After": "2"}),
                     StubResponse(200, openai_chat_body("hi"))]) as srv:
        client = OpenAILLM(base_url=srv.url + "/v1", ...)
        ...
        assert srv.requests[0].path == "/v1/chat/completions"

Responses are served in order; when the script runs out, ``default`` (if
given) answers every further request, else a 599 "stub exhausted" error —
which tests see as a failure instead of a hang. A callable may be given
instead of a list to compute each response from the recorded request.
"""
from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator

__all__ = [
    "RecordedRequest",
    "StubResponse",
    "StubServer",
    "anthropic_error_body",
    "anthropic_message_body",
    "anthropic_stream",
    "openai_chat_body",
    "openai_error_body",
    "openai_stream",
]


@dataclass
class StubResponse:
    """One scripted reply. ``body``: dict/list → JSON, str/bytes → sent raw."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (to provoke client timeouts)."""
    drip: float = 0.0
    """Seconds between single bytes of the body (a server that never quite stalls)."""
    head_drip: float = 0.0
    """Seconds between single bytes of the status line and headers (no read timeout ever fires)."""
    stream: list[str] | None = None
    """A streamed reply (``openai_stream``, ``anthropic_stream``): its events sent as HTTP chunks,
    ``stream_delay`` seconds apart, as text/event-stream; ``body`` is ignored."""
    stream_delay: float = 0.0
    stream_cut: int | None = None
    """Close the connection after this many events, mid-body (a server that died part-way)."""
    stream_gate: tuple[int, threading.Event] | None = None
    """(i, gate): wait for ``gate`` before sending event i, so a test can see the pieces before it
    arrive while the reply is still unfinished; not set within 30 s, the connection is closed there."""


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased, so tests need not guess the SDK's casing."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


Responder = Callable[[RecordedRequest], StubResponse]


class StubServer:
    """A ThreadingHTTPServer on 127.0.0.1:0 serving scripted responses."""

    def __init__(
        self,
        responses: Iterable[StubResponse] | Responder | None = None,
        *,
        default: StubResponse | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._responder: Responder | None = responses if callable(responses) else None
        self._queue: deque[StubResponse] = deque(
            [] if responses is None or callable(responses) else list(responses)
        )
        self._default = default
        self.requests: list[RecordedRequest] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "StubServer":
        # A short poll interval: shutdown() waits up to one interval (default 0.5 s per test).
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="stub-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on a scripted delay
        if self._thread is not None:  # shutdown() would wait forever on a never-started server
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- scripting ----------------------------------------------------------
    def push(self, *responses: StubResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _next_response(self, req: RecordedRequest) -> StubResponse:
        with self._lock:
            self.requests.append(req)
            if self._responder is None:
                if self._queue:
                    return self._queue.popleft()
                if self._default is not None:
                    return self._default
                return StubResponse(599, {"error": {"message": "stub exhausted"}})
        return self._responder(req)

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like real APIs

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # keep pytest output clean

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                resp = server._next_response(req)
                if resp.delay and server._stopping.wait(resp.delay):
                    return
                if resp.stream is not None:
                    self._stream(resp)
                    return
                payload = _encode(resp.body)
                headers = {"Content-Type": "application/json", **resp.headers,
                           "Content-Length": str(len(payload))}
                try:
                    if resp.head_drip > 0:
                        if not _drip(self.wfile, _head(resp.status, headers), resp.head_drip, server._stopping):
                            return
                    else:
                        self.send_response(resp.status)
                        for name, value in headers.items():
                            self.send_header(name, value)
                        self.end_headers()
                    if resp.drip > 0:
                        if not _drip(self.wfile, payload, resp.drip, server._stopping):
                            return
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test); nothing to do

            def _stream(self, resp: StubResponse) -> None:
                try:
                    self.send_response(resp.status)
                    for name, value in {"Content-Type": "text/event-stream", **resp.headers,
                                        "Transfer-Encoding": "chunked"}.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for i, ev in enumerate(resp.stream):
                        if resp.stream_cut is not None and i >= resp.stream_cut:
                            self.close_connection = True
                            return
                        if resp.stream_gate is not None and resp.stream_gate[0] == i:
                            if not resp.stream_gate[1].wait(30):
                                self.close_connection = True
                                return
                        data = ev.encode("utf-8")
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        if resp.stream_delay and server._stopping.wait(resp.stream_delay):
                            return
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_POST = _handle
            do_GET = _handle

        return Handler


def _head(status: int, headers: dict[str, str]) -> bytes:
    """The status line and headers as ``send_response`` + ``send_header`` would write them."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    lines = [f"HTTP/1.1 {status} {phrase}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _drip(wfile: Any, data: bytes, seconds: float, stopping: threading.Event) -> bool:
    """Write ``data`` a byte at a time, ``seconds`` apart; False if the server stopped meanwhile."""
    for i in range(len(data)):
        wfile.write(data[i:i + 1])
        wfile.flush()
        if stopping.wait(seconds):
            return False
    return True


def _encode(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


# --- wire-format bodies --------------------------------------------------------
def openai_chat_body(
    text: str | None,
    *,
    model: str = "gpt-4o-mini",
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A chat.completions response as api.openai.com (and llama.cpp etc.) send it."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def openai_error_body(message: str, *, type_: str = "invalid_request_error", code: str | None = None,
                      param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def anthropic_message_body(
    text: str,
    *,
    model: str = "claude-sonnet-4-5",
    input_tokens: int = 13,
    output_tokens: int = 5,
    stop_reason: str = "end_turn",
) -> dict[str, Any]:
    """A /v1/messages response as api.anthropic.com sends it."""
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def anthropic_error_body(message: str, *, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def openai_stream(
    pieces: list[str],
    *,
    model: str = "gpt-4o-mini",
    prompt_tokens: int | None = 11,
    completion_tokens: int = 7,
    finish_reason: str = "stop",
) -> list[str]:
    """chat.completions with ``stream=True`` as api.openai.com sends it: a role chunk, one chunk per
    piece, the finish_reason chunk, the usage chunk (no choices; ``prompt_tokens`` None: none sent, as
    servers that ignore ``stream_options``), ``data: [DONE]``."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1_700_000_000,
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [_sse(chunk({"role": "assistant", "content": ""}))]
    events += [_sse(chunk({"content": p})) for p in pieces]
    events.append(_sse(chunk({}, finish_reason)))
    if prompt_tokens is not None:
        events.append(_sse({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1_700_000_000,
                            "model": model, "choices": [],
                            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                      "total_tokens": prompt_tokens + completion_tokens}}))
    events.append(_sse("[DONE]"))
    return events


def anthropic_stream(
    pieces: list[str],
    *,
    model: str = "claude-sonnet-4-5",
    input_tokens: int = 13,
    output_tokens: int = 5,
    stop_reason: str = "end_turn",
) -> list[str]:
    """/v1/messages with ``stream=True`` as api.anthropic.com sends it (named events, a ping)."""
    start = {"type": "message_start", "message": {
        "id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}
    events = [_sse(start, "message_start"),
              _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                   "content_block_start"),
              _sse({"type": "ping"}, "ping")]
    events += [_sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
                    "content_block_delta") for p in pieces]
    events += [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
               _sse({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                     "usage": {"output_tokens": output_tokens}}, "message_delta"),
               _sse({"type": "message_stop"}, "message_stop")]
    return events


@contextlib.contextmanager
def refusing_url() -> Iterator[str]:
    """A 127.0.0.1 URL whose connections are refused for as long as the block runs.

    The port is held by a socket that is bound but never listens, so the kernel refuses every
    connection to it. A port freed by stopping a server is not enough on a shared machine:
    another process may bind it meanwhile and accept without answering (seen as a timeout).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()
