"""The MCP server: TreeRAG's questions, search, documents and sections as tools for an agent.

Built on the official SDK (``mcp.server.mcpserver.MCPServer``); the same server object runs over
stdio (``main.py mcp``) and, mounted at ``/mcp``, over streamable HTTP under ``main.py serve``.
Every tool reads one snapshot of the index and runs in a worker thread, so a long query never
blocks the event loop other clients share. The descriptions are written for the model that reads
them: what each tool is for, what it returns, and how the tools combine.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from server import service
from server.errors import ApiError
from server.state import IndexHolder
from utils.record_json import to_json
from utils.run_record import RetrievedHit
from utils.render import order_of

INSTRUCTIONS = (
    "TreeRAG answers questions from a fixed collection of long documents (papers, manuals, statutes) "
    "and cites the exact passage of each claim. Start with `ask` for a question; use `search` when you "
    "want the ranked passages to write your own answer; `list_documents` and `get_tree` show what the "
    "collection holds and how each document is organised; `get_section` reads a section in full. Quote "
    "the `citation` strings (file:Lstart-Lend or file:pPAGE) when you repeat what a passage says.")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


MCP_TREE_NODES = 500
"""Nodes in one get_tree result: an outline an agent can read in its context, not a collection's
every section (a subtree is one more call, with ``node_id``)."""


def build_mcp(holder: IndexHolder, limits: service.Limits, limiter: anyio.CapacityLimiter,
              version: str, readers: anyio.CapacityLimiter | None = None) -> MCPServer:
    """The MCP server over ``holder``'s index; ``limiter`` bounds the queries running at once,
    ``readers`` the reads of the index (the same limiter when not given)."""
    mcp = MCPServer(name="treerag", title="TreeRAG", version=version, instructions=INSTRUCTIONS,
                    log_level="WARNING")

    async def in_thread(fn: Callable[[], Any], pool: anyio.CapacityLimiter = limiter) -> Any:
        try:
            return await anyio.to_thread.run_sync(fn, limiter=pool)
        except ApiError as exc:
            raise ToolError(exc.message) from None

    async def read(fn: Callable[[], Any]) -> Any:
        return await in_thread(fn, readers or limiter)

    def ask_of(question: str, documents: list[str] | None, top_k: int | None) -> service.Ask:
        body: dict[str, Any] = {"question": question}
        if documents:
            body["documents"] = documents
        if top_k is not None:
            body["top_k"] = top_k
        try:
            return service.parse_ask(body, limits)
        except ApiError as exc:
            raise ToolError(exc.message) from None

    @mcp.tool(annotations=READ_ONLY)
    async def ask(question: str, documents: list[str] | None = None, top_k: int | None = None) -> dict[str, Any]:
        """Answer a question from the indexed documents, with citations.

        Runs TreeRAG's three steps: locate the sections that answer (step 1), retrieve the best
        passages in and around them (step 2), answer from those passages (step 3). Returns
        `answer` (its [N] marks refer to `citations[N-1]`), `evidence_found` (false means the
        documents do not contain the answer: say so rather than guess), `citations` (each with
        `citation` like paper.md:L45-L47 or report.pdf:p12, the section's `heading_path`, the
        passage `text`), and `located_sections`. `documents` limits the question to those document
        paths (as list_documents gives them); `top_k` is how many passages step 2 keeps.
        """
        a = ask_of(question, documents, top_k)
        record = await in_thread(lambda: service.run_query(holder.current(), a, threading.Event()))
        return {"answer": record.answer.text, "evidence_found": record.answer.evidence_found,
                "notice": record.notice, "citations": service.citations(record),
                "located_sections": to_json(record.locate.nodes), "run_id": record.run_id,
                "build_id": record.index.build_id}

    @mcp.tool(annotations=READ_ONLY)
    async def search(question: str, documents: list[str] | None = None, top_k: int | None = None) -> dict[str, Any]:
        """Find the passages that answer a question, without writing an answer.

        Returns `located_sections` (the sections step 1 chose, with scores) and `passages`: ranked
        chunks of document text, each with `citation`, `heading_path`, `doc_path`, `chunk_id`,
        `node_id` and its `score`. Use it to compare sources or quote them yourself; read more of a
        passage's section with get_section(node_id=...).
        """
        a = ask_of(question, documents, top_k)
        r = await in_thread(lambda: service.run_search(holder.current(), a, threading.Event()))
        return {"located_sections": to_json(r.locate.nodes) if r.locate is not None else [], "notice": r.notice,
                "passages": [{"rank": h.rank, "citation": h.citation, "heading_path": h.heading_path,
                              "doc_path": h.doc_path, "chunk_id": h.chunk_id, "node_id": h.node_id,
                              "text": h.text, "score": _score(h)} for h in r.hits],
                "build_id": r.build_id}

    @mcp.tool(annotations=READ_ONLY)
    async def list_documents() -> dict[str, Any]:
        """List the documents in the collection: `path` (what the other tools' `documents` take),
        `title`, `kind` (md, pdf, docx, html, txt), size, and pages for a PDF."""
        return await read(lambda: service.documents(holder.current()))

    @mcp.tool(annotations=READ_ONLY)
    async def get_tree(document: str | None = None, max_depth: int = 3, node_id: str | None = None) -> dict[str, Any]:
        """The section tree (table of contents) of one document, or of all when `document` is not
        given, or below one section (`node_id`): nested nodes with `node_id`, `heading`,
        `heading_path`, `summary` (one line) and `citation` (the section's line or page span).
        Pass a node_id to get_section to read one. `max_depth` cuts deeper levels (1 = top-level
        sections only). At most 500 sections are returned, top levels first: a node with
        `subsections` has children not shown (call get_tree with its node_id to see them), and
        `truncated` says whether anything was left out."""
        if not 1 <= max_depth <= 6:
            raise ToolError("max_depth must be from 1 to 6")
        t = await read(lambda: service.tree(holder.current(), [document] if document else None,
                                            under=node_id, depth=max_depth, max_nodes=MCP_TREE_NODES))
        out = {"build_id": t["build_id"], "sections": [_outline(n) for n in t["nodes"]], "truncated": t["truncated"]}
        if t.get("top_omitted"):
            out["documents_omitted"] = t["top_omitted"]
        return out

    @mcp.tool(annotations=READ_ONLY)
    async def get_section(node_id: str | None = None, heading_path: str | None = None,
                          document: str | None = None) -> dict[str, Any]:
        """Read one section's full text with its citation. Name it by `node_id` (from get_tree,
        search or ask) or by `heading_path` as get_tree shows it, e.g. "3 Methods > 3.3 Training
        Procedure" (add `document` when several documents have that heading). A section with
        subsections returns their text in reading order; very long text is cut (`truncated`)."""
        return await read(lambda: service.section(holder.current(), node_id, heading_path, document))

    return mcp


def _score(hit: RetrievedHit) -> float | None:
    value = hit.scores.get(f"{order_of(hit.scores)}_score")
    return round(float(value), 4) if isinstance(value, (int, float)) else None


def _outline(node: dict[str, Any]) -> dict[str, Any]:
    lines = node.get("lines") or [0, 0]
    pages = node.get("pages")
    where = (f"{node['doc_path']}:p{pages[0]}" + (f"-p{pages[1]}" if pages[1] != pages[0] else "") if pages
             else f"{node['doc_path']}:L{lines[0]}-L{lines[1]}")
    out = {"node_id": node["node_id"], "heading": node["heading"], "heading_path": node["heading_path"],
           "kind": node["kind"], "summary": node.get("summary", ""), "citation": where}
    if node["children"]:
        out["children"] = [_outline(c) for c in node["children"]]
    if node.get("children_omitted"):
        out["subsections"] = node["children_omitted"]
    return out
