"""On-disk cache of LLM responses, so re-running an index build or an
evaluation costs nothing.

Why SQLite (stdlib) in WAL mode: index builds summarise leaves from a thread
pool, and an evaluation may run next to an interactive session on the same
cache. WAL lets readers proceed while one writer commits, ``busy_timeout``
makes writers queue instead of failing, and each write is one atomic
transaction — a crash can lose at most the entry being written, never corrupt
the others. Connections are per thread (sqlite3 connections must not be shared
across threads by default).

Why failures are swallowed: the cache is an optimisation. A corrupt,
read-only or vanished cache file must not make an LLM call fail, so the first
real error disables the cache for the rest of the process with one notice.
A transiently locked database (another process holding the write lock past the
busy timeout) only skips that one read or write.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CACHE_FILENAME = "llm_cache.sqlite3"
CACHE_KEY_VERSION = 1
"""Bump when the meaning of a cached response changes (e.g. prompt framing)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_responses (
    key        TEXT PRIMARY KEY,
    provider   TEXT NOT NULL,
    model      TEXT NOT NULL,
    response   TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


@dataclass(frozen=True)
class CacheEntry:
    """What is needed to rebuild an LLMResponse: the text and the original usage."""

    text: str
    input_tokens: int
    output_tokens: int


def cache_key(
    *,
    provider: str,
    model: str,
    base_url: str | None,
    system: str | None,
    prompt: str,
    json_mode: bool,
    max_tokens: int,
    temperature: float,
) -> str:
    """sha256 over every input that can change the answer.

    base_url is part of the key because "openai:qwen2.5" on two local servers
    can be two different models.
    """
    material = json.dumps(
        {
            "v": CACHE_KEY_VERSION,
            "provider": provider,
            "model": model,
            "base_url": base_url,
            "system": system,
            "prompt": prompt,
            "json_mode": bool(json_mode),
            "max_tokens": int(max_tokens),
            "temperature": float(temperature),
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _is_transient(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class LLMCache:
    """Key → response store; every method is safe to call from any thread."""

    def __init__(
        self,
        path: Path,
        *,
        notice: Callable[[str], None] | None = None,
        busy_timeout_ms: int = 10_000,
    ) -> None:
        self.path = Path(path)
        self._notice = notice or (lambda _msg: None)
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._disabled = False
        self._schema_ready = False

    @property
    def disabled(self) -> bool:
        return self._disabled

    # --- public API -----------------------------------------------------------
    def get(self, key: str) -> CacheEntry | None:
        if self._disabled:
            return None
        try:
            row = self._conn().execute(
                "SELECT response FROM llm_responses WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as exc:
            self._on_error(exc)
            return None
        except OSError as exc:
            self._disable(str(exc))
            return None
        if row is None:
            return None
        try:
            data = json.loads(row[0])
            return CacheEntry(
                text=str(data["text"]),
                input_tokens=int(data.get("input_tokens", 0)),
                output_tokens=int(data.get("output_tokens", 0)),
            )
        except (ValueError, KeyError, TypeError):
            return None  # a damaged row is a miss; the next put overwrites it

    def put(self, key: str, entry: CacheEntry, *, provider: str, model: str) -> None:
        if self._disabled:
            return
        payload = json.dumps(
            {"text": entry.text, "input_tokens": entry.input_tokens, "output_tokens": entry.output_tokens},
            ensure_ascii=False,
        )
        try:
            conn = self._conn()
            with conn:  # one transaction: committed or rolled back, never half-written
                conn.execute(
                    "INSERT OR REPLACE INTO llm_responses (key, provider, model, response, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (key, provider, model, payload, time.time()),
                )
        except sqlite3.Error as exc:
            self._on_error(exc)
        except OSError as exc:
            self._disable(str(exc))

    def delete(self, key: str) -> None:
        """Drop one entry (a reply its caller could not use must not be served again)."""
        if self._disabled:
            return
        try:
            conn = self._conn()
            with conn:
                conn.execute("DELETE FROM llm_responses WHERE key = ?", (key,))
        except sqlite3.Error as exc:
            self._on_error(exc)
        except OSError as exc:
            self._disable(str(exc))

    def __len__(self) -> int:
        if self._disabled:
            return 0
        try:
            return int(self._conn().execute("SELECT COUNT(*) FROM llm_responses").fetchone()[0])
        except (sqlite3.Error, OSError) as exc:
            self._disable(str(exc))
            return 0

    def close(self) -> None:
        with self._lock:
            conns, self._connections = self._connections, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    # --- internals --------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=self._busy_timeout_ms / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            # In WAL mode NORMAL never corrupts; it may only forget the last
            # commits on power loss — fine for a cache, and no fsync per entry.
            conn.execute("PRAGMA synchronous = NORMAL")
            self._ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        self._local.conn = conn
        with self._lock:
            self._connections.append(conn)
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        if self._schema_ready:
            return
        # Switching to WAL needs a moment of exclusive access; when another
        # process is creating the same file at the same instant SQLite may
        # report "locked" without waiting, so retry briefly.
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                with conn:
                    conn.execute(_SCHEMA)
                break
            except sqlite3.OperationalError as exc:
                if not _is_transient(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self._schema_ready = True

    def _on_error(self, exc: sqlite3.Error) -> None:
        if _is_transient(exc):
            return  # someone else holds the lock too long: skip this one operation
        self._disable(str(exc))

    def _disable(self, reason: str) -> None:
        with self._lock:
            if self._disabled:
                return
            self._disabled = True
        reason = " ".join(reason.split())
        self._notice(f"LLM cache at {self.path} is unusable ({reason}); continuing without cache")
