"""Document text placed inside a prompt's tags.

Every prompt that wraps document text in tags (``<evidence>`` for the answer, ``<section>`` for
summaries and graph extraction) escapes it the same way, so no document can close a tag and speak
as the instructions around it.
"""
from __future__ import annotations

import re

_ESCAPES = {"&": "&amp;", "<": "&lt;"}


def escape_evidence(text: str) -> str:
    """``&`` and ``<`` as entities: no text inside a tag can open or close one (``>`` alone cannot)."""
    return re.sub(r"[&<]", lambda m: _ESCAPES[m.group(0)], text)
