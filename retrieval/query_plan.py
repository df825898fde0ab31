"""What kind of question this is, and how the answer step should spend its reading budget.

A person reads differently for different questions: "what is this paper about" wants the
section summaries and a little of everything; "how many epochs" wants one paragraph read
closely; "which datasets and which metrics" wants each part found in its own section. The
analyser is rules only (no model, microseconds), so its decision is cheap, deterministic and
shown in step 1 and the run record:

- **overview**: asks for the gist of a document (``what is this paper about``, ``summarise``,
  ``main contributions``, ``主要内容``, ``概述``) -> breadth: no leaf may take more than a quarter
  of the context, and hits are read as short units (a sixth of the budget);
- **multi-part**: two or more parts joined by a conjunction, list or comparison (``X and Y``,
  ``X, Y and Z``, ``X compared with Y``, ``X和Y``, ``X以及Y``, ``X、Y``), each with words of its
  own -> spread: each part gets its own sub-query, the budget is shared over the parts, and hits
  are read as short units. Over several documents such a question is read as a detail question
  (``read_as_one``);
- **detail**: everything else -> depth: the best section may take most of the budget, and each hit
  is read as a larger unit (a third of the budget: its paragraph, or a good part of it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from retrieval.asked_figure import without_periods
from retrieval.quantity_names import COMPOUND_NAMES
from utils.tokenizer import jieba_words, tokenize

Route = Literal["overview", "detail", "multi-part"]

_OVERVIEW_EN = re.compile(
    r"\b(?:what\s+(?:is|are)\s+(?:this|the)\s+(?:paper|article|document|report|study|book|chapter|work)s?\s+about"
    r"|summar(?:ise|ize)\b(?!\s+(?:graph|generation|model|length)s?)|(?:summary|overview)\s+of\s+(?:this|the)\s+(?:paper|article|document|report|study)"
    r"|gist|in\s+a\s+nutshell|tl;?dr"
    r"|main\s+(?:idea|contribution|finding|point|topic|result|takeaway)s?"
    r"|key\s+(?:idea|contribution|finding|point|takeaway)s?)\b", re.IGNORECASE)
_OVERVIEW_ZH = re.compile(r"主要内容|主要讲|讲了什么|讲的是什么|概述|概括|总结|大意|要点|核心思想|主要贡献|主要观点|主旨")
_SPLIT_EN = re.compile(
    r"\s*(?:,\s*(?:and|or)\s+|\s+and\s+|\s+or\s+|\s+as\s+well\s+as\s+|\s+versus\s+|\s+vs\.?\s+"
    r"|\s+compared\s+(?:to|with)\s+|\s+in\s+contrast\s+to\s+)\s*", re.IGNORECASE)
_LIST_COMMA_EN = re.compile(r",\s*(?=(?:[^\s,]+\s+){0,3}?[^\s,]+\s*(?:,|\s(?:and|or)\s))", re.IGNORECASE)
"""A comma before a short list item followed by another comma or "and"/"or" ("X, Y and Z");
other commas join clauses."""
_SPLIT_ZH = frozenset({"和", "与", "及", "以及", "跟", "或", "或者", "还是", "、"})
"""Conjunctions and the enumeration comma, as jieba's own words (so 合同 or 和解 never split)."""

_COMMA, _SPACE = "\u2063", "\u2060"
"""Invisible stand-ins for the commas and spaces of a guarded line-item name while a question is split."""

DETAIL_LEAF_SHARE = 0.7
OVERVIEW_LEAF_SHARE = 0.25
WIDE_UNITS_PER_BUDGET = 6
"""Reading units per context budget for a multi-part or overview question: many short pieces, so
every part or section is read; a detail question reads fewer, larger ones (ContextParams in
retrieval/types.py)."""


@dataclass(frozen=True)
class QueryPlan:
    route: Route
    aspects: tuple[str, ...]
    """The parts of a multi-part question (each a sub-query); the question alone otherwise."""
    reason: str
    """One line: why this route (shown in step 1 and kept in the run record)."""

    def leaf_share(self, default: float) -> float:
        """The most of the context budget one leaf may take before other leaves' hits are read."""
        if self.route == "overview":
            return min(default, OVERVIEW_LEAF_SHARE)
        if self.route == "multi-part":
            return min(default, max(1.0 / (len(self.aspects) + 1), OVERVIEW_LEAF_SHARE))
        return max(default, DETAIL_LEAF_SHARE)

    def units_per_budget(self, default: int) -> int:
        """Into how many reading units the context budget is cut: ``default`` (few, large units) for a
        detail question, at least WIDE_UNITS_PER_BUDGET for one that wants breadth."""
        return default if self.route == "detail" else max(default, WIDE_UNITS_PER_BUDGET)

    def to_dict(self) -> dict[str, object]:
        return {"route": self.route, "aspects": list(self.aspects), "reason": self.reason}


def _parts(query: str) -> list[str]:
    text = query.strip().rstrip("?？。.!！")
    if re.search(r"[\u4e00-\u9fff]", text):
        parts, cur = [], []
        for word in jieba_words(text):
            if word in _SPLIT_ZH:
                parts.append("".join(cur))
                cur = []
            else:
                cur.append(word)
        parts.append("".join(cur))
    else:
        # a line item named by a list ("property, plant and equipment") is one thing: its commas and
        # "and" are hidden from the split and given back after it
        guarded = COMPOUND_NAMES.sub(lambda m: m.group().replace(",", _COMMA).replace(" ", _SPACE), text)
        parts = [q.replace(_COMMA, ",").replace(_SPACE, " ")
                 for chunk in _LIST_COMMA_EN.split(guarded) for q in _SPLIT_EN.split(chunk)]
    return [p.strip(" ，,") for p in parts if p and p.strip(" ，,")]


def aspects_of(query: str) -> list[str]:
    """The question's parts that carry words of their own (a part of stop-words only is glue).

    Each part must add a content word no earlier part has, so "precision and recall" splits
    but "the model and the model's size" does not double-count its head. A year or fiscal period is
    no word of its own: "how did the tax rate change between FY2021 and FY2022" asks one thing of
    two periods, and "FY2022" searched alone is no question.
    """
    seen: set[str] = set()
    out: list[str] = []
    for part in _parts(query):
        words = set(tokenize(without_periods(part)))
        if words - seen:
            out.append(part)
            seen |= words
    return out


def plan_query(query: str, routing: bool = True) -> QueryPlan:
    """The route of ``query``; with ``routing`` off, every question is a detail question."""
    if not routing:
        return QueryPlan("detail", (query,), "query routing is off")
    if _OVERVIEW_EN.search(query) or _OVERVIEW_ZH.search(query):
        return QueryPlan("overview", (query,), "asks for the gist of the document")
    parts = aspects_of(query)
    if len(parts) >= 2:
        return QueryPlan("multi-part", tuple(parts), f"{len(parts)} parts joined by a conjunction or list")
    return QueryPlan("detail", (query,), "one question about one thing")


def read_as_one(plan: QueryPlan, query: str, n_documents: int) -> QueryPlan:
    """A multi-part question over several documents, planned as one detail question.

    Within one document every part is searched in the text the question is about, and the parts'
    own hits give each part its share of the reading. Across a collection a part searched alone is a
    fragment of the question matched anywhere ("法人" of "法人、非法人组织的简称"), while the evidence
    of such a question lies as concentrated as any other's: on the statutes 306 of 1,234 questions are
    split, with no more evidence items than the rest, and their parts' hits, taking turns with the
    whole question's and capping a leaf at a part's share, pushed evidence the whole question ranks
    out of the first 2,000 characters (docs/evaluation.md)."""
    if plan.route != "multi-part" or n_documents <= 1:
        return plan
    return QueryPlan("detail", (query,), f"{len(plan.aspects)} parts, but over {n_documents} documents: "
                     "read as one question")
