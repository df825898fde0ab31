"""Which characters count as Chinese, Japanese or Korean: one definition for every stage.

Three questions are asked of text, and each has its own set, named for it:
- is it written in Chinese (the answer's language): Han ideographs;
- does it use CJK letters (no spaces between words, one token per character): Han, kana, Hangul;
- may two lines be joined without a space (PDF line breaks): those letters plus CJK
  punctuation, radicals and full-width forms.
"""
from __future__ import annotations

import re

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_LETTERS = _HAN + "\u3040-\u30ff\uac00-\ud7af"
_WIDE = _LETTERS + "\u2e80-\u2fff\u3000-\u303f\uff00-\uffef"

HAN = re.compile(f"[{_HAN}]")
CJK_LETTER = re.compile(f"[{_LETTERS}]")
CJK_WIDE = re.compile(f"[{_WIDE}]")


def has_han(text: str) -> bool:
    return HAN.search(text) is not None


def has_cjk(text: str) -> bool:
    return CJK_LETTER.search(text) is not None


def is_wide(ch: str) -> bool:
    """A character after or before which a line break is not a word break."""
    return CJK_WIDE.fullmatch(ch) is not None
