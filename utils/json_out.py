"""JSON that every parser accepts.

Python's json writes NaN and Infinity as bare ``NaN`` / ``Infinity``, which
is not JSON: a consumer of ``--json`` would fail on the whole document. A
non-finite number carries no information anyway, so it becomes null.
"""
from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """``obj`` with every NaN/Infinity float (at any depth) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "item") and hasattr(obj, "dtype"):  # numpy scalar
        return finite(obj.item())
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps that never emits NaN/Infinity (raises instead of writing invalid JSON)."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
