"""Character offsets -> 1-based page numbers, for sources with pages (PDF)."""
from __future__ import annotations

from bisect import bisect_right
from typing import Sequence


def page_of(page_starts: Sequence[int], pos: int) -> int:
    """Page holding character ``pos``; 0 when the document has no pages."""
    return bisect_right(page_starts, pos) if page_starts else 0


def page_span(page_starts: Sequence[int], start: int, end: int) -> tuple[int, int]:
    """(first page, last page) of the span [start, end); (0, 0) without pages."""
    if not page_starts:
        return 0, 0
    return page_of(page_starts, start), page_of(page_starts, max(start, end - 1))
