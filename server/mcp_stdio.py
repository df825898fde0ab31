"""MCP over stdin/stdout with an answer for every line and a bound on each.

The SDK's stdio transport drops a line it cannot parse without a word (the client waits for a
reply that never comes) and holds a line of any length in memory. Here each line is at most
``max_line_bytes``; a longer one is skipped as it streams past and answered ``-32600``; a line that
is not JSON (or not valid Unicode, or nested too deep) is answered ``-32700``, and JSON that is no
JSON-RPC message ``-32600``, with the request's ``id`` when it has one. Good lines go to the SDK's
session unchanged.

While serving, fd 1 points at stderr, so a stray ``print`` cannot corrupt the protocol stream, and
fd 0 at the null device; both are restored on exit.
"""
from __future__ import annotations

import contextlib
import json
import os
from typing import Any, AsyncIterator, BinaryIO, Callable

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server

from server.request_json import is_unicode, too_deep

READ_CHUNK = 64 * 1024
MAX_MESSAGE_DEPTH = 64


def classify(line: bytes) -> tuple[int, str, Any] | None:
    """None for a line the SDK can take; else the JSON-RPC error (code, message, id) to answer it."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception:  # noqa: BLE001 - pydantic's verdict; the reason is worked out below
        pass
    if too_deep(line, MAX_MESSAGE_DEPTH):
        return types.PARSE_ERROR, f"Parse error: JSON nested more than {MAX_MESSAGE_DEPTH} deep", None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return types.PARSE_ERROR, "Parse error: the line is not JSON", None
    request_id = value.get("id") if isinstance(value, dict) else None
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool) or not is_unicode(str(request_id)):
        request_id = None
    if not is_unicode(json.dumps(value, ensure_ascii=False)):
        return types.INVALID_REQUEST, "Invalid Request: the message is not valid Unicode (a lone surrogate)", request_id
    if isinstance(value, list):
        return types.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported", None
    return types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message", request_id


def error_line(code: int, message: str, request_id: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}) + "\n"


class LineWriter:
    """The one writer of protocol lines (the SDK's replies and this transport's errors), one whole
    line at a time."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")
        async with self._lock:
            await anyio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()

    async def flush(self) -> None:
        return None


class BoundedLines:
    """stdin as the SDK reads it (``async for line``), yielding only the lines it can take."""

    def __init__(self, fd: int, max_line_bytes: int, writer: LineWriter) -> None:
        self._fd = fd
        self._max = max_line_bytes
        self._writer = writer

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        buffer = bytearray()
        skipping = False
        while True:
            chunk = await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK, abandon_on_cancel=True)
            if not chunk:
                break
            buffer += chunk
            while True:
                end = buffer.find(b"\n")
                if end < 0:
                    break
                line = bytes(buffer[:end])
                del buffer[:end + 1]
                if skipping:
                    skipping = False
                    continue
                good = await self._take(line)
                if good is not None:
                    yield good
            if not skipping and len(buffer) > self._max:
                skipping = True
                await self._writer.write(error_line(
                    types.INVALID_REQUEST, f"Invalid Request: a message is longer than {self._max:,} bytes", None))
            if skipping:
                buffer.clear()
        if buffer and not skipping:
            good = await self._take(bytes(buffer))
            if good is not None:
                yield good

    async def _take(self, line: bytes) -> str | None:
        line = line.rstrip(b"\r")
        if not line.strip():
            return None
        verdict = classify(line)
        if verdict is None:
            return line.decode("utf-8")
        await self._writer.write(error_line(*verdict))
        return None


@contextlib.contextmanager
def _claimed_stdio() -> Any:
    """(stdin fd, stdout file) of the wire, with fd 0 on the null device and fd 1 on stderr meanwhile."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    out = os.fdopen(wire_out, "wb", closefd=False)
    try:
        yield wire_in, out
    finally:
        with contextlib.suppress(OSError, ValueError):
            out.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


async def serve_stdio(run: Callable[[Any, Any], Any], max_line_bytes: int) -> None:
    """Run ``run(read_stream, write_stream)`` (the SDK's server loop) over stdin and stdout."""
    with _claimed_stdio() as (fd_in, out):
        writer = LineWriter(out)
        lines = BoundedLines(fd_in, max_line_bytes, writer)
        async with stdio_server(stdin=lines, stdout=writer) as (read_stream, write_stream):  # type: ignore[arg-type]
            await run(read_stream, write_stream)


__all__ = ["serve_stdio", "classify"]
