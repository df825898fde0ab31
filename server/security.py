"""The guards in front of every route: the bearer token and the request body limit.

Pure ASGI middleware (not Starlette's BaseHTTPMiddleware) so the event stream and the MCP
transport pass through unbuffered. Refusals are JSON with one message, like every other error.
"""
from __future__ import annotations

import hmac
import json
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = ("/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)
"""The page and its assets carry no data: a browser loads them without a token, and the page then
sends the token (typed in once) with every API call."""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


async def send_json_error(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


class BearerToken:
    """Requests other than the page need ``Authorization: Bearer <token>`` when a token is set
    (always, when the server listens beyond loopback). Compared in constant time."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http" or self._public(scope):
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "OPTIONS":  # a CORS preflight carries no credentials by design
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                given = value
                break
        scheme, _, presented = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(presented.strip(), self.token):
            await send_json_error(send, 401, "missing or wrong bearer token (Authorization: Bearer $TREERAG_SERVE_TOKEN)",
                                  [(b"www-authenticate", b'Bearer realm="treerag"')])
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _public(scope: Scope) -> bool:
        path = scope.get("path", "")
        return scope.get("method") in ("GET", "HEAD") and (path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES))


class BodyLimit:
    """A request body declared larger than ``limit`` bytes is refused with 413 before anything is
    read. A body sent without a length is counted as it is read (``routes.read_json``; the MCP
    transport has its own limit)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_json_error(send, 400, "Content-Length is not a number")
                    return
                if declared > self.limit:
                    await send_json_error(send, 413, f"the request body is {declared:,} bytes; the limit is {self.limit:,}")
                    return
        await self.app(scope, receive, send)
