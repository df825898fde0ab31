"""Tokenisation for BM25 and token-budget estimates.

CONTRACT (BM25 tokenizer implementation pending):
    tokenize(text: str) -> list[str]

estimate_tokens is final: other modules (summary length rule, TOC budget) use it.
"""
from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
_WORD = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


def estimate_tokens(text: str) -> int:
    """Rough LLM token count without loading a tokenizer.

    CJK characters cost about one token each in current LLM tokenizers, Latin
    words about 1.3 (sub-word splits), punctuation one. Good to ~15%, which is
    all a budget needs.
    """
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text)
    words = 0
    other = 0
    for m in _WORD.finditer(rest):
        if m.group(0)[0].isalnum() or m.group(0)[0] == "_":
            words += 1
        else:
            other += 1
    return cjk + int(round(words * 1.3)) + other
