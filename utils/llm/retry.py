"""The retry rule both providers share, and how failures read.

The SDKs do the retrying (``max_retries``): 408/409/429/5xx, timeouts and
connection errors, with their own backoff, honouring Retry-After. What is
ours: how many retries, the longest Retry-After worth waiting for, and the
one-line wording of what finally failed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from utils.oneline import one_line


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` goes to the SDK client; ``max_retry_after`` is checked by our HTTP hook.

    Why a cap of our own: the Anthropic SDK sleeps for any Retry-After a server
    sends (an hour, if asked) and the OpenAI SDK for up to two minutes; a
    longer wait than ``max_retry_after`` (or than the budget left) ends the
    call at once instead.
    """

    max_retries: int = 4
    max_retry_after: float = 60.0


_RETRYABLE_STATUS = frozenset({408, 409, 429})
FailureKind = Literal["status", "timeout", "connection", "response"]


class CallFailure(Exception):
    """Backend-neutral description of one failed attempt."""

    def __init__(self, kind: FailureKind, detail: str, *, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.status = status

    @property
    def retryable(self) -> bool:
        """Whether the SDK retried it (so it failed "after N attempts"), by the SDKs' own status rule."""
        if self.kind in ("timeout", "connection"):
            return True
        if self.kind == "status" and self.status is not None:
            return self.status in _RETRYABLE_STATUS or self.status >= 500
        return False


def parse_retry_after(headers: Mapping[str, str] | Any, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds or HTTP date)."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    import email.utils  # rare path; keeps module import cheap

    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def failure_from_sdk(exc: Exception, sdk: Any) -> CallFailure:
    """Map an openai/anthropic SDK exception (same shape in both) to a CallFailure."""
    if isinstance(exc, sdk.APITimeoutError):
        return CallFailure("timeout", "request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return CallFailure("connection", one_line(cause or exc, 200))
    if isinstance(exc, sdk.APIStatusError):
        body = getattr(exc, "body", None)
        message: object = exc.message
        if isinstance(body, dict):
            err = body.get("error", body)
            if isinstance(err, dict) and err.get("message"):
                message = err["message"]
            elif isinstance(err, str):
                message = err
        return CallFailure("status", one_line(message, 200), status=int(exc.status_code))
    return CallFailure("response", one_line(exc, 200))


def bad_body(exc: BaseException) -> CallFailure:
    """A 200 whose body is not the JSON it claims to be (a proxy's HTML error page, a cut-off body)."""
    if isinstance(exc, RecursionError):
        return CallFailure("response", "response body is JSON nested too deeply")
    return CallFailure("response", f"response body is not valid JSON ({one_line(exc, 80)})")


def deadline_kwargs(inner: Any, deadline: float | None, retry_timeouts: bool = True) -> dict[str, Any]:
    """``{"deadline": d}`` (and ``retry_timeouts`` when False) for our clients, nothing for a plain
    LLMClient that does not take them."""
    if not getattr(inner, "accepts_deadline", False):
        return {}
    out: dict[str, Any] = {} if deadline is None else {"deadline": deadline}
    if not retry_timeouts and getattr(inner, "accepts_retry_timeouts", False):
        out["retry_timeouts"] = False
    return out


CHARS_PER_TOKEN_CAP = 16
"""No tokenizer averages more characters per token; a longer answer ignored max_tokens."""


def answer_char_cap(max_tokens: int) -> int:
    return CHARS_PER_TOKEN_CAP * max(1, int(max_tokens)) + 1024
