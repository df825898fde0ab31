"""Estimated USD cost of an LLM call from its token counts.

Why an estimate and not the bill: providers do not return prices, and they
change them. The table holds list prices (USD per 1M tokens, input/output,
standard tier, no prompt caching) for a handful of models people actually point
TreeRAG at; anything else reports tokens only (cost ``None``) rather than a
made-up number. Local servers (Ollama, llama.cpp, vLLM) serve models under
names that are not in the table, so they correctly show no cost.
"""
from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float


# Keys are model-name prefixes: "claude-sonnet-4-5-20250929" matches "claude-sonnet-4-5".
# Longest prefix wins, so "gpt-4o-mini" is not priced as "gpt-4o".
PRICE_TABLE: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-6": Price(5.00, 25.00),
    "claude-opus-4-5": Price(5.00, 25.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-sonnet-4-6": Price(3.00, 15.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    # OpenAI
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    # DeepSeek (OpenAI-compatible endpoint)
    "deepseek-chat": Price(0.28, 0.42),
}


def price_for(model: str) -> Price | None:
    """The table entry whose key is the longest prefix of ``model``, if any.

    A prefix must end at the end of the name or before a "-" / ":" / "@" so that
    "gpt-4o" does not price a hypothetical "gpt-4oz".
    """
    name = model.strip().lower()
    best: str | None = None
    for key in PRICE_TABLE:
        if name == key or (name.startswith(key) and name[len(key)] in "-:@"):
            if best is None or len(key) > len(best):
                best = key
    return PRICE_TABLE[best] if best is not None else None


def estimate_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """USD for one call, or None when the model's price is unknown."""
    price = price_for(model)
    if price is None:
        return None
    return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1_000_000
