"""A connection to seekdb (embedded in this process, or a server) over the MySQL protocol: parameters, sessions, timeouts, errors in one line.

Both kinds are reached through pymysql, so every value travels as a driver parameter (``%s``): the
embedded engine's own cursor (pylibseekdb) takes only SQL text, but the engine serves the MySQL
protocol on a local socket (``pylibseekdb.connection_options()``), as the wheel's own tools use it.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Sequence

from indexing.seekdb.sql import checked_name, identifier
from indexing.seekdb.uri import StoreURI
from utils.errors import BackendError, IndexFormatError, InputError
from utils.oneline import one_line


FETCH_ROWS = 4096
"""Rows asked for by one IN (...) list (leaf vectors, vectors and digests read back for updates and verify)."""

STATEMENT_TIMEOUT_US = 3_600_000_000
"""ob_query_timeout for our sessions: an hour (index builds over a million rows)."""


_EMBEDDED_LOCK = threading.Lock()
_EMBEDDED_OPEN: list[str] = []
"""The embedded engine is one per process (pylibseekdb.open binds the process to one directory and
silently ignores a second): the directory this process opened, so a different one is refused."""


ENGINE_DIRS = ("etc", "store")
"""What an embedded seekdb database directory holds once the engine has created it."""


def check_embedded_dir(path: str) -> None:
    """Refuse to create an embedded database in an existing directory that already holds something
    else (a folder of documents, a file index): the engine would add etc/ log/ run/ store/ to it."""
    p = Path(path)
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        raise InputError(f"--store seekdb://{path}: exists and is not a directory")
    if not p.is_dir():
        return
    try:
        entries = {e.name for e in p.iterdir()}
    except OSError as exc:
        raise InputError(f"--store seekdb://{path}: cannot list the directory ({exc.strerror or exc})") from None
    if entries and not all((p / d).is_dir() for d in ENGINE_DIRS):
        raise InputError(f"--store seekdb://{path}: a non-empty directory that is not a seekdb database; "
                         "name a new or empty directory")


def _open_embedded(path: str, create: bool) -> None:
    import pylibseekdb  # noqa: PLC0415 - the engine loads only for an engine-backed index

    if not create and not (Path(path) / "etc").is_dir():
        # an index may come from someone else: reading it never creates a database where it points
        raise IndexFormatError(f"no seekdb database at {path} (the index's store); build it there with "
                               f"python main.py index --store seekdb://{path}")

    with _EMBEDDED_LOCK:
        if _EMBEDDED_OPEN and _EMBEDDED_OPEN[0] != path:
            raise BackendError(f"seekdb: this process already opened the embedded database at {_EMBEDDED_OPEN[0]}; "
                               f"one embedded database per process (use a server for {path})")
        if not _EMBEDDED_OPEN:
            check_embedded_dir(path)
            Path(path).mkdir(parents=True, exist_ok=True)
            # the engine's child process reports host facts home unless told not to (no network at run
            # time); it inherits this environment. A value the user set is kept.
            os.environ.setdefault("TELEMETRY_ENABLED", "false")
            pylibseekdb.open(db_dir=path)
            _EMBEDDED_OPEN.append(path)


class Engine:
    """One SQL connection to seekdb/OceanBase; every failure is one line naming the store."""

    def __init__(self, uri: StoreURI, create: bool = False) -> None:
        self.uri = uri
        self.create = create
        """Whether an embedded database may be created (builds), or must exist (reading an index)."""
        self._conn: Any = None
        self._session: dict[str, int] = {}
        """Session variables set on the current connection (a new connection has none)."""
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        uri = self.uri
        try:
            if uri.embedded:
                import pylibseekdb  # noqa: PLC0415

                _open_embedded(str(uri.path), self.create)
                options: dict[str, Any] = dict(pylibseekdb.connection_options())
            else:
                options = dict(host=uri.host, port=uri.port, user=f"{uri.user}@{uri.tenant}",
                               password=uri.password, connect_timeout=10)
            conn = _connect_database(options, uri.database)
            with conn.cursor() as cur:  # building a vector index over a million rows takes minutes
                cur.execute("SET ob_query_timeout = %s", (STATEMENT_TIMEOUT_US,))
            return conn
        except ImportError as exc:
            raise BackendError(f"seekdb store needs the pyseekdb package: pip install pyseekdb ({exc.name} missing)") from None
        except (BackendError, IndexFormatError):
            raise
        except Exception as exc:  # noqa: BLE001 - driver errors vary; one line with the store named
            raise BackendError(f"seekdb: cannot connect to {uri.public()}: {one_line(exc, 200)}") from None

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows ``sql`` returns; ``params`` fill its ``%s`` placeholders (the driver quotes them).
        Without ``params`` the text is sent as it is (a ``%`` in it is then literal)."""
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
                self._session = {}
            cur = self._conn.cursor()
            try:
                cur.execute(sql, None if params is None else tuple(params))
                return list(cur.fetchall() or [])
            except Exception as exc:  # noqa: BLE001
                raise BackendError(f"seekdb ({self.uri.public()}): {one_line(exc, 200)}{_hint(exc)}") from None
            finally:
                cur.close()

    def run(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.rows(sql, params)

    def run_bounded(self, sql: str, seconds: float) -> None:
        """A statement that may wait on a lock past any timeout the engine honours (a DDL): it runs in
        a helper thread and is cancelled with KILL QUERY from a second connection at the deadline
        (the engine then interrupts it at once, code 1317, and nothing is changed)."""
        session = int(self.rows("SELECT CONNECTION_ID()")[0][0])
        failure: list[BaseException] = []

        def work() -> None:
            try:
                self.run(sql)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                failure.append(exc)

        worker = threading.Thread(target=work, name="seekdb-bounded", daemon=True)
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            killer = Engine(self.uri)
            try:
                killer.run("KILL QUERY %s", (session,))
            finally:
                killer.close()
            worker.join(30)
            raise BackendError(f"seekdb ({self.uri.public()}): still waiting after {seconds:.0f} s, cancelled: "
                               f"{one_line(sql, 80)}")
        if failure:
            raise failure[0]

    def set_session(self, name: str, value: int) -> None:
        """A session variable, sent only when this connection does not already have that value."""
        with self._lock:
            if self._conn is not None and self._session.get(name) == value:
                return
        self.run(f"SET {checked_name(name)} = %s", (int(value),))
        self._session[name] = value

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass
                self._conn = None


def _connect_database(options: dict[str, Any], database: str) -> Any:
    """A pymysql connection to ``database``, created first when missing (a new store)."""
    import pymysql  # noqa: PLC0415

    common = dict(options, charset="utf8mb4", autocommit=True)
    boot = pymysql.connect(**common)
    try:
        with boot.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {identifier(database)}")
    finally:
        boot.close()
    return pymysql.connect(database=database, **common)


def check_reachable(uri: StoreURI) -> None:
    if uri.embedded and uri.path is not None:
        check_embedded_dir(uri.path)  # before the engine is loaded: nothing is created on refusal
    engine = Engine(uri, create=True)
    try:
        engine.rows("SELECT 1")
    finally:
        engine.close()


def _hint(exc: object) -> str:
    """What to do about an engine error a user can act on."""
    if "code=4013" in str(exc) or "memory limit reached" in str(exc):
        return (" - the engine's memory budget is too small for this index: raise it as its administrator "
                "(ALTER SYSTEM SET memory_budget = '8G'), or use a server with more memory")
    if "7604" in str(exc):
        return (" - the engine could not use a vector index; when its log says 'Not enough memory', raise "
                "its memory budget (ALTER SYSTEM SET memory_budget = '8G')")
    return ""
