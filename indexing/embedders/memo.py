"""One model call per distinct query text."""
from __future__ import annotations

from typing import Any


class MemoQueryEmbedder:
    """Embeds each distinct query text once.

    One query needs the same vector in the locator, in every located leaf and
    in the cross-leaf ordering; the evaluation asks for it again in every arm.
    """

    def __init__(self, inner: Any, size: int = 4096) -> None:
        self.inner = inner
        self.name, self.model_id = inner.name, inner.model_id
        self._memo: dict[str, Any] = {}
        self._size = size

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: list[str], progress: Any = None) -> Any:
        return self.inner.embed_documents(texts, progress=progress)

    def embed_query(self, text: str) -> Any:
        vec = self._memo.get(text)
        if vec is None:
            if len(self._memo) >= self._size:
                self._memo.clear()
            vec = self._memo[text] = self.inner.embed_query(text)
        return vec


def memoized(embedder: Any, size: int = 16) -> MemoQueryEmbedder:
    """``embedder`` with query memoisation, without wrapping a wrapper twice."""
    return embedder if isinstance(embedder, MemoQueryEmbedder) else MemoQueryEmbedder(embedder, size=size)
