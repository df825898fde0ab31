"""Words a PDF's text layer splits where a ligature lost its letters: "adversely af ect our business",
"dif icult", "of ices", "suf icient".

Some filing generators set "ff", "fi" or "ffi" in their bold and display fonts as one glyph whose text
maps to a single "f"; PDFium reads the rest of the glyph's width as a gap and writes a space. Risk
titles, the headings the locator reads, are full of such words, and neither BM25 nor the reader knows
"af ect". The lost letters are not in the file, so the document's own words decide: a split "...f x..."
is joined with the letters that make a word the document spells whole at least ``MIN_SPELLED`` times
("affect" in its body text, set in a font without the ligature), unless the split's second part is a
word the document uses on its own that often ("right of set-off" is no "offset-off", though "offset"
is a word). Nothing is joined where no such word exists ("of all", "chief executive"), and a space alone
is never dropped ("one of ten" stays, though "often" is a word).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_builder.readers.pdf_lines import Line

_SPLIT = re.compile(r"\b([A-Za-z]*f) ([a-z]+)\b")
_WORD = re.compile(r"[A-Za-z]+")
_LOST = ("f", "i", "fi", "l", "fl", "ff", "ffi", "ffl")
"""The letters a ligature glyph may have taken with it after its "f"."""
MIN_SPELLED = 2
"""Times the document must spell the joined word whole before a split is read as that word."""


def _mended(text: str, words: Counter[str], alone: Counter[str]) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with its split words joined, and (position, change in length) of each join. ``alone``:
    how often each word stands where it follows no "...f" (a split's second part "ect" never does, a
    word "set" does)."""
    out: list[str] = []
    shifts: list[tuple[int, int]] = []
    last = 0
    for m in _SPLIT.finditer(text):
        head, tail = m.group(1), m.group(2)
        spelled, lost = max((words[(head + x + tail).casefold()], x) for x in _LOST)
        if spelled < MIN_SPELLED or alone[tail] >= MIN_SPELLED:
            continue
        out += [text[last:m.end(1)], lost]
        last = m.start(2)
        shifts.append((m.end(1), len(lost) - 1))
    return "".join(out) + text[last:], shifts


def _moved(end: int, shifts: list[tuple[int, int]]) -> int:
    return end + sum(delta for at, delta in shifts if at < end) if end else 0


def mend_ligatures(pages: list[list["Line"]]) -> None:
    """Join the words of ``pages`` split where a ligature lost its letters, in place (a line's run-in
    title ends move with its text)."""
    words = Counter(w.casefold() for lines in pages for ln in lines for w in _WORD.findall(ln.text))
    after_f = Counter(m.group(2) for lines in pages for ln in lines for m in _SPLIT.finditer(ln.text))
    alone = words - after_f
    for lines in pages:
        for ln in lines:
            if "f " not in ln.text:
                continue
            text, shifts = _mended(ln.text, words, alone)
            if shifts:
                ln.text = text
                ln.bold_end, ln.italic_end = _moved(ln.bold_end, shifts), _moved(ln.italic_end, shifts)
