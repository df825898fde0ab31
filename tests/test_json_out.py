"""--json output is JSON every parser accepts, whatever numbers the pipeline produced."""
from __future__ import annotations

import json
import math

import numpy as np

from utils.json_out import dumps, finite


def test_non_finite_numbers_become_null_at_any_depth() -> None:
    result = {"score": float("nan"), "stages": {"vector": [{"score": float("inf")}, {"score": 0.5}]},
              "np": np.float32("nan"), "ok": (1, -float("inf"))}
    text = dumps(result, indent=2)
    assert "NaN" not in text and "Infinity" not in text
    back = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert back == {"score": None, "stages": {"vector": [{"score": None}, {"score": 0.5}]}, "np": None,
                    "ok": [1, None]}


def test_finite_values_are_untouched() -> None:
    data = {"a": [1, 2.5, "x", None, True], "b": {"c": math.pi}}
    assert finite(data) == data
