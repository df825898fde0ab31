"""Step 1 behind one interface: a Locator object with ``locate(query, scope) -> LocateResult``.

Four locators exist (keyword, hybrid, llm, llm-rerank). Each is built once per index and query
settings with what it needs (an LLM and its usage meter), so callers hold one object and pass only
the question (a ``Query``: its text, tokens and vector) and its documents. ``make_locator`` is the only place that maps a name
to a class, rejects an unknown name, resolves ``auto`` (llm when an LLM is configured, else
hybrid) and decides what an LLM locator does without an LLM (the no-LLM locator, with the reason
recorded). Another locator is one class with a ``locate`` method and one entry in ``LOCATORS``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from config import Config
from indexing.index_store import Index
from retrieval.leaf_rerank_locator import llm_rerank_locate
from retrieval.node_locator import hybrid_locate, keyword_locate, llm_locate, no_llm_locate
from retrieval.query import Query
from retrieval.types import Fallback, LocateResult
from utils.errors import InputError
from utils.llm.types import LLMClient, UsageMeter


class Locator(Protocol):
    name: str

    def locate(self, query: Query, scope: set[str] | None = None) -> LocateResult:
        """The leaves that hold the answer; ``scope`` is the question's documents (None: all)."""
        ...


@dataclass(frozen=True)
class KeywordLocator:
    """The spec's mock: query words against headings and summaries."""

    index: Index
    config: Config
    name: str = "keyword"

    def locate(self, query: Query, scope: set[str] | None = None) -> LocateResult:
        return keyword_locate(self.index, query, self.config, scope)


@dataclass(frozen=True)
class HybridLocator:
    """No LLM: dense + BM25 evidence of each leaf's chunks and of its heading path and summary
    (the question's vector comes with the question)."""

    index: Index
    config: Config
    name: str = "hybrid"

    def locate(self, query: Query, scope: set[str] | None = None) -> LocateResult:
        return hybrid_locate(self.index, query, self.config, scope)


@dataclass(frozen=True)
class LLMLocator:
    """The spec's prompt over the serialised tree; the no-LLM locator (recorded) on any failure."""

    index: Index
    config: Config
    llm: LLMClient
    usage: UsageMeter | None = None
    name: str = "llm"

    def locate(self, query: Query, scope: set[str] | None = None) -> LocateResult:
        return llm_locate(self.index, self.llm, query, self.config, scope, self.usage)


@dataclass(frozen=True)
class LLMRerankLocator:
    """The LLM's choice among the hybrid locator's top leaves (a much smaller prompt)."""

    index: Index
    config: Config
    llm: LLMClient
    usage: UsageMeter | None = None
    name: str = "llm-rerank"

    def locate(self, query: Query, scope: set[str] | None = None) -> LocateResult:
        return llm_rerank_locate(self.index, self.llm, query, self.config, scope, self.usage)


@dataclass(frozen=True)
class NoLLMLocator:
    """What an LLM locator is when no LLM is configured: the no-LLM locator, the reason recorded."""

    index: Index
    config: Config
    name: str

    def locate(self, query: Query, scope: set[str] | None = None) -> LocateResult:
        res = no_llm_locate(self.index, query, self.config, scope)
        res.fallbacks.append(Fallback("locate", "no LLM configured", f"{res.locator} locator"))
        return res


LOCATORS: dict[str, bool] = {"keyword": False, "hybrid": False, "llm": True, "llm-rerank": True}
"""Locator name -> whether it needs an LLM."""


def resolve_name(name: str, llm: LLMClient | None) -> str:
    if name == "auto":
        return "llm" if llm is not None else "hybrid"
    if name not in LOCATORS:
        raise InputError(f"unknown locator {name!r} (choose from: auto, {', '.join(LOCATORS)})")
    return name


def make_locator(name: str, index: Index, config: Config, llm: LLMClient | None = None,
                 usage: UsageMeter | None = None) -> Locator:
    """``llm`` is None when no LLM is configured (the mock counts as none)."""
    name = resolve_name(name, llm)
    if LOCATORS[name] and llm is None:
        return NoLLMLocator(index, config, name)
    if name == "keyword":
        return KeywordLocator(index, config)
    if name == "hybrid":
        return HybridLocator(index, config)
    assert llm is not None
    if name == "llm":
        return LLMLocator(index, config, llm, usage)
    return LLMRerankLocator(index, config, llm, usage)
