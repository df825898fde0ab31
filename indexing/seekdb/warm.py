"""Warming an engine at open: its vector indexes loaded, optionally its tables read, while TreeRAG does
other work (loading the embedder, embedding the question).

Why: a freshly started engine loads an HNSW index into memory on the first kNN that uses it (at 10,000
generated documents 3.0 s for the chunks' index and 1.3 s for the leaves', most of a first question's
time), and reads every table block from disk and decompresses it on first touch (a whole-collection
question on a cold engine cost ~230 ms of the engine's CPU more than on a warm one). Two kNN searches
that reach an index while it loads each load it again (measured: twice the CPU and memory), so a
question's kNN waits here for the load this started instead of starting its own.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Literal, Mapping

import numpy as np

from indexing.seekdb.engine import Engine
from indexing.seekdb.sql import vector_text
from indexing.seekdb.uri import StoreURI
from utils.oneline import one_line

WarmLevel = Literal["auto", "off", "indexes", "tables"]
"""Config.store_prewarm: see ``resolve_level``."""

WARM_TIMEOUT_US = 600_000_000
"""ob_query_timeout of a warming connection: ten minutes (a table read past that is not worth it)."""

VECTOR_TABLES = (("chunks", "row_id"), ("leaves", "leaf"))
"""The tables with a vector index, and each one's key: the largest first."""


def resolve_level(level: WarmLevel, embedded: bool, long_running: bool) -> Literal["off", "indexes", "tables"]:
    """What ``auto`` means: the vector indexes always (a first question needs them anyway), the tables
    too only for an embedded engine in a long-running process (interactive, serve, eval), where the
    seconds of reading pay back over many questions; a one-shot query would pay them before its one
    question, and a server's tables are its administrator's to keep warm."""
    if level != "auto":
        return level
    return "tables" if embedded and long_running else "indexes"


@dataclass
class WarmReport:
    """What warming did: seconds per step (``chunks index``, ``chunks table``...), and the first failure."""

    seconds: dict[str, float] = field(default_factory=dict)
    error: str | None = None


class Warmer:
    """Loads the vector indexes (a kNN of one row on each table) and, with ``tables``, reads each
    table's vectors once (``COUNT(emb)``: every block of the table passes through the engine's block
    cache), one table per thread and connection. A failure is kept in ``report`` and never raised: a
    question's own statements report a broken engine in their own words."""

    def __init__(self, uri: StoreURI, tables: Mapping[str, str], dim: int, read_tables: bool) -> None:
        self.uri = uri
        self.tables = dict(tables)
        self.dim = dim
        self.read_tables = read_tables
        self.report = WarmReport()
        self._loaded = {name: threading.Event() for name, _ in VECTOR_TABLES}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        for name, key in VECTOR_TABLES:
            t = threading.Thread(target=self._warm, args=(name, key), name=f"seekdb-warm-{name}", daemon=True)
            self._threads.append(t)
            t.start()

    def wait_index(self, table: str) -> None:
        """Return once ``table``'s vector index has loaded (or its load failed); at once when it has no
        vector index or warming was not started."""
        event = self._loaded.get(table)
        if event is not None and self._threads:
            event.wait()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every step to end; whether all did within ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _warm(self, name: str, key: str) -> None:
        engine = Engine(self.uri)
        table = self.tables[name]
        try:
            engine.set_session("ob_query_timeout", WARM_TIMEOUT_US)
            unit = vector_text(np.full(self.dim, 1.0 / np.sqrt(self.dim), dtype=np.float32))
            t = time.perf_counter()
            try:
                engine.rows(f"SELECT {key} FROM `{table}` ORDER BY cosine_distance(emb, %s) APPROXIMATE LIMIT 1",
                            [unit])
            finally:
                self._loaded[name].set()
                self._note(f"{name} index", time.perf_counter() - t)
            if self.read_tables:
                t = time.perf_counter()
                engine.rows(f"SELECT COUNT(emb) FROM `{table}`")
                self._note(f"{name} table", time.perf_counter() - t)
        except Exception as exc:  # noqa: BLE001 - kept for the report; the question's statements raise their own
            with self._lock:
                self.report.error = self.report.error or one_line(exc, 200)
        finally:
            engine.close()

    def _note(self, step: str, seconds: float) -> None:
        with self._lock:
            self.report.seconds[step] = seconds
