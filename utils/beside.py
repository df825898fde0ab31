"""``Beside``: one call run on a second thread while the caller works on, joined with ``result()``.

Why: a whole-collection question answered from the ANN does independent pieces of work (the IVF
scans, the BM25 scores of the collection, reading scattered vector rows), each a few to a few dozen
milliseconds. faiss's search and numpy's large operations release the GIL, so on two cores the
pieces overlap instead of adding up. With one usable core the call simply runs in ``result()``.
``SharedCalls``: several such calls taken in turn by the caller and the second thread.
"""
from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

from utils.similarity import scan_threads

T = TypeVar("T")


class Beside(Generic[T]):
    """``fn()`` started on a daemon thread (or deferred to ``result()`` when ``threaded`` is False)."""

    def __init__(self, fn: Callable[[], T], threaded: bool | None = None) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._done = False
        self._thread: threading.Thread | None = None
        if scan_threads() > 1 if threaded is None else threaded:
            self._thread = threading.Thread(target=self._run, daemon=True, name="treerag-beside")
            self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread by result()
            self._error = exc
        self._done = True

    def result(self) -> T:
        """The call's value (waiting for it), or its exception raised here."""
        if self._thread is not None:
            self._thread.join()
        elif not self._done:
            self._run()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class SharedCalls:
    """Named independent calls shared by the caller and one second thread: each thread takes the next
    call not yet started, so two cores finish together whatever each call's length.

    Why: a whole-collection question's IVF scans (faiss releases the GIL) differ in length by index
    size and probe share; given to fixed threads, one thread waited ~90 ms for the other at 100,000
    documents. Taken in turn, the caller does its own work (BM25, which holds the GIL most of the
    time) and then helps with the scans left. Each call computes what it did on a fixed thread.
    """

    def __init__(self, calls: list[tuple[str, Callable[[], object]]], threaded: bool | None = None) -> None:
        self._calls = list(calls)
        self._next = 0
        self._lock = threading.Lock()
        self._values: dict[str, object] = {}
        self._error: BaseException | None = None
        self._side: Beside[None] = Beside(self._drain, threaded)

    def _take(self) -> tuple[str, Callable[[], object]] | None:
        with self._lock:
            if self._next >= len(self._calls) or self._error is not None:
                return None
            self._next += 1
            return self._calls[self._next - 1]

    def _drain(self) -> None:
        while (call := self._take()) is not None:
            name, fn = call
            try:
                self._values[name] = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread by finish()
                with self._lock:
                    self._error = self._error or exc
                return

    def finish(self) -> dict[str, object]:
        """Take the calls left on this thread too, wait for the other's; every value by name (or the
        first exception raised here)."""
        self._drain()
        self._side.result()
        if self._error is not None:
            raise self._error
        return self._values

    def stop(self) -> None:
        """Start no further call and wait for the one running (the caller failed: nothing outlives it)."""
        with self._lock:
            self._next = len(self._calls)
        self._side.result()
