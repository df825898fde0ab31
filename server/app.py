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
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from server import service
from server.errors import ApiError
from server.openapi import openapi_schema
from server.routes import Api, JSONResponse, error_of
from server.security import BearerToken, BodyLimit, is_loopback
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

    def check(self) -> None:
        if not is_loopback(self.host) and not self.token:
            raise InputError(f"--host {self.host} listens beyond this machine: set TREERAG_SERVE_TOKEN to a secret "
                             "(every request must then carry Authorization: Bearer TOKEN), or use --host 127.0.0.1")
        if self.token is not None and len(self.token) < 16:
            raise InputError("TREERAG_SERVE_TOKEN is too short: use at least 16 characters "
                             "(e.g. python -c \"import secrets; print(secrets.token_urlsafe(24))\")")
        if not 0 <= self.port <= 65535:
            raise InputError(f"--port {self.port} is not a port number (0-65535)")
        if not 1 <= self.workers <= 64:
            raise InputError(f"--workers {self.workers} must be from 1 to 64")


STATIC = files("server") / "static"


def build_app(holder: IndexHolder, settings: ServeSettings, version: str,
              warn: Callable[[str], None]) -> Starlette:
    limiter = anyio.CapacityLimiter(settings.workers)
    api = Api(holder, settings.limits, limiter, version, warn)
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

        mcp_server = build_mcp(holder, settings.limits, limiter, version)
        # beyond loopback the bearer token guards /mcp; on loopback the SDK's DNS-rebinding check does too
        security = None if is_loopback(settings.host) else TransportSecuritySettings(enable_dns_rebinding_protection=False)
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

    middleware = [Middleware(BodyLimit, limit=settings.limits.max_body_bytes),
                  Middleware(BearerToken, token=settings.token)]
    if settings.cors_origins:
        middleware.insert(0, Middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                                        allow_methods=["GET", "POST"],
                                        allow_headers=["authorization", "content-type", "mcp-protocol-version",
                                                       "mcp-session-id"]))

    async def api_error(_request: Request, exc: Exception) -> Response:
        status, message = error_of(exc)
        return JSONResponse({"error": message}, status_code=status)

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = {404: "no such endpoint (see /openapi.json)", 405: "method not allowed here"}.get(
            exc.status_code, str(exc.detail))
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)

    async def crash(_request: Request, exc: Exception) -> Response:
        warn("error: " + "".join(traceback.format_exception(exc)).rstrip())
        return JSONResponse({"error": error_of(exc)[1]}, status_code=500)

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                     exception_handlers={ApiError: api_error, TreeRAGError: api_error, HTTPException: http_error, Exception: crash})


async def _page(_request: Request) -> Response:
    return FileResponse(str(STATIC / "index.html"), media_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-cache"})
