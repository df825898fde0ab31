"""uvicorn's HTTP/1.1 protocol with the bounds it lacks: a deadline for reading each request, a cap
on open connections, and JSON for the refusals it writes itself.

uvicorn times out only an idle keep-alive connection: a client that sends its headers (or its body)
one byte every few seconds holds a connection, and a task, for as long as it likes. Here every
request must arrive whole, headers and body, within ``read_timeout_s`` of its first byte (or of the
connection opening): a late one is answered 408 when no response has started, and closed.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def raw_json_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 response with a ``{"error": ...}`` body, closing the connection: for the
    refusals written before any ASGI request exists."""
    body = json.dumps({"error": message}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode() + body


def guarded_protocol(read_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` with these bounds."""

    class GuardedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(raw_json_response(503, "Service Unavailable",
                                                  f"the server has {max_connections:,} connections open; try again"))
                transport.close()
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._disarm()  # the request has arrived whole (or the connection is over)
            elif self.conn.their_state is h11.IDLE and self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # a response is being written; the next request's clock starts after it

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def send_400_response(self, msg: str) -> None:
            """A request h11 cannot parse: 400 as JSON, like every other refusal."""
            self._disarm()
            if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and (self.cycle is None or not self.cycle.response_started):
                self.transport.write(raw_json_response(
                    400, "Bad Request", "the request is not valid HTTP/1.1 (its request line, a header or its Content-Length)"))
            self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._read_deadline = self.loop.call_later(read_timeout_s, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            if self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is h11.IDLE and (self.cycle is None or self.cycle.response_complete):
                received = bool(self.conn.trailing_data[0])
                if received:  # part of a request's head arrived, and no more in time
                    self.transport.write(raw_json_response(
                        408, "Request Timeout", f"the request did not arrive within {read_timeout_s:g} s"))
                self.transport.close()  # or an idle connection: closed quietly
                return
            if state is h11.SEND_BODY:
                cycle = self.cycle
                if cycle is not None and not cycle.response_started:
                    cycle.response_started = True  # the app's own answer, if it ever comes, is dropped
                    self.transport.write(raw_json_response(
                        408, "Request Timeout", f"the request body did not arrive within {read_timeout_s:g} s"))
                self.transport.close()  # the app sees the client gone (http.disconnect)

    return GuardedH11Protocol
