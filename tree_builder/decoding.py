"""File bytes -> normalised text: the one place that decides what counts as text and which encoding it is in.

Markdown and plain-text files, and HTML, are decoded here; so offsets in every
later stage refer to the same normalised characters (BOM stripped, CRLF/CR -> LF).
"""
from __future__ import annotations

import re

from utils.errors import InputError

_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")  # Cc minus \t\n\v\f\r


def looks_binary(data: bytes) -> bool:
    return b"\x00" in data


def decode_text(data: bytes, rel_path: str) -> str:
    """UTF-8 (with or without BOM) first, then GB18030 (common for Chinese files)."""
    if data.startswith(b"\xef\xbb\xbf"):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
    for encoding in ("utf-8", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise InputError(f"{rel_path}: cannot decode as UTF-8 or GB18030 text")


def mostly_control(text: str) -> bool:
    """Binary data that happens to decode (no NUL bytes) is full of control characters."""
    sample = text[:8192]
    return len(_CONTROL.findall(sample)) > max(8, len(sample) // 100)


def normalise_text(text: str) -> str:
    """BOM and CR/CRLF are normalised before anything else so offsets mean one thing."""
    text = text.lstrip("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_from_bytes(data: bytes, rel_path: str, what: str = "Markdown text") -> str:
    """Bytes of a text file -> decoded text, or a one-line InputError naming the file."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{rel_path}: UTF-16 text is not supported; save it as UTF-8")
    if looks_binary(data):
        raise InputError(f"{rel_path}: binary file, not {what}")
    return decode_text(data, rel_path)
