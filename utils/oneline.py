"""One helper for every message or summary that must fit on one line."""
from __future__ import annotations


def one_line(text: object, limit: int | None = None) -> str:
    """Whitespace (newlines included) collapsed to single spaces; cut to ``limit`` characters with "…".

    Error messages, summaries in the serialised tree and run-log notes all go one per line: a
    newline inside one would break the format a reader (person or parser) relies on.
    """
    flat = " ".join(str(text).split())
    if limit is not None and len(flat) > limit:
        return flat[: max(0, limit - 1)] + "…"
    return flat
