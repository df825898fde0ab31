"""OpenAI and any OpenAI-compatible server (Ollama, vLLM, llama.cpp, DeepSeek...)."""
from __future__ import annotations

from typing import Any

from utils.oneline import one_line
from utils.llm.settings import (
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_OPENAI_MODEL,
    JSON_ONLY_INSTRUCTION,
    Notice,
    OPENAI_KEY_ENV,
)
from utils.llm.types import LLMRequest, TextSink
from utils.llm.retry import RetryPolicy, CallFailure, bad_body, failure_from_sdk
from utils.llm.remote import RawResult, RemoteLLM, StreamedText


class OpenAILLM(RemoteLLM):
    """chat.completions via the official SDK; any OpenAI-compatible base_url."""

    provider = "openai"
    client_class = "OpenAI"
    sdk_error = "OpenAIError"
    key_env = OPENAI_KEY_ENV

    def __init__(self, *, model: str = DEFAULT_OPENAI_MODEL, api_key: str,
                 base_url: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, notice: Notice | None = None) -> None:
        super().__init__(model=model, api_key=api_key, base_url=(base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/"),
                         timeout=timeout, retry=retry, notice=notice)
        self._use_response_format = True
        self._token_param = "max_tokens"  # universal among compatible servers
        self._send_temperature = True
        self._stream_usage = True
        """Ask a stream for its usage (``stream_options``); dropped for servers that reject it."""

    def _call_once(self, request: LLMRequest, timeout: float, emit: TextSink | None = None) -> RawResult:
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
        if emit is not None:
            return self._stream(client, sdk, kwargs, timeout, StreamedText(emit, request.max_tokens))
        try:
            completion = client.chat.completions.create(**kwargs, timeout=timeout)
        except sdk.APIError as exc:
            raise failure_from_sdk(exc, sdk) from None
        except (ValueError, RecursionError) as exc:
            raise bad_body(exc) from None
        try:
            choice = completion.choices[0]
            text = choice.message.content or ""
            usage = completion.usage
            return RawResult(
                text=text,
                input_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
                output_tokens=getattr(usage, "completion_tokens", None) if usage else None,
                truncated=choice.finish_reason == "length",
            )
        except (AttributeError, IndexError, TypeError) as exc:
            raise CallFailure("response", f"no choices in the completion ({one_line(exc, 80)})") from None

    def _stream(self, client: Any, sdk: Any, kwargs: dict[str, Any], timeout: float, out: StreamedText) -> RawResult:
        """chat.completions with ``stream=True``: ``data:`` chunks of deltas, the usage in a last
        chunk without choices (when asked for), ``data: [DONE]``."""
        if self._stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        try:
            stream = client.chat.completions.create(**kwargs, stream=True, timeout=timeout)
        except sdk.APIError as exc:
            raise failure_from_sdk(exc, sdk) from None
        except (ValueError, RecursionError) as exc:
            raise bad_body(exc) from None
        finish: str | None = None
        usage: Any = None
        with out.reading(sdk):
            with stream:
                for chunk in stream:
                    usage = getattr(chunk, "usage", None) or usage
                    for choice in getattr(chunk, "choices", None) or ():
                        if getattr(choice, "index", 0) != 0:
                            continue
                        out.add(getattr(choice.delta, "content", None) or "")
                        finish = choice.finish_reason or finish
                    if out.full:
                        break
        if finish is None and not out.full:
            raise out.ended_early()
        return RawResult(text=out.text,
                         input_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
                         output_tokens=getattr(usage, "completion_tokens", None) if usage else None,
                         truncated=finish == "length", past_cap=out.full)

    def _adapt(self, failure: CallFailure, request: LLMRequest) -> str | None:
        detail = failure.detail.lower()
        if self._stream_usage and ("stream_options" in detail or "include_usage" in detail):
            self._stream_usage = False
            return self._learned("server does not accept stream_options; token counts of streamed answers estimated")
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
