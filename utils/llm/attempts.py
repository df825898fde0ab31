"""What the SDK's requests for one call did, recorded by the HTTP hooks (``http_hooks``).

Why: the SDK retries inside one ``create()`` call, so only the HTTP layer
sees how many requests went out, when the one in flight started and how the
last one ended. The call loop (``remote``) needs exactly that: "after N
attempts", each request's wall-clock limit, the error to report when the
budget ends a call while the SDK is waiting to retry, and a way to stop the
SDK of an abandoned call from sending more.
"""
from __future__ import annotations

import threading
import time

from utils.llm.retry import CallFailure


class CallLog:
    """One ``generate()`` call's requests, across its parameter fix-ups; written from the call's thread."""

    def __init__(self, *, timeout: float, deadline: float | None, max_retry_after: float,
                 retry_timeouts: bool = True) -> None:
        self.timeout = timeout
        self.retry_timeouts = retry_timeouts
        """False: a timed-out request is not retried (the call ends with its timeout)."""
        self.deadline = deadline
        self.max_retry_after = max_retry_after
        self.sent = 0
        self.limit = timeout
        """Wall-clock seconds of the latest request: ``timeout``, or less when the budget has less left."""
        self._started = 0.0
        self._in_flight = False
        self._outcome: CallFailure | None = None
        self._abandoned = False
        self._lock = threading.Lock()

    def left(self, now: float | None = None) -> float | None:
        """Seconds of budget left (None: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - (time.monotonic() if now is None else now)

    def read_timeout(self) -> float:
        """The per-read timeout for one SDK call: ``timeout``, or the budget left when that is less."""
        left = self.left()
        return self.timeout if left is None else max(0.0, min(self.timeout, left))

    def begin(self) -> bool:
        """A request is about to go out (False: the call was abandoned, send nothing)."""
        with self._lock:
            if self._abandoned or self._gave_up():
                return False
            now = time.monotonic()
            left = self.left(now)
            self.sent += 1
            self.limit = self.timeout if left is None else max(0.0, min(self.timeout, left))
            self._started, self._in_flight, self._outcome = now, True, None
            return True

    def _gave_up(self) -> bool:
        """The last request timed out and timeouts are not retried (call with the lock held)."""
        return (not self.retry_timeouts and not self._in_flight and self._outcome is not None
                and self._outcome.kind == "timeout")

    def gave_up(self) -> bool:
        """Whether the call ended at a timed-out request that is not to be retried."""
        with self._lock:
            return self._gave_up()

    @property
    def ends_at(self) -> float:
        """The wall-clock end of the latest request (requests of one call go out one after another)."""
        return self._started + self.limit

    def status(self, code: int, reason: str) -> None:
        """Response headers with an error status arrived (the body is still to come)."""
        with self._lock:
            self._outcome = CallFailure("status", f"{code} {reason}".strip(), status=code)

    def ended(self, failure: CallFailure | None = None) -> None:
        """The request in flight is over: its body was read, or it failed with ``failure``."""
        with self._lock:
            if not self._in_flight:
                return
            self._in_flight = False
            if failure is not None:
                self._outcome = failure

    def too_long_to_wait(self, retry_after: float | None) -> bool:
        """Whether the SDK would sleep past ``max_retry_after`` or past the budget for this Retry-After.

        Both SDKs take a Retry-After of zero or less as absent (their own backoff applies).
        """
        if retry_after is None or retry_after <= 0:
            return False
        left = self.left()
        return retry_after > self.max_retry_after or (left is not None and retry_after >= left)

    def cut_at(self) -> float | None:
        """When the call must be abandoned: at the deadline, or when the request in flight has run
        twice its limit (its body is checked as it arrives, which can run one read timeout late; a
        server dripping its headers is caught only here)."""
        with self._lock:
            if self._gave_up():
                return time.monotonic()
            hard_end = self._started + (2 if self.retry_timeouts else 1) * self.limit if self._in_flight else None
        ends = [t for t in (self.deadline, hard_end) if t is not None]
        return min(ends) if ends else None

    def abandon(self) -> CallFailure:
        """Stop the SDK from sending more, and say how the call stands: the request in flight timed
        out, or the last one's failure (the SDK was waiting to retry it)."""
        with self._lock:
            self._abandoned = True
            if self._in_flight or self._outcome is None:
                return CallFailure("timeout", f"no complete response within {self.limit:g} s")
            return self._outcome
