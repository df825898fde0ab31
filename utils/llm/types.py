"""The data contracts of one LLM call (request, response, usage) and the usage meter."""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

from utils.errors import BackendError


@dataclass
class LLMUsage:
    """Tokens and estimated cost of one or more calls.

    ``calls`` counts requests actually sent to a provider; ``cached_calls``
    counts answers served from the disk cache (no tokens, no cost).
    ``cost_usd`` is None when any contributing call was to a model with no
    known price — an unknown part makes the total unknown, not smaller.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0
    cached_calls: int = 0

    def __add__(self, other: "LLMUsage") -> "LLMUsage":
        if not isinstance(other, LLMUsage):
            return NotImplemented
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return LLMUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=cost,
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
        )

    @classmethod
    def sum(cls, usages: Iterable["LLMUsage"]) -> "LLMUsage":
        total = cls()
        for usage in usages:
            total = total + usage
        return total

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line for terminal output, e.g. '1,234 in / 56 out tokens, $0.0045, 2 calls (1 cached)'."""
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        cached = f" ({self.cached_calls} cached)" if self.cached_calls else ""
        n = self.calls + self.cached_calls
        return (
            f"{self.input_tokens:,} in / {self.output_tokens:,} out tokens, {cost}, "
            f"{n} call{'s' if n != 1 else ''}{cached}"
        )


@dataclass
class LLMResponse:
    text: str
    usage: LLMUsage
    provider: str
    model: str
    cached: bool = False
    notes: tuple[str, ...] = ()
    """How the answer was obtained when it deviates from the request, e.g.
    'response_format unsupported by the server; JSON requested by instruction only'."""
    cacheable: bool = True
    """False when we had to cut an answer the server sent past max_tokens, or the server cut it
    (``truncated``): never stored, so a healthy server is asked again next time."""
    truncated: bool = False
    """The server stopped at max_tokens (finish_reason "length", stop_reason "max_tokens"): the text
    is incomplete, and the run record and terminal say so."""
    cache_key: str | None = None
    """Set by CachedLLM: the entry ``forget_reply`` drops when the caller could not use the reply."""


@dataclass(frozen=True)
class LLMRequest:
    """One call's inputs; MockLLM records these so tests can assert on them."""

    prompt: str
    system: str | None = None
    json_mode: bool = False
    max_tokens: int = 1024
    temperature: float = 0.0


TextSink = Callable[[str], None]
"""Told each piece of an answer's text as the provider writes it (``generate(..., on_text=...)``).

Called on the thread that called ``generate``; an exception it raises (a client gone) ends the call
and propagates as is. The pieces joined are the text the provider wrote, before the client's own
fix-ups: a reply cut at ``answer_char_cap`` stops there, and a reply that fails part-way has been
partly told (the caller then gets an ``LLMCallError``, never a second copy of the text)."""


def text_kwargs(inner: Any, on_text: TextSink | None) -> dict[str, Any]:
    """``{"on_text": f}`` for clients that stream (``accepts_on_text``), nothing for a plain LLMClient."""
    if on_text is None or not getattr(inner, "accepts_on_text", False):
        return {}
    return {"on_text": on_text}


@runtime_checkable
class LLMClient(Protocol):
    provider: str
    model: str

    def generate(
        self,
        prompt: str,
        *,
        json_mode: bool = False,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        system: str | None = None,
    ) -> LLMResponse: ...


class LLMCallError(BackendError):
    """A failed LLM call, with enough detail for the run record."""

    def __init__(self, message: str, *, provider: str, status: int | None = None, attempts: int = 1,
                 retryable: bool = False, timed_out: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.attempts = attempts
        self.retryable = retryable
        self.timed_out = timed_out
        """No response came within the request's time limit (the server is silent or too slow)."""


class UsageMeter:
    """Thread-safe running total of LLMUsage (per query, per index build)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = LLMUsage()

    def add(self, usage: LLMUsage) -> None:
        with self._lock:
            self._total = self._total + usage

    def record(self, response: LLMResponse) -> LLMResponse:
        self.add(response.usage)
        return response

    def total(self) -> LLMUsage:
        with self._lock:
            return LLMUsage(**asdict(self._total))

    def to_dict(self) -> dict[str, Any]:
        return self.total().to_dict()

    def reset(self) -> LLMUsage:
        """Zero the meter and return what it held (so one meter can serve many queries)."""
        with self._lock:
            total, self._total = self._total, LLMUsage()
            return total
