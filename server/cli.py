"""``main.py serve`` and ``main.py mcp``: the long-running processes around one opened index."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Callable

import anyio

from pipeline import TreeRAG
from server.app import ServeSettings, build_app
from server.state import IndexHolder
from utils.errors import InputError


def holder_for(rag: TreeRAG, path: Path, embedder_name: str | None, warn: Callable[[str], None]) -> IndexHolder:
    return IndexHolder(path, rag, rag.backends.llm, embedder_name, warn)


def serve(rag: TreeRAG, path: Path, settings: ServeSettings, version: str, embedder_name: str | None,
          warn: Callable[[str], None]) -> int:
    """Serve until Ctrl-C or SIGTERM (uvicorn finishes the requests in flight, then stops)."""
    import uvicorn  # the server stack only when serve runs (main.py builds this parser at start-up)

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


__all__ = ["serve", "serve_mcp_stdio"]
