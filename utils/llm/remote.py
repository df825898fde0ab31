"""The shared call loop of the remote providers: deadlines, parameter fix-ups, error wording, usage.

The retries themselves are the SDK's (``max_retries``); ``attempts`` and ``http_hooks`` let
this loop see them.
"""
from __future__ import annotations

import contextlib
import queue
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from utils.errors import BackendError
from utils.oneline import one_line
from utils.llm.pricing import estimate_cost
from utils.tokenizer import estimate_tokens
from utils.llm.settings import Notice, no_notice
from utils.llm.types import LLMCallError, LLMRequest, LLMResponse, LLMUsage, TextSink
from utils.llm.attempts import CallLog
from utils.llm.retry import RetryPolicy, CallFailure, bad_body, answer_char_cap, stream_failure

_WATCH_INTERVAL = 0.25
_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_safe(text: str) -> str:
    """A provider's text with lone surrogates (a JSON ``\\ud800`` escape decodes to one) replaced by
    U+FFFD: such a string cannot be encoded, so caching, logging, printing or sending it failed,
    and a buggy or hostile server broke every question."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text
"""Seconds between looks at a running call's log (a request may have started or ended since)."""


@dataclass
class RawResult:
    text: str
    input_tokens: int | None
    output_tokens: int | None
    truncated: bool = False
    past_cap: bool = False
    """A streamed reply ran past ``answer_char_cap`` and was no longer read (its text stops at the cap)."""


class Stopped(Exception):
    """The caller left a streamed call (its deadline, or its text callback raised): stop reading."""


class StreamedText:
    """A streamed reply's text as it arrives: each piece told, the whole kept, nothing past the cap.

    Why a cap while streaming: a server that ignores max_tokens would otherwise be read (and told)
    until its request's time limit; ``_response`` cuts the kept text at the same cap.
    """

    def __init__(self, emit: TextSink, max_tokens: int) -> None:
        self._emit = emit
        self._cap = answer_char_cap(max_tokens)
        self._parts: list[str] = []
        self.size = 0
        self.full = False
        """The reply ran past the cap: stop reading it."""

    def add(self, piece: str) -> None:
        piece = unicode_safe(piece)
        if len(piece) > self._cap - self.size:
            piece, self.full = piece[:self._cap - self.size], True
        if piece:
            self._parts.append(piece)
            self.size += len(piece)
            self._emit(piece)

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @contextlib.contextmanager
    def reading(self, sdk: Any) -> Iterator[None]:
        """Read the SDK's stream inside this block: a break in it (``stream_failure``) becomes a
        CallFailure that knows how much text was already told; anything else passes as it is."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - mapped, or re-raised as is
            failure = stream_failure(exc, sdk, self.size)
            if failure is None:
                raise
            raise failure from None

    def ended_early(self) -> CallFailure:
        """The stream closed without the provider's end marker and before the cap."""
        return CallFailure("response", "the stream ended before the answer was complete", streamed=self.size)


class RemoteLLM:
    """Shared call loop, error wording and usage accounting."""

    provider: str = ""
    """Also the SDK's module name (``openai``, ``anthropic``)."""
    key_env: str = ""
    client_class: str = ""
    """The SDK's client class (``OpenAI``, ``Anthropic``) and its base error class (``OpenAIError``, ...)."""
    sdk_error: str = ""

    def __init__(self, *, model: str, api_key: str, base_url: str, timeout: float,
                 retry: RetryPolicy | None, notice: Notice | None) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self._api_key = api_key
        self._notice = notice or no_notice
        self._client: Any = None
        self._sdk: Any = None
        self._lock = threading.Lock()
        self._calls = threading.local()
        """``.log``: the CallLog of the call running on this thread, for the HTTP hooks."""

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # --- subclass hooks -------------------------------------------------------
    def _create_client(self) -> tuple[Any, Any]:
        """The SDK's client with our timeout, retry count and HTTP hooks (both SDKs take the same arguments)."""
        sdk = import_sdk(self.provider)
        error = getattr(sdk, self.sdk_error)
        try:
            client = getattr(sdk, self.client_class)(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                max_retries=self.retry.max_retries, http_client=self._http_client(sdk, error))
        except error as exc:
            raise BackendError(f"{self.provider}: cannot create client: {one_line(exc, 200)}") from None
        return client, sdk

    def _call_once(self, request: LLMRequest, timeout: float, emit: TextSink | None = None) -> RawResult:
        """One SDK call (the SDK retries inside it); ``timeout`` bounds each socket read.

        ``emit`` given: stream the reply, telling ``emit`` each piece of text as it arrives (a
        failure after the headers raises ``CallFailure`` with ``streamed`` set)."""
        raise NotImplementedError

    def _adapt(self, failure: CallFailure, request: LLMRequest) -> str | None:
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

    def _http_client(self, sdk: Any, stop: Callable[[str], Exception]) -> Any:
        """The SDK's own default HTTP client (its limits, proxies, keep-alive) with our hooks on it."""
        from utils.llm.http_hooks import event_hooks  # imports httpx2: only once a real client is made

        return sdk.DefaultHttpxClient(event_hooks=event_hooks(lambda: getattr(self._calls, "log", None), stop))

    accepts_deadline = True
    accepts_retry_timeouts = True
    accepts_on_text = True

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None, retry_timeouts: bool = True,
                 on_text: TextSink | None = None) -> LLMResponse:
        """One answer, or LLMCallError.

        ``on_text`` given: the reply is streamed and each piece of its text told to ``on_text``
        (on this thread) as it arrives. A stream that breaks before any text is tried again like a
        failed request (up to ``max_retries`` times); once text was told, a failure is an
        LLMCallError ("the answer broke off"), never a silent second copy.

        ``retry_timeouts`` False: a request that times out ends the call (no SDK retry of it);
        the budget asks for that while the provider has not answered once, so a silent server
        costs one request timeout, not attempts × timeout.

        The SDK retries (``self.retry.max_retries``); each request ends by ``self.timeout``
        seconds of wall-clock time, and everything, the SDK's waits included, by
        ``deadline`` (``time.monotonic()`` value, from the query's or build's LLM budget)
        when one is given. A 400/422 naming a parameter the server rejects is answered by
        dropping or renaming it and calling again; that request is not counted as an attempt.
        """
        request = LLMRequest(prompt=prompt, system=system, json_mode=json_mode,
                             max_tokens=max_tokens, temperature=temperature)
        log = CallLog(timeout=self.timeout, deadline=deadline, max_retry_after=self.retry.max_retry_after,
                      retry_timeouts=retry_timeouts)
        adaptations = stream_retries = 0
        while True:
            left = log.left()
            if left is not None and left <= 0:
                raise self._budget_error(log.sent - adaptations)
            try:
                raw = self._call_with_deadline(request, log, on_text)
                break
            except CallFailure as failure:
                if (failure.kind == "status" and failure.status in (400, 422) and adaptations < 3
                        and self._adapt(failure, request) is not None):
                    adaptations += 1
                    continue
                attempts = max(1, log.sent - adaptations)
                if failure.streamed:
                    raise self._broken_stream_error(failure, attempts) from None
                if (failure.streamed == 0 and failure.retryable and stream_retries < self.retry.max_retries
                        and (failure.kind != "timeout" or retry_timeouts)):
                    stream_retries += 1
                    continue
                if not failure.retryable:
                    raise self._permanent_error(failure, attempts) from None
                raise self._exhausted_error(failure, attempts, log.limit) from None
        return self._response(request, raw)

    def _call_with_deadline(self, request: LLMRequest, log: CallLog, on_text: TextSink | None = None) -> RawResult:
        """``_call_once`` (one SDK call, all its retries) in a thread abandoned when ``log`` says so.

        The SDK bounds each socket read, not a request or its retries, so the call runs in
        a daemon thread watched here: it is abandoned at the deadline, or when a request has
        run twice its limit (see ``CallLog.cut_at``). The abandoned thread ends when its
        request does; the hooks refuse any request it would send after that. A streamed
        reply's pieces come back through a queue and are told to ``on_text`` here, on the
        caller's thread; if ``on_text`` raises, the call is abandoned and the exception goes on.
        """
        box: dict[str, Any] = {}
        timeout = log.read_timeout()
        pieces: queue.SimpleQueue[object] = queue.SimpleQueue()
        done = object()
        stop = threading.Event()

        def emit(piece: str) -> None:
            if stop.is_set():
                raise Stopped()
            pieces.put(piece)

        def run() -> None:
            self._calls.log = log
            try:
                box["raw"] = self._call_once(request, timeout, emit if on_text is not None else None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box["exc"] = exc
            finally:
                pieces.put(done)

        worker = threading.Thread(target=run, name=f"{self.provider}-call", daemon=True)
        worker.start()
        finished = False
        told = 0
        try:
            while True:
                cut = log.cut_at()
                wait = _WATCH_INTERVAL if cut is None else min(_WATCH_INTERVAL, cut - time.monotonic())
                try:
                    item = pieces.get(timeout=max(0.0, wait))
                except queue.Empty:
                    item = None
                if item is done:
                    break
                if isinstance(item, str) and on_text is not None:
                    on_text(item)
                    told += len(item)
                if cut is not None and time.monotonic() >= cut:
                    failure = log.abandon()
                    if told:  # part of the answer was told: say it broke off
                        failure = CallFailure(failure.kind, failure.detail, status=failure.status, streamed=told)
                    raise failure
            finished = True
        finally:
            if not finished:
                stop.set()
                log.abandon()
        worker.join()
        if "exc" in box:
            exc = box["exc"]
            if isinstance(exc, CallFailure) and exc.streamed is not None:
                raise exc  # how the stream broke, and after how much text
            if log.gave_up():  # the SDK was refused its retry of a timed-out request
                raise log.abandon()
            if isinstance(exc, (CallFailure, BackendError)):
                raise exc
            if isinstance(exc, (ValueError, RecursionError)):  # the SDK's json.loads of a bad body
                raise bad_body(exc) from None
            raise exc
        return box["raw"]

    def _budget_error(self, attempts: int) -> LLMCallError:
        return LLMCallError(f"{self.provider}: LLM time budget used up after {attempts} attempt(s)",
                            provider=self.provider, attempts=attempts, retryable=False)

    def _response(self, request: LLMRequest, raw: RawResult) -> LLMResponse:
        notes = self._standing_notes(request)
        input_tokens, output_tokens = raw.input_tokens, raw.output_tokens
        if input_tokens is None or output_tokens is None:
            # Some OpenAI-compatible servers omit usage; estimate rather than report zero.
            input_tokens = estimate_tokens((request.system or "") + request.prompt) if input_tokens is None else input_tokens
            output_tokens = estimate_tokens(raw.text) if output_tokens is None else output_tokens
            notes.append("token counts estimated (server sent no usage)")
        text, cacheable = unicode_safe(raw.text), True
        if text != raw.text:
            notes.append("reply held invalid Unicode (lone surrogates): replaced with U+FFFD")
        if raw.truncated:  # an incomplete answer must not be served again from the cache
            notes.append(f"output truncated at max_tokens={request.max_tokens}: not cached")
            cacheable = False
        cap = answer_char_cap(request.max_tokens)
        if raw.past_cap:
            notes.append(f"streamed answer ran past {cap:,} characters, ignoring max_tokens={request.max_tokens}: "
                         "cut there and not cached")
            cacheable = False
            output_tokens = min(output_tokens, request.max_tokens)
        elif len(text) > cap:
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
                           cached=False, notes=tuple(notes), cacheable=cacheable, truncated=raw.truncated)

    def _broken_stream_error(self, failure: CallFailure, attempts: int) -> LLMCallError:
        what = {"timeout": "timed out", "connection": "connection lost"}.get(failure.kind, "bad stream")
        return LLMCallError(f"{self.provider}: the answer broke off after {failure.streamed:,} characters "
                            f"({what}: {failure.detail})", provider=self.provider, status=failure.status,
                            attempts=attempts, retryable=failure.retryable, timed_out=failure.kind == "timeout")

    def _permanent_error(self, failure: CallFailure, attempts: int) -> LLMCallError:
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

    def _exhausted_error(self, failure: CallFailure, attempts: int, limit: float | None = None) -> LLMCallError:
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
        return LLMCallError(msg, provider=p, status=status, attempts=attempts, retryable=True,
                            timed_out=failure.kind == "timeout")


def import_sdk(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise BackendError(f"the '{name}' package is not installed: pip install {name}") from None
