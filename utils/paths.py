"""An index directory named on the command line or in the Python API, as a usable absolute path.

Why: the index is replaced by renaming a sibling directory into place and recovered from
``.<name>.previous`` beside it, which needs a parent and a name. ``.`` (a person standing inside the
index), ``""`` and ``/`` have no name of their own; made absolute, ``.`` has one, the others are
one-line errors instead of a ValueError from deep inside pathlib.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from utils.errors import InputError


def index_dir_path(raw: Any, what: str = "the index path") -> Path:
    """``raw`` (str or path) as an absolute, normalised path with a name; InputError otherwise."""
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if not isinstance(raw, (str, os.PathLike)):
        raise InputError(f"{what} must be a path to an index directory, got {type(raw).__name__}")
    text = os.fspath(raw)
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{what} is empty: name an index directory")
    if "\0" in text:
        raise InputError(f"{what} holds a NUL character")
    path = Path(os.path.abspath(text))
    if not path.name:
        raise InputError(f"{what} {text}: the root directory cannot be an index directory")
    return path
