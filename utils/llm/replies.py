"""Reading the JSON object a model's reply carries, whatever surrounds it.

Small models fence their JSON, wrap it in prose, or open several braces before the real object.
Every caller that asks a model for JSON (the LLM locator, the knowledge-graph extractor) reads the
reply through this one parser, so they survive the same mess in the same way.
"""
from __future__ import annotations

import json
import re
from typing import Any


def strip_fences(text: str) -> str:
    """The body of the first ```json fenced block, or ``text`` when there is none."""
    m = re.search(r"```(?:json|JSON)?\s*\n?(.*?)```", text, re.S)
    return m.group(1) if m else text


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that parses, fenced or surrounded by prose."""
    text = strip_fences(text)
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None
