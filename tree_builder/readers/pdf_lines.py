"""A PDF page's text line with the layout signals structure recovery reads (its own module: the
reader and the structure rules both use it)."""
from __future__ import annotations

from dataclasses import dataclass

from utils.cjk import is_wide


@dataclass
class Line:
    text: str
    size: float
    bold: bool
    y: float
    page: int
    heading: int = 0
    """0 = body; otherwise the heading's marker level."""
    x: float = 0.0
    """Left edge of the line's first run (indentation in a contents page)."""


def join_wrapped(a: str, b: str) -> str:
    """Two lines (or pieces of one) joined: CJK text wraps without a space, other text at one."""
    if a and b and is_wide(a[-1]) and is_wide(b[0]):
        return a + b
    return f"{a} {b}" if a and b else a or b
