"""The LLM clients, re-exported from their package (``utils/llm/``) under the names callers use."""
from __future__ import annotations

from utils.llm.settings import (
    ANTHROPIC_BASE_URL_ENV,
    ANTHROPIC_KEY_ENV,
    DEFAULT_ANTHROPIC_BASE_URL,
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_OPENAI_MODEL,
    JSON_ONLY_INSTRUCTION,
    LLM_SPEC_ENV,
    LOCAL_SERVER_DUMMY_KEY,
    NO_LLM_NOTICE,
    Notice,
    OPENAI_BASE_URL_ENV,
    OPENAI_KEY_ENV,
    PROVIDERS,
)
from utils.llm.types import LLMCallError, LLMClient, LLMRequest, LLMResponse, LLMUsage, UsageMeter
from utils.llm.mock import MockExhaustedError, MockLLM, MockReply, MockScript
from utils.llm.retry import (
    CHARS_PER_TOKEN_CAP,
    FailureKind,
    RetryPolicy,
    answer_char_cap,
    deadline_kwargs,
    parse_retry_after,
)
from utils.llm.openai_llm import OpenAILLM
from utils.llm.anthropic_llm import AnthropicLLM
from utils.llm.cached import CachedLLM, forget_reply
from utils.llm.factory import default_cache_dir, make_llm, parse_llm_spec, resolve_llm_spec

__all__ = [
    "ANTHROPIC_BASE_URL_ENV",
    "ANTHROPIC_KEY_ENV",
    "AnthropicLLM",
    "CHARS_PER_TOKEN_CAP",
    "CachedLLM",
    "DEFAULT_ANTHROPIC_BASE_URL",
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_BASE_URL",
    "DEFAULT_OPENAI_MODEL",
    "FailureKind",
    "JSON_ONLY_INSTRUCTION",
    "LLMCallError",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "LLMUsage",
    "LLM_SPEC_ENV",
    "LOCAL_SERVER_DUMMY_KEY",
    "MockExhaustedError",
    "MockLLM",
    "MockReply",
    "MockScript",
    "NO_LLM_NOTICE",
    "Notice",
    "OPENAI_BASE_URL_ENV",
    "OPENAI_KEY_ENV",
    "OpenAILLM",
    "PROVIDERS",
    "RetryPolicy",
    "UsageMeter",
    "answer_char_cap",
    "deadline_kwargs",
    "default_cache_dir",
    "forget_reply",
    "make_llm",
    "parse_llm_spec",
    "parse_retry_after",
    "resolve_llm_spec",
]
