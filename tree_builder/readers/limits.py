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
    """Headings in one HTML, Word or PDF document (a section tree of more is not a document's outline)."""

    @classmethod
    def from_config(cls, config: Any) -> "ReadLimits":
        return cls(**{name: getattr(config, name) for name in cls.__dataclass_fields__})


DEFAULT_LIMITS = ReadLimits()


def check_headings(count: int, rel_path: str, limits: ReadLimits) -> None:
    """Refuse a document with more headings than ``limits.max_headings`` (one line naming the setting)."""
    if count > limits.max_headings:
        raise InputError(f"{rel_path}: more than {limits.max_headings:,} headings (max_headings); not read")
