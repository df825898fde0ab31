"""Heading lines in plain text (no ``#``): numbering first, layout second.

The design notes name "better structure detection" as the next step; a statute
pasted as plain lines (``第一章 总则`` / ``第一条 …``) or a ``.txt`` report
otherwise becomes one leaf. A line is a heading only when it is short, does
not end like a sentence, and either carries a heading number (the same
numbering rules the tree builder uses: 1 / 1.2 / A.1 / 第X章 / 一、 …) or is
set apart by blank lines the way a title is. When the text has numbered
headings, unnumbered lines must also look like a title (a few capitalised
words) so a short body sentence never becomes a section.
"""
from __future__ import annotations

import re

from tree_builder.document import Heading
from tree_builder.numbering import heading_numbering
from utils.cjk import has_cjk

MAX_HEADING_CHARS = 80
MAX_CJK_HEADING_CHARS = 40
_SENTENCE_END = tuple(".,;:!?。，；：！？、…")
_BULLETS = tuple("-*•+>|#=~`")
_LAW_MARK = re.compile(r"^第[^\s]{1,8}?(部分|分编|编|章|节|条)")
_LAW_ORDER = {"部分": 0, "编": 1, "分编": 2, "章": 3, "节": 4, "条": 5}


def _shape_ok(s: str, scale: int = 1) -> bool:
    """Short, not a list bullet, not ending like a sentence (a question is fine: "Why X?")."""
    limit = (MAX_CJK_HEADING_CHARS if has_cjk(s) else MAX_HEADING_CHARS) * scale
    return (0 < len(s) <= limit and not s.startswith(_BULLETS)
            and (not s.endswith(_SENTENCE_END) or s.endswith(("?", "？"))))


def _numbered_rest(s: str, numbering_family: str) -> str:
    """The words after the number (``1.2 Foo`` -> ``Foo``)."""
    if numbering_family == "cn_law":
        m = _LAW_MARK.match(s)
        return s[m.end():].strip() if m else ""
    if numbering_family == "cn_outline":
        return re.sub(r"^[（(]?[^、）)\s]{1,6}[、）)]", "", s).strip()
    parts = s.split(None, 1)
    return parts[1] if len(parts) > 1 else ""


def _title_like(s: str, strict: bool) -> bool:
    if not s[0].isupper() and not has_cjk(s[0]):
        return False
    if strict:
        if has_cjk(s):  # 附则, 附件一: a few characters only
            return len(s) <= 8
        words = s.split()
        return len(words) <= 5 and all(w[0].isupper() or len(w) <= 3 or not w[0].isalpha() for w in words)
    return len(s.split()) <= 10


def detect_headings(text: str, body_start: int = 0) -> list[Heading]:
    """Heading lines of ``text[body_start:]`` (marker levels: title 1, numbered/unnumbered below it)."""
    starts: list[int] = []
    lines: list[str] = []
    pos = body_start
    for raw in text[body_start:].split("\n"):
        starts.append(pos)
        lines.append(raw)
        pos += len(raw) + 1
    n = len(lines)
    blank = [not ln.strip() for ln in lines]

    def prev_nonblank(i: int) -> int:
        j = i - 1
        while j >= 0 and blank[j]:
            j -= 1
        return j

    def next_nonblank(i: int) -> int:
        j = i + 1
        while j < n and blank[j]:
            j += 1
        return j

    numbered: dict[int, tuple[str, int]] = {}
    for i, raw in enumerate(lines):
        s = raw.strip()
        if not s or not _shape_ok(s):
            continue
        num = heading_numbering(s)
        if num is None:
            continue
        rest = _numbered_rest(s, num.family)
        if num.family == "cn_law" and num.depth == _LAW_ORDER["条"] and rest:
            continue  # "第一条 ……" opens an article's text; only a bare "第一条" line is a heading
        if num.family != "cn_law":
            # "12 apples were sold" is a sentence; "3.2 Encoder Design" a heading
            if not rest or not (rest[0].isupper() or has_cjk(rest[0])):
                continue
        numbered[i] = (num.family, num.depth)
    # A run of adjacent lines numbered alike is a list, not headings.
    in_list = [i for i, key in numbered.items() if key[0] != "cn_law"
               and (numbered.get(i - 1) == key or numbered.get(i + 1) == key)]
    for i in in_list:
        del numbered[i]

    strict = len(numbered) >= 2
    law_ranks = sorted({d for f, d in numbered.values() if f == "cn_law"})
    marker: dict[int, int] = {}  # line index -> marker level
    for i, (family, depth) in numbered.items():
        if family == "cn_law":
            marker[i] = 2 + law_ranks.index(depth)
        elif family == "decimal":
            marker[i] = 1 + depth
        else:
            marker[i] = 2
    # Unnumbered lines, last to first: "body follows" may be another heading just accepted.
    for i in range(n - 1, -1, -1):
        s = lines[i].strip()
        if blank[i] or i in numbered or not _shape_ok(s, scale=2):
            continue
        p, q = prev_nonblank(i), next_nonblank(i)
        isolated = (p == -1 or p < i - 1) and (q >= n or q > i + 1)
        if not isolated or q >= n:
            continue
        if p == -1:  # the first line of the text, set apart: the title (may be long)
            marker[i] = 1
            continue
        if not _shape_ok(s) or not _title_like(s, strict):
            continue
        follower = lines[q].strip()
        body_follows = len(follower) >= max(2 * len(s), 20 if has_cjk(follower) else 40)
        if q in marker or body_follows:
            marker[i] = 2
    out = sorted(marker.items())
    first_line = text.count("\n", 0, body_start) + 1
    headings: list[Heading] = []
    for i, level in out:
        raw = lines[i]
        end = starts[i] + len(raw) + (1 if i + 1 < n else 0)
        headings.append(Heading(text=" ".join(raw.split()), marker_level=level,
                                line=first_line + i, start_char=starts[i], end_char=end,
                                end_line=first_line + i))
    return headings
