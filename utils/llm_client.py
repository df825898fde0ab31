"""One LLM interface, three backends: mock, Anthropic, OpenAI(-compatible).

Why one small interface (``generate(prompt, json_mode=…) -> LLMResponse``):
the pipeline needs exactly two things from a model — JSON for node locating,
text for synthesis — and the same code must talk to Claude, GPT, DeepSeek and
any local Ollama / vLLM / llama.cpp server (``OPENAI_BASE_URL``).

Why retries live here and not in the SDKs (which get ``max_retries=0``): the
two SDKs retry differently, and the pipeline needs one predictable rule it can
test: retry 408/409/429/5xx, timeouts and connection errors with exponential
backoff and full jitter, honour Retry-After; never retry other 4xx. Every
failure the user can fix surfaces as a one-line ``BackendError`` (subclass
``LLMCallError``), which the pipeline catches and records as a fallback.

Why the SDKs are imported inside the first call: ``python main.py --help``
and mock runs must not pay for importing them (or need them installed).

Servers differ in what they accept. When a server rejects a parameter with a
400 that names it (``response_format`` on many OpenAI-compatible servers,
``temperature`` or ``max_tokens`` on newer models, assistant prefill on newer
Claude models), the client drops or renames that parameter, retries once,
remembers the choice, tells the user once through ``notice`` and lists it in
``LLMResponse.notes`` so the run record shows how the answer was obtained.
"""
from __future__ import annotations

import dataclasses

import json
import random as _random
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Protocol, Sequence, runtime_checkable

from utils.errors import BackendError
from utils.oneline import one_line
from utils.llm_cache import CACHE_FILENAME, CacheEntry, LLMCache, cache_key
from utils.llm_pricing import estimate_cost
from utils.tokenizer import estimate_tokens

__all__ = [
    "ANTHROPIC_KEY_ENV",
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "JSON_ONLY_INSTRUCTION",
    "NO_LLM_NOTICE",
    "AnthropicLLM",
    "CachedLLM",
    "LLMCallError",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "LLMUsage",
    "MockExhaustedError",
    "MockLLM",
    "OpenAILLM",
    "RetryPolicy",
    "UsageMeter",
    "default_cache_dir",
    "make_llm",
    "parse_llm_spec",
    "resolve_llm_spec",
]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
OPENAI_KEY_ENV = "OPENAI_API_KEY"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
ANTHROPIC_BASE_URL_ENV = "ANTHROPIC_BASE_URL"
LLM_SPEC_ENV = "TREERAG_LLM"
LOCAL_SERVER_DUMMY_KEY = "not-needed"
PROVIDERS = ("mock", "anthropic", "openai")

JSON_ONLY_INSTRUCTION = (
    "Respond with a single valid JSON object and nothing else: no prose before or after it, no code fences."
)
NO_LLM_NOTICE = (
    "no LLM configured (set ANTHROPIC_API_KEY or OPENAI_API_KEY/OPENAI_BASE_URL, or pass --llm); using the mock LLM"
)

Notice = Callable[[str], None]


def _no_notice(_msg: str) -> None:
    pass


# =============================================================================
# Data contracts
# =============================================================================
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
    """False when we had to cut an answer the server sent past max_tokens: never stored."""
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
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


# =============================================================================
# Usage metering
# =============================================================================
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


# =============================================================================
# Mock
# =============================================================================
class MockExhaustedError(RuntimeError):
    """A scripted MockLLM ran out of replies: a test bug, deliberately not a
    BackendError so the pipeline cannot mistake it for a recordable fallback."""


MockReply = str | BaseException
MockScript = Sequence[MockReply] | Callable[[LLMRequest], MockReply] | None


class MockLLM:
    """Deterministic stand-in for tests and offline runs.

    It knows nothing about locating or synthesis (the pipeline has its own
    mock paths). ``replies`` may be a list (served in order; an exception
    instance in the list is raised — handy for scripting a BackendError), a
    callable of the LLMRequest, or None to echo: the prompt itself, or in JSON
    mode ``{"echo": prompt}``.
    """

    provider = "mock"
    accepts_deadline = True

    def __init__(self, replies: MockScript = None, *, model: str = "mock") -> None:
        self.model = model
        self.base_url: str | None = None
        self._lock = threading.Lock()
        self._script: list[MockReply] | None = list(replies) if isinstance(replies, (list, tuple)) else None
        self._fn: Callable[[LLMRequest], MockReply] | None = replies if callable(replies) else None
        self.requests: list[LLMRequest] = []

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None) -> LLMResponse:
        request = LLMRequest(prompt=prompt, system=system, json_mode=json_mode,
                             max_tokens=max_tokens, temperature=temperature)
        with self._lock:
            self.requests.append(request)
            if self._script is not None:
                if not self._script:
                    raise MockExhaustedError(f"MockLLM: no scripted reply left for call {len(self.requests)}")
                reply: MockReply = self._script.pop(0)
            elif self._fn is not None:
                reply = self._fn(request)
            else:
                reply = json.dumps({"echo": prompt}, ensure_ascii=False) if json_mode else prompt
        if isinstance(reply, BaseException):
            raise reply
        text = str(reply)
        usage = LLMUsage(
            input_tokens=estimate_tokens((system or "") + prompt),
            output_tokens=estimate_tokens(text),
            cost_usd=0.0,
            calls=1,
        )
        return LLMResponse(text=text, usage=usage, provider=self.provider, model=self.model)


# =============================================================================
# Retry policy
# =============================================================================
@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    ``sleep`` and ``random`` are injectable so tests run instantly and can
    assert on the delays chosen.
    """

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    random: Callable[[], float] = _random.random

    def delay(self, retry_index: int, retry_after: float | None) -> float:
        """Seconds before retry number ``retry_index`` (0-based).

        Retry-After from the server wins (capped: a server asking for an hour
        is not going to be waited on); otherwise uniform in [0, min(cap, base·2^n)].
        """
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * (2 ** retry_index))
        return self.random() * ceiling


_RETRYABLE_STATUS = frozenset({408, 409, 429})
FailureKind = Literal["status", "timeout", "connection", "response"]


class _CallFailure(Exception):
    """Backend-neutral description of one failed attempt."""

    def __init__(self, kind: FailureKind, detail: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
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


def _one_line(text: object, limit: int = 200) -> str:
    return one_line(text, limit)


def _failure_from_sdk(exc: Exception, sdk: Any) -> _CallFailure:
    """Map an openai/anthropic SDK exception (same shape in both) to a _CallFailure."""
    if isinstance(exc, sdk.APITimeoutError):
        return _CallFailure("timeout", "request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return _CallFailure("connection", _one_line(cause or exc))
    if isinstance(exc, sdk.APIStatusError):
        body = getattr(exc, "body", None)
        message: object = exc.message
        if isinstance(body, dict):
            err = body.get("error", body)
            if isinstance(err, dict) and err.get("message"):
                message = err["message"]
            elif isinstance(err, str):
                message = err
        return _CallFailure("status", _one_line(message), status=int(exc.status_code),
                            retry_after=parse_retry_after(exc.response.headers))
    return _CallFailure("response", _one_line(exc))


def _bad_body(exc: BaseException) -> _CallFailure:
    """A 200 whose body is not the JSON it claims to be (a proxy's HTML error page, a cut-off body)."""
    if isinstance(exc, RecursionError):
        return _CallFailure("response", "response body is JSON nested too deeply")
    return _CallFailure("response", f"response body is not valid JSON ({_one_line(exc, 80)})")


def deadline_kwargs(inner: Any, deadline: float | None) -> dict[str, Any]:
    """``{"deadline": d}`` for our clients, nothing for a plain LLMClient that does not take one."""
    return {"deadline": deadline} if deadline is not None and getattr(inner, "accepts_deadline", False) else {}


CHARS_PER_TOKEN_CAP = 16
"""No tokenizer averages more characters per token; a longer answer ignored max_tokens."""


def answer_char_cap(max_tokens: int) -> int:
    return CHARS_PER_TOKEN_CAP * max(1, int(max_tokens)) + 1024


# =============================================================================
# Remote backends
# =============================================================================
@dataclass
class _RawResult:
    text: str
    input_tokens: int | None
    output_tokens: int | None
    truncated: bool = False


class _RemoteLLM:
    """Shared retry loop, error wording and usage accounting."""

    provider: str = ""
    key_env: str = ""

    def __init__(self, *, model: str, api_key: str, base_url: str, timeout: float,
                 retry: RetryPolicy | None, notice: Notice | None) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self._api_key = api_key
        self._notice = notice or _no_notice
        self._client: Any = None
        self._sdk: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # --- subclass hooks -------------------------------------------------------
    def _create_client(self) -> tuple[Any, Any]:
        raise NotImplementedError

    def _call_once(self, request: LLMRequest, timeout: float) -> _RawResult:
        raise NotImplementedError

    def _adapt(self, failure: _CallFailure, request: LLMRequest) -> str | None:
        """Drop/rename a rejected parameter; return a note if something changed."""
        return None

    def _standing_notes(self, request: LLMRequest) -> list[str]:
        return []

    # --- shared machinery -----------------------------------------------------
    def _get_client(self) -> tuple[Any, Any]:
        with self._lock:
            if self._client is None:
                self._client, self._sdk = self._create_client()
            return self._client, self._sdk

    def _learned(self, note: str) -> str:
        self._notice(f"{self.provider} ({self.model}): {note}")
        return note

    accepts_deadline = True

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None) -> LLMResponse:
        """One answer, or LLMCallError.

        Each attempt ends by ``self.timeout`` seconds of wall-clock time (not
        per read: a server dripping a byte at a time is cut off too), and all
        attempts and waits end by ``deadline`` (``time.monotonic()`` value,
        from the query's or build's LLM budget) when one is given.
        """
        request = LLMRequest(prompt=prompt, system=system, json_mode=json_mode,
                             max_tokens=max_tokens, temperature=temperature)
        attempts = 0
        adaptations = 0
        while True:
            attempts += 1
            limit = self.timeout
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._budget_error(attempts - 1)
                limit = min(limit, left)
            try:
                raw = self._call_with_deadline(request, limit)
                break
            except _CallFailure as failure:
                if (failure.kind == "status" and failure.status in (400, 422) and adaptations < 3
                        and self._adapt(failure, request) is not None):
                    adaptations += 1
                    attempts -= 1  # a parameter fix-up is not a failed attempt
                    continue
                if not failure.retryable:
                    raise self._permanent_error(failure, attempts) from None
                if attempts > self.retry.max_retries:
                    raise self._exhausted_error(failure, attempts, limit) from None
                wait = self.retry.delay(attempts - 1, failure.retry_after)
                if deadline is not None and wait >= deadline - time.monotonic():
                    # waiting would use up the budget: give up now rather than at its end
                    raise self._exhausted_error(failure, attempts, limit) from None
                self.retry.sleep(wait)
        return self._response(request, raw)

    def _call_with_deadline(self, request: LLMRequest, seconds: float) -> _RawResult:
        """``_call_once`` with a wall-clock limit.

        The SDKs only bound each socket read, so the call runs in a daemon
        thread that is abandoned when the limit passes (it ends when the server
        does or the read timeout fires; nothing waits for it).
        """
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["raw"] = self._call_once(request, seconds)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box["exc"] = exc

        worker = threading.Thread(target=run, name=f"{self.provider}-call", daemon=True)
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            raise _CallFailure("timeout", f"no complete response within {seconds:g} s")
        if "exc" in box:
            exc = box["exc"]
            if isinstance(exc, (_CallFailure, BackendError)):
                raise exc
            if isinstance(exc, (ValueError, RecursionError)):  # the SDK's json.loads of a bad body
                raise _bad_body(exc) from None
            raise exc
        return box["raw"]

    def _budget_error(self, attempts: int) -> LLMCallError:
        return LLMCallError(f"{self.provider}: LLM time budget used up after {attempts} attempt(s)",
                            provider=self.provider, attempts=attempts, retryable=False)

    def _response(self, request: LLMRequest, raw: _RawResult) -> LLMResponse:
        notes = self._standing_notes(request)
        input_tokens, output_tokens = raw.input_tokens, raw.output_tokens
        if input_tokens is None or output_tokens is None:
            # Some OpenAI-compatible servers omit usage; estimate rather than report zero.
            input_tokens = estimate_tokens((request.system or "") + request.prompt) if input_tokens is None else input_tokens
            output_tokens = estimate_tokens(raw.text) if output_tokens is None else output_tokens
            notes.append("token counts estimated (server sent no usage)")
        if raw.truncated:
            notes.append(f"output truncated at max_tokens={request.max_tokens}")
        text, cacheable = raw.text, True
        cap = answer_char_cap(request.max_tokens)
        if len(text) > cap:
            notes.append(f"answer of {len(text):,} characters ignored max_tokens={request.max_tokens}: "
                         f"cut to {cap:,} and not cached")
            text, cacheable = text[:cap], False
            output_tokens = min(output_tokens, request.max_tokens)
        usage = LLMUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=estimate_cost(self.model, input_tokens, output_tokens),
            calls=1,
        )
        return LLMResponse(text=text, usage=usage, provider=self.provider, model=self.model,
                           cached=False, notes=tuple(notes), cacheable=cacheable)

    def _permanent_error(self, failure: _CallFailure, attempts: int) -> LLMCallError:
        p, status = self.provider, failure.status
        if failure.kind == "response":
            msg = f"{p}: unexpected response from {self.base_url}: {failure.detail}"
        elif status in (401, 403):
            msg = f"authentication failed for {p}: check {self.key_env}"
        elif status == 404:
            msg = f"{p}: model '{self.model}' not found at {self.base_url} (404): check --llm / model name"
        else:
            msg = f"{p}: request rejected ({status}): {failure.detail}"
        return LLMCallError(msg, provider=p, status=status, attempts=attempts, retryable=False)

    def _exhausted_error(self, failure: _CallFailure, attempts: int, limit: float | None = None) -> LLMCallError:
        p, status = self.provider, failure.status
        if failure.kind == "timeout":
            msg = f"{p}: request timed out after {limit if limit is not None else self.timeout:.3g} s ({attempts} attempts)"
        elif failure.kind == "connection":
            msg = f"{p}: cannot connect to {self.base_url} after {attempts} attempts ({failure.detail})"
        elif status == 429:
            msg = f"{p}: rate limited (429) after {attempts} attempts"
        elif status is not None and status >= 500:
            msg = f"{p}: server error {status} after {attempts} attempts"
        else:
            msg = f"{p}: request failed ({status}) after {attempts} attempts: {failure.detail}"
        return LLMCallError(msg, provider=p, status=status, attempts=attempts, retryable=True)


def _import_sdk(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise BackendError(f"the '{name}' package is not installed: pip install {name}") from None


class OpenAILLM(_RemoteLLM):
    """chat.completions via the official SDK; any OpenAI-compatible base_url."""

    provider = "openai"
    key_env = OPENAI_KEY_ENV

    def __init__(self, *, model: str = DEFAULT_OPENAI_MODEL, api_key: str,
                 base_url: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, notice: Notice | None = None) -> None:
        super().__init__(model=model, api_key=api_key, base_url=(base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/"),
                         timeout=timeout, retry=retry, notice=notice)
        self._use_response_format = True
        self._token_param = "max_tokens"  # universal among compatible servers
        self._send_temperature = True

    def _create_client(self) -> tuple[Any, Any]:
        sdk = _import_sdk("openai")
        try:
            client = sdk.OpenAI(api_key=self._api_key, base_url=self.base_url,
                                timeout=self.timeout, max_retries=0)
        except sdk.OpenAIError as exc:
            raise BackendError(f"openai: cannot create client: {_one_line(exc)}") from None
        return client, sdk

    def _call_once(self, request: LLMRequest, timeout: float) -> _RawResult:
        client, sdk = self._get_client()
        system_parts = [s for s in (request.system, JSON_ONLY_INSTRUCTION if request.json_mode else None) if s]
        messages: list[dict[str, str]] = []
        if system_parts:
            messages.append({"role": "system", "content": "\n\n".join(system_parts)})
        messages.append({"role": "user", "content": request.prompt})
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages,
                                  self._token_param: request.max_tokens}
        if self._send_temperature:
            kwargs["temperature"] = request.temperature
        if request.json_mode and self._use_response_format:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            completion = client.chat.completions.create(**kwargs, timeout=timeout)
        except sdk.APIError as exc:
            raise _failure_from_sdk(exc, sdk) from None
        except (ValueError, RecursionError) as exc:
            raise _bad_body(exc) from None
        try:
            choice = completion.choices[0]
            text = choice.message.content or ""
            usage = completion.usage
            return _RawResult(
                text=text,
                input_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
                output_tokens=getattr(usage, "completion_tokens", None) if usage else None,
                truncated=choice.finish_reason == "length",
            )
        except (AttributeError, IndexError, TypeError) as exc:
            raise _CallFailure("response", f"no choices in the completion ({_one_line(exc, 80)})") from None

    def _adapt(self, failure: _CallFailure, request: LLMRequest) -> str | None:
        detail = failure.detail.lower()
        if request.json_mode and self._use_response_format and ("response_format" in detail or "json_object" in detail):
            self._use_response_format = False
            return self._learned("server does not support response_format; asking for JSON by instruction only")
        if self._token_param == "max_tokens" and "max_completion_tokens" in detail:
            self._token_param = "max_completion_tokens"
            return self._learned("model wants max_completion_tokens instead of max_tokens")
        if self._send_temperature and "temperature" in detail:
            self._send_temperature = False
            return self._learned("model does not accept temperature; using its default")
        return None

    def _standing_notes(self, request: LLMRequest) -> list[str]:
        notes = []
        if request.json_mode and not self._use_response_format:
            notes.append("response_format unsupported by the server; JSON requested by instruction only")
        if not self._send_temperature:
            notes.append("temperature not supported by the model; default used")
        return notes


class AnthropicLLM(_RemoteLLM):
    """Messages API via the official SDK.

    JSON mode: Anthropic has no response_format, so a JSON-only system
    instruction plus an assistant turn prefilled with "{" (the reply continues
    the object; we put the "{" back). Models that reject prefill get the
    instruction alone.
    """

    provider = "anthropic"
    key_env = ANTHROPIC_KEY_ENV

    def __init__(self, *, model: str = DEFAULT_ANTHROPIC_MODEL, api_key: str,
                 base_url: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, notice: Notice | None = None) -> None:
        super().__init__(model=model, api_key=api_key,
                         base_url=(base_url or DEFAULT_ANTHROPIC_BASE_URL).rstrip("/"),
                         timeout=timeout, retry=retry, notice=notice)
        self._use_prefill = True
        self._send_temperature = True

    def _create_client(self) -> tuple[Any, Any]:
        sdk = _import_sdk("anthropic")
        try:
            client = sdk.Anthropic(api_key=self._api_key, base_url=self.base_url,
                                   timeout=self.timeout, max_retries=0)
        except sdk.AnthropicError as exc:
            raise BackendError(f"anthropic: cannot create client: {_one_line(exc)}") from None
        return client, sdk

    def _call_once(self, request: LLMRequest, timeout: float) -> _RawResult:
        client, sdk = self._get_client()
        system_parts = [s for s in (request.system, JSON_ONLY_INSTRUCTION if request.json_mode else None) if s]
        prefill = request.json_mode and self._use_prefill
        messages: list[dict[str, str]] = [{"role": "user", "content": request.prompt}]
        if prefill:
            messages.append({"role": "assistant", "content": "{"})
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": messages}
        if system_parts:
            kwargs["system"] = "\n\n".join(system_parts)
        if self._send_temperature:
            # Not a named argument in current SDKs, still accepted by the API for most models.
            kwargs["extra_body"] = {"temperature": request.temperature}
        try:
            message = client.messages.create(**kwargs, timeout=timeout)
        except sdk.APIError as exc:
            raise _failure_from_sdk(exc, sdk) from None
        except (ValueError, RecursionError) as exc:
            raise _bad_body(exc) from None
        try:
            text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
            usage = message.usage
            input_tokens = getattr(usage, "input_tokens", None) if usage else None
            output_tokens = getattr(usage, "output_tokens", None) if usage else None
            truncated = message.stop_reason == "max_tokens"
        except (AttributeError, TypeError) as exc:
            raise _CallFailure("response", f"no content in the message ({_one_line(exc, 80)})") from None
        # After a "{" prefill a valid continuation is '"' (a key) or '}' after optional
        # whitespace. Anything else (a fresh "{", a code fence, prose) means the model
        # ignored the prefill: hand back its raw text for the caller's repair.
        head = text.lstrip()[:1]
        if prefill and head in ("", '"', "}"):
            text = "{" + text
        return _RawResult(text=text, input_tokens=input_tokens, output_tokens=output_tokens, truncated=truncated)

    def _adapt(self, failure: _CallFailure, request: LLMRequest) -> str | None:
        detail = failure.detail.lower()
        if request.json_mode and self._use_prefill and ("prefill" in detail or "assistant" in detail):
            self._use_prefill = False
            return self._learned("model does not support assistant prefill; asking for JSON by instruction only")
        if self._send_temperature and "temperature" in detail:
            self._send_temperature = False
            return self._learned("model does not accept temperature; using its default")
        return None

    def _standing_notes(self, request: LLMRequest) -> list[str]:
        notes = []
        if request.json_mode and not self._use_prefill:
            notes.append("assistant prefill unsupported by the model; JSON requested by instruction only")
        if not self._send_temperature:
            notes.append("temperature not supported by the model; default used")
        return notes


# =============================================================================
# Cache wrapper
# =============================================================================
class CachedLLM:
    """Serves repeated identical calls from the disk cache.

    Only successful responses are stored, and a caller that could not use one (a locate answer
    with no valid leaf, an empty synthesis) drops it with ``forget_reply``: otherwise every later
    run would reuse the bad reply. A hit costs nothing and is reported as ``cached=True`` with
    ``cached_calls=1`` and zero tokens and cost. ``read=False`` (``--no-cache``) asks the model
    every time but still stores what it answers, so the cache is refreshed, not bypassed.
    """

    def __init__(self, inner: LLMClient, cache: LLMCache, read: bool = True) -> None:
        self.inner = inner
        self.cache = cache
        self.read = read
        self.provider = inner.provider
        self.model = inner.model
        self.base_url: str | None = getattr(inner, "base_url", None)

    accepts_deadline = True

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None) -> LLMResponse:
        key = cache_key(provider=self.provider, model=self.model, base_url=self.base_url, system=system,
                        prompt=prompt, json_mode=json_mode, max_tokens=max_tokens, temperature=temperature)
        hit = self.cache.get(key) if self.read else None
        if hit is not None:
            return LLMResponse(text=hit.text, usage=LLMUsage(cost_usd=0.0, cached_calls=1),
                               provider=self.provider, model=self.model, cached=True, cache_key=key)
        response = self.inner.generate(prompt, json_mode=json_mode, max_tokens=max_tokens,
                                       temperature=temperature, system=system,
                                       **deadline_kwargs(self.inner, deadline))
        if not response.cacheable:
            return response
        self.cache.put(key, CacheEntry(response.text, response.usage.input_tokens, response.usage.output_tokens),
                       provider=self.provider, model=self.model)
        return dataclasses.replace(response, cache_key=key)

    def forget(self, response: LLMResponse) -> None:
        if response.cache_key is not None:
            self.cache.delete(response.cache_key)


def forget_reply(llm: Any, response: LLMResponse) -> None:
    """Drop ``response`` from whatever cache served or stored it (wrappers pass it down)."""
    while llm is not None:
        forget = getattr(llm, "forget", None)
        if callable(forget):
            forget(response)
            return
        llm = getattr(llm, "inner", None)


# =============================================================================
# Selection
# =============================================================================
def _spec_error(spec: str) -> BackendError:
    return BackendError(f"unknown LLM '{spec}': use auto, mock, anthropic[:MODEL] or openai[:MODEL]")


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    value = value.strip() if isinstance(value, str) else None
    return value or None


def resolve_llm_spec(cli_value: str | None, env: Mapping[str, str], config_value: str | None) -> str:
    """CLI flag > TREERAG_LLM > config file > "auto"."""
    if cli_value is not None and not cli_value.strip():
        raise BackendError("--llm is empty: use auto, mock, anthropic[:MODEL] or openai[:MODEL]")
    for value in (cli_value, _env(env, LLM_SPEC_ENV), config_value):
        if value is not None and value.strip():
            return value.strip()
    return "auto"


def parse_llm_spec(spec: str | None, env: Mapping[str, str]) -> tuple[str, str | None]:
    """``"openai:qwen2.5:1.5b"`` → ``("openai", "qwen2.5:1.5b")``; "auto" resolved from env.

    Only the first ":" separates provider and model, so Ollama tags survive.
    Raises BackendError for an unknown provider.
    """
    raw = (spec or "auto").strip()
    provider, sep, model = raw.partition(":")
    provider = provider.strip().lower()
    model_name = model.strip() or None
    if provider in ("", "auto"):
        if sep:  # ":" or "auto:x": a model with no provider
            raise _spec_error(raw)
        if _env(env, ANTHROPIC_KEY_ENV):
            return "anthropic", None
        if _env(env, OPENAI_KEY_ENV) or _env(env, OPENAI_BASE_URL_ENV):
            return "openai", None
        return "mock", None
    if provider not in PROVIDERS:
        raise _spec_error(raw)
    if provider == "mock" and model_name:
        raise BackendError(f"unknown LLM '{raw}': mock takes no model (use mock)")
    return provider, model_name


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """$TREERAG_CACHE_DIR, else $XDG_CACHE_HOME/treerag, else ~/.cache/treerag."""
    explicit = _env(env, "TREERAG_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = _env(env, "XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path(_env(env, "HOME") or Path.home()).expanduser() / ".cache"
    return base / "treerag"


def make_llm(
    spec: str | None,
    env: Mapping[str, str],
    *,
    cache_dir: Path | None,
    use_cache: bool = True,
    timeout: float = 60,
    max_retries: int = 4,
    notice: Notice | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> LLMClient:
    """Build the configured client. Keys and endpoints come only from ``env``.

    "auto" with nothing configured gives the mock and one notice, so the main
    command works offline. The cache wraps real backends only (at
    ``cache_dir/llm_cache.sqlite3``), unless ``use_cache`` is False or
    ``cache_dir`` is None.
    """
    notice = notice or _no_notice
    raw = (spec or "auto").strip()
    provider, model = parse_llm_spec(raw, env)
    if provider == "mock":
        if raw.lower() in ("", "auto"):
            notice(NO_LLM_NOTICE)
        return MockLLM(model=model or "mock")

    retry = RetryPolicy(max_retries=max(0, int(max_retries)), sleep=sleep)
    client: LLMClient
    if provider == "anthropic":
        key = _env(env, ANTHROPIC_KEY_ENV)
        if not key:
            raise BackendError(f"--llm anthropic needs {ANTHROPIC_KEY_ENV} set in the environment")
        client = AnthropicLLM(model=model or DEFAULT_ANTHROPIC_MODEL, api_key=key,
                              base_url=_env(env, ANTHROPIC_BASE_URL_ENV), timeout=timeout,
                              retry=retry, notice=notice)
    else:
        key = _env(env, OPENAI_KEY_ENV)
        base_url = _env(env, OPENAI_BASE_URL_ENV)
        if not key and not base_url:
            raise BackendError(
                f"--llm openai needs {OPENAI_KEY_ENV} (or {OPENAI_BASE_URL_ENV} for a local OpenAI-compatible server)"
            )
        client = OpenAILLM(model=model or DEFAULT_OPENAI_MODEL, api_key=key or LOCAL_SERVER_DUMMY_KEY,
                           base_url=base_url, timeout=timeout, retry=retry, notice=notice)
    if cache_dir is not None:  # without use_cache (--no-cache): ask the model, still refresh the cache
        client = CachedLLM(client, LLMCache(Path(cache_dir) / CACHE_FILENAME, notice=notice), read=use_cache)
    return client
