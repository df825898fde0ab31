"""Values written into SQL text (strings, vectors, integer lists, full-text queries), and vectors read back."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from pymysql.converters import escape_string  # once per process: a copy escapes millions of strings

from utils.errors import IndexFormatError


def sql_str(text: str) -> str:
    """A quoted SQL string literal (MySQL escaping)."""
    return "'" + escape_string(text) + "'"


def sql_vec(vec: np.ndarray) -> str:
    """A vector literal; 9 significant digits round-trip float32."""
    return "'[" + ",".join("%.9g" % v for v in np.asarray(vec, dtype=np.float32).tolist()) + "]'"


def parse_vec(text: Any, dim: int, where: str) -> np.ndarray:
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str) or not text.startswith("[") or not text.endswith("]"):
        raise IndexFormatError(f"{where}: not a vector")
    vec = np.array(text[1:-1].split(","), dtype=np.float32) if dim else np.zeros(0, dtype=np.float32)
    if vec.shape != (dim,):
        raise IndexFormatError(f"{where}: vector of {vec.shape[0]} values, expected {dim}")
    return vec


def sql_ints(values: Sequence[int] | np.ndarray) -> str:
    return ",".join(str(int(v)) for v in values)


def fulltext_query(tokens: Sequence[str]) -> str | None:
    """The question's tokens for MATCH ... AGAINST (natural language mode); None when none remain."""
    words = [t for t in dict.fromkeys(tokens) if t and not any(c in t for c in "'\"\\()<>+-~*@")]
    return " ".join(words) if words else None
