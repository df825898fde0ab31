"""Step 1 behind one interface: ``make_locator(name, ...)`` -> a Locator with ``locate(query, scope)``.

Four locators exist (keyword, hybrid, llm, llm-rerank); the factory is the only place that maps a
name to one, rejects an unknown name, resolves ``auto`` (llm when an LLM is configured, else hybrid)
and decides what an LLM locator does without an LLM (``no_llm_locate``, with the reason recorded).
Another locator is one entry in ``LOCATORS``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from config import Config
from indexing.index_store import Index
from retrieval.hybrid_retriever import QueryEmbedder
from retrieval.leaf_rerank_locator import llm_rerank_locate
from retrieval.node_locator import hybrid_locate, keyword_locate, llm_locate, no_llm_locate
from retrieval.query import QueryLike
from retrieval.types import Fallback, LocateResult
from utils.errors import InputError


class Locator(Protocol):
    name: str

    def locate(self, query: QueryLike, scope: set[str] | None = None) -> LocateResult: ...


@dataclass
class _Bound:
    """A locating function bound to what it needs; ``scope`` is the question's documents (None: all)."""

    name: str
    fn: Callable[[QueryLike, set[str] | None], LocateResult]

    def locate(self, query: QueryLike, scope: set[str] | None = None) -> LocateResult:
        return self.fn(query, scope)


LocatorFactory = Callable[[Index, Config, QueryEmbedder | None, Any, Any],
                          Callable[[QueryLike, set[str] | None], LocateResult]]
"""(index, config, embedder, llm, usage) -> locate(query, scope)."""

LOCATORS: dict[str, tuple[bool, LocatorFactory]] = {
    # name: (needs an LLM, factory)
    "keyword": (False, lambda ix, cfg, emb, llm, usage: lambda q, s: keyword_locate(ix, q, cfg, s)),
    "hybrid": (False, lambda ix, cfg, emb, llm, usage: lambda q, s: hybrid_locate(ix, emb, q, cfg, s)),
    "llm": (True, lambda ix, cfg, emb, llm, usage: lambda q, s: llm_locate(ix, llm, q, cfg, emb, s, usage)),
    "llm-rerank": (True, lambda ix, cfg, emb, llm, usage:
                   lambda q, s: llm_rerank_locate(ix, llm, q, cfg, emb, s, usage)),
}


def resolve_name(name: str, llm: Any) -> str:
    if name == "auto":
        return "llm" if llm is not None else "hybrid"
    if name not in LOCATORS:
        raise InputError(f"unknown locator {name!r} (choose from: auto, {', '.join(LOCATORS)})")
    return name


def make_locator(name: str, index: Index, config: Config, embedder: QueryEmbedder | None,
                 llm: Any = None, usage: Any = None) -> Locator:
    """``llm`` is None when no LLM is configured (the mock counts as none)."""
    name = resolve_name(name, llm)
    needs_llm, factory = LOCATORS[name]
    if needs_llm and llm is None:
        def without_llm(query: QueryLike, scope: set[str] | None) -> LocateResult:
            res = no_llm_locate(index, embedder, query, config, scope)
            res.fallbacks.append(Fallback("locate", "no LLM configured", f"{res.locator} locator"))
            return res

        return _Bound(name, without_llm)
    return _Bound(name, factory(index, config, embedder, llm, usage))


