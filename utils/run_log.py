"""A SQLite record of every query run, for `history`, `show` and audits.

Each run is one row in ``runs`` plus one row in ``hits`` per candidate per
stage (keyword, vector, fusion, rerank, and the final list that reached the
LLM as ``final``), so "why was this chunk cited / dropped?" can be answered
from the log alone with plain SQL. The whole record is also kept as JSON
(``runs.result``, ``RunRecord.to_dict``) so ``show`` re-renders a past run
exactly like ``query`` did, even after the structured columns evolve; a run
logged by an older version reads back through ``RunRecord.from_dict``.

Logging is a side effect of answering: a locked, read-only, unwritable or
corrupt log must never cost the user their answer. ``record`` therefore
swallows every failure, warns once per ``RunLog`` and returns False.
``recent``/``get`` are what the user explicitly asked for, so they raise a
one-line ``TreeRAGError`` instead. Read calls never create the file.

Only stdlib ``sqlite3``; one short-lived connection per call, which keeps the
class safe to share between threads and cheap (no fsync per commit: WAL with
``synchronous=NORMAL``).
"""
from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.errors import TreeRAGError
from utils.json_out import dumps
from utils.oneline import one_line
from utils.record_json import RecordError
from utils.run_record import RunRecord, Setting

SCHEMA_VERSION = 1
"""Stored in ``PRAGMA user_version``; bump with a migration when columns change."""

STAGES = ("keyword", "vector", "fusion", "rerank")
"""Intermediate stages of ``RunRecord.retrieve.stages`` recorded as hit rows."""
FINAL_STAGE = "final"

MIN_PREFIX = 6
"""Shortest run-id prefix ``get`` accepts: shorter ones collide too easily."""

DEFAULT_BUSY_TIMEOUT_MS = 2000
DEFAULT_MAX_RUNS = 2000
"""Runs kept by default (``Config.run_log_max_runs``): a served question's record is ~50 KB, so an
unbounded log grows by megabytes a second under load. The oldest runs are deleted as new ones come."""
_EXCERPT_CHARS = 80

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS runs (
        run_id         TEXT PRIMARY KEY,
        created_at     TEXT NOT NULL,
        query          TEXT NOT NULL,
        index_path     TEXT,
        index_identity TEXT,
        config         TEXT,
        providers      TEXT,
        timing_ms      TEXT,
        answer         TEXT,
        fallbacks      TEXT,
        usage          TEXT,
        notice         TEXT,
        result         TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS hits (
        run_id        TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        stage         TEXT NOT NULL
                      CHECK (stage IN ('keyword', 'vector', 'fusion', 'rerank', 'final')),
        rank          INTEGER,
        chunk_id      TEXT,
        node_id       TEXT,
        doc_path      TEXT,
        start_offset  INTEGER,
        end_offset    INTEGER,
        score         REAL,
        score_details TEXT,
        excerpt       TEXT,
        source        TEXT
    )
    """,
    "CREATE INDEX IF NOT EXISTS hits_run_id ON hits(run_id)",
    "CREATE INDEX IF NOT EXISTS runs_created_at ON runs(created_at)",
)

_HIT_COLUMNS = (
    "run_id, stage, rank, chunk_id, node_id, doc_path, start_offset, end_offset,"
    " score, score_details, excerpt, source"
)


@dataclass(frozen=True)
class RunSummary:
    """One line of ``history`` (and of ``/api/runs``): read from the columns, so a run of any
    record version lists."""

    run_id: str
    created_at: str
    query: str
    answer_excerpt: str
    total_ms: float | None
    index_path: str | None
    fallbacks: int

    def to_dict(self) -> dict[str, Setting]:
        return {"run_id": self.run_id, "created_at": self.created_at, "query": self.query,
                "answer_excerpt": self.answer_excerpt, "total_ms": self.total_ms,
                "index_path": self.index_path, "fallbacks": self.fallbacks}


def default_log_path(env: Mapping[str, str]) -> Path:
    """``$TREERAG_LOG``, else ``runs.sqlite3`` in the user's data directory.

    ``env`` is passed in (not read from ``os.environ``) so tests and the CLI
    decide where the log goes without global state.
    """
    override = env.get("TREERAG_LOG", "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs  # lazy: only the CLI needs it

    return Path(platformdirs.user_data_dir("treerag", appauthor=False)) / "runs.sqlite3"


class _NewerSchema(Exception):
    """The log was written by a newer TreeRAG; writing into it could corrupt it."""


class RunLog:
    """Append-only run record at ``path``; see the module docstring for the rules."""

    def __init__(
        self,
        path: Path,
        warn: Callable[[str], None],
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        max_runs: int = DEFAULT_MAX_RUNS,
    ) -> None:
        """``max_runs``: the newest runs kept (older ones are deleted as each run is recorded);
        0 keeps every run."""
        self.path = Path(path)
        self.max_runs = int(max_runs)
        self._warn = warn
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._warned = False
        self._warn_lock = threading.Lock()

    # ------------------------------------------------------------------ write
    def record(self, record: RunRecord) -> bool:
        """Store one run; True if it was written.

        Never raises: the query already has its answer and a logging failure
        must not take it away. The first failure is reported through ``warn``;
        later ones stay silent so an interactive session is not flooded.
        """
        try:
            self._record(record)
            return True
        except Exception as exc:  # noqa: BLE001 - see docstring: nothing may escape
            self._warn_once(f"run log unavailable ({self.path}: {_one_line(exc)}): "
                            "this query was not recorded")
            return False

    def _record(self, record: RunRecord) -> None:
        run_row = _run_row(record)
        hit_rows = _hit_rows(record)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect(read_only=False)
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("BEGIN IMMEDIATE")
            try:
                _ensure_schema(conn)
                conn.execute(
                    "INSERT INTO runs (run_id, created_at, query, index_path, index_identity,"
                    " config, providers, timing_ms, answer, fallbacks, usage, notice, result)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    run_row,
                )
                conn.executemany(
                    f"INSERT INTO hits ({_HIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    hit_rows,
                )
                if self.max_runs > 0:
                    _prune(conn, self.max_runs)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def _warn_once(self, message: str) -> None:
        with self._warn_lock:
            if self._warned:
                return
            self._warned = True
        self._warn(message)

    # ------------------------------------------------------------------- read
    def recent(self, limit: int = 20, index_path: str | None = None) -> list[RunSummary]:
        """Newest runs first, summarised for ``history``; [] when nothing was logged.
        ``index_path``: only the runs of that index (as its records name it)."""
        if not self.path.exists():
            return []
        where, params = ("", ()) if index_path is None else (" WHERE index_path = ?", (index_path,))
        rows = self._read(
            "SELECT run_id, created_at, query, answer, timing_ms, index_path, fallbacks"
            f" FROM runs{where} ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (*params, max(0, int(limit))),
        )
        return [
            RunSummary(
                run_id=str(run_id),
                created_at=str(created_at),
                query=str(query),
                answer_excerpt=one_line(str(answer or ""), _EXCERPT_CHARS),
                total_ms=_total_ms(timing),
                index_path=None if index_path is None else str(index_path),
                fallbacks=_count(fallbacks),
            )
            for run_id, created_at, query, answer, timing, index_path, fallbacks in rows
        ]

    def get(self, run_id_or_prefix: str, index_path: str | None = None) -> RunRecord | None:
        """The record of one run, by full id or unique prefix (``index_path``: among that index's runs).

        None when no run matches; an ambiguous or too short prefix, or a
        stored record that cannot be read as one (a newer version, a row
        edited by hand), is the user's to fix, so it raises ``TreeRAGError``.
        """
        key = run_id_or_prefix.strip()
        if not key or not self.path.exists():
            return None
        shown = one_line(repr(key), _EXCERPT_CHARS)
        where, params = ("", ()) if index_path is None else (" AND index_path = ?", (index_path,))
        rows = self._read(f"SELECT result FROM runs WHERE run_id = ?{where}", (key, *params))
        if not rows:
            if len(key) < MIN_PREFIX:
                raise TreeRAGError(
                    f"run id prefix {shown} is too short: give at least {MIN_PREFIX} characters"
                )
            pattern = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self._read(
                f"SELECT result FROM runs WHERE run_id LIKE ? ESCAPE '\\'{where} LIMIT 2", (pattern, *params)
            )
        if len(rows) > 1:
            raise TreeRAGError(
                f"run id prefix {shown} matches several runs: give more characters"
            )
        if not rows:
            return None
        try:
            record = RunRecord.from_dict(json.loads(rows[0][0]))
        except RecursionError:  # a record nested too deep for the parser: not one this TreeRAG wrote
            raise TreeRAGError(f"run log {self.path}: run {shown} is unreadable (nested too deep)") from None
        except (TypeError, ValueError, RecordError) as exc:
            raise TreeRAGError(f"run log {self.path}: run {shown} is unreadable ({_one_line(exc)})") from None
        record.logged = True  # it is in the log, whatever an old record said
        return record

    def _read(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """Run one SELECT; a log that cannot answer becomes a one-line error."""
        _check_regular(self.path)
        try:
            conn = self._connect(read_only=True)
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise _NewerSchema(f"schema {version} is newer than this TreeRAG ({SCHEMA_VERSION})")
                has_runs = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
                ).fetchone()
                if not has_runs:  # e.g. an empty file: nothing recorded yet
                    return []
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except (sqlite3.Error, OSError, _NewerSchema) as exc:
            raise TreeRAGError(f"run log {self.path} cannot be read: {_one_line(exc)}") from None

    # ------------------------------------------------------------- connection
    def _connect(self, *, read_only: bool) -> sqlite3.Connection:
        """A fresh autocommit connection; read-only ones never create the file."""
        timeout_s = self._busy_timeout_ms / 1000
        if read_only:
            uri = self.path.resolve().as_uri() + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
        else:
            conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        return conn


def _check_regular(path: Path) -> None:
    """A log to read must be a regular file: SQLite opening a FIFO waits for a writer for ever, and a
    device is no log (``history --log FIFO`` hung)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise TreeRAGError(f"run log {path} cannot be read: {_one_line(exc)}") from None
    if not stat.S_ISREG(mode):
        what = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "a device or socket"
        raise TreeRAGError(f"run log {path} is {what}, not a regular file")


# ---------------------------------------------------------------- row mapping
def _ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables on first write (inside the caller's write transaction)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise _NewerSchema(f"schema {version} is newer than this TreeRAG ({SCHEMA_VERSION})")
    for statement in _SCHEMA:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _prune(conn: sqlite3.Connection, keep: int) -> None:
    """Delete all but the newest ``keep`` runs (their hit rows go with them, ON DELETE CASCADE).
    Runs are inserted in order, so rowid order is age order; the cut is one indexed lookup."""
    conn.execute(
        "DELETE FROM runs WHERE rowid <= (SELECT rowid FROM runs ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
        (keep,),
    )


def _run_row(record: RunRecord) -> tuple[object, ...]:
    flat = record.to_dict()
    return (
        record.run_id,
        record.created_at,
        record.query,
        record.index.path,
        _dumps(flat["index"]),
        _dumps(flat["config"]),
        _dumps(flat["providers"]),
        _dumps(flat["timing_ms"]),
        record.answer.text,
        _dumps(flat["fallbacks"]),
        _dumps(flat["usage"]),
        record.notice,
        _dumps(flat),
    )


def _hit_rows(record: RunRecord) -> list[tuple[object, ...]]:
    """One row per candidate per stage, then the final list as stage ``final``."""
    run_id = record.run_id
    rows: list[tuple[object, ...]] = []
    for stage in STAGES:
        for hit in record.retrieve.stages.of(stage):
            rows.append((
                run_id, stage, hit.rank, hit.chunk_id, hit.node_id, hit.doc_path, hit.start_char,
                hit.end_char, _float(hit.score), _dumps(hit.score_details), hit.excerpt, None,
            ))
    for item in record.retrieve.hits:
        scores = item.scores
        final_score = scores.get("rerank_score", scores.get("fused_score"))
        rows.append((
            run_id, FINAL_STAGE, item.rank, item.chunk_id, item.node_id, item.doc_path, item.start_char,
            item.end_char, _float(final_score), _dumps(scores), item.text, item.source,
        ))
    return rows


def _dumps(value: object) -> str:
    """JSON as the record is printed (a NaN score is null: SQLite's json functions reject NaN)."""
    return dumps(value, ensure_ascii=False)


def _float(value: object) -> float | None:
    """A score column's value: a finite number, else NULL."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _total_ms(timing_json: str | None) -> float | None:
    try:
        return _float(json.loads(timing_json or "{}").get("total"))
    except (ValueError, AttributeError, RecursionError):
        return None


def _count(list_json: str | None) -> int:
    try:
        value = json.loads(list_json or "[]")
    except (ValueError, RecursionError):
        return 0
    return len(value) if isinstance(value, list) else 0


def _one_line(exc: BaseException) -> str:
    return one_line(exc) or type(exc).__name__
