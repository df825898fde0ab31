"""How much one input document may cost to read: bytes on disk, bytes unpacked, markup size and depth.

Why limits at all: a document is data from anyone. A 3 GB sparse text file, a 2.7 MB .docx that
unpacks to 600 MB, an HTML page of a million headings or a thousand nested ``<div>`` each cost
gigabytes or minutes, or crash the reader, and one such file in a folder must not stop the build.
A document over a limit is refused with a one-line reason naming the setting (a folder build skips
it with a warning); the settings live in config.py so a user with a real need can raise them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from utils.errors import InputError


@dataclass(frozen=True)
class ReadLimits:
    max_input_bytes: int = 128 * 1024 * 1024
    """Size of one input file on disk."""
    max_unpacked_bytes: int = 64 * 1024 * 1024
    """Total unpacked size of the parts of one .docx (its declared sizes; the zip reader enforces them)."""
    max_html_elements: int = 300_000
    """Tags in one HTML file (counted before parsing: a parsed tag costs hundreds of bytes)."""
    max_html_depth: int = 512
    """Nesting depth of HTML elements."""
    max_headings: int = 20_000
    """Headings in one document of any format (a section tree of more is not a document's outline)."""
    max_headings_per_kb: int = 100
    """Headings per KiB of the file (a file under 1 KiB counts as 1 KiB): with ``max_headings``, a
    document's sections (one per heading) stay in proportion to its size."""
    max_text_per_byte: int = 20
    """Characters of text a reader may produce per byte of the file. Markdown, text and HTML give at
    most one; a PDF's or a .docx's compressed streams a few. Chunks follow the text (one per
    ``chunk_size`` characters, less the overlap, or per paragraph), so this bounds them too."""

    @classmethod
    def from_config(cls, config: Any) -> "ReadLimits":
        return cls(**{name: getattr(config, name) for name in cls.__dataclass_fields__})


DEFAULT_LIMITS = ReadLimits()


def heading_allowance(limits: ReadLimits, size: int | None) -> tuple[int, str]:
    """How many headings a file of ``size`` bytes may have, and the setting that says so."""
    if size is None:
        return limits.max_headings, "max_headings"
    relative = limits.max_headings_per_kb * max(1, -(-size // 1024))
    if relative < limits.max_headings:
        return relative, "max_headings_per_kb"
    return limits.max_headings, "max_headings"


def check_headings(count: int, rel_path: str, limits: ReadLimits, size: int | None = None) -> None:
    """Refuse a document with more headings than ``limits.max_headings`` or, given the file's
    ``size`` in bytes, than ``limits.max_headings_per_kb`` allows (one line naming the setting)."""
    allowed, setting = heading_allowance(limits, size)
    if count > allowed:
        per = f" for its {size:,} bytes" if setting == "max_headings_per_kb" else ""
        raise InputError(f"{rel_path}: more than {allowed:,} headings{per} ({setting}); not read")


def check_output(text_chars: int, headings: int, rel_path: str, limits: ReadLimits, size: int) -> None:
    """What a reader produced from ``size`` bytes, held to the limits relative to that size: its
    text (``max_text_per_byte``) and its headings (``check_headings``). A reader whose output grows
    faster than its input (a table nested row in row) is then refused, not indexed at any cost."""
    allowed = limits.max_text_per_byte * max(size, 1024)
    if text_chars > allowed:
        raise InputError(f"{rel_path}: {text_chars:,} characters of text from {size:,} bytes, more than "
                         f"{limits.max_text_per_byte} per byte (max_text_per_byte); not read")
    check_headings(headings, rel_path, limits, size)
