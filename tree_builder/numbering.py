"""Heading numbers (``1.2``, ``A.1``, ``第三节``, ``（一）``, ``IV.``): which family a number belongs to and how deep it is.

Shared by the tree builder (levels), plain-text heading detection and the PDF
reader (outline entries), so all three read numbering the same way.
"""
from __future__ import annotations

import re
from typing import NamedTuple

_CN_DIGITS = "零〇一二三四五六七八九十百千两"
_LAW_RANK = {"部分": 0, "编": 1, "分编": 2, "章": 3, "节": 4, "条": 5}
_NUMBERING: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"^第[{_CN_DIGITS}\d]+(分编|部分|编|章|节|条)"), "cn_law"),
    (re.compile(rf"^[{_CN_DIGITS}]+、"), "cn_outline:1"),
    (re.compile(rf"^[（(][{_CN_DIGITS}]+[）)]"), "cn_outline:2"),
    (re.compile(r"^\d{1,3}、"), "cn_outline:3"),
    (re.compile(r"^[（(]\d{1,3}[）)]"), "cn_outline:4"),
    (re.compile(r"^(\d{1,3}(?:\.\d{1,3})*)\.?(?=\s|$)"), "decimal"),
    (re.compile(r"^([A-Z](?:\.\d{1,3})+)\.?(?=\s|$)"), "decimal"),
    (re.compile(r"^(?:XX|XIX|XVIII|XVII|XVI|XV|XIV|XIII|XII|XI|X|IX|VIII|VII|VI|V|IV|III|II|I)[.)](?=\s)"),
     "roman"),
    (re.compile(r"^[A-Z][.)](?=\s)"), "alpha"),
    (re.compile(r"^\d{1,3}\)(?=\s)"), "paren"),
]


class Numbering(NamedTuple):
    family: str
    """Headings compare by ``depth`` only within one family."""
    depth: int


def heading_numbering(text: str) -> Numbering | None:
    """``1.2 Foo`` -> (decimal, 2); ``第三节 X`` -> (cn_law, 4); ``（一）`` -> (cn_outline, 2)."""
    for pattern, family in _NUMBERING:
        m = pattern.match(text)
        if m is None:
            continue
        if family == "cn_law":
            return Numbering("cn_law", _LAW_RANK[m.group(1)])
        if family.startswith("cn_outline:"):
            return Numbering("cn_outline", int(family.split(":")[1]))
        if family == "decimal":
            return Numbering("decimal", m.group(1).count(".") + 1)
        return Numbering(family, 1)
    return None
