"""OpenAI (or compatible) /v1/embeddings."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from utils.errors import BackendError
from utils.oneline import one_line

from indexing.embedders.base import (
    OPENAI_BATCH,
    OPENAI_DEFAULT_MODEL,
    Progress,
    embed_in_batches,
    l2_normalise,
)


class OpenAIEmbedder:
    """OpenAI (or any OpenAI-compatible server's) /v1/embeddings via the official SDK.

    Key and endpoint come from OPENAI_API_KEY / OPENAI_BASE_URL. With only a base
    URL (a local server such as Ollama or vLLM), a placeholder key is sent since
    such servers ignore it. The dimension is whatever the server returns; before
    the first call it costs one probe request to learn it.
    """

    name = "openai"
    variant = "api"

    def __init__(self, model: str | None = None, batch_size: int = OPENAI_BATCH,
                 api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 60.0) -> None:
        self.model_id = model or OPENAI_DEFAULT_MODEL
        self.batch_size = max(1, int(batch_size))
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if not self._api_key and not self._base_url:
            raise BackendError(
                "the openai embedder needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)"
            )
        self._timeout = timeout
        self._client: Any = None
        self._dim: int | None = None

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai  # optional SDK, imported on first use
            except ImportError as exc:
                raise BackendError("the openai embedder needs: pip install openai") from exc
            self._client = openai.OpenAI(
                api_key=self._api_key or "no-key", base_url=self._base_url, timeout=self._timeout
            )
        return self._client

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._request(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai  # optional SDK; _client imported it already

        client = self._get_client()
        try:
            resp = client.embeddings.create(model=self.model_id, input=texts, encoding_format="float")
        except openai.AuthenticationError as exc:
            raise BackendError(
                f"OpenAI embeddings refused the key (HTTP {exc.status_code}): check OPENAI_API_KEY"
            ) from exc
        except openai.APIStatusError as exc:
            raise BackendError(
                f"OpenAI embeddings failed (HTTP {exc.status_code}, model {self.model_id}): "
                f"{one_line(exc.message, 200)}"
            ) from exc
        except openai.APIConnectionError as exc:
            where = self._base_url or "api.openai.com"
            raise BackendError(f"cannot reach the OpenAI embeddings endpoint {where}: {one_line(str(exc), 200)}") from exc
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise BackendError(
                f"OpenAI embeddings returned {len(rows)} vectors for {len(texts)} inputs"
            )
        arr = np.asarray([r.embedding for r in rows], dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise BackendError("OpenAI embeddings returned malformed vectors")
        if self._dim is None:
            self._dim = int(arr.shape[1])
        elif arr.shape[1] != self._dim:
            raise BackendError(
                f"OpenAI embeddings changed dimension mid-run ({self._dim} -> {arr.shape[1]})"
            )
        return l2_normalise(arr)

    def _encode(self, texts: list[str]) -> np.ndarray:
        # The API rejects empty strings; they get the zero vector instead.
        keep = [i for i, t in enumerate(texts) if t.strip()]
        got = self._request([texts[i] for i in keep]) if keep else None
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if got is not None:
            out[keep] = got
        return out

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        return embed_in_batches(texts, self.batch_size, self._encode, lambda: self.dim, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]
