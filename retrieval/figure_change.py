"""A change the question asks for, computed from the two figures of one row it was read from; and
a figure said in the scale the question asks for.

"How much has the effective tax rate changed between FY2021 and FY2022?" is answered by a row
that states both years (``Effective tax rate 21.6 % 24.6 %``); the change itself is printed
nowhere. Reading both cells and saying the difference, marked as computed and with the figures it
came from beside it, answers what was asked and stays checkable. Likewise "in USD billions" asked
of a table printed in millions: the cell as printed, then the same amount in billions.
"""
from __future__ import annotations

import re

_ASKS_CHANGE = re.compile(r"\b(?:chang\w*|grow\w*|growth|increas\w*|decreas\w*|declin\w*|improv\w*|compar\w*|"
                          r"differ\w*|year[- ]over[- ]year|yoy|drop\w*|rise|rose)\b", re.I)
_ASKS_CAGR = re.compile(r"\bCAGR\b|\bcompound(?:ed)? annual", re.I)
_NUMBER = re.compile(r"^\(?-?\$?\(?-?(\d[\d,]*(?:\.\d+)?)\)?(%?)\)?$")


def asks_change(question: str) -> bool:
    """Whether the question asks how a quantity changed between periods (or its compound growth)."""
    return bool(_ASKS_CHANGE.search(question) or _ASKS_CAGR.search(question))


def cell_value(cell: str) -> tuple[float, bool] | None:
    """(value, is a percentage) of a table cell as printed: ``(4,625)`` -> -4625, ``21.6%`` -> 21.6."""
    m = _NUMBER.match(cell.strip())
    if not m:
        return None
    value = float(m.group(1).replace(",", ""))
    negative = "(" in cell or cell.strip().lstrip("$").startswith("-")
    return (-value if negative else value), bool(m.group(2))


_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}


def in_scale(cell: str, scale: str, wanted: str) -> str:
    """``cell`` (printed in ``scale``) said in ``wanted``: ``(4,625)`` millions -> ``-4.625`` billions;
    "" when either scale is unknown, they are the same, or the cell is not an amount."""
    value = cell_value(cell)
    if scale not in _SCALES or wanted not in _SCALES or scale == wanted or value is None or value[1]:
        return ""
    x = value[0] * _SCALES[scale] / _SCALES[wanted]
    text = f"{x:,.3f}".rstrip("0").rstrip(".")
    return text if text not in ("0", "-0") else f"{x:.3g}"


def decimals(cell: str) -> int:
    """How many decimals a cell prints (``3,676.2`` -> 1): a figure computed from cells is said so."""
    m = re.search(r"\.(\d+)", cell)
    return len(m.group(1)) if m else 0


def describe_change(question: str, columns: tuple[str, ...], periods: tuple[str, ...],
                    values: tuple[str, ...]) -> str:
    """``change from 2021 to 2022: -3.0 points`` (or ``+4,322, +6.9%``; for CAGR questions the compound
    annual growth rate) between the earliest and the latest period read; "" when the question asks
    no change, fewer than two periods were read, or a cell is not a number."""
    if not asks_change(question) or len(values) < 2 or len(set(periods)) < 2:
        return ""
    read = [(p, c, v, cell_value(v)) for p, c, v in zip(periods, columns, values)]
    if any(x[3] is None for x in read):
        return ""
    read.sort(key=lambda x: x[0])
    (p0, c0, v0, (a, pct_a)), (p1, c1, v1, (b, pct_b)) = read[0], read[-1]
    if pct_a != pct_b:
        return ""
    places = max(decimals(v0), decimals(v1))
    span = f"from {c0} to {c1}"
    if pct_a:
        return f"change {span}: {b - a:+.{max(places, 1)}f} points (computed)"
    if _ASKS_CAGR.search(question):
        years = int(p1) - int(p0)
        if years <= 0 or a <= 0 or b <= 0:
            return ""
        return f"compound annual growth {span}: {((b / a) ** (1 / years) - 1) * 100:+.1f}% (computed)"
    diff = f"{b - a:+,.{places}f}"
    rel = f", {(b - a) / abs(a) * 100:+.1f}%" if a != 0 else ""
    return f"change {span}: {diff}{rel} (computed)"
