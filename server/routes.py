"""The HTTP routes: JSON in and out, each a thin door onto ``service``.

Blocking work (a query, reading a section, a reload) runs in a worker thread bounded by the app's
limiter; the event loop only moves bytes. Every route reads one snapshot of the index.
"""
from __future__ import annotations

import traceback
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from server import service
from server.errors import ApiError, ClientGone
from server.request_json import MAX_JSON_DEPTH, too_deep
from server.security import shown
from server.sse import query_events
from server.state import IndexHolder
from utils.errors import InputError, TreeRAGError
from utils.json_out import dumps


@dataclass
class Counters:
    """What /api/health reports about queries: how many ran, were cancelled, failed."""

    running: int = 0
    done: int = 0
    cancelled: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **changes: int) -> None:
        with self._lock:
            for name, n in changes.items():
                setattr(self, name, getattr(self, name) + n)

    def to_dict(self) -> dict[str, int]:
        return {"running": self.running, "done": self.done, "cancelled": self.cancelled, "failed": self.failed}


class JSONResponse(Response):
    """JSON that every parser accepts (no NaN), non-ASCII text kept as is."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def json_bytes(content: Any) -> bytes:
    """UTF-8 JSON; a string no UTF-8 can carry (a lone surrogate from some provider) is sent
    escaped (``\\ud800``, valid JSON) instead of failing the whole response."""
    try:
        return dumps(content, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return dumps(content).encode()


def error_of(exc: BaseException) -> tuple[int, str]:
    """HTTP status and the one message a client is told; no traceback ever leaves the server."""
    if isinstance(exc, ApiError):
        return exc.status, exc.message
    if isinstance(exc, InputError):
        return 400, str(exc)
    if isinstance(exc, TreeRAGError):  # the index or a model backend, not the request
        return 500, str(exc)
    return 500, f"internal error ({type(exc).__name__}); the server log has the details"


@dataclass
class Api:
    """The routes' shared state: the index, the limits, the thread limiter, the counters."""

    holder: IndexHolder
    limits: service.Limits
    limiter: anyio.CapacityLimiter
    version: str
    warn: Callable[[str], None]
    readers: anyio.CapacityLimiter
    """Threads for reads of the index, apart from the query workers (``limiter``)."""
    counters: Counters = field(default_factory=Counters)

    async def in_thread(self, fn: Callable[[], Any]) -> Any:
        """A read of the index in a worker thread: never queued behind running questions."""
        return await anyio.to_thread.run_sync(fn, limiter=self.readers)

    async def read_json(self, request: Request) -> Any:
        body = bytearray()
        async for part in request.stream():
            body += part
            if len(body) > self.limits.max_body_bytes:
                raise ApiError(413, f"the request body is over the limit of {self.limits.max_body_bytes:,} bytes")
        if too_deep(bytes(body)):
            raise ApiError(400, f"the body is not valid JSON for this API (nested more than {MAX_JSON_DEPTH} deep)")
        try:
            return json.loads(bytes(body) or b"null")
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ApiError(400, "the body is not valid JSON") from None

    # ------------------------------------------------------------------ queries

    async def query(self, request: Request) -> Response:
        ask = service.parse_ask(await self.read_json(request), self.limits)
        cancel = threading.Event()
        record = await self._cancellable(request, lambda: service.run_query(self.holder.current(), ask, cancel), cancel)
        return JSONResponse(self.served(record.to_dict())) if record is not None else Response(status_code=499)

    def served(self, record: dict[str, Any]) -> dict[str, Any]:
        """A run record as HTTP clients get it: the index named by its directory's name, not by the
        server's absolute path (the run log keeps that)."""
        index = record.get("index")
        if isinstance(index, dict) and "path" in index:
            record["index"] = {**index, "path": self.holder.path.name}
        return record

    async def query_stream(self, request: Request) -> Response:
        ask = service.parse_ask(await self.read_json(request), self.limits)
        cancel = threading.Event()
        snapshot = await anyio.to_thread.run_sync(self.holder.current, limiter=self.limiter)  # a reload loads in a worker
        self.counters.add(running=1)
        outcome: dict[str, str] = {}

        def work(on_step: Callable[[str, dict[str, Any]], None]) -> dict[str, Any]:
            try:
                record = service.run_query(snapshot, ask, cancel, on_step)
            except ClientGone:
                raise
            except Exception as exc:
                outcome["end"] = "failed"
                self._failed(exc)
                raise
            outcome["end"] = "done"
            return self.served(record.to_dict())

        async def events() -> Any:
            try:
                async for chunk in query_events(work, {"build_id": snapshot.build_id, "query": ask.question},
                                                cancel, self.limiter, error_of):
                    yield chunk
            finally:  # neither done nor failed: the client left first (the worker stops at its next step)
                self.counters.add(running=-1, **({"done": 1} if outcome.get("end") == "done" else
                                                 {} if outcome.get("end") == "failed" else {"cancelled": 1}))

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    async def search(self, request: Request) -> Response:
        ask = service.parse_ask(await self.read_json(request), self.limits)
        cancel = threading.Event()
        found = await self._cancellable(request, lambda: service.run_search(self.holder.current(), ask, cancel), cancel)
        return JSONResponse(found.to_dict()) if found is not None else Response(status_code=499)

    def _failed(self, exc: BaseException) -> None:
        self.counters.add(failed=1)
        if error_of(exc)[0] >= 500:
            self.warn("error: a query failed:\n" + "".join(traceback.format_exception(exc)).rstrip())

    async def _cancellable(self, request: Request, fn: Callable[[], Any], cancel: threading.Event) -> Any:
        """``fn()`` in a worker thread, cancelled (``cancel`` set, None returned) if the client
        disconnects first: the body has been read, so the next ASGI message is the disconnect."""
        box: dict[str, Any] = {}
        self.counters.add(running=1)
        try:
            async with anyio.create_task_group() as tg:
                async def call() -> None:
                    try:
                        box["value"] = await anyio.to_thread.run_sync(fn, limiter=self.limiter, abandon_on_cancel=True)
                    except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                        box["error"] = exc
                    tg.cancel_scope.cancel()

                async def watch() -> None:
                    while True:
                        message = await request.receive()
                        if message["type"] == "http.disconnect":
                            cancel.set()
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(call)
                tg.start_soon(watch)
        finally:
            self.counters.add(running=-1)
        if "error" in box:
            if isinstance(box["error"], ClientGone):
                self.counters.add(cancelled=1)
                return None
            self._failed(box["error"])
            raise box["error"]
        if "value" not in box:
            self.counters.add(cancelled=1)
            return None
        self.counters.add(done=1)
        return box["value"]

    # ------------------------------------------------------------------ reading the index

    async def health(self, request: Request) -> Response:
        snap = self.holder.latest()  # answered on the event loop: no worker, no reload, never queued
        return JSONResponse({"status": "ok", "version": self.version, "build_id": snap.build_id,
                             "documents": snap.index.metadata["counts"]["documents"],
                             "reloads": self.holder.reloads, "queries": self.counters.to_dict(),
                             "llm": _llm_name(snap.rag.backends.llm)})

    async def documents(self, request: Request) -> Response:
        return JSONResponse(await self.in_thread(lambda: service.documents(self.holder.current())))

    async def tree(self, request: Request) -> Response:
        q = request.query_params
        docs = q.getlist("document") or None
        nodes = q.getlist("node") or None
        depth = _int_param(q.get("depth"), "depth")
        max_nodes = _int_param(q.get("max_nodes"), "max_nodes")
        return JSONResponse(await self.in_thread(lambda: service.tree(
            self.holder.current(), docs, nodes, under=q.get("under"), depth=depth,
            max_nodes=service.MAX_TREE_NODES if max_nodes is None else max_nodes)))

    async def section(self, request: Request) -> Response:
        node_id = request.path_params.get("node_id")
        q = request.query_params
        return JSONResponse(await self.in_thread(lambda: service.section(
            self.holder.current(), node_id, q.get("heading_path"), q.get("document"))))

    async def passage(self, request: Request) -> Response:
        chunk_id = request.path_params["chunk_id"]
        return JSONResponse(await self.in_thread(lambda: service.passage(self.holder.current(), chunk_id)))

    async def runs(self, request: Request) -> Response:
        try:
            limit = int(request.query_params.get("limit", "20"))
        except ValueError:
            raise ApiError(400, "limit must be an integer") from None
        if not 1 <= limit <= 500:
            raise ApiError(400, "limit must be from 1 to 500")
        log = self.holder.run_log
        rows = [] if log is None else await self.in_thread(lambda: log.recent(limit, index_path=self.index_path))
        return JSONResponse({"logging": log is not None,
                             "runs": [{**r.to_dict(), "index_path": self.holder.path.name} for r in rows]})

    @property
    def index_path(self) -> str:
        """The served index as the run log records it: only its runs are listed or shown."""
        from tree_builder.folder_walk import printable_name

        return printable_name(str(self.holder.path))

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        log = self.holder.run_log
        if log is None:
            raise ApiError(404, "this server does not log runs (started with --no-log)")
        try:
            record = await self.in_thread(lambda: log.get(run_id, index_path=self.index_path))
        except TreeRAGError as exc:
            raise ApiError(400, str(exc)) from None
        if record is None:
            raise ApiError(404, f"no recorded run {shown(run_id)} of this index")
        return JSONResponse(self.served(record.to_dict()))


def _int_param(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value[:12])
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None


def _llm_name(llm: Any) -> str:
    if llm is None:
        return "none (extractive answers)"
    return f"{llm.provider}:{llm.model}" if getattr(llm, "model", None) else str(getattr(llm, "provider", "?"))
