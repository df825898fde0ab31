"""What SQL text may contain besides constants: checked identifiers, placeholders, and the vector text format.

Values never enter SQL text: they travel as driver parameters (pymysql's ``%s``, escaped by the
connection that sends them). Identifiers cannot be parameters, so the only ones built at run time
(a table prefix, a database name, a session variable) are checked against a strict pattern where
they are made. A vector is a parameter too, in the text form the engine parses (``vector_text``).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from utils.errors import IndexFormatError


TABLE_PREFIX = re.compile(r"treerag_[0-9a-f]{16}")
"""A table prefix: ``treerag_`` and the first 16 hex digits of the build id."""

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""A database or session-variable name: letters, digits and underscores, never a quote or a space."""


def checked_name(name: str, pattern: re.Pattern[str] = NAME) -> str:
    """``name`` itself, once ``pattern`` matched all of it (else a ValueError: a name that reaches
    here unchecked is a bug, not bad input, since names are checked where they are made)."""
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise ValueError(f"not a safe SQL identifier: {name!r}")
    return name


def identifier(name: str, pattern: re.Pattern[str] = NAME) -> str:
    """``name`` back-quoted for SQL text, once ``pattern`` matched all of it."""
    return f"`{checked_name(name, pattern)}`"


def placeholders(n: int, per_row: int = 1) -> str:
    """``%s,%s,...`` for an IN list (``per_row`` 1), or ``(%s,%s),(%s,%s)`` for ``n`` rows of ``per_row`` values."""
    if per_row == 1:
        return ",".join(["%s"] * n)
    row = "(" + ",".join(["%s"] * per_row) + ")"
    return ",".join([row] * n)


def int_list(values: Sequence[int] | np.ndarray) -> list[int]:
    """Row numbers as Python ints: the driver renders numpy integers as quoted strings otherwise."""
    return [int(v) for v in values]


def vector_text(vec: np.ndarray) -> str:
    """The text form of a vector the engine parses (``[0.1,...]``), sent as a parameter; 9
    significant digits round-trip float32."""
    return "[" + ",".join("%.9g" % v for v in np.asarray(vec, dtype=np.float32).tolist()) + "]"


def parse_vec(text: Any, dim: int, where: str) -> np.ndarray:
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str) or not text.startswith("[") or not text.endswith("]"):
        raise IndexFormatError(f"{where}: not a vector")
    vec = np.array(text[1:-1].split(","), dtype=np.float32) if dim else np.zeros(0, dtype=np.float32)
    if vec.shape != (dim,):
        raise IndexFormatError(f"{where}: vector of {vec.shape[0]} values, expected {dim}")
    return vec


def fulltext_query(tokens: Sequence[str]) -> str | None:
    """The question's tokens for MATCH ... AGAINST (natural language mode); None when none remain.

    Quoting is the driver's job; the characters left out here are the engine's full-text operators,
    which would change what the query means, not break the SQL."""
    words = [t for t in dict.fromkeys(tokens) if t and not any(c in t for c in "'\"\\()<>+-~*@")]
    return " ".join(words) if words else None
