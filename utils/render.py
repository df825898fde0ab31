"""The spec's terminal format, rendered from a run record.

Rendering reads only the ``RunRecord`` (not live pipeline objects), so ``show RUN_ID`` prints a
logged run, read back from the log, exactly as ``query`` printed it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from utils.oneline import one_line
from utils.run_record import ContextRecord, GraphRecord, RunRecord

if TYPE_CHECKING:
    from utils.run_log import RunSummary

RULE = "=" * 60
EXCERPT_CHARS = 120
CONTEXT_EXCERPT_CHARS = 80

#: ANSI/VT escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte ESC codes), in 7- and 8-bit form.
_ESCAPE_SEQ = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
                         r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
                         r"|\x1b[ -/]*[0-~]?")
#: Other control characters (C0 but newline and tab, DEL, C1) and bidirectional overrides/isolates.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile(r"[\udc80-\udcff]")
"""An undecodable byte of a file name (Python's surrogate escape): printed as the text ``\\xNN``,
never as the raw byte (not UTF-8) nor as a lone surrogate (not Unicode)."""


def _byte_text(m: "re.Match[str]") -> str:
    return f"\\x{ord(m.group(0)) - 0xDC00:02x}"


_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")

TRUNCATED_NOTE = "[answer cut short: the LLM stopped at its token limit]"

ORDER_LEGEND = {
    "rerank": "rerank (cross-encoder)",
    "section": "section (the chunk's and its section's evidence, learned weights)",
    "union": "union (dense + BM25 across leaves + leaf prior)",
    "fused": "fused (dense + BM25 within each leaf)",
}
ORDER_SCORES = (("rerank", "rerank_score"), ("section", "section_score"), ("union", "union_score"))
"""Which score ordered a step-2 list, read off its first hit's scores (the first present wins)."""


def order_of(scores: Mapping[str, object]) -> str:
    return next((name for name, key in ORDER_SCORES if key in scores), "fused")


def terminal_safe(text: str) -> str:
    """Text a document supplied, made harmless for a terminal.

    Escape sequences are removed whole (an ESC alone would leave ``[31m``
    behind); other control characters are dropped, tabs become spaces,
    carriage returns (which would overwrite the line) are dropped. Newlines stay.
    """
    text = _ESCAPE_SEQ.sub("", _SURROGATE.sub(_byte_text, text))
    return _CONTROL.sub("", text.replace("\t", "    "))


def json_safe(dumped: str) -> str:
    """A ``json.dumps(..., ensure_ascii=False)`` string with the characters it leaves raw but a terminal
    would act on (DEL, C1 controls, bidi overrides, line separators) written as ``\\uXXXX`` escapes.
    Such characters only occur inside JSON strings, so the result is the same JSON value."""
    dumped = _SURROGATE.sub(lambda m: "\\" + _byte_text(m), dumped)  # "\\xff" in JSON is the text \xff
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", dumped)


_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def shown_text(text: str) -> str:
    """Document text as a person reads it: HTML comments (an author's notes in Markdown) left out.
    Only the display drops them; the result's text and offsets stay the document's."""
    return _HTML_COMMENT.sub("", text)


def _excerpt(text: str) -> str:
    flat = " ".join(shown_text(text).split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rstrip() + "..."


def _fmt(x: object) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else str(x)


def _fallback_lines(record: RunRecord, step: str) -> list[str]:
    return [f"Fallback: {f.reason} -> used {f.used}" for f in record.fallbacks if f.step == step]


def render_result(record: RunRecord) -> str:
    """The spec's layout; everything a document (or a model) wrote passes ``terminal_safe``."""
    return terminal_safe(_render(record))


def _render(record: RunRecord) -> str:
    out: list[str] = [RULE, f"Query: {record.query}", RULE, ""]
    if record.notice:
        out += [record.notice, RULE]
        return "\n".join(out)

    step1 = record.locate
    out.append(">>> Step 1: Node Locating")
    out.append(f"Thinking: {step1.thinking}")
    route = step1.route
    if route is not None:  # runs logged before query routing have none
        shown = f" — parts: {' | '.join(route.aspects)}" if route.route == "multi-part" else ""
        out.append(f"Route: {route.route} ({route.reason}){shown}")
    out += _fallback_lines(record, "locate")
    out.append(f"Located {len(step1.nodes)} leaf nodes:")
    for n in step1.nodes:
        out.append(f"  [{n.node_id}] {n.heading_path}")
        out.append(f"    sub_query: \"{n.sub_query}\"")
    out.append("")

    hits = record.retrieve.hits
    from_nodes = len({h.node_id for h in hits})
    out.append(">>> Step 2: Hybrid Retrieval + Rerank")
    out += _fallback_lines(record, "rerank")
    out.append(f"Retrieved {len(hits)} chunks (from {from_nodes} nodes):")
    order = record.retrieve.order or (order_of(hits[0].scores) if hits else "fused")
    if hits:
        out.append(f"  ordered by {ORDER_LEGEND.get(order, order)}, the last score on each line")
    for h in hits:
        s = h.scores
        net = "  [safety net]" if h.source == "net" else ""
        out.append(f"  #{h.rank} [{h.node_id}] {h.heading_path}  ({h.citation}){net}")
        out.append(f"     \"{_excerpt(h.text)}\"")
        parts = [f"dense={_fmt(s.get('dense_score'))}", f"bm25={_fmt(s.get('bm25_score'))}",
                 f"fused={_fmt(s.get('fused_score'))}"]
        for name in ("section", "union"):
            if order == name and f"{name}_score" in s:
                parts.append(f"{name}={_fmt(s[f'{name}_score'])}")
        if "rerank_score" in s:
            parts.append(f"rerank={_fmt(s['rerank_score'])}")
        if "graph_score" in s:
            parts.append(f"graph={_fmt(s['graph_score'])}" + (" (lifted by the graph)" if s.get("graph_lifted") else ""))
        out.append("     " + "  ".join(parts))
        out.append("")

    out += _graph_lines(record.retrieve.graph)
    out += _context_lines(record.context, bool(hits))
    out.append(">>> Step 3: Answer")
    out += _fallback_lines(record, "synthesis")
    out.append(record.answer.text)
    if record.answer.truncated:
        out.append(TRUNCATED_NOTE)
    out.append(footer(record))
    out.append(RULE)
    return "\n".join(out)


def _graph_lines(graph: list[GraphRecord]) -> list[str]:
    """The subgraph the graph channel used in each located long leaf, its paths citing chunks."""
    if not graph:
        return []
    out = [">>> Graph channel (long-leaf graphs)"]
    for g in graph:
        seeds = ", ".join(g.seeds) or "none: no node of the leaf matched the question"
        out.append(f"  [{g.leaf}] {g.heading_path}")
        out.append(f"    seeds: {one_line(shown_text(seeds), 200)}")
        for p in g.paths:
            line = f"{p.head} -[{p.relation}]-> {p.tail}"
            out.append(f"    {one_line(shown_text(line), 160)}  ({', '.join(p.chunks)})")
        if g.added:
            out.append(f"    added to the leaf's candidates: {', '.join(g.added)}")
    out.append("")
    return out


def _context_lines(ctx: ContextRecord, had_hits: bool) -> list[str]:
    """What step 3 read, numbered: the answer's [N] is passage N here. Runs logged before context
    assembly carry no context (budget 0) and print as they did."""
    if not ctx.budget and not ctx.passages:
        return []
    passages = ctx.passages
    n = len(passages)
    out = [f">>> Context: {n} passage{'' if n == 1 else 's'}, {ctx.used} of {ctx.budget} "
           f"characters (from {ctx.hits_read} hits)"]
    for i, p in enumerate(passages, 1):
        out.append(f'  [{i}] {p.heading_path}  ({p.citation})  "{one_line(shown_text(p.text), CONTEXT_EXCERPT_CHARS)}"')
    if not passages and had_hits:
        out.append("  no passage could be read: the answer reads step 2's chunks ([N] is #N)")
    out.append("")
    return out


def footer(record: RunRecord) -> str:
    steps = " ".join(f"{k}={v:.0f}ms" for k, v in record.timing_ms.items())
    llm = record.providers.llm
    llm_name = llm.provider + (f":{llm.model}" if llm.model else "")
    if llm.failed and not llm.answered:
        llm_name += " (did not answer: fallback used)"
    elif llm.failed:
        llm_name += " (failed once: fallback used)"
    rr = record.providers.reranker
    if rr.name != "none":
        llm_name += f" | reranker={rr.name}" + ("" if rr.answered else " (failed: fused order)")
    u = record.usage
    cost = u.cost_usd
    cost_s = f" ${cost:.4f}" if cost else ""
    # a run that was not recorded has no id `show` could find: say so instead of printing one
    run = f"run {record.run_id[:8]}" if record.logged else "not logged"
    return f"[{steps} | llm={llm_name} tokens={u.tokens}{cost_s} | {run}]"


def render_history(rows: "list[RunSummary]") -> str:
    if not rows:
        return "no runs recorded yet"
    lines = []
    for r in rows:
        q = " ".join(r.query.split())
        q = q if len(q) <= 60 else q[:57] + "..."
        ms = f"{r.total_ms:.0f}ms" if r.total_ms is not None else "-"
        lines.append(f"{r.run_id[:12]}  {r.created_at}  {ms:>7}  {q}")
    return terminal_safe("\n".join(lines))
