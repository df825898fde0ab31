"""An overall wall-clock budget and a circuit breaker for the LLM calls of one query or one build.

Why: a per-request timeout alone lets a broken provider cost requests ×
attempts × timeout (a silent server cost a query 609 s; an index build against
a failing server made 970 requests). One budget bounds the total, and the
breaker stops calling a provider that cannot answer:

- a permanent error (401/403 bad key, 404 unknown model) opens it at once —
  every further call would fail the same way;
- ``max_failures`` failed calls in a row (each already retried) open it too;
- while the provider has not answered once, a request that times out is not
  retried and opens the breaker: a silent server (nothing listening behind an
  open port, a hung local model) costs one request timeout, not workers ×
  attempts × timeout.

Once open, or once the time is used up, every call fails immediately with an
``LLMCallError`` naming the first cause, which the pipeline records as a
fallback like any other LLM failure.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from utils.llm.retry import deadline_kwargs
from utils.llm.types import LLMCallError, LLMResponse

PERMANENT_STATUS = frozenset({401, 403, 404})
DEFAULT_MAX_FAILURES = 3


class LLMBudget:
    """Thread-safe: index builds share one budget across summary workers."""

    def __init__(self, seconds: float, *, max_failures: int = DEFAULT_MAX_FAILURES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = float(seconds)
        self.max_failures = max(1, int(max_failures))
        self._clock = clock
        self._deadline = clock() + self.seconds
        self._lock = threading.Lock()
        self._failures_in_row = 0
        self._open: str | None = None
        self._answered = False

    @property
    def ever_answered(self) -> bool:
        """Whether any call on this budget got a reply (then a timeout may be a slow moment: retried)."""
        return self._answered

    @property
    def deadline(self) -> float:
        return self._deadline

    def remaining(self) -> float:
        return max(0.0, self._deadline - self._clock())

    @property
    def open_reason(self) -> str | None:
        """Why the breaker stopped further calls (None while closed)."""
        return self._open

    def check(self, provider: str) -> None:
        """Raise instead of starting a call that cannot succeed or would overrun the budget."""
        with self._lock:
            reason = self._open
        if reason is not None:
            raise LLMCallError(f"{provider}: not called again after: {reason}", provider=provider)
        if self.remaining() <= 0:
            raise LLMCallError(f"{provider}: LLM time budget of {self.seconds:g} s used up", provider=provider)

    def record_success(self) -> None:
        with self._lock:
            self._failures_in_row = 0
            self._answered = True

    def record_failure(self, exc: LLMCallError) -> None:
        with self._lock:
            if self._open is not None:
                return
            self._failures_in_row += 1
            if exc.status in PERMANENT_STATUS:
                self._open = str(exc)
            elif getattr(exc, "timed_out", False) and not self._answered:
                self._open = f"no answer from a server that has not answered yet ({exc})"
            elif self._failures_in_row >= self.max_failures:
                self._open = f"{self._failures_in_row} failed calls in a row (last: {exc})"


class BudgetedLLM:
    """Wraps a client so every call checks and feeds one LLMBudget."""

    accepts_deadline = True
    accepts_retry_timeouts = True

    def __init__(self, inner: Any, budget: LLMBudget) -> None:
        self.inner = inner
        self.budget = budget
        self.provider = inner.provider
        self.model = inner.model
        self.base_url: str | None = getattr(inner, "base_url", None)
        self.answered = 0
        """Calls that returned a reply (the run record says whether the LLM really took part)."""
        self.failed = 0

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None, retry_timeouts: bool = True) -> LLMResponse:
        self.budget.check(self.provider)
        until = self.budget.deadline if deadline is None else min(deadline, self.budget.deadline)
        retry = retry_timeouts and self.budget.ever_answered
        try:
            response = self.inner.generate(prompt, json_mode=json_mode, max_tokens=max_tokens,
                                           temperature=temperature, system=system,
                                           **deadline_kwargs(self.inner, until, retry))
        except LLMCallError as exc:
            self.failed += 1
            self.budget.record_failure(exc)
            raise
        self.answered += 1
        self.budget.record_success()
        return response


def with_budget(llm: Any, seconds: float, *, max_failures: int = DEFAULT_MAX_FAILURES) -> Any:
    """``llm`` behind a fresh budget; None and mock clients are returned unchanged (they cannot hang)."""
    if llm is None or getattr(llm, "provider", "mock") == "mock":
        return llm
    if isinstance(llm, BudgetedLLM):
        llm = llm.inner
    return BudgetedLLM(llm, LLMBudget(seconds, max_failures=max_failures))
