"""``main.py serve`` and ``main.py mcp``: their options, their checked settings, and the long-running
processes around one opened index.

The options are added to the parser at every start of ``main.py``, so this module imports no server
stack at its top (``main.py --help`` stays fast); the stack loads when a server runs.
"""
from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from config import parse_seconds
from utils.errors import InputError

if TYPE_CHECKING:
    from pipeline import TreeRAG
    from server.app import ServeSettings
    from server.state import IndexHolder


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The listening and safety settings of ``serve``/``mcp``, checked before the index is loaded."""
    from server.app import ServeSettings
    from server.service import Limits

    token = os.environ.get("TREERAG_SERVE_TOKEN") or None
    limits = Limits(max_body_bytes=args.max_body_kb * 1024, max_question_chars=args.max_question_chars)
    for name, value in (("--max-body-kb", args.max_body_kb), ("--max-question-chars", args.max_question_chars)):
        if value < 1:
            raise InputError(f"{name} must be at least 1")
    read_timeout = getattr(args, "read_timeout", None)
    settings = ServeSettings(host=getattr(args, "host", "127.0.0.1"), port=getattr(args, "port", 0), token=token,
                             cors_origins=tuple(getattr(args, "cors_origin", None) or ()), workers=args.workers,
                             limits=limits, mcp=not getattr(args, "no_mcp", False),
                             read_timeout_s=30.0 if read_timeout is None else parse_seconds(read_timeout, "--read-timeout"),
                             max_connections=getattr(args, "max_connections", 1000))
    settings.check()
    return settings


def _service_options(sp: argparse.ArgumentParser, query_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """The options ``serve`` and ``mcp`` share: a query's, and the service's limits."""
    query_options(sp)
    sp.add_argument("--workers", type=int, default=4,
                    help="questions answered at once; more wait their turn (default 4)")
    sp.add_argument("--max-question-chars", type=int, default=2000,
                    help="longest question accepted (default 2000)")
    sp.add_argument("--max-body-kb", type=int, default=64, help="largest request body in kB (default 64)")


def add_serve_arguments(sub: Any, query_options: Callable[[argparse.ArgumentParser], None],
                        cmd_serve: Callable[[argparse.Namespace], int], cmd_mcp: Callable[[argparse.Namespace], int]) -> None:
    """The ``serve`` and ``mcp`` sub-commands on ``sub`` (main.py's sub-parsers); ``query_options`` adds
    the options every query command shares, ``cmd_serve``/``cmd_mcp`` run them (main.py opens the
    session: the index and models as ``query`` opens them)."""
    pserve = sub.add_parser("serve", help="serve an index over HTTP: JSON API, streamed steps, a web page, MCP at /mcp")
    _service_options(pserve, query_options)
    pserve.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; any other needs $TREERAG_SERVE_TOKEN)")
    pserve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    pserve.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                        help="let a web page from ORIGIN call the API (repeatable; default: no CORS)")
    pserve.add_argument("--no-mcp", action="store_true", help="do not serve MCP at /mcp")
    pserve.add_argument("--read-timeout", default=None, metavar="SECONDS",
                        help="a request's headers and body must arrive within this (default 30; else 408)")
    pserve.add_argument("--max-connections", type=int, default=1000,
                        help="open connections at once; more are refused with 503 (default 1000)")
    pserve.set_defaults(func=cmd_serve)

    pmcp = sub.add_parser("mcp", help="serve an index to an MCP client over stdio (tools ask, search, "
                                      "list_documents, get_tree, get_section)")
    _service_options(pmcp, query_options)
    pmcp.set_defaults(func=cmd_mcp)


def holder_for(rag: TreeRAG, path: Path, embedder_name: str | None, warn: Callable[[str], None]) -> IndexHolder:
    from server.state import IndexHolder

    return IndexHolder(path, rag, rag.backends.llm, embedder_name, warn)


def serve(rag: TreeRAG, path: Path, settings: ServeSettings, version: str, embedder_name: str | None,
          warn: Callable[[str], None]) -> int:
    """Serve until Ctrl-C or SIGTERM (uvicorn finishes the requests in flight, then stops)."""
    import uvicorn  # the server stack only when serve runs (main.py builds this parser at start-up)

    from server.app import build_app

    holder = holder_for(rag, path, embedder_name, warn)
    app = build_app(holder, settings, version, warn)
    docs = rag.index.metadata["counts"]["documents"]

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.should_exit:  # the port was taken: uvicorn has said why
                return
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            auth = "; bearer token required" if settings.token else ""
            print(f"TreeRAG serving {docs} document(s) (build {holder.current().build_id}) on http://{shown}:{port}/ "
                  f"- API /api, MCP {'/mcp' if settings.mcp else 'off'}{auth}; Ctrl-C to stop", flush=True)

    from server.http_protocol import guarded_protocol

    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=10, lifespan="on", server_header=False,
                            http=guarded_protocol(settings.read_timeout_s, settings.max_connections))
    server = Server(config)
    server.run(sockets=[_listening_socket(settings.host, settings.port)])
    return 0 if server.started else 1


def _listening_socket(host: str, port: int) -> Any:
    """The socket bound here, not by uvicorn, so a taken port or a foreign address is one ``error:``
    line like every other refusal of the CLI."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve_mcp_stdio(rag: TreeRAG, path: Path, settings: ServeSettings, version: str, embedder_name: str | None,
                    warn: Callable[[str], None]) -> int:
    """MCP over stdin/stdout for a client that starts this process (Claude Desktop, an agent).
    Only protocol messages go to stdout; every notice goes to stderr."""
    import anyio

    from server.app import READ_WORKERS
    from server.mcp_stdio import serve_stdio  # the MCP SDK only when MCP over stdio runs
    from server.mcp_tools import build_mcp

    holder = holder_for(rag, path, embedder_name, warn)

    async def run() -> None:
        mcp = build_mcp(holder, settings.limits, anyio.CapacityLimiter(settings.workers), version,
                        anyio.CapacityLimiter(READ_WORKERS))
        server = mcp._lowlevel_server  # what MCPServer.run_stdio_async runs, over a transport that answers every line
        await serve_stdio(lambda read, write: server.run(read, write, server.create_initialization_options()),
                          settings.limits.max_body_bytes)

    anyio.run(run)
    return 0


__all__ = ["add_serve_arguments", "serve", "serve_mcp_stdio", "serve_settings"]
