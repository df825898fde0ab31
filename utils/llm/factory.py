"""Which client a spec and the environment give (auto, mock, anthropic[:MODEL], openai[:MODEL])."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from utils.errors import BackendError
from utils.llm.response_cache import CACHE_FILENAME, LLMCache
from utils.llm.settings import (
    ANTHROPIC_BASE_URL_ENV,
    ANTHROPIC_KEY_ENV,
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    LLM_SPEC_ENV,
    LOCAL_SERVER_DUMMY_KEY,
    NO_LLM_NOTICE,
    Notice,
    OPENAI_BASE_URL_ENV,
    OPENAI_KEY_ENV,
    PROVIDERS,
    no_notice,
)
from utils.llm.types import LLMClient
from utils.llm.mock import MockLLM
from utils.llm.retry import RetryPolicy
from utils.llm.openai_llm import OpenAILLM
from utils.llm.anthropic_llm import AnthropicLLM
from utils.llm.cached import CachedLLM


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
) -> LLMClient:
    """Build the configured client. Keys and endpoints come only from ``env``.

    "auto" with nothing configured gives the mock and one notice, so the main
    command works offline. The cache wraps real backends only (at
    ``cache_dir/llm_cache.sqlite3``), unless ``use_cache`` is False or
    ``cache_dir`` is None.
    """
    notice = notice or no_notice
    raw = (spec or "auto").strip()
    provider, model = parse_llm_spec(raw, env)
    if provider == "mock":
        if raw.lower() in ("", "auto"):
            notice(NO_LLM_NOTICE)
        return MockLLM(model=model or "mock")

    retry = RetryPolicy(max_retries=max(0, int(max_retries)))
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
