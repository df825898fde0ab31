"""The OpenAPI description of the JSON API, served at /openapi.json.

Written out here (Starlette has no schema generator of its own worth the name): the request
bodies are small and stable; the query record's schema is derived from the ``RunRecord``
dataclasses themselves (``RunRecord.json_schema``), so it is what ``query --json`` prints.
"""
from __future__ import annotations

from typing import Any

from utils.run_record import RECORD_VERSION, RunRecord

_ERROR = {"description": "an error, as one message", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": schema or {"type": "object"}}}}


def _get(summary: str, params: list[dict[str, Any]] | None = None, ok: str = "the answer",
         schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"get": {"summary": summary, "parameters": params or [],
                    "responses": {"200": _json(ok, schema), "400": _ERROR, "401": _ERROR, "404": _ERROR}}}


def _param(name: str, where: str, description: str, required: bool = False, schema: dict | None = None) -> dict:
    return {"name": name, "in": where, "required": required, "description": description,
            "schema": schema or {"type": "string"}}


def _post(summary: str, ok: dict[str, Any]) -> dict[str, Any]:
    return {"post": {"summary": summary,
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": {"$ref": "#/components/schemas/Ask"}}}},
                     "responses": {"200": ok, "400": _ERROR, "401": _ERROR, "413": _ERROR, "500": _ERROR}}}


def openapi_schema(version: str, max_question_chars: int, max_top_k: int) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "TreeRAG", "version": version,
                 "description": "Structure-aware question answering over long documents, with a citation for "
                                "every claim. Errors are JSON {\"error\": \"one message\"}. When the server "
                                "has a token, every /api and /mcp request needs Authorization: Bearer TOKEN. "
                                "A POST body must be sent as Content-Type: application/json."},
        "paths": {
            "/api/query": _post("Ask a question: the three steps and the answer; the body is exactly "
                                "`python main.py query --json`'s record",
                                _json("the run record (query --json)", {"$ref": "#/components/schemas/QueryRecord"})),
            "/api/query/stream": _post(
                "Ask a question, the steps streamed as server-sent events as they finish: start, step1, "
                "step2, context, answer_delta (each piece of an LLM's answer as it is written, {\"text\": ...}), "
                "answer, then result (the query --json record) or error",
                {"description": "text/event-stream; each event's data is one JSON object",
                 "content": {"text/event-stream": {"schema": {"type": "string"}}}}),
            "/api/search": _post("Steps 1 and 2 only: the located sections and the ranked passages, no answer",
                                 _json("located sections (step1_*) and passages (step2_retrieved)")),
            "/api/documents": _get("The documents of the index, with its build id and counts"),
            "/api/tree": _get("The section tree (tree --json's nodes), cut breadth-first at max_nodes: a node "
                              "whose children were left out has children_omitted; truncated says whether any were",
                              [_param("document", "query", "limit to this document (repeatable)"),
                               _param("node", "query", "limit to the documents holding these sections (repeatable)"),
                               _param("under", "query", "only this section and what is below it"),
                               _param("depth", "query", "at most this many levels", schema={"type": "integer"}),
                               _param("max_nodes", "query", "at most this many nodes (1-10000, default 2000)",
                                      schema={"type": "integer"})]),
            "/api/sections/{node_id}": _get("A section's text and citation",
                                            [_param("node_id", "path", "the section's node id", True)]),
            "/api/sections": _get("A section found by its heading path",
                                  [_param("heading_path", "query", "e.g. '3 Methods > 3.3 Training Procedure'", True),
                                   _param("document", "query", "the document, when several have that heading")]),
            "/api/passages/{chunk_id}": _get(
                "A retrieved passage inside its section's text (highlight = its span there), with its citation",
                [_param("chunk_id", "path", "a chunk id from step2_retrieved", True)]),
            "/api/runs": _get("Recent recorded runs of the served index, newest first",
                              [_param("limit", "query", "how many (1-500, default 20)", schema={"type": "integer"})]),
            "/api/runs/{run_id}": _get("One recorded run, as /api/query returned it (a run logged by an older "
                                       "version read into the current record_version)",
                                       [_param("run_id", "path", "a run id or a unique prefix (>= 6 characters)", True)],
                                       "the run record", {"$ref": "#/components/schemas/QueryRecord"}),
            "/api/health": _get("Build id, document count, reloads and query counters"),
            "/mcp": {"post": {"summary": "The MCP server (streamable HTTP): tools ask, search, list_documents, "
                                         "get_tree, get_section", "responses": {"200": {"description": "MCP"}}}},
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            "Ask": {"type": "object", "required": ["question"], "additionalProperties": False, "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": max_question_chars},
                "documents": {"type": "array", "items": {"type": "string"},
                              "description": "answer only from these documents (paths as /api/documents lists them)"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": max_top_k,
                          "description": "passages step 2 keeps (default: the server's configuration)"},
                "llm": {"type": "boolean", "default": True,
                        "description": "false: no LLM for this question (hybrid locating, extractive answer)"}}},
            "QueryRecord": {**RunRecord.json_schema(), "description": (
                f"The record `query --json` prints (record_version {RECORD_VERSION}; docs/pipeline.md). "
                "index.build_settings: what the index was built with, from its metadata.json (null for an "
                "index that records none); config: the query's settings only.")},
        }},
    }
