"""Bottom-up node summaries: a leaf from its content, a parent from its children.

The summaries are what the node locator reads instead of the text (the spec:
"不放 content 原文，只放 summary"), so each must be one line and short. The
default is extractive and needs no model; an LLM summariser plugs in through
the ``Summarizer`` protocol (its answers are kept by the LLM response cache,
keyed by prompt, so re-indexing unchanged sections costs nothing).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Collection, Protocol, runtime_checkable

from tree_builder.summary_params import SummaryParams
from utils.errors import BackendError
from utils.oneline import one_line
from utils.tokenizer import estimate_tokens

if TYPE_CHECKING:
    from tree_builder.tree import TreeNode


class Settings(Protocol):
    """What summarising reads of the settings: config.Config has it (config.py composes SummaryParams, so
    this module cannot import config)."""

    @property
    def summary_mode(self) -> str: ...

    @property
    def tuning(self) -> Any: ...


# --------------------------------------------------------------------------- text cleaning

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>")
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\](?:\([^)]*\)|\[[^\]]*\])")
_LINE_PREFIX = re.compile(r"^\s{0,3}(?:#{1,6}(?=\s|$)|>+|[-*+](?=\s)|\d{1,9}[.)](?=\s))\s*")
_CLOSING_HASHES = re.compile(r"\s+#+\s*$")
_RULE = re.compile(r"^\s*(?:(?:[-*_]\s*){3,}|=+|:?-{3,}:?(?:\s*\|\s*:?-{3,}:?)*\s*\|?)\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~<>])")
_STARS_TICKS = re.compile(r"[*`]+")
_UNDERSCORE_EMPH = re.compile(r"(?<!\w)_+|_+(?!\w)")  # not the one in snake_case
_WS = re.compile(r"\s+")


def _clean_block(block: str) -> str:
    lines: list[str] = []
    for line in block.split("\n"):
        if _TABLE_SEP.match(line) or _RULE.match(line):
            continue
        line = _LINE_PREFIX.sub("", line)
        if line.endswith("#"):
            line = _CLOSING_HASHES.sub("", line)
        lines.append(line.replace("|", " "))
    text = " ".join(lines)
    text = _AUTOLINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _ESCAPE.sub(lambda m: "\x00" + m.group(1), text)  # protect escaped marks
    text = _STARS_TICKS.sub("", text).replace("~~", "")
    if "_" in text:
        text = _UNDERSCORE_EMPH.sub("", text)
    return " ".join(text.replace("\x00", "").split())


def markdown_blocks(text: str, limit: int | None = None) -> list[str]:
    """Markdown -> plain-text blocks (paragraph, list item run, …); code and comments dropped.

    A block boundary is also a sentence boundary: a heading line kept as text
    (deeper than the depth cap) must not run into the paragraph after it.
    ``limit``: stop once this many characters of plain text are collected (a
    summary needs the beginning of a section, not all of it).
    """
    text = _COMMENT.sub("\n", text)
    out: list[str] = []
    total = 0
    current: list[str] = []
    fence: str | None = None

    def flush(block: str) -> bool:
        nonlocal total
        if limit is not None:  # cleaning only removes characters: 3x what is missing is plenty
            block = block[: 3 * (limit - total) + 200]
        cleaned = _clean_block(block)
        if cleaned:
            out.append(cleaned)
            total += len(cleaned) + 1
        return limit is not None and total > limit

    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            line = ""
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and _LINE_PREFIX.match(line)):
            if current and flush("\n".join(current)):
                return out
            current = []
            if stripped and flush(line):
                return out
            continue
        current.append(line)
    if current:
        flush("\n".join(current))
    return out


# --------------------------------------------------------------------------- sentences

_SENT_END = re.compile(r"[。！？；!?]+[”’」』）)\]\"']*|\.[”’」』）)\]\"']*(?=\s|$)|…+(?=\s|$)")
_ABBREVIATIONS = frozenset(
    "e.g i.e et al al fig figs eq eqs vs cf dr mr mrs ms no nos sec secs ref refs approx resp "
    "viz incl st jr prof tab ch vol pp ca".split()
)
_CJK_PUNCT_END = re.compile(r"[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20”’]$")


def split_sentences(text: str) -> list[str]:
    """CJK-aware: 。！？； always end a sentence; . ! ? only before a space or the end."""
    out: list[str] = []
    start = 0
    for m in _SENT_END.finditer(text):
        if m.group(0).startswith("."):
            word_start = max(start, text.rfind(" ", start, m.start()) + 1)
            word = text[word_start:m.start()].lstrip("([{\"'“‘").lower()
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        sentence = text[start:m.end()].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _join(parts: list[str]) -> str:
    """No space after CJK punctuation (。，；…), one space otherwise."""
    out = ""
    for part in parts:
        if out and not _CJK_PUNCT_END.search(out):
            out += " "
        out += part
    return out


def truncate(text: str, max_chars: int) -> str:
    """Cut to ``max_chars`` (ellipsis included), at a word boundary when one is near."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return "…"[:max_chars]
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space >= int(max_chars * 0.6):
        cut = cut[:space]
    return cut.rstrip(" ,;:，；：、…") + "…"


def pack_sentences(sentences: list[str], max_chars: int) -> str:
    """Leading whole sentences that fit; the first one truncated if even it does not."""
    chosen: list[str] = []
    for sentence in sentences:
        candidate = _join(chosen + [sentence])
        if len(candidate) > max_chars:
            break
        chosen.append(sentence)
    if not chosen:
        return truncate(sentences[0], max_chars) if sentences else ""
    return _join(chosen)


def fair_pack(parts: list[str], max_chars: int, min_share: int = 40) -> str:
    """Every part gets an equal share of ``max_chars`` (unused share goes to the others).

    A parent's summary should say what *all* its children cover, not spend the
    whole line on the first child; a share below ``min_share`` says nothing, so
    with many children only the first ``max_chars // min_share`` are used.
    """
    parts = [p for p in parts if p][: max(1, max_chars // min_share)]
    if not parts:
        return ""
    budget = max_chars - (len(parts) - 1)  # one separator between parts
    alloc = [0] * len(parts)
    remaining = budget
    order = sorted(range(len(parts)), key=lambda i: len(parts[i]))
    for rank, i in enumerate(order):
        share = remaining // (len(parts) - rank)
        alloc[i] = min(len(parts[i]), share)
        remaining -= alloc[i]
    out = _join([truncate(p, a) for p, a in zip(parts, alloc)])
    return out if len(out) <= max_chars else truncate(out, max_chars)


# --------------------------------------------------------------------------- summarisers

@runtime_checkable
class Summarizer(Protocol):
    summarizer_id: str
    """Changes whenever the output would change (model, prompt, settings): part of cache keys."""

    def summarize_leaf(self, node: TreeNode) -> str: ...

    def summarize_parent(self, node: TreeNode, child_summaries: list[str]) -> str: ...


class ExtractiveSummarizer:
    """No model: short sections speak for themselves, long ones by their first sentences."""

    def __init__(self, max_chars: int = 160, short_section_tokens: int = 200) -> None:
        self.max_chars = max_chars
        self.short_section_tokens = short_section_tokens
        self.summarizer_id = f"extractive-v1:{max_chars}:{short_section_tokens}"

    @classmethod
    def of(cls, params: SummaryParams) -> "ExtractiveSummarizer":
        return cls(params.summary_max_chars, params.short_section_tokens)

    def _is_short(self, text: str) -> bool:
        limit = self.short_section_tokens
        if len(text) * 1.3 < limit:  # no character costs more than 1.3 tokens
            return True
        # A token rarely spans more than ~8 characters, so a prefix decides; every
        # whitespace-separated piece costs at least one token, a C-speed lower bound.
        prefix = text[: limit * 8]
        if len(prefix.split()) >= limit:
            return False
        return estimate_tokens(prefix) < limit

    def summarize_leaf(self, node: TreeNode) -> str:
        content = node.content
        window = max(4000, self.max_chars * 25)
        limit = self.max_chars * 2
        blocks = markdown_blocks(content[:window], limit)
        if not blocks and len(content) > window:  # e.g. a long code block first
            blocks = markdown_blocks(content, limit)
        if not blocks:
            return ""
        if self._is_short(content):
            # PageIndex: a short section is its own best summary (as much as fits).
            return truncate(_join(blocks), self.max_chars)
        sentences = [s for b in blocks for s in split_sentences(b)]
        return pack_sentences(sentences, self.max_chars)

    def summarize_parent(self, node: TreeNode, child_summaries: list[str]) -> str:
        firsts = [split_sentences(s)[0] for s in child_summaries if s.strip()]
        return fair_pack(firsts, self.max_chars)


def summarize_tree(root: TreeNode, config: Settings, summarizer: Summarizer | None = None,
                   keep: Collection[str] = frozenset(), save: bool = True) -> None:
    """Fill ``summary`` of every node below the synthetic root, children before parents.

    Nodes whose id is in ``keep`` already hold a summary lent by a previous index (an update).
    ``save``: let the summariser save what it keeps (a build that summarises a batch of documents
    at a time saves once, at its end).
    """
    if summarizer is None:
        if config.summary_mode != "extractive":
            raise BackendError(f"summary_mode={config.summary_mode!r} needs a summariser "
                               "(none was configured)")
        summarizer = ExtractiveSummarizer.of(config.tuning.summary)
    # Iterative post-order: children are always summarised before their parent.
    order = [n for n in root.iter_preorder() if n.kind != "root" and n.node_id not in keep]
    try:
        for node in reversed(order):
            if node.is_leaf:
                node.summary = one_line(summarizer.summarize_leaf(node))
            else:
                node.summary = one_line(
                    summarizer.summarize_parent(node, [c.summary for c in node.children]))
    finally:
        if save:
            save_summaries(summarizer)


def save_summaries(summarizer: Summarizer | None) -> None:
    """Let a summariser that keeps its answers (a cache) write them out."""
    save = getattr(summarizer, "save", None)
    if callable(save):
        save()
