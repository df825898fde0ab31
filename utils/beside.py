"""``Beside``: one call run on a second thread while the caller works on, joined with ``result()``.

Why: a whole-collection question answered from the ANN does independent pieces of work (the IVF
scans, the BM25 scores of the collection, reading scattered vector rows), each a few to a few dozen
milliseconds. faiss's search and numpy's large operations release the GIL, so on two cores the
pieces overlap instead of adding up. With one usable core the call simply runs in ``result()``.
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
