"""The guards in front of every route: where a request may come from, the bearer token, and the
request body limit.

Pure ASGI middleware (not Starlette's BaseHTTPMiddleware) so the event stream and the MCP
transport pass through unbuffered. Refusals are JSON with one message, like every other error.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from typing import Any, Awaitable, Callable

from utils.oneline import one_line

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = ("/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)
"""The page and its assets carry no data: a browser loads them without a token, and the page then
sends the token (typed in once) with every API call."""

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""Host names a local client reaches a loopback server by (besides the address it listens on)."""

ECHO_CHARS = 80
"""How much of a client's value an error message quotes: enough to recognise, never the whole of it."""


def loopback_address(host: str) -> str | None:
    """The canonical loopback address ``host`` binds to (any of 127.0.0.0/8 in any numeric form
    the system accepts, such as ``127.1``; ``::1``; ``localhost``), or None when it is not loopback.

    One test for both rules that depend on it: a loopback server needs no token, and only a
    loopback server checks Host (a DNS-rebinding page can only reach this machine's own addresses).
    """
    if host.strip().lower() == "localhost":
        return "127.0.0.1"
    try:
        infos = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
        address = ipaddress.ip_address(infos[0][4][0].split("%")[0])
    except (OSError, ValueError, IndexError, UnicodeError):
        return None
    return str(address) if address.is_loopback else None


def is_loopback(host: str) -> bool:
    return loopback_address(host) is not None


def allowed_host_names(host: str) -> tuple[str, ...]:
    """The Host header names (without port) a loopback server at ``host`` answers to."""
    names = list(LOOPBACK_NAMES)
    for name in (host.strip().lower(), loopback_address(host) or ""):
        if name and ":" in name and not name.startswith("["):
            name = f"[{name}]"
        if name and name not in names:
            names.append(name)
    return tuple(names)


def host_name(value: str) -> str:
    """A Host header's name without its port, lower-cased (``[::1]:8765`` -> ``[::1]``)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[:end + 1] if end > 0 else value
    name, sep, port = value.rpartition(":")
    return name if sep and port.isdigit() else value


def shown(value: str | bytes, limit: int = ECHO_CHARS) -> str:
    """A client's value quoted in an error: one line, cut at ``limit`` characters."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return one_line(repr(value), limit)


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
    read. A body sent without a length is counted as it is read (``routes.read_json``; ``WholeBody``
    for the MCP transport)."""

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


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value
    return None


def is_json_media_type(value: bytes | None) -> bool:
    return value is not None and value.split(b";", 1)[0].strip().lower() == b"application/json"


class RequestGuard:
    """Where a request may come from, checked before anything else reads it.

    - On loopback, the ``Host`` header must name this machine (``127.0.0.1``, ``localhost``,
      ``[::1]`` or the address served on), any port: a page whose DNS name was rebound to
      127.0.0.1 sends its own name and is refused with 421.
    - An ``Origin`` header must be this server's own origin or one of ``cors_origins`` (403):
      another site's page can neither read an answer nor make the server run a question.
    - A POST body must be declared ``application/json`` (415), so no cross-site form or
      ``no-cors`` fetch (a CORS "simple request", sent without a preflight) is ever acted on.
    - ``GET /mcp`` (the SDK's server-to-client event stream) is 405: the transport is stateless,
      where that stream would stay open with nothing ever sent on it.
    """

    def __init__(self, app: ASGIApp, host: str, cors_origins: tuple[str, ...] = (), mcp_path: str | None = "/mcp") -> None:
        self.app = app
        self.host_names = allowed_host_names(host) if is_loopback(host) else None
        self.cors_origins = {o.strip().rstrip("/").lower() for o in cors_origins}
        self.mcp_path = mcp_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            status, message, headers = refusal
            await send_json_error(send, status, message, headers)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        host = (_header(scope, b"host") or b"").decode("latin-1")
        if self.host_names is not None and host_name(host) not in self.host_names:
            return 421, (f"Host {shown(host)} is not this server's: on loopback it answers only to "
                         f"{', '.join(self.host_names)} (DNS-rebinding protection)"), []
        origin = _header(scope, b"origin")
        if origin is not None:
            text = origin.decode("latin-1").strip().rstrip("/").lower()
            own = {f"{scheme}://{host.strip().lower()}" for scheme in ("http", "https")}
            if text not in own and text not in self.cors_origins:
                return 403, (f"Origin {shown(origin)} may not call this server (its own pages may; "
                             "allow another with serve --cors-origin ORIGIN)"), []
        method = scope.get("method")
        if self.mcp_path is not None and scope.get("path") == self.mcp_path and method == "GET":
            return 405, "GET /mcp is not served (a stateless transport: POST JSON-RPC requests)", [(b"allow", b"POST")]
        if method == "POST" and not is_json_media_type(_header(scope, b"content-type")):
            given = _header(scope, b"content-type")
            return 415, ("the request body must be sent as Content-Type: application/json"
                         + (f" (got {shown(given)})" if given is not None else "")), []
        return None


class JsonErrors:
    """Every error response is ``{"error": "one message"}``: a refusal written as plain text by a
    part the app mounts (the MCP transport's header checks, CORS) is rewritten as JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] = {}
        body = bytearray()

        async def guarded_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), None)
                if message["status"] >= 400 and not is_json_media_type(ctype) and \
                        not (ctype or b"").startswith(b"text/event-stream"):
                    held["start"] = message
                    return
                await send(message)
                return
            if "start" not in held or message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            start = held.pop("start")
            text = one_line(bytes(body).decode("utf-8", "replace")) or f"HTTP {start['status']}"
            out = json.dumps({"error": text}).encode()
            headers = [(k, v) for k, v in start.get("headers", [])
                       if k.lower() not in (b"content-type", b"content-length")]
            await send({**start, "headers": [*headers, (b"content-type", b"application/json"),
                                              (b"content-length", str(len(out)).encode())]})
            await send({"type": "http.response.body", "body": out})

        await self.app(scope, receive, guarded_send)


class WholeBody:
    """A POST to ``path`` (the MCP transport) is read whole, up to ``limit`` bytes, before the app
    sees it. A client that leaves mid-body is then a cancelled request that writes nothing to the
    log (the SDK would log a traceback for each), and a body sent without a length is bounded here."""

    def __init__(self, app: ASGIApp, path: str, limit: int) -> None:
        self.app = app
        self.path = path
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await send_json_error(send, 413, f"the request body is over the limit of {self.limit:,} bytes")
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)
