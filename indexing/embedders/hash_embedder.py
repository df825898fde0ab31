"""Feature hashing: deterministic, instant, no model (tests and --mock)."""
from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

from utils.errors import BackendError

from indexing.embedders.base import Progress, batch_ranges, l2_normalise
from utils.tokenizer import TOKENIZER_VERSION, tokenize


@lru_cache(maxsize=200_000)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable (index, sign) of a feature: blake2b, never Python's per-process salted hash()."""
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return (h >> 1) % dim, (1.0 if h & 1 else -1.0)


class HashEmbedder:
    """Signed feature hashing of BM25 tokens: unigrams (weight 1) + adjacent bigrams (0.5).

    It is the mock embedder: same vector in every process and on every machine,
    no model, and still lexically meaningful (shared words => positive cosine),
    so mock-mode retrieval tests can assert rankings. The sign bit keeps the
    expected dot product of two unrelated texts at 0 despite collisions. Bigrams
    give word order a little weight. A text with no tokens (empty, whitespace,
    only stop words/punctuation) maps to the zero vector.

    The vector depends on utils.tokenizer.tokenize, so the identity's
    ``variant`` carries TOKENIZER_VERSION; bump ``VERSION`` (part of model_id)
    when the hashing itself changes.
    """

    VERSION = "v1"
    BIGRAM_WEIGHT = 0.5
    name = "hash"

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise BackendError(f"hash_dim must be at least 2, got {dim}")
        self._dim = int(dim)
        self.model_id = f"hash-{self.VERSION}-{self._dim}"
        # The vectors are only as stable as the tokens: a tokenizer change
        # changes every vector, so its version is part of the identity.
        self.variant = f"blake2b-uni+bi/{TOKENIZER_VERSION}"

    @property
    def dim(self) -> int:
        return self._dim

    def _vector(self, text: str) -> np.ndarray:
        tokens = tokenize(text)
        dim = self._dim
        vec = np.zeros(dim, dtype=np.float64)
        # Summed per kind with bincount, not one element update per feature: the sums are of +-1 and
        # (times BIGRAM_WEIGHT = 0.5) +-0.5, exact in any order and in float32, so the vector is the
        # one the loop of float32 updates gave.
        unigrams = [_bucket(tok, dim) for tok in tokens]
        if unigrams:
            index, sign = zip(*unigrams)
            vec += np.bincount(index, weights=sign, minlength=dim)
        bigrams = [_bucket(a + "\x1f" + b, dim) for a, b in zip(tokens, tokens[1:])]
        if bigrams:
            index, sign = zip(*bigrams)
            vec += self.BIGRAM_WEIGHT * np.bincount(index, weights=sign, minlength=dim)
        return l2_normalise(vec.astype(np.float32))

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for start, end in batch_ranges(len(texts), 256):
            for i in range(start, end):
                out[i] = self._vector(texts[i])
            if progress is not None:
                progress(end - start)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)
