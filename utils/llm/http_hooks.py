"""Event hooks on the SDK's HTTP client (httpx2, public API): they see every request the SDK retries.

Imported only when a client is created, so mock runs never import httpx2.

What they do per request, for the ``CallLog`` of the call running on this thread:

- count it (the "after N attempts" of our errors), and refuse to send it once
  the call was abandoned (an SDK error the SDK re-raises without retrying);
- end its body with a ``ReadTimeout`` once its wall-clock limit has passed,
  which the SDK retries like any timeout: a server dripping a byte at a time
  never trips the per-read timeout;
- mark an error response ``x-should-retry: false`` (the header both SDKs obey)
  when its Retry-After is longer than ``max_retry_after`` or the budget left,
  so the call fails now instead of sleeping past its budget;
- note how a request without a response ended (httpcore's ``trace``
  extension), for the error reported if the budget ends while the SDK waits.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import httpcore2
import httpx2

from utils.llm.attempts import CallLog
from utils.oneline import one_line
from utils.llm.retry import CallFailure, parse_retry_after

EventHooks = dict[str, list[Callable[..., None]]]


def event_hooks(current: Callable[[], CallLog | None], stop: Callable[[str], Exception]) -> EventHooks:
    """Hooks for ``DefaultHttpxClient(event_hooks=...)``.

    ``current`` gives the log of the call on this thread (None outside ``generate``); ``stop``
    makes the SDK's own base error, which the SDK raises as is instead of retrying.
    """

    def on_request(request: httpx2.Request) -> None:
        log = current()
        if log is None:
            return
        if not log.begin():
            raise stop("call abandoned at its time limit")
        request.extensions["trace"] = _tracer(log)

    def on_response(response: httpx2.Response) -> None:
        log = current()
        if log is None:
            return
        if response.status_code >= 400:
            log.status(response.status_code, response.reason_phrase)
            if log.too_long_to_wait(parse_retry_after(response.headers)):
                response.headers["x-should-retry"] = "false"
        response.stream = _WallClockBody(response.stream, log, response.request, log.ends_at)

    return {"request": [on_request], "response": [on_response]}


def _tracer(log: CallLog) -> Callable[[str, dict[str, Any]], None]:
    def trace(event: str, info: dict[str, Any]) -> None:
        exc = info.get("exception")
        if event.endswith(".failed") and isinstance(exc, Exception):
            if isinstance(exc, httpcore2.TimeoutException):
                log.ended(CallFailure("timeout", "request timed out"))
            else:
                log.ended(CallFailure("connection", one_line(exc, 200)))

    return trace


class _WallClockBody(httpx2.SyncByteStream):
    """A response body that raises ``ReadTimeout`` at the first piece arriving after ``ends_at``."""

    def __init__(self, inner: httpx2.SyncByteStream, log: CallLog, request: httpx2.Request,
                 ends_at: float) -> None:
        self._inner = inner
        self._log = log
        self._request = request
        self._ends_at = ends_at

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            if time.monotonic() > self._ends_at:
                detail = f"no complete response within {self._log.limit:g} s"
                self._log.ended(CallFailure("timeout", detail))
                raise httpx2.ReadTimeout(detail, request=self._request)
            yield chunk
        self._log.ended()

    def close(self) -> None:
        self._inner.close()
