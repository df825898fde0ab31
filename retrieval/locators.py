"""Step 1 behind one interface: ``make_locator(name, ...)`` -> a Locator with ``locate(query, scope)``.

Four locators exist (keyword, hybrid, llm, llm-rerank); the factory is the only place that maps a
name to one, rejects an unknown name, resolves ``auto`` (llm when an LLM is configured, else hybrid)
and decides what an LLM locator does without an LLM (``no_llm_locate``, with the reason recorded).
Another locator is one function with the ``LocateFn`` signature and one entry in ``LOCATORS``.
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


LocateFn = Callable[[Index, Config, "QueryEmbedder | None", Any, Any, QueryLike, "set[str] | None"], LocateResult]
"""(index, config, embedder, llm, usage, query, scope) -> the located leaves."""


def _keyword(ix: Index, cfg: Config, emb: Any, llm: Any, usage: Any, q: QueryLike, s: Any) -> LocateResult:
    return keyword_locate(ix, q, cfg, s)


def _hybrid(ix: Index, cfg: Config, emb: Any, llm: Any, usage: Any, q: QueryLike, s: Any) -> LocateResult:
    return hybrid_locate(ix, emb, q, cfg, s)


def _llm(ix: Index, cfg: Config, emb: Any, llm: Any, usage: Any, q: QueryLike, s: Any) -> LocateResult:
    return llm_locate(ix, llm, q, cfg, emb, s, usage)


def _llm_rerank(ix: Index, cfg: Config, emb: Any, llm: Any, usage: Any, q: QueryLike, s: Any) -> LocateResult:
    return llm_rerank_locate(ix, llm, q, cfg, emb, s, usage)


def _without_llm(ix: Index, cfg: Config, emb: Any, llm: Any, usage: Any, q: QueryLike, s: Any) -> LocateResult:
    res = no_llm_locate(ix, emb, q, cfg, s)
    res.fallbacks.append(Fallback("locate", "no LLM configured", f"{res.locator} locator"))
    return res


LOCATORS: dict[str, tuple[bool, LocateFn]] = {
    # name: (needs an LLM, locating function)
    "keyword": (False, _keyword),
    "hybrid": (False, _hybrid),
    "llm": (True, _llm),
    "llm-rerank": (True, _llm_rerank),
}


@dataclass(frozen=True)
class BoundLocator:
    """A locating function with what it needs; ``scope`` is the question's documents (None: all)."""

    name: str
    fn: LocateFn
    index: Index
    config: Config
    embedder: Any
    llm: Any
    usage: Any

    def locate(self, query: QueryLike, scope: set[str] | None = None) -> LocateResult:
        return self.fn(self.index, self.config, self.embedder, self.llm, self.usage, query, scope)


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
    needs_llm, fn = LOCATORS[name]
    return BoundLocator(name, _without_llm if needs_llm and llm is None else fn, index, config, embedder, llm, usage)
