"""A linear chunk ranker whose weights are a small JSON file (fitted by evaluation/learn_ranker.py).

Linear on purpose: a dozen weights fitted with cross-validation grouped by
document cannot memorise an evaluation set, the file is readable, and the
score is one matrix-vector product over the scope.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from retrieval.features import FEATURES
from utils.errors import InputError

DEFAULT_WEIGHTS = Path(__file__).with_name("ranker_weights.json")
WEIGHTS_MAX_BYTES = 1024 * 1024
"""A weights file is a few hundred bytes; the setting may come from a ./treerag.toml a cloned
repository ships, so ``/dev/zero`` or a FIFO there must be a one-line error, not an OOM or a hang."""
MULTI_SUFFIX = "_multi"
"""Models for a scope of several documents are stored as ``<kind>_multi``: within one document the
sections partition its evidence; across a collection a question's evidence spans documents, and
the evidence a section pools weighs differently (fitted separately, evaluation/learn_ranker.py)."""


def model_name(kind: str, n_docs: int) -> str:
    return kind + MULTI_SUFFIX if n_docs > 1 else kind


@dataclass(frozen=True)
class LinearRanker:
    kind: str
    """flat | tree | para (the chunk and its paragraph, ordering chunks inside a section)."""
    names: tuple[str, ...]
    weights: np.ndarray

    def score(self, X: np.ndarray) -> np.ndarray:
        return X @ self.weights


def load_ranker(kind: str, path: str | Path | None = None, missing: str = "") -> LinearRanker:
    """The ``kind`` model of a weights file; one-line errors for a missing or malformed file
    (``missing``: what to do when the file has no such model, added to that error).

    Read once per file version: the section ranker asks for its models on every question, and
    reading and checking the file costs about as much as scoring a paper. The key is the file's
    path, size, inode and modification time, so an edited file is read again; a failed read is
    never kept."""
    p = Path(path) if path else DEFAULT_WEIGHTS
    try:
        st = p.stat()
    except OSError:
        return _read_ranker(kind, p, missing)  # the bounded read says what is wrong
    return _cached_ranker(kind, str(p), (st.st_size, st.st_ino, st.st_mtime_ns), missing)


@lru_cache(maxsize=32)
def _cached_ranker(kind: str, path: str, version: tuple[int, int, int], missing: str) -> LinearRanker:
    return _read_ranker(kind, Path(path), missing)


def _read_ranker(kind: str, p: Path, missing: str = "") -> LinearRanker:
    from utils.bounded_read import read_text_bounded

    text = read_text_bounded(p, limit=WEIGHTS_MAX_BYTES, what=f"ranker weights {p}",
                             setting="a weights file is small")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"ranker weights {p} are not readable JSON: {exc}") from None
    model = data.get(kind) if isinstance(data, dict) else None
    if model is None and kind.endswith(MULTI_SUFFIX) and isinstance(data, dict):
        model = data.get(kind[:-len(MULTI_SUFFIX)])  # one model for both regimes
    if not isinstance(model, dict) or not model:
        raise InputError(f"ranker weights {p} have no {kind!r} model" + (f" ({missing})" if missing else ""))
    names, values = [], []
    for name, value in model.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
            raise InputError(f"ranker weights {p}: {kind}.{name} is not a finite number")
        names.append(str(name))
        values.append(float(value))
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise InputError(f"ranker weights {p}: unknown feature(s) {', '.join(unknown)}")
    return LinearRanker(kind, tuple(names), np.asarray(values, dtype=np.float64))
