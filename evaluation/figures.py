"""Numbers in text compared as a reader compares them: ``$1,577 million``, ``1577`` and
``1.577 billion`` are one figure.

Why a module of its own: the offline-answer check (``evaluation.answer_check``) asks two questions
of the same kind, "does the evidence page hold the reference figure?" and "does the answer state
it?", and both must normalise the same way.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(
    r"(?<![\w.])(?P<fy>(?:FY|Q[1-4])\s?'?)?\(?-?\$?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\)?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|mn|bn|[kmb])\b)?", re.I)
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9,
           "trillion": 1e12}
_STEPS = (1.0, 1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9)
"""A figure may be printed in units, thousands, millions or billions: equal up to one of these."""
CROSS_UNIT_DIGITS = 3
"""Significant digits a figure needs before it may match in other units (``1.577`` billion = ``1,577``)."""


@dataclass(frozen=True)
class Figure:
    """A number as printed: its value (scale word applied) and how many decimals it was printed with."""

    value: float
    decimals: int
    digits: int
    """Significant digits as printed (``0.40`` -> 1, ``12,645`` -> 5)."""
    literal: str


def figures(text: str, *, skip_years: bool = True) -> list[Figure]:
    """Every number in ``text``; years (``2022``, ``FY2022``) and period labels (``Q2``) left out
    when ``skip_years``: they name when, not how much."""
    out: list[Figure] = []
    for m in _NUMBER.finditer(text):
        num = m.group("num")
        if m.group("fy"):
            continue
        plain = num.replace(",", "")
        if skip_years and "," not in num and "." not in num and 1900 <= int(plain) <= 2100:
            continue
        scale = _SCALES.get((m.group("scale") or "").lower(), 1.0)
        decimals = len(plain.split(".")[1]) if "." in plain else 0
        digits = len(plain.replace(".", "").lstrip("0").rstrip("0")) or 1
        out.append(Figure(float(plain) * scale, decimals, digits, m.group(0).strip()))
    return out


def same_figure(ref: Figure, seen: Figure) -> bool:
    """Whether ``seen`` states ``ref``: equal once ``seen`` is rounded as ``ref`` was printed, in the
    same units or a power of 1,000 apart (a figure of fewer than three significant digits must match
    in the same units: ``0.69`` is not every ``690`` of a statement page)."""
    for step in _STEPS:
        if step != 1.0 and ref.digits < CROSS_UNIT_DIGITS:
            continue
        v = seen.value * step
        scale = 10 ** ref.decimals
        if abs(round(abs(v) * scale) - round(abs(ref.value) * scale)) == 0 and ref.value != 0:
            return True
    return False


def contains_figure(text: str, ref: Figure) -> bool:
    return any(same_figure(ref, f) for f in figures(text, skip_years=False))


def reference_figures(answer: str) -> list[Figure]:
    """The figures a reference answer states (years and period labels left out), once each."""
    seen: set[tuple[float, int]] = set()
    out: list[Figure] = []
    for f in figures(answer):
        if (f.value, f.decimals) not in seen:
            seen.add((f.value, f.decimals))
            out.append(f)
    return out
