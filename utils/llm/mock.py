"""The deterministic stand-in for tests and offline runs."""
from __future__ import annotations

import json
import re
import threading
from typing import Callable, Sequence

from utils.tokenizer import estimate_tokens
from utils.llm.types import LLMRequest, LLMResponse, LLMUsage, TextSink


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
    accepts_on_text = True

    def __init__(self, replies: MockScript = None, *, model: str = "mock") -> None:
        self.model = model
        self.base_url: str | None = None
        self._lock = threading.Lock()
        self._script: list[MockReply] | None = list(replies) if isinstance(replies, (list, tuple)) else None
        self._fn: Callable[[LLMRequest], MockReply] | None = replies if callable(replies) else None
        self.requests: list[LLMRequest] = []

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None, on_text: TextSink | None = None) -> LLMResponse:
        """The scripted reply; ``on_text`` is told it word by word (whitespace kept), as a
        provider's stream would tell it."""
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
        if on_text is not None:
            for piece in re.findall(r"\S+\s*|\s+", text):
                on_text(piece)
        usage = LLMUsage(
            input_tokens=estimate_tokens((system or "") + prompt),
            output_tokens=estimate_tokens(text),
            cost_usd=0.0,
            calls=1,
        )
        return LLMResponse(text=text, usage=usage, provider=self.provider, model=self.model)
