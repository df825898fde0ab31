"""The ASGI application: routes, the MCP endpoint, the page, and the guards around them.

Starlette rather than FastAPI: FastAPI's extra time per request (docs/serve.md) would buy validation
this API does in a few explicit lines; and the MCP SDK brings Starlette anyway.
"""
from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, AsyncIterator, Callable

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from server import service
from server.errors import ApiError
from server.openapi import openapi_schema
from server.routes import Api, JSONResponse, error_of
from server.security import (BearerToken, BodyLimit, JsonErrors, RequestGuard, WholeBody, allowed_host_names,
                             is_loopback, loopback_address)
from server.state import IndexHolder
from utils.errors import InputError, TreeRAGError


@dataclass(frozen=True)
class ServeSettings:
    """How ``serve`` listens and what it allows; checked by ``check`` before anything starts."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    """Bearer token every API and MCP request must carry; required beyond loopback."""
    cors_origins: tuple[str, ...] = ()
    """Origins allowed to call the API from a browser page of theirs; none by default."""
    workers: int = 4
    """Queries (and other blocking work) running at once; more wait their turn."""
    limits: service.Limits = service.Limits()
    mcp: bool = True
    read_timeout_s: float = 30.0
    """A request's headers and body must arrive within this of its first byte (408, then closed)."""
    max_connections: int = 1000
    """Open connections at once; one more is answered 503 and closed."""

    def check(self) -> None:
        if loopback_address(self.host) is None and not self.token:
            raise InputError(f"--host {self.host} listens beyond this machine: set TREERAG_SERVE_TOKEN to a secret "
                             "(every request must then carry Authorization: Bearer TOKEN), or use --host 127.0.0.1")
        if self.token is not None and len(self.token) < 16:
            raise InputError("TREERAG_SERVE_TOKEN is too short: use at least 16 characters "
                             "(e.g. python -c \"import secrets; print(secrets.token_urlsafe(24))\")")
        if not 0 <= self.port <= 65535:
            raise InputError(f"--port {self.port} is not a port number (0-65535)")
        if not 1 <= self.workers <= 64:
            raise InputError(f"--workers {self.workers} must be from 1 to 64")
        if not 0.1 <= self.read_timeout_s <= 3600:
            raise InputError(f"--read-timeout {self.read_timeout_s:g} must be from 0.1 to 3600 seconds")
        if not 1 <= self.max_connections <= 100_000:
            raise InputError(f"--max-connections {self.max_connections} must be from 1 to 100,000")


STATIC = files("server") / "static"

READ_WORKERS = 4
"""Threads for reading the index (documents, tree, sections, a reload), apart from the query workers:
a health check or the page's tree answers while every query worker is busy."""


def build_app(holder: IndexHolder, settings: ServeSettings, version: str,
              warn: Callable[[str], None]) -> Starlette:
    limiter = anyio.CapacityLimiter(settings.workers)
    readers = anyio.CapacityLimiter(READ_WORKERS)  # reads of the index never wait behind running questions
    api = Api(holder, settings.limits, limiter, version, warn, readers)
    routes: list[Any] = [
        Route("/", _page, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
        Route("/openapi.json", lambda r: JSONResponse(openapi_schema(
            version, settings.limits.max_question_chars, settings.limits.max_top_k)), methods=["GET"]),
        Route("/api/health", api.health, methods=["GET"]),
        Route("/api/query", api.query, methods=["POST"]),
        Route("/api/query/stream", api.query_stream, methods=["POST"]),
        Route("/api/search", api.search, methods=["POST"]),
        Route("/api/documents", api.documents, methods=["GET"]),
        Route("/api/tree", api.tree, methods=["GET"]),
        Route("/api/sections", api.section, methods=["GET"]),
        Route("/api/sections/{node_id}", api.section, methods=["GET"]),
        Route("/api/passages/{chunk_id}", api.passage, methods=["GET"]),
        Route("/api/runs", api.runs, methods=["GET"]),
        Route("/api/runs/{run_id}", api.run, methods=["GET"]),
    ]
    mcp_server = None
    if settings.mcp:
        from mcp.server.transport_security import TransportSecuritySettings  # the MCP SDK only when MCP is served

        from server.mcp_tools import build_mcp

        mcp_server = build_mcp(holder, settings.limits, limiter, version, readers)
        # beyond loopback the bearer token guards /mcp; on loopback RequestGuard checks Host and Origin
        # first, and the SDK's own DNS-rebinding check is given the same lists (never left to its
        # guess from the host, which covers 127.0.0.1 but not 127.0.0.2 or 127.1)
        if is_loopback(settings.host):
            hosts = allowed_host_names(settings.host)
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True, allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
                allowed_origins=[*(f"{s}://{h}{p}" for s in ("http", "https") for h in hosts for p in ("", ":*")),
                                 *settings.cors_origins])
        else:
            security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        mcp_app = mcp_server.streamable_http_app(streamable_http_path="/mcp", host=settings.host,
                                                 transport_security=security, stateless_http=True,
                                                 json_response=True,
                                                 max_request_body_size=settings.limits.max_body_bytes)
        routes.extend(mcp_app.routes)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    middleware = [Middleware(JsonErrors),
                  Middleware(RequestGuard, host=settings.host, cors_origins=settings.cors_origins,
                             mcp_path="/mcp" if settings.mcp else None),
                  Middleware(BodyLimit, limit=settings.limits.max_body_bytes),
                  Middleware(BearerToken, token=settings.token),
                  Middleware(WholeBody, path="/mcp", limit=settings.limits.max_body_bytes)]
    if settings.cors_origins:
        middleware.insert(2, Middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                                        allow_methods=["GET", "POST"],
                                        allow_headers=["authorization", "content-type", "mcp-protocol-version",
                                                       "mcp-session-id"]))

    def without_paths(message: str) -> str:
        """An error names the index and the run log by their file names: a client is never told the
        server's directories."""
        log = holder.run_log
        for path in (holder.path, *((log.path,) if log is not None else ())):
            message = message.replace(str(path.resolve()), path.name).replace(str(path), path.name)
        return message

    async def api_error(_request: Request, exc: Exception) -> Response:
        status, message = error_of(exc)
        return JSONResponse({"error": without_paths(message)}, status_code=status)

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = {404: "no such endpoint (see /openapi.json)", 405: "method not allowed here"}.get(
            exc.status_code, str(exc.detail))
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)

    async def client_gone(_request: Request, _exc: Exception) -> Response:
        return Response(status_code=499)  # nobody is left to read it: not an error of the server's

    async def crash(_request: Request, exc: Exception) -> Response:
        warn("error: " + "".join(traceback.format_exception(exc)).rstrip())
        return JSONResponse({"error": error_of(exc)[1]}, status_code=500)

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                     exception_handlers={ApiError: api_error, TreeRAGError: api_error, HTTPException: http_error,
                                         ClientDisconnect: client_gone, Exception: crash})


async def _page(_request: Request) -> Response:
    return FileResponse(str(STATIC / "index.html"), media_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-cache"})
