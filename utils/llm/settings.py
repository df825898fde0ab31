"""Provider names, defaults and environment variables: the constants every part shares."""
from __future__ import annotations

from typing import Callable


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


def no_notice(_msg: str) -> None:
    pass
