"""How deep a request's JSON may nest, checked before it is parsed.

``json.loads`` recurses once per level: 30,000 ``[`` fit in a 64 KB body and end in a
``RecursionError`` deep inside the parser. No request of this API nests more than a few levels, so
a body nested deeper than ``MAX_JSON_DEPTH`` is refused with 400 before the parser sees it.
"""
from __future__ import annotations

import re

MAX_JSON_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``body``'s arrays and objects nest more than ``limit`` deep (brackets inside
    strings do not count). Linear in the body's size, no recursion."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', body)):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def is_unicode(text: str) -> bool:
    """False for a string JSON may carry but no UTF-8 text can (a lone surrogate, ``"\\ud800"``):
    it could be neither searched, recorded nor sent back."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
