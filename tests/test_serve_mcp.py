"""The MCP server through the official SDK's own client: over stdio (``main.py mcp``, the process a
desktop client starts) and over streamable HTTP at ``/mcp`` under ``main.py serve``."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import ROOT
from tests.serve_process import running_server

TOOLS = {"ask", "search", "list_documents", "get_tree", "get_section"}
CITATION = re.compile(r"^test_paper\.md:L\d+(-L\d+)?$")


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    if data is None:  # a client that reads only text gets the same JSON
        data = json.loads(result.content[0].text)
    return data


async def _exercise(client: Client) -> None:
    tools = await client.list_tools()
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == TOOLS
    for tool in by_name.values():  # written for a model to read: say what it returns
        assert tool.description and len(tool.description) > 80, tool.name
        assert "citation" in tool.description or tool.name in ("list_documents",), tool.name

    asked = _structured(await client.call_tool("ask", {"question": "How many epochs was the model trained for?"}))
    assert "50 epochs" in asked["answer"] and asked["evidence_found"] is True
    assert asked["citations"] and all(CITATION.match(c["citation"]) for c in asked["citations"])
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", asked["answer"])}
    assert cited and all(1 <= n <= len(asked["citations"]) for n in cited)  # [N] is citations[N-1]
    assert any("50 epochs" in asked["citations"][n - 1]["text"] for n in cited)

    found = _structured(await client.call_tool("search", {"question": "training epochs", "top_k": 3}))
    assert len(found["passages"]) == 3 and all(CITATION.match(p["citation"]) for p in found["passages"])

    docs = _structured(await client.call_tool("list_documents", {}))
    assert [d["path"] for d in docs["documents"]] == ["test_paper.md"]

    outline = _structured(await client.call_tool("get_tree", {"max_depth": 1}))
    assert any(s["heading"] == "3 Methods" and s["subsections"] == 3 for s in outline["sections"])
    assert outline["truncated"] is True  # levels were cut: said so, and get_tree(node_id=...) reads below
    methods = next(s for s in outline["sections"] if s["heading"] == "3 Methods")
    below = _structured(await client.call_tool("get_tree", {"node_id": methods["node_id"], "max_depth": 6}))
    assert [s["node_id"] for s in below["sections"]] == [methods["node_id"]]
    assert len(below["sections"][0]["children"]) == 3 and below["truncated"] is False

    sec = _structured(await client.call_tool("get_section", {"heading_path": "3 Methods > 3.3 Training Procedure"}))
    assert "50 epochs" in sec["text"] and CITATION.match(sec["citation"])
    by_id = _structured(await client.call_tool("get_section", {"node_id": sec["node_id"]}))
    assert by_id["text"] == sec["text"]

    missing = await client.call_tool("get_section", {"node_id": "9999"})
    assert missing.is_error and "no section" in missing.content[0].text
    too_long = await client.call_tool("ask", {"question": "x" * 5000})
    assert too_long.is_error and "limit" in too_long.content[0].text


def test_mcp_over_stdio_with_the_sdk_client(paper_index_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TREERAG_LLM")}
    params = StdioServerParameters(command=sys.executable, args=[str(ROOT / "main.py"), "mcp", "--index",
                                                                 str(paper_index_dir), "--no-log"],
                                   env=env, cwd=str(ROOT))

    async def run() -> None:
        with anyio.fail_after(180):
            async with Client(params) as client:
                await _exercise(client)

    anyio.run(run)


def test_mcp_over_http_under_serve(paper_index_dir: Path) -> None:
    with running_server("--index", str(paper_index_dir), "--no-log") as srv:
        async def run() -> None:
            with anyio.fail_after(180):
                async with Client(srv.url + "/mcp") as client:
                    await _exercise(client)

        anyio.run(run)


def test_mcp_stdio_refuses_a_missing_index_in_one_line(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "mcp", "--index", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
