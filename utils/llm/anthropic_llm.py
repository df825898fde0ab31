"""Anthropic (Claude) through the official SDK."""
from __future__ import annotations

from typing import Any

from utils.oneline import one_line
from utils.llm.settings import (
    ANTHROPIC_KEY_ENV,
    DEFAULT_ANTHROPIC_BASE_URL,
    DEFAULT_ANTHROPIC_MODEL,
    JSON_ONLY_INSTRUCTION,
    Notice,
)
from utils.llm.types import LLMRequest, TextSink
from utils.llm.retry import RetryPolicy, CallFailure, bad_body, failure_from_sdk
from utils.llm.remote import RawResult, RemoteLLM, StreamedText


class AnthropicLLM(RemoteLLM):
    """Messages API via the official SDK.

    JSON mode: Anthropic has no response_format, so a JSON-only system
    instruction plus an assistant turn prefilled with "{" (the reply continues
    the object; we put the "{" back). Models that reject prefill get the
    instruction alone.
    """

    provider = "anthropic"
    client_class = "Anthropic"
    sdk_error = "AnthropicError"
    key_env = ANTHROPIC_KEY_ENV

    def __init__(self, *, model: str = DEFAULT_ANTHROPIC_MODEL, api_key: str,
                 base_url: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, notice: Notice | None = None) -> None:
        super().__init__(model=model, api_key=api_key,
                         base_url=(base_url or DEFAULT_ANTHROPIC_BASE_URL).rstrip("/"),
                         timeout=timeout, retry=retry, notice=notice)
        self._use_prefill = True
        self._send_temperature = True

    def _call_once(self, request: LLMRequest, timeout: float, emit: TextSink | None = None) -> RawResult:
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
        if emit is not None:
            return self._stream(client, sdk, kwargs, timeout, StreamedText(emit, request.max_tokens), prefill)
        try:
            message = client.messages.create(**kwargs, timeout=timeout)
        except sdk.APIError as exc:
            raise failure_from_sdk(exc, sdk) from None
        except (ValueError, RecursionError) as exc:
            raise bad_body(exc) from None
        try:
            text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
            usage = message.usage
            input_tokens = getattr(usage, "input_tokens", None) if usage else None
            output_tokens = getattr(usage, "output_tokens", None) if usage else None
            truncated = message.stop_reason == "max_tokens"
        except (AttributeError, TypeError) as exc:
            raise CallFailure("response", f"no content in the message ({one_line(exc, 80)})") from None
        if prefill and _continues_prefill(text):
            text = "{" + text
        return RawResult(text=text, input_tokens=input_tokens, output_tokens=output_tokens, truncated=truncated)

    def _stream(self, client: Any, sdk: Any, kwargs: dict[str, Any], timeout: float, out: StreamedText,
                prefill: bool) -> RawResult:
        """Messages with ``stream=True``: message_start (input usage), content_block_delta (text),
        message_delta (stop_reason, output usage), message_stop. After a prefill the text is held
        until its first visible character says whether the "{" goes back in front."""
        try:
            stream = client.messages.create(**kwargs, stream=True, timeout=timeout)
        except sdk.APIError as exc:
            raise failure_from_sdk(exc, sdk) from None
        except (ValueError, RecursionError) as exc:
            raise bad_body(exc) from None
        held: str | None = "" if prefill else None
        input_tokens = output_tokens = stop_reason = None
        stopped = False
        with out.reading(sdk):
            with stream:
                for ev in stream:
                    kind = getattr(ev, "type", None)
                    if kind == "message_start":
                        usage = getattr(ev.message, "usage", None)
                        input_tokens = getattr(usage, "input_tokens", None)
                        output_tokens = getattr(usage, "output_tokens", None)
                    elif kind == "content_block_delta" and getattr(ev.delta, "type", None) == "text_delta":
                        piece = ev.delta.text or ""
                        if held is not None:
                            held += piece
                            if not held.strip():
                                continue
                            piece, held = ("{" if _continues_prefill(held) else "") + held, None
                        out.add(piece)
                    elif kind == "message_delta":
                        stop_reason = getattr(ev.delta, "stop_reason", None) or stop_reason
                        output_tokens = getattr(getattr(ev, "usage", None), "output_tokens", None) or output_tokens
                    elif kind == "message_stop":
                        stopped = True
                    if out.full:
                        break
        if not stopped and not out.full:
            raise out.ended_early()
        if held is not None:  # nothing visible came: as the whole reply would read
            out.add("{" + held)
        return RawResult(text=out.text, input_tokens=input_tokens, output_tokens=output_tokens,
                         truncated=stop_reason == "max_tokens", past_cap=out.full)

    def _adapt(self, failure: CallFailure, request: LLMRequest) -> str | None:
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


def _continues_prefill(text: str) -> bool:
    """After a "{" prefill a valid continuation is '"' (a key) or '}' after optional whitespace.
    Anything else (a fresh "{", a code fence, prose) means the model ignored the prefill: its raw
    text goes to the caller's repair."""
    return text.lstrip()[:1] in ("", '"', "}")
