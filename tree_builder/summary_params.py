"""The summary parameters config.py composes, apart from the summariser: every command (``--help``
included) imports config.py, and summary.py loads the tokenizer."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class SummaryParams:
    """How long a node summary may be and when a section is its own summary (build only)."""

    summary_max_chars: int = field(default=160, metadata={"build": True})
    """Cap on a summary (characters; CJK and Latin alike): the locator's TOC holds one per node."""
    short_section_tokens: int = field(default=200, metadata={"build": True})
    """A section shorter than this is its own summary (PageIndex's rule)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {"summary_max_chars": (1, math.inf),
                                                        "short_section_tokens": (0, math.inf)}
