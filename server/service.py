"""What the server does, once for every door (JSON routes, the event stream, MCP tools).

Each operation takes the ``Snapshot`` its request started with. A query returns its typed
``RunRecord`` (``TreeRAG.run``; the routes send ``to_dict()``, exactly ``query --json``); a search
its ``SearchResult`` of the same step records; the other answers are plain JSON values built from
the same pieces the CLI prints (``tree_builder.visualizer.tree_dict``).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pipeline import (Backends, StepHook, citation, locate_step, ordering_score, query_budget, retrieved_hit,
                      run_retrieval)
from server.errors import ApiError, ClientGone
from server.request_json import is_unicode
from server.security import shown
from server.state import Snapshot
from indexing.node_table import first_children
from tree_builder.tree import TreeNode
from tree_builder.visualizer import node_dict
from utils.errors import InputError
from utils.record_json import to_json
from utils.run_record import FallbackRecord, LocateStep, RetrievedHit, RunRecord
from utils.tokenizer import is_stopword_only

MAX_SECTION_CHARS = 20_000
"""A section asked for whole (a chapter of a statute, an MCP client's get_section) is cut here and
says so: a client asking for the root of a 276-paper index must not receive megabytes."""


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; larger is refused with a 4xx and one message."""

    max_body_bytes: int = 64 * 1024
    max_question_chars: int = 2_000
    max_top_k: int = 100
    max_documents: int = 1_000


@dataclass(frozen=True)
class Ask:
    """One question as a client sent it, checked."""

    question: str
    documents: list[str] | None = None
    top_k: int | None = None
    llm: bool = True


def parse_ask(body: Any, limits: Limits) -> Ask:
    """The body of /api/query and /api/search (or an MCP tool's arguments) as an ``Ask``."""
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object such as {\"question\": \"...\"}")
    unknown = sorted(set(body) - {"question", "documents", "top_k", "llm"})
    if unknown:
        raise ApiError(400, f"unknown field(s): {', '.join(unknown)} (allowed: question, documents, top_k, llm)")
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ApiError(400, "question must be a non-empty string")
    if not is_unicode(question):
        raise ApiError(400, "question is not valid Unicode (it holds a lone surrogate such as \\ud800)")
    if len(question) > limits.max_question_chars:
        raise ApiError(413, f"question is {len(question):,} characters; the limit is {limits.max_question_chars:,}")
    documents = body.get("documents")
    if documents is not None:
        if not isinstance(documents, list) or not all(isinstance(d, str) and d for d in documents):
            raise ApiError(400, "documents must be a list of document paths as /api/documents lists them")
        if not all(is_unicode(d) for d in documents):
            raise ApiError(400, "documents holds a name that is not valid Unicode (a lone surrogate)")
        if len(documents) > limits.max_documents:
            raise ApiError(413, f"documents names {len(documents):,} documents; the limit is {limits.max_documents:,}")
    top_k = body.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or not 1 <= top_k <= limits.max_top_k):
        raise ApiError(400, f"top_k must be an integer from 1 to {limits.max_top_k}")
    llm = body.get("llm", True)
    if not isinstance(llm, bool):
        raise ApiError(400, "llm must be true or false")
    return Ask(question.strip(), documents or None, top_k, llm)


def _check_documents(documents: list[str] | None, snapshot: Snapshot) -> set[str] | None:
    if documents is None:
        return None
    known = snapshot.index.doc_rows
    unknown = [d for d in documents if d not in known]
    if unknown:
        raise ApiError(400, f"not a document of the index: {', '.join(shown(d) for d in unknown[:3])} "
                            "(see /api/documents)")
    return set(documents)


def guarded(cancel: threading.Event, on_step: StepHook | None) -> StepHook:
    """A step hook that ends the query when its client has gone (``cancel`` set)."""
    def hook(step: str, part: dict[str, Any]) -> None:
        if cancel.is_set():
            raise ClientGone(step)
        if on_step is not None:
            on_step(step, part)
    return hook


def run_query(snapshot: Snapshot, ask: Ask, cancel: threading.Event,
              on_step: StepHook | None = None) -> RunRecord:
    """The three steps: ``query --json``'s record, logged like a CLI query when the server logs."""
    _check_documents(ask.documents, snapshot)
    rag = snapshot.with_options(top_k=ask.top_k, llm=ask.llm)
    try:
        return rag.run(ask.question, ask.documents, on_step=guarded(cancel, on_step))
    except InputError as exc:
        raise ApiError(400, str(exc)) from None


@dataclass
class SearchResult:
    """Steps 1 and 2 of a question (no context, no answer), from the run record's own step records."""

    query: str
    build_id: str
    notice: str | None = None
    locate: LocateStep | None = None
    """None when the question never reached step 1 (stop-words only)."""
    hits: list[RetrievedHit] = field(default_factory=list)
    order: str | None = None
    fallbacks: list[FallbackRecord] = field(default_factory=list)
    timing_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The /api/search body: the run record's keys for these steps."""
        out: dict[str, Any] = {"query": self.query, "notice": self.notice, "index": {"build_id": self.build_id}}
        if self.locate is None:
            out["step2_retrieved"] = []
            return out
        out.update(to_json(self.locate))
        out.update({"step2_retrieved": to_json(self.hits), "step2_order": self.order,
                    "fallbacks": to_json(self.fallbacks), "timing_ms": dict(self.timing_ms)})
        return out


def run_search(snapshot: Snapshot, ask: Ask, cancel: threading.Event) -> SearchResult:
    """Steps 1 and 2 only (no context, no answer): what a client that writes its own answer needs."""
    doc_paths = _check_documents(ask.documents, snapshot)
    rag = snapshot.with_options(top_k=ask.top_k, llm=ask.llm)
    out = SearchResult(query=ask.question, build_id=snapshot.build_id)
    if is_stopword_only(ask.question):
        out.notice = "The question has only stop-words or punctuation: nothing to search for."
        return out
    t = time.perf_counter()
    backends = Backends(rag.backends.embedder, rag.backends.reranker, query_budget(rag.backends.llm, rag.config))
    r = run_retrieval(ask.question, rag.index, rag.config, backends, doc_paths,
                      on_step=guarded(cancel, None), orderings=rag.orderings)
    assert r.located is not None
    out.locate = locate_step(r.located, r.plan)
    out.hits = [retrieved_hit(rc, i) for i, rc in enumerate(r.final, 1)]
    out.order = ordering_score(r.final)
    out.fallbacks = [FallbackRecord(f.step, f.reason, f.used) for f in r.fallbacks]
    out.timing_ms = {**{k: round(v, 2) for k, v in r.timing_ms.items()},
                     "total": round((time.perf_counter() - t) * 1000, 2)}
    rag.index.search.after_question()  # the hits are built: the store's housekeeping, off the question's path
    return out


def documents(snapshot: Snapshot) -> dict[str, Any]:
    meta = snapshot.index.metadata
    docs = [{"path": d["path"], "title": d.get("title"), "kind": d.get("kind", "md"),
             "chars": d.get("chars"), "pages": d.get("pages")} for d in meta["documents"]]
    return {"build_id": snapshot.build_id, "created_at": meta.get("created_at"),
            "counts": dict(meta["counts"]), "embedder": snapshot.index.embedder_identity, "documents": docs}


MAX_TREE_DOCUMENTS = 20
"""Documents one tree request may name through its sections (the page asks for the answer's)."""

MAX_TREE_NODES = 2_000
"""Nodes in one tree response by default (at most ``TREE_NODES_LIMIT`` when asked): a whole
collection's tree can hold hundreds of thousands of sections, far more than a page or an agent
can use in one answer. Cut breadth-first, so the top levels always come first."""
TREE_NODES_LIMIT = 10_000
MAX_SECTION_CHILDREN = 500
"""Children listed in a section response; ``children_omitted`` counts the rest."""


def tree(snapshot: Snapshot, docs: list[str] | None = None, of_nodes: list[str] | None = None, *,
         under: str | None = None, depth: int | None = None, max_nodes: int = MAX_TREE_NODES) -> dict[str, Any]:
    """The section tree (``tree --json``'s nodes), of the named documents, of the documents holding
    the named sections (``of_nodes``: step 1's node ids carry no document), of one section
    (``under``), or of all; at most ``depth`` levels and ``max_nodes`` nodes.

    A node whose children were left out says how many (``children_omitted``); ``truncated`` says
    whether anything was; ``top_omitted`` counts top-level nodes (documents) left out. Ask again
    with ``under=NODE_ID`` to read below a node."""
    if depth is not None and not 1 <= depth <= 1_000:
        raise ApiError(400, "depth must be from 1 to 1000")
    if not 1 <= max_nodes <= TREE_NODES_LIMIT:
        raise ApiError(400, f"max_nodes must be from 1 to {TREE_NODES_LIMIT:,}")
    top_count: int | None = None
    if under is not None:
        top = snapshot.index.get_node(under)
        if top is None or top.kind == "root":
            raise ApiError(404, f"no section {shown(under)} in the index (see /api/tree)")
        tops = [top]
    else:
        if of_nodes:
            found = [snapshot.index.get_node(n) for n in of_nodes[:MAX_TREE_DOCUMENTS * 10]]
            docs = list(dict.fromkeys([*(docs or []), *(n.doc_path for n in found if n is not None and n.doc_path)]))
            docs = docs[:MAX_TREE_DOCUMENTS]
        wanted = _check_documents(docs, snapshot)
        root = snapshot.index.root
        if root.kind != "root":
            tops = [root]
        elif wanted is None:  # only the top nodes that are sent are read
            tops, top_count = first_children(root, max_nodes)
        else:
            tops = [n for n in root.children if n.doc_path in wanted]
    nodes, truncated, top_omitted = bounded_tree(tops, max_nodes, depth, top_count)
    out: dict[str, Any] = {"build_id": snapshot.build_id, "nodes": nodes, "truncated": truncated}
    if top_omitted:
        out["top_omitted"] = top_omitted
    return out


def bounded_tree(tops: list[TreeNode], max_nodes: int, depth: int | None,
                 top_count: int | None = None) -> tuple[list[dict[str, Any]], bool, int]:
    """``tops`` and their descendants as nested node dicts, breadth-first up to ``max_nodes`` nodes
    and ``depth`` levels: (top-level dicts, whether any node was left out, top-level nodes left out).
    ``top_count``: how many top-level nodes there are when ``tops`` holds only the first of them.
    Only the nodes sent are read, so the cost follows the answer, not the tree."""
    out: list[dict[str, Any]] = []
    queue: deque[tuple[TreeNode, int, list[dict[str, Any]]]] = deque((n, 1, out) for n in tops[:max_nodes])
    sent = len(queue)
    truncated = False
    while queue:
        node, level, siblings = queue.popleft()
        d = node_dict(node, [])
        siblings.append(d)
        room = max_nodes - sent if depth is None or level < depth else 0
        kids, total = first_children(node, room)
        queue.extend((c, level + 1, d["children"]) for c in kids)
        sent += len(kids)
        if total > len(kids):
            d["children_omitted"] = total - len(kids)
            truncated = True
    top_omitted = (len(tops) if top_count is None else top_count) - len(out)
    return out, truncated or top_omitted > 0, top_omitted


def _find_node(snapshot: Snapshot, node_id: str | None, heading_path: str | None,
               document: str | None) -> "TreeNode":
    index = snapshot.index
    if node_id:
        node = index.get_node(node_id)
        if node is None or node.kind == "root":
            raise ApiError(404, f"no section {shown(node_id)} in the index (see /api/tree)")
        return node
    if not heading_path:
        raise ApiError(400, "name the section by node_id or by heading_path")
    _check_documents([document] if document else None, snapshot)

    def norm(s: str) -> str:
        return " > ".join(" ".join(p.split()).casefold() for p in s.split(">"))

    want = norm(heading_path)
    hits = [n for n in index.nodes.values() if n.kind != "root" and norm(n.heading_path) == want
            and (document is None or n.doc_path == document)]
    if not hits:
        raise ApiError(404, f"no section with heading path {shown(heading_path)}"
                            + (f" in {shown(document)}" if document else ""))
    if len(hits) > 1:
        where = ", ".join(f"{n.node_id} ({n.doc_path})" for n in hits[:5])
        raise ApiError(409, f"{len(hits)} sections have heading path {shown(heading_path)}: {where}; "
                            "name the document or the node_id")
    return hits[0]


def section(snapshot: Snapshot, node_id: str | None = None, heading_path: str | None = None,
            document: str | None = None) -> dict[str, Any]:
    """A section's text with its citation. A leaf's text is its own; a larger section's is its leaves'
    in reading order, each under its heading, cut at ``MAX_SECTION_CHARS``."""
    node = _find_node(snapshot, node_id, heading_path, document)
    if node.is_leaf:
        text, truncated = node.content, False
    else:
        parts, size = [], 0
        for leaf in node.leaves():
            block = f"{leaf.heading}\n\n{leaf.content}" if leaf.kind != "intro" else leaf.content
            parts.append(block)
            size += len(block) + 2
            if size > MAX_SECTION_CHARS:
                break
        text = "\n\n".join(parts)
        truncated = len(text) > MAX_SECTION_CHARS
        text = text[:MAX_SECTION_CHARS]
    children, child_count = first_children(node, MAX_SECTION_CHILDREN)
    return {"node_id": node.node_id, "heading": node.heading, "heading_path": node.heading_path,
            "doc_path": node.doc_path, "kind": node.kind, "leaf": node.is_leaf, "citation": citation(node),
            "lines": [node.start_line, node.end_line],
            "pages": [node.page_start, node.page_end] if node.page_start else None,
            "text": text, "text_start_char": node.content_start if node.is_leaf else None,
            "truncated": truncated,
            "children": [{"node_id": c.node_id, "heading": c.heading} for c in children],
            "children_omitted": child_count - len(children),
            "build_id": snapshot.build_id}


def passage(snapshot: Snapshot, chunk_id: str) -> dict[str, Any]:
    """One retrieved chunk inside its section's text: ``highlight`` is its span in ``section.text``."""
    index = snapshot.index
    node_id = chunk_id.rsplit("_chunk_", 1)[0] if "_chunk_" in chunk_id else ""
    rows = index.leaf_rows.get(node_id) if node_id else None
    chunk = None
    if rows is not None:
        chunk = next((c for c in index.chunks[rows[0]:rows[1]] if c.chunk_id == chunk_id), None)
    if chunk is None:
        raise ApiError(404, f"no passage {shown(chunk_id)} in the index (chunk ids come from a query's step2_retrieved)")
    sec = section(snapshot, node_id=node_id)
    start = chunk.start_char - (sec["text_start_char"] or 0)
    return {"chunk_id": chunk.chunk_id, "node_id": node_id, "doc_path": chunk.doc_path,
            "heading_path": chunk.heading_path, "text": chunk.text, "citation": citation(chunk),
            "start_char": chunk.start_char, "end_char": chunk.end_char,
            "lines": [chunk.start_line, chunk.end_line],
            "pages": [chunk.page_start, chunk.page_end] if chunk.page_start else None,
            "section": sec, "highlight": [start, start + len(chunk.text)], "build_id": snapshot.build_id}


def citations(record: RunRecord) -> list[dict[str, Any]]:
    """What an answer's ``[N]`` marks point at: context passage N, with where it is and its text."""
    return [{"n": n, "citation": p.citation, "doc_path": p.doc_path, "node_id": p.node_id,
             "heading_path": p.heading_path, "start_char": p.start_char, "end_char": p.end_char, "text": p.text}
            for n, p in enumerate(record.context.passages, 1)]
