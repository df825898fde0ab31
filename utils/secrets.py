"""Passwords written into URIs never reach a terminal, a log or a JSON record.

A seekdb URI may carry ``USER:PASSWORD@``; every message that could quote one (a malformed
``--store``, an error from deep inside) goes through ``redact_secrets`` before it is printed.
"""
from __future__ import annotations

import re

_SCHEME_URI = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>\S*)")
_PLACEHOLDER = "USER[:PASS]"
"""How help and error text spell the form of a URI: not a secret."""


def _redact_rest(rest: str) -> str:
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        colon = userinfo.find(":")
        if colon < 0 or userinfo == _PLACEHOLDER:
            return rest
        return userinfo[:colon + 1] + "***" + rest[at:]
    end = len(rest)
    for stop in "/?#":
        pos = rest.find(stop)
        if pos >= 0:
            end = min(end, pos)
    netloc = rest[:end]
    colon = netloc.find(":")
    if colon >= 0 and not netloc[colon + 1:].isdigit():
        return netloc[:colon + 1] + "***" + rest[end:]
    return rest


def redact_uri(uri: str) -> str:
    """One URI (the whole string, however malformed) with its password replaced by ``***``."""
    head, sep, rest = uri.partition("://")
    return head + sep + _redact_rest(rest) if sep else _redact_rest(uri)


def redact_secrets(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` replaced by ``***``."""
    return _SCHEME_URI.sub(lambda m: m.group("head") + _redact_rest(m.group("rest")), text)
