"""A query as server-sent events: each step is sent the moment the pipeline has it.

Events, in order: ``start`` (the build answering), ``step1`` (located sections), ``step2``
(ranked passages), ``context`` (what the answer reads), ``answer_delta`` (each piece of an LLM's
answer as it is written, ``{"text": ...}``), ``answer``, then ``result`` — the whole
record, exactly ``query --json`` — or ``error`` with one message. A client that disconnects
cancels the query at its next step (``service.guarded``).
"""
from __future__ import annotations

import threading
from typing import Any, AsyncIterator, Callable

import anyio
import anyio.from_thread

from server.errors import ClientGone
from utils.json_out import dumps

KEEPALIVE_S = 15.0
"""A comment line this often while a step runs, so proxies do not close an idle stream."""


def event(name: str, data: Any) -> bytes:
    """One SSE event. JSON escapes every newline, so the data is always one ``data:`` line."""
    try:
        return f"event: {name}\ndata: {dumps(data, ensure_ascii=False)}\n\n".encode()
    except UnicodeEncodeError:  # a lone surrogate (from a provider's reply): escaped, still one valid line
        return f"event: {name}\ndata: {dumps(data)}\n\n".encode()


async def query_events(work: Callable[[Callable[[str, dict[str, Any]], None]], dict[str, Any]],
                       start: dict[str, Any], cancel: threading.Event, limiter: anyio.CapacityLimiter,
                       on_error: Callable[[BaseException], tuple[int, str]]) -> AsyncIterator[bytes]:
    """The event stream of ``work(on_step)`` run in a worker thread; ``cancel`` is set when the
    stream ends early (the client went away) so the worker stops at its next step."""
    send, receive = anyio.create_memory_object_stream[tuple[str, Any]](32)

    def on_step(step: str, part: dict[str, Any]) -> None:
        anyio.from_thread.run(send.send, (step, part))

    async def worker() -> None:
        async with send:
            try:
                result = await anyio.to_thread.run_sync(lambda: work(on_step), limiter=limiter,
                                                        abandon_on_cancel=True)
                await send.send(("result", result))
            except ClientGone:
                pass
            except Exception as exc:  # noqa: BLE001 - told to the client as one line
                status, message = on_error(exc)
                await send.send(("error", {"error": message, "status": status}))

    yield event("start", start)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker)
            async with receive:
                while True:
                    with anyio.move_on_after(KEEPALIVE_S) as scope:
                        try:
                            name, data = await receive.receive()
                        except anyio.EndOfStream:
                            break
                    if scope.cancelled_caught:
                        yield b": keep-alive\n\n"
                        continue
                    yield event(name, data)
    finally:
        cancel.set()
