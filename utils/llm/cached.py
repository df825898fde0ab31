"""The disk cache in front of a provider: only used replies stay."""
from __future__ import annotations

import dataclasses

from typing import Any

from utils.llm.response_cache import CacheEntry, LLMCache, cache_key
from utils.llm.types import LLMClient, LLMResponse, LLMUsage
from utils.llm.retry import deadline_kwargs


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
    accepts_retry_timeouts = True

    def generate(self, prompt: str, *, json_mode: bool = False, max_tokens: int = 1024,
                 temperature: float = 0.0, system: str | None = None,
                 deadline: float | None = None, retry_timeouts: bool = True) -> LLMResponse:
        key = cache_key(provider=self.provider, model=self.model, base_url=self.base_url, system=system,
                        prompt=prompt, json_mode=json_mode, max_tokens=max_tokens, temperature=temperature)
        hit = self.cache.get(key) if self.read else None
        if hit is not None:
            return LLMResponse(text=hit.text, usage=LLMUsage(cost_usd=0.0, cached_calls=1),
                               provider=self.provider, model=self.model, cached=True, cache_key=key)
        response = self.inner.generate(prompt, json_mode=json_mode, max_tokens=max_tokens,
                                       temperature=temperature, system=system,
                                       **deadline_kwargs(self.inner, deadline, retry_timeouts))
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
