"""Other names of a quantity a question asks for, as financial statements print it.

A question says "capital expenditure"; the cash flow statement's row says "Purchases of property,
plant and equipment" or "Capital spending". Matching a row label with the question's own words
finds no such row. These are the statement names of the quantities analysts ask about most
(GAAP line items and their common abbreviations), not any filer's wording: each asked phrase may
be read as any of its names, and the best-matching row label wins.
"""
from __future__ import annotations

import re

_PPE = "property, plant and equipment"
_CAPEX = (f"purchases of {_PPE}", "capital spending", f"additions to {_PPE}", f"payments for {_PPE}",
          "capital expenditures")
_CFO = ("net cash provided by operating activities", "cash provided by operations",
        "net cash from operating activities")
_COGS = ("cost of sales", "cost of goods sold", "cost of revenue", "cost of products sold")

_DA, _SGA, _RD, _EPS = ("depreciation and amortization", "selling, general and administrative expenses",
                        "research and development expense", "earnings per share")

NAMES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"capital expenditures?|capex", _CAPEX),
    (r"pp&e|ppne|pp and e", (_PPE,)),
    (r"d&a", (_DA,)),
    (r"cogs|cost of goods sold", _COGS),
    (r"sg&a", (_SGA,)),
    (r"r&d", (_RD,)),
    (r"eps", (_EPS,)),
    (r"(?:operating|unadjusted operating) (?:income|profit)", ("operating income", "income from operations",
                                                                "earnings from operations", "operating profit")),
    (r"net income", ("net earnings", "net income attributable")),
    (r"(?:cash (?:flow )?from operations|operating cash flows?|cash flows? from operating activities)", _CFO),
    (r"(?:total )?revenues?", ("net sales", "total revenues", "net revenues")),
    (r"(?:cash )?dividends(?: paid)?", ("cash dividends paid", "dividends paid")),
    (r"inventory", ("inventories",)),
    (r"accounts payable", ("accounts payable", "trade payables")),
)


def _whole(pattern: str) -> re.Pattern[str]:
    """``pattern`` as whole words: "eps" is not in "steps", "r&d" not in "r&dx"."""
    return re.compile(rf"(?<![\w&])(?:{pattern})(?![\w&])", re.I)


_COMPILED = tuple((_whole(pattern), names) for pattern, names in NAMES)


ABBREVIATIONS: tuple[tuple[str, str], ...] = (
    (r"capex", "capital expenditures"),
    (r"pp&e|ppne|pp and e", _PPE),
    (r"d&a", _DA),
    (r"cogs", "cost of goods sold"),
    (r"sg&a", _SGA),
    (r"r&d", _RD),
    (r"eps", _EPS),
)
"""An analyst's abbreviation and the words a filing spells it out in. As a search term the abbreviation
finds little: "PPNE" is no word of any filing, "PP&E" and "R&D" tokenise to letters ("pp", "e"; "r",
"d"), while the note it asks about is titled "Property, Plant and Equipment"."""
_ABBREVIATED = tuple((_whole(pattern), name) for pattern, name in ABBREVIATIONS)


def spelled_out(text: str) -> list[str]:
    """The spelled-out name of each abbreviation ``text`` uses, once each, in table order."""
    return [name for pattern, name in _ABBREVIATED if pattern.search(text)]


def quantity_variants(text: str) -> list[tuple[str, str]]:
    """``text`` with each asked quantity it names replaced by each of its statement names, with the
    phrase it replaced: ``[("what is the FY2018 purchases of property, plant and equipment",
    "capital expenditure"), ...]``. [] when it names none."""
    out: list[tuple[str, str]] = []
    for pattern, names in _COMPILED:
        for m in pattern.finditer(text):
            for name in names:
                variant = text[:m.start()] + name + text[m.end():]
                if variant.lower() != text.lower():
                    out.append((variant, m.group(0)))
    return out


LISTED_NAMES = ("property, plant and equipment", "selling, general and administrative", "research and development",
                "depreciation and amortization", "profit and loss")
"""Line items whose name is a list: one quantity, never the parts of a multi-part question."""
COMPOUND_NAMES = re.compile(
    r"(?<!\w)(?:" + "|".join(r",?\s+".join(map(re.escape, n.replace(",", " ").split())) for n in LISTED_NAMES)
    + r")(?!\w)", re.IGNORECASE)
"""``LISTED_NAMES`` as questions write them ("property, plant, and equipment", "property plant and
equipment"): retrieval/query_plan.py does not split a question inside one."""
