"""An index whose chunks, leaves and section texts live in seekdb or OceanBase (``--store seekdb://...``).

Why an engine: one machine's files stop scaling somewhere past ten thousand
documents; seekdb runs embedded in this process (``seekdb:///abs/path``) or as a
server, and OceanBase speaks the same protocol across machines
(``seekdb://USER[:PASS]@HOST:PORT/DATABASE``). The index directory then keeps a
small manifest: metadata.json (the store URI without its password, the table
prefix, counts, documents, settings) and the tree's structure arrays
(node_table.npy, node_toc_tokens.npy, leaf_chunks.npy: a few MB at 10,000
documents). Everything that grows with the text is in four tables:

    <prefix>_chunks  row, leaf, doc, body (FULLTEXT), record (JSON), tkey, emb VECTOR (HNSW, cosine)
    <prefix>_leaves  leaf, doc, body (FULLTEXT), tkey, emb VECTOR (HNSW, cosine)
    <prefix>_nodes   row, record (JSON), content
    <prefix>_terms   term, df          (the relevance floor's IDF)

How retrieval runs on it (``SeekdbSearch``): a leaf or a document is scored
exactly by a metadata filter (``WHERE leaf = ?`` / ``WHERE doc = ?``) with the
engine computing every row's inner product and full-text relevance; a larger
scope (the whole collection) by the engine's approximate kNN and full-text
top-N, the union of both candidate lists re-scored exactly. The ``body``
columns hold TreeRAG's own tokens (jieba for Chinese, the same stop words),
indexed with the engine's ``space`` parser, so the engine matches the words
TreeRAG's BM25 matches; its relevance formula and statistics are its own.

A build writes the file index to a staging directory as usual (the same code,
the same incremental reuse), copies it into new tables, swaps the manifest in
atomically and only then drops the previous tables: a failed build leaves the
previous index usable. A password comes from TREERAG_SEEKDB_PASSWORD (or the
URI) and is never written to disk.
"""
from __future__ import annotations

import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import unquote, urlsplit

import numpy as np
from pymysql.converters import escape_string  # once per process: a copy escapes millions of strings

from indexing.search import ScoreParams, RangeScores, check_finite, empty_scores
from utils.errors import BackendError, IndexFormatError, InputError
from utils.oneline import one_line

SCHEME = "seekdb"
EMBEDDED_DATABASE = "treerag"
PASSWORD_ENV = "TREERAG_SEEKDB_PASSWORD"
FETCH_ROWS = 4096
"""Rows asked for by one IN (...) list (leaf vectors, vectors and digests read back for updates and verify)."""
INSERT_ROWS = 500
"""Rows per INSERT statement, at most."""
INSERT_BYTES = 4 << 20
"""Bytes per INSERT statement, at most (the engine refuses packets over 16 MB; a section's text can be large)."""
STATEMENT_TIMEOUT_US = 3_600_000_000
"""ob_query_timeout for our sessions: an hour (index builds over a million rows)."""
TABLES = ("chunks", "leaves", "nodes", "terms")


# --------------------------------------------------------------------------- URI


@dataclass(frozen=True)
class StoreURI:
    """Where the engine is: an embedded database directory, or a server."""

    path: str | None = None
    host: str | None = None
    port: int = 2881
    user: str = "root"
    database: str = EMBEDDED_DATABASE
    tenant: str = "sys"
    password: str = field(default="", repr=False, compare=False)

    @property
    def embedded(self) -> bool:
        return self.path is not None

    def public(self) -> str:
        """The URI as written to metadata.json and shown to people: never the password."""
        if self.embedded:
            return f"{SCHEME}://{self.path}"
        tenant = f"?tenant={self.tenant}" if self.tenant != "sys" else ""
        return f"{SCHEME}://{self.user}@{self.host}:{self.port}/{self.database}{tenant}"


def is_store_uri(text: str) -> bool:
    return text.startswith(f"{SCHEME}:")


def redact_uri(text: str) -> str:
    """A store URI as an error message may quote it: whatever could be a password replaced by ``***``.

    The URI is often malformed when it is quoted (that is why there is an error), so this does not
    parse it: everything between the first ``:`` after the user and the *last* ``@`` is the password
    (a password may hold ``@``, ``/`` or ``:`` unencoded); with no ``@``, a non-numeric "port" may
    be a password typed without a host and is hidden too.
    """
    from utils.secrets import redact_uri as _redact

    return _redact(text)


def parse_store_uri(text: str, env: Mapping[str, str] | None = None) -> StoreURI:
    """``seekdb:///abs/path`` or ``seekdb://USER[:PASS]@HOST:PORT/DATABASE[?tenant=T]``; one-line errors
    that never show the password."""
    env = os.environ if env is None else env
    bad = (f"--store {redact_uri(text)!r}: expected seekdb:///absolute/path (embedded) or "
           "seekdb://USER[:PASS]@HOST:PORT/DATABASE (server)")
    if not is_store_uri(text):
        raise InputError(bad)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise InputError(bad) from None
    if parts.scheme != SCHEME or parts.fragment:
        raise InputError(bad)
    if not parts.netloc:
        path = unquote(parts.path)
        if not path.startswith("/") or path == "/" or parts.query:
            raise InputError(bad)
        return StoreURI(path=os.path.normpath(path))
    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not parts.username or not _NAME.fullmatch(database or ""):
        raise InputError(bad)
    tenant = "sys"
    if parts.query:
        m = re.fullmatch(r"tenant=([A-Za-z0-9_]+)", parts.query)
        if not m:
            raise InputError(bad)
        tenant = m.group(1)
    password = unquote(parts.password) if parts.password is not None else env.get(PASSWORD_ENV, "")
    return StoreURI(host=parts.hostname, port=port or 2881, user=unquote(parts.username), database=database,
                    tenant=tenant, password=password)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


# --------------------------------------------------------------------------- connection

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
                boot = pylibseekdb.connect(database="information_schema", autocommit=True)
                cur = boot.cursor()
                try:
                    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{uri.database}`")
                finally:
                    cur.close()
                conn = pylibseekdb.connect(database=uri.database, autocommit=True)
            else:
                conn = self._connect_server()
            cur = conn.cursor()
            try:  # building a vector index over a million rows takes minutes, not the default seconds
                cur.execute(f"SET ob_query_timeout = {STATEMENT_TIMEOUT_US}")
            finally:
                cur.close()
            return conn
        except ImportError as exc:
            raise BackendError(f"seekdb store needs the pyseekdb package: pip install pyseekdb ({exc.name} missing)") from None
        except (BackendError, IndexFormatError):
            raise
        except Exception as exc:  # noqa: BLE001 - driver errors vary; one line with the store named
            raise BackendError(f"seekdb: cannot connect to {uri.public()}: {one_line(exc, 200)}") from None

    def _connect_server(self) -> Any:
        import pymysql  # noqa: PLC0415

        uri = self.uri
        common = dict(host=uri.host, port=uri.port, user=f"{uri.user}@{uri.tenant}", password=uri.password,
                      charset="utf8mb4", autocommit=True, connect_timeout=10)
        boot = pymysql.connect(**common)
        try:
            with boot.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{uri.database}`")
        finally:
            boot.close()
        return pymysql.connect(database=uri.database, **common)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
                self._session = {}
            cur = self._conn.cursor()
            try:
                cur.execute(sql)
                try:
                    got = cur.fetchall()
                except Exception:  # noqa: BLE001 - a statement without a result set
                    got = None
                return list(got or [])
            except Exception as exc:  # noqa: BLE001
                raise BackendError(f"seekdb ({self.uri.public()}): {one_line(exc, 200)}{_hint(exc)}") from None
            finally:
                cur.close()

    def run(self, sql: str) -> None:
        self.rows(sql)

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
                killer.run(f"KILL QUERY {session}")
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
        self.run(f"SET {name} = {int(value)}")
        self._session[name] = value

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass
                self._conn = None


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
    return ""


# --------------------------------------------------------------------------- SQL values


def sql_str(text: str) -> str:
    """A quoted SQL string literal (MySQL escaping)."""
    return "'" + escape_string(text) + "'"


def sql_vec(vec: np.ndarray) -> str:
    """A vector literal; 9 significant digits round-trip float32."""
    return "'[" + ",".join("%.9g" % v for v in np.asarray(vec, dtype=np.float32).tolist()) + "]'"


def parse_vec(text: Any, dim: int, where: str) -> np.ndarray:
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str) or not text.startswith("[") or not text.endswith("]"):
        raise IndexFormatError(f"{where}: not a vector")
    vec = np.array(text[1:-1].split(","), dtype=np.float32) if dim else np.zeros(0, dtype=np.float32)
    if vec.shape != (dim,):
        raise IndexFormatError(f"{where}: vector of {vec.shape[0]} values, expected {dim}")
    return vec


def sql_ints(values: Sequence[int] | np.ndarray) -> str:
    return ",".join(str(int(v)) for v in values)


def fulltext_query(tokens: Sequence[str]) -> str | None:
    """The question's tokens for MATCH ... AGAINST (natural language mode); None when none remain."""
    words = [t for t in dict.fromkeys(tokens) if t and not any(c in t for c in "'\"\\()<>+-~*@")]
    return " ".join(words) if words else None


# --------------------------------------------------------------------------- tables


def table_names(prefix: str) -> dict[str, str]:
    return {t: f"{prefix}_{t}" for t in TABLES}


FULLTEXT = "FULLTEXT INDEX ft_body (body) WITH PARSER space PARSER_PROPERTIES=(min_token_size=1)"
VECTOR_INDEX = "VECTOR INDEX vi_emb (emb) WITH (DISTANCE=cosine, TYPE=hnsw, LIB=vsag)"
DEFER_INDEX_ROWS = 20_000
"""A table of more rows gets its full-text and vector indexes after its rows are loaded: 20k rows
loaded at 13,700 rows/s then indexed (4 s FTS, 16 s HNSW) beat 760 rows/s indexing row by row;
a small table pays ~1 s per index built afterwards, so it is indexed as it is filled."""


def create_tables(engine: Engine, prefix: str, dim: int, rows: Mapping[str, int]) -> dict[str, str]:
    names = table_names(prefix)
    for t in names.values():
        engine.run(f"DROP TABLE IF EXISTS `{t}`")

    def indexes(table: str) -> str:
        return "" if rows[table] > DEFER_INDEX_ROWS else f", {FULLTEXT}, {VECTOR_INDEX}"

    engine.run(f"CREATE TABLE `{names['chunks']}` (row_id BIGINT PRIMARY KEY, leaf INT NOT NULL, doc INT NOT NULL, "
               f"body LONGTEXT, record LONGTEXT NOT NULL, tkey CHAR(32) NOT NULL, emb VECTOR({dim}) NOT NULL, "
               f"KEY k_leaf (leaf), KEY k_doc (doc){indexes('chunks')})")
    engine.run(f"CREATE TABLE `{names['leaves']}` (leaf BIGINT PRIMARY KEY, doc INT NOT NULL, body LONGTEXT, "
               f"tkey CHAR(32) NOT NULL, emb VECTOR({dim}) NOT NULL, KEY k_doc (doc){indexes('leaves')})")
    engine.run(f"CREATE TABLE `{names['nodes']}` (row_id BIGINT PRIMARY KEY, record LONGTEXT NOT NULL, "
               f"content LONGTEXT NOT NULL)")
    engine.run(f"CREATE TABLE `{names['terms']}` (term VARCHAR(512) COLLATE utf8mb4_bin PRIMARY KEY, df INT NOT NULL)")
    return names


def build_parallelism() -> int:
    """Threads asked for when an index is built over loaded rows: HNSW over 50k rows went from
    1,248 to 1,900 rows/s with PARALLEL(2) on 2 cores (the full-text build is unchanged by it). A hint:
    a server caps it at what it allows."""
    return max(1, min(os.cpu_count() or 1, 16))


def index_tables(engine: Engine, names: Mapping[str, str], rows: Mapping[str, int]) -> None:
    """Full-text (TreeRAG's tokens, split on spaces) and HNSW (cosine) indexes over the loaded rows
    of the tables ``create_tables`` left without them."""
    hint = f"/*+ PARALLEL({build_parallelism()}) */"
    for kind in ("chunks", "leaves"):
        if rows[kind] <= DEFER_INDEX_ROWS:
            continue
        table = names[kind]
        engine.run(f"CREATE {hint} FULLTEXT INDEX ft_body ON `{table}` (body) WITH PARSER space "
                   f"PARSER_PROPERTIES=(min_token_size=1)")
        engine.run(f"CREATE {hint} VECTOR INDEX vi_emb ON `{table}` (emb) "
                   f"WITH (DISTANCE=cosine, TYPE=hnsw, LIB=vsag)")


GIB = 1 << 30


def memory_budget_needed(vector_rows: int, dim: int) -> int:
    """Bytes an embedded engine should be allowed for HNSW indexes over ``vector_rows`` vectors.

    seekdb holds an HNSW index in memory (the vectors, float32, plus the graph) and pylibseekdb creates
    an embedded database with a 1 GB budget: copying 10,000 documents (1.46M vectors) failed with
    "No memory or server runtime memory limit reached" (code 4013). Twice the vectors' bytes covers
    the graph and the build's working set; 1 GB is left for everything else the engine keeps.
    """
    return GIB + 2 * vector_rows * dim * 4


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def ensure_memory_budget(engine: Engine, needed: int) -> str | None:
    """Raise an embedded engine's memory_budget to ``needed`` (whole GB, at most 80% of this machine's
    memory, the engine's own automatic ceiling); never lowers it. The setting persists in the database
    directory, so later queries open with it. Returns a note when it changed.

    Only for an embedded database, which this process owns; a server's budget is its administrator's.
    """
    got = engine.rows("SHOW PARAMETERS LIKE 'memory_budget'")
    current = parse_capacity(str(got[0][3])) if got else 0
    if current == 0 or needed <= current:  # 0 is the engine's own automatic sizing (80% of memory)
        return None
    want = -(-needed // GIB) * GIB
    physical = _physical_memory()
    if physical:
        want = min(want, int(physical * 0.8) // GIB * GIB)
    if want <= current:
        return None
    engine.run(f"ALTER SYSTEM SET memory_budget = '{want // GIB}G'")
    return (f"raised the embedded seekdb database's memory budget from {_capacity(current)} to "
            f"{_capacity(want)} (its vector indexes are held in memory)")


def parse_capacity(text: str) -> int:
    """Bytes of an engine capacity value such as '1G', '512M', '0M' (0 when unreadable)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)B?\s*", text.upper())
    if not m:
        return 0
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def _capacity(n: int) -> str:
    return f"{n // GIB} GB" if n % GIB == 0 else f"{n / GIB:.1f} GB"


DROP_TIMEOUT_S = 30.0
"""How long one DROP TABLE of a replaced index may wait. A DROP takes ~0.2 s, but an embedded engine
that had just built a large index in this process held a lock on the previous index's tables, and the
DROP waited without end (ob_query_timeout, ob_trx_lock_timeout and lock_wait_timeout do not bound a
DDL's wait for a lock; measured at 1,000 documents, while the same DROP from a fresh process took
0.2 s). It is cancelled instead, and the next build drops those tables."""


def drop_tables(engine: Engine, prefix: str, timeout_s: float | None = None) -> None:
    for t in table_names(prefix).values():
        sql = f"DROP TABLE IF EXISTS `{t}`"
        engine.run(sql) if timeout_s is None else engine.run_bounded(sql, timeout_s)


def insert_rows(engine: Engine, table: str, columns: str, values: Sequence[str]) -> None:
    """INSERT statements of at most INSERT_ROWS rows and about INSERT_BYTES each."""
    head = f"INSERT INTO `{table}` ({columns}) VALUES "
    batch: list[str] = []
    size = 0
    for v in values:
        if batch and (len(batch) >= INSERT_ROWS or size + len(v) > INSERT_BYTES):
            engine.run(head + ",".join(batch))
            batch, size = [], 0
        batch.append(v)
        size += len(v) + 1
    if batch:
        engine.run(head + ",".join(batch))


def forward_terms(terms: Sequence[str], indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray,
                  n_rows: int) -> Callable[[int, int], list[str]]:
    """Rows [a, b) of a BM25 index as their token strings (each term repeated tf times).

    The postings are grouped by term; regrouped by row once, so the engine's body
    column holds exactly the tokens TreeRAG's BM25 counted.
    """
    term_of = np.repeat(np.arange(len(terms), dtype=np.int64), np.diff(np.asarray(indptr)))
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    by_row_term, by_row_tf = term_of[order], np.asarray(tf)[order]
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=ptr[1:])

    def bodies(a: int, b: int) -> list[str]:
        out = []
        for r in range(a, b):
            s, e = int(ptr[r]), int(ptr[r + 1])
            out.append(" ".join(" ".join([terms[t]] * int(c)) for t, c in zip(by_row_term[s:e], by_row_tf[s:e])))
        return out

    return bodies


# --------------------------------------------------------------------------- search

EF_SEARCH_FACTOR = 2
"""The HNSW search beam, as a multiple of the candidates asked for. The engine's default beam (64, or the
LIMIT when larger) found 62% of the true 1,000 nearest of 200k clustered vectors; twice the LIMIT found
80% (+11 ms)."""
EF_SEARCH_MAX = 100_000
"""The engine refuses a larger ob_hnsw_ef_search."""


class SeekdbSearch:
    """``indexing.search.Search`` answered by the engine (see the module docstring)."""

    store = "seekdb"

    def __init__(self, engine: Engine, prefix: str, dim: int, n_chunks: int, n_leaves: int,
                 leaf_ptr: np.ndarray, doc_rows: Mapping[str, tuple[int, int]], doc_numbers: Mapping[str, int],
                 scripts: frozenset[str]) -> None:
        self.engine = engine
        self.tables = table_names(prefix)
        self.dim = dim
        self.n_chunks = n_chunks
        self.n_leaves = n_leaves
        self.leaf_ptr = np.asarray(leaf_ptr)
        self._scripts = scripts
        # a range that is exactly one leaf's or one document's rows is asked for by that filter
        self._doc_of_range = {rng: doc_numbers[d] for d, rng in doc_rows.items()}

    # ---------------------------------------------------------- chunk side

    def _filter(self, start: int, end: int) -> str:
        doc = self._doc_of_range.get((start, end))
        if doc is not None:
            return f"doc = {doc}"
        leaf = int(np.searchsorted(self.leaf_ptr, start, side="right")) - 1
        if 0 <= leaf < self.n_leaves and int(self.leaf_ptr[leaf]) == start and int(self.leaf_ptr[leaf + 1]) == end:
            return f"leaf = {leaf}"
        return f"row_id >= {int(start)} AND row_id < {int(end)}"

    def _dense(self, qvec: np.ndarray, where: str) -> dict[int, float]:
        got = self.engine.rows(f"SELECT row_id, inner_product(emb, {sql_vec(qvec)}) FROM `{self.tables['chunks']}` "
                               f"WHERE {where}")
        return {int(r): float(s) for r, s in got}

    def _fulltext(self, tokens: Sequence[str], where: str | None, limit: int | None = None,
                  table: str = "chunks", key: str = "row_id") -> dict[int, float]:
        q = fulltext_query(tokens)
        if q is None:
            return {}
        match = f"MATCH(body) AGAINST({sql_str(q)})"
        cond = f"{where} AND {match}" if where else match
        tail = f" ORDER BY s DESC LIMIT {int(limit)}" if limit else ""
        got = self.engine.rows(f"SELECT {key}, {match} AS s FROM `{self.tables[table]}` WHERE {cond}{tail}")
        return {int(r): float(s) for r, s in got}

    def _knn(self, qvec: np.ndarray, table: str, key: str, limit: int, where: str | None = None) -> list[int]:
        self.engine.set_session("ob_hnsw_ef_search", min(EF_SEARCH_MAX, max(64, EF_SEARCH_FACTOR * int(limit))))
        cond = f" WHERE {where}" if where else ""
        got = self.engine.rows(f"SELECT {key} FROM `{self.tables[table]}`{cond} ORDER BY cosine_distance(emb, "
                               f"{sql_vec(qvec)}) APPROXIMATE LIMIT {int(limit)}")
        return [int(r[0]) for r in got]

    def score_range(self, qvec: np.ndarray | None, tokens: Sequence[str], start: int, end: int,
                    idf: tuple[int, int], params: ScoreParams) -> RangeScores:
        if end <= start:
            return empty_scores()
        if end - start <= params.exact_rows:
            where = self._filter(start, end)
            rows = np.arange(start, end, dtype=np.int64)
            dense = np.zeros(end - start, dtype=np.float32)
            if qvec is not None:
                got = self._dense(qvec, where)
                dense = np.array([got.get(int(r), np.nan) for r in rows], dtype=np.float32)
            bm = self._fulltext(tokens, where)
            bm25 = np.array([bm.get(int(r), 0.0) for r in rows], dtype=np.float32)
            return RangeScores(rows, check_finite(dense, f"{self.tables['chunks']}.emb"), bm25)
        # a large scope: the engine's nearest neighbours and full-text best, re-scored exactly
        cand: set[int] = set()
        where = None if (start, end) == (0, self.n_chunks) else self._filter(start, end)
        if qvec is not None:
            cand.update(r for r in self._knn(qvec, "chunks", "row_id", params.candidates, where) if start <= r < end)
        bm = self._fulltext(tokens, where, params.candidates)
        cand.update(r for r in bm if start <= r < end)
        rows = np.array(sorted(cand), dtype=np.int64)
        if not len(rows):
            return empty_scores()
        dense = self.dense_rows(qvec, rows) if qvec is not None else np.zeros(len(rows), dtype=np.float32)
        bm25 = np.array([bm.get(int(r), 0.0) for r in rows], dtype=np.float32)
        return RangeScores(rows, dense, bm25)

    def dense_rows(self, qvec: np.ndarray, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        got = self._dense(qvec, f"row_id IN ({sql_ints(np.unique(rows))})")
        return check_finite(np.array([got.get(int(r), np.nan) for r in rows], dtype=np.float32),
                            f"{self.tables['chunks']}.emb")

    def bm25_rows(self, tokens: Sequence[str], rows: np.ndarray, idf: tuple[int, int],
                  params: ScoreParams) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        got = self._fulltext(tokens, f"row_id IN ({sql_ints(np.unique(rows))})")
        return np.array([got.get(int(r), 0.0) for r in rows], dtype=np.float32)

    # ---------------------------------------------------------- leaf side

    def leaf_dense(self, qvec: np.ndarray, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        table = self.tables["leaves"]
        if leaves is None and self.n_leaves > params.exact_rows:
            near = self._knn(qvec, "leaves", "leaf", params.candidates)
            out = np.zeros(self.n_leaves, dtype=np.float32)
            if near:
                got = self.engine.rows(f"SELECT leaf, inner_product(emb, {sql_vec(qvec)}) FROM `{table}` "
                                       f"WHERE leaf IN ({sql_ints(near)})")
                for leaf, s in got:
                    out[int(leaf)] = float(s)
            return check_finite(out, f"{table}.emb")
        want = np.arange(self.n_leaves) if leaves is None else np.asarray(leaves, dtype=np.int64)
        if not len(want):
            return np.zeros(0, dtype=np.float32)
        got_rows: list[tuple[Any, ...]] = []
        for i in range(0, len(want), FETCH_ROWS):
            part = want[i:i + FETCH_ROWS]
            got_rows += self.engine.rows(f"SELECT leaf, inner_product(emb, {sql_vec(qvec)}) FROM `{table}` "
                                         f"WHERE leaf IN ({sql_ints(np.unique(part))})")
        got = {int(leaf): float(s) for leaf, s in got_rows}
        return check_finite(np.array([got.get(int(j), np.nan) for j in want], dtype=np.float32), f"{table}.emb")

    def leaf_keyword(self, tokens: Sequence[str], leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        """The engine's full-text relevance of each leaf's heading path + summary words."""
        want = None if leaves is None else np.asarray(leaves, dtype=np.int64)
        where = None
        if want is not None:
            if not len(want):
                return np.zeros(0, dtype=np.float64)
            where = f"leaf IN ({sql_ints(np.unique(want))})"
        got = self._fulltext(tokens, where, params.candidates, table="leaves", key="leaf")
        if want is None:
            out = np.zeros(self.n_leaves, dtype=np.float64)
            for leaf, s in got.items():
                if 0 <= leaf < self.n_leaves:
                    out[leaf] = s
            return out
        return np.array([got.get(int(j), 0.0) for j in want], dtype=np.float64)

    def term_stats(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        words = sorted(set(tokens))
        if not words:
            return self.n_chunks, {}
        got = self.engine.rows(f"SELECT term, df FROM `{self.tables['terms']}` WHERE term IN "
                               f"({','.join(sql_str(w) for w in words)})")
        return self.n_chunks, {str(t): int(df) for t, df in got}

    def scripts(self) -> frozenset[str]:
        return self._scripts


# --------------------------------------------------------------------------- lazy rows


class EngineRecords:
    """``indexing.records.Records`` read from a table column: one JSON value per row."""

    def __init__(self, engine: Engine, table: str, column: str, n: int, as_json: bool = True) -> None:
        self.engine, self.table, self.column, self.n, self.as_json = engine, table, column, n, as_json
        self.name = f"{table}.{column}"

    def __len__(self) -> int:
        return self.n

    def where(self, i: int) -> str:
        return f"{self.name} row {i}"

    def raw(self, i: int) -> Any:
        from indexing.index_files import loads_strict  # noqa: PLC0415

        got = self.engine.rows(f"SELECT {self.column} FROM `{self.table}` WHERE row_id = {int(i)}")
        if not got:
            raise IndexFormatError(f"{self.where(i)} is missing")
        value = got[0][0]
        if isinstance(value, (bytes, bytearray)):
            value = value.decode("utf-8", "replace")
        return loads_strict(value, self.where(i)) if self.as_json else value


class EngineRows:
    """Rows of a table column as an array-like (vectors, or text digests): what updates and ``verify`` read."""

    def __init__(self, engine: Engine, table: str, key: str, column: str, n: int, dim: int, kind: str) -> None:
        self.engine, self.table, self.key, self.column = engine, table, key, column
        self.n, self.dim, self.kind = n, dim, kind
        self.shape = (n, dim if kind == "vector" else 16)
        self.dtype = np.dtype(np.float32 if kind == "vector" else np.uint8)

    def __len__(self) -> int:
        return self.n

    def _decode(self, value: Any, row: int) -> np.ndarray:
        where = f"{self.table}.{self.column} row {row}"
        if self.kind == "vector":
            return parse_vec(value, self.dim, where)
        text = value.decode("ascii", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
        try:
            return np.frombuffer(bytes.fromhex(text), dtype=np.uint8)
        except ValueError:
            raise IndexFormatError(f"{where}: not a text digest") from None

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            a, b, step = key.indices(self.n)
            if step != 1:
                raise IndexError("step slices are not supported")
            want = np.arange(a, max(a, b), dtype=np.int64)
            where = f"{self.key} >= {a} AND {self.key} < {max(a, b)}"
        else:
            want = np.asarray(key, dtype=np.int64).reshape(-1)
            if len(want) and (want.min() < 0 or want.max() >= self.n):
                raise IndexError("row out of range")
            where = f"{self.key} IN ({sql_ints(np.unique(want))})" if len(want) else "FALSE"
        out = np.zeros((len(want), self.shape[1]), dtype=self.dtype)
        if len(want):
            got = {}
            for i in range(0, len(want), FETCH_ROWS):
                part = want[i:i + FETCH_ROWS]
                cond = where if len(want) <= FETCH_ROWS else f"{self.key} IN ({sql_ints(np.unique(part))})"
                for r, v in self.engine.rows(f"SELECT {self.key}, {self.column} FROM `{self.table}` WHERE {cond}"):
                    got[int(r)] = v
            for i, r in enumerate(want.tolist()):
                if r not in got:
                    raise IndexFormatError(f"{self.table}: row {r} is missing")
                out[i] = self._decode(got[r], r)
        if not isinstance(key, slice) and np.ndim(key) == 0:
            return out[0]
        return out


# --------------------------------------------------------------------------- build (publish) and open

COPY_STEP = 2048
"""Rows formatted per batch while the engine executes the previous batch."""


def prepared(make: Callable[[int, int], list[str]], n: int,
             step: int = COPY_STEP) -> Iterator[tuple[int, list[str]]]:
    """(rows, SQL values) for rows [0, n) in batches; each batch is formatted in a helper thread while
    the caller sends the one before (both drivers wait on the engine without the GIL)."""
    if n <= 0:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="seekdb-copy") as pool:
        pending = pool.submit(make, 0, min(n, step))
        for a in range(0, n, step):
            b = min(n, a + step)
            values = pending.result()
            if b < n:
                pending = pool.submit(make, b, min(n, b + step))
            yield b - a, values


def publish(staged: Path, uri: StoreURI, advance: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Copy a complete file index (``staged``) into new engine tables; the manifest fields for metadata.json.

    On any failure the new tables are dropped and the error propagates: the previous index (its
    manifest and tables) is untouched. ``advance(n)`` is told of every n chunks copied (a progress bar).
    A ``note`` field, when present, is for the person building and not for the manifest.
    """
    from indexing.index_store import load_index  # noqa: PLC0415
    from utils.tokenizer import vocabulary_scripts  # noqa: PLC0415

    index = load_index(staged)
    meta = index.metadata
    dim = int(meta["embedder"]["dim"])
    prefix = "treerag_" + str(meta["build_id"])[:16]
    engine = Engine(uri, create=True)
    try:
        n_chunks, n_leaves = len(index.chunks), len(index.leaves)
        sizes = {"chunks": n_chunks, "leaves": n_leaves}
        note = ensure_memory_budget(engine, memory_budget_needed(n_chunks + n_leaves, dim)) if uri.embedded else None
        names = create_tables(engine, prefix, dim, sizes)
        search = index.search  # FileSearch over the staged files
        bm = search.bm25  # type: ignore[attr-defined]
        chunk_bodies = forward_terms(bm.terms, bm.indptr, bm.rows, bm.tf, n_chunks)
        lt = search.leaf_terms  # type: ignore[attr-defined]
        leaf_bodies = forward_terms(lt.terms, lt.indptr, lt.rows, lt.tf, n_leaves)
        leaf_of_row = np.repeat(np.arange(n_leaves, dtype=np.int64), np.diff(index.leaf_ptr))
        leaf_docs = index.tree.doc[index.tree.leaf_rows]
        records = index.chunks.records  # type: ignore[attr-defined]
        keys = index.text_keys
        def chunk_values(a: int, b: int) -> list[str]:
            bodies = chunk_bodies(a, b)
            vecs = np.asarray(index.embeddings[a:b])
            ks = np.asarray(keys["chunk_text_keys.npy"][a:b])
            values = []
            for i, r in enumerate(range(a, b)):
                rec = json.dumps(records.raw(r), ensure_ascii=False)
                leaf = int(leaf_of_row[r])
                values.append(f"({r},{leaf},{int(leaf_docs[leaf])},{sql_str(bodies[i])},{sql_str(rec)},"
                              f"'{ks[i].tobytes().hex()}',{sql_vec(vecs[i])})")
            return values

        def leaf_values(a: int, b: int) -> list[str]:
            bodies = leaf_bodies(a, b)
            vecs = np.asarray(index.leaf_embeddings[a:b])
            ks = np.asarray(keys["leaf_text_keys.npy"][a:b])
            return [f"({j},{int(leaf_docs[j])},{sql_str(bodies[j - a])},'{ks[j - a].tobytes().hex()}',"
                    f"{sql_vec(vecs[j - a])})" for j in range(a, b)]

        tree = index.tree

        def node_values(a: int, b: int) -> list[str]:
            return [f"({r},{sql_str(json.dumps(tree.records.raw(r), ensure_ascii=False))},"
                    f"{sql_str(json.dumps(tree.contents.raw(r), ensure_ascii=False))})" for r in range(a, b)]

        for count, values in prepared(chunk_values, n_chunks):
            insert_rows(engine, names["chunks"], "row_id,leaf,doc,body,record,tkey,emb", values)
            if advance:
                advance(count)
        for _, values in prepared(leaf_values, n_leaves):
            insert_rows(engine, names["leaves"], "leaf,doc,body,tkey,emb", values)
        for _, values in prepared(node_values, len(tree)):
            insert_rows(engine, names["nodes"], "row_id,record,content", values)
        df = np.diff(np.asarray(bm.indptr))
        # a "word" over 512 characters (a run of symbols) is left out: the relevance floor then
        # counts it as unseen, the most informative, as it counts any word the index lacks
        terms = [f"({sql_str(t)},{int(df[i])})" for i, t in enumerate(bm.terms) if len(t) <= 512]
        insert_rows(engine, names["terms"], "term,df", terms)
        index_tables(engine, names, sizes)
        fields: dict[str, Any] = {"uri": uri.public(), "prefix": prefix,
                                  "scripts": sorted(vocabulary_scripts(bm.terms))}
        if note:
            fields["note"] = note
        return fields
    except BaseException:
        try:
            drop_tables(engine, prefix, DROP_TIMEOUT_S)
        except BackendError:
            pass
        raise
    finally:
        engine.close()


MANIFEST_FILES = ("node_table.npy", "node_toc_tokens.npy", "leaf_chunks.npy")
"""What an engine-backed index directory keeps besides metadata.json (the tree's structure)."""


def store_uri_of(meta: Mapping[str, Any], env: Mapping[str, str] | None = None) -> StoreURI:
    """The engine an index's metadata names, with the password from the environment."""
    store = meta.get("store")
    if not isinstance(store, dict) or not isinstance(store.get("uri"), str) \
            or not _PREFIX.fullmatch(str(store.get("prefix", ""))):
        raise IndexFormatError("metadata.json: store must name a seekdb URI and a table prefix")
    return parse_store_uri(store["uri"], env)


_PREFIX = re.compile(r"treerag_[0-9a-f]{16}")


def keep_manifest(directory: Path, store_fields: dict[str, Any]) -> None:
    """Turn a staged file index into an engine index's manifest directory: only the structure files
    stay, and metadata.json names the store and lists what is left (written last, fsynced)."""
    from indexing.index_files import write_manifest_entry  # noqa: PLC0415
    from indexing.index_store import METADATA  # noqa: PLC0415

    directory = Path(directory)
    meta = json.loads((directory / METADATA).read_text(encoding="utf-8"))
    for name in os.listdir(directory):
        if name != METADATA and name not in MANIFEST_FILES:
            os.unlink(directory / name)
    meta["store"] = dict(store_fields)
    meta["files"] = {name: write_manifest_entry(directory, name) for name in sorted(MANIFEST_FILES)}
    _write_metadata(directory, meta)


def _write_metadata(directory: Path, meta: Mapping[str, Any]) -> None:
    """metadata.json replaced atomically and durably (the file, then its directory, fsynced)."""
    from indexing.index_files import fsync_directory  # noqa: PLC0415
    from indexing.index_store import METADATA  # noqa: PLC0415
    from utils.atomic import atomic_write_text  # noqa: PLC0415

    atomic_write_text(Path(directory) / METADATA,
                      json.dumps(meta, ensure_ascii=False, indent=2, allow_nan=False))
    fsync_directory(Path(directory))


def previous_tables(meta: Mapping[str, Any] | None) -> tuple[StoreURI, str] | None:
    """The engine and table prefix an existing index's metadata names (None for a file index)."""
    if not meta or "store" not in meta:
        return None
    try:
        return store_uri_of(meta), str(meta["store"]["prefix"])
    except (IndexFormatError, InputError):
        return None


def drop_retired(entries: Sequence[tuple[StoreURI, str]]) -> list[tuple[StoreURI, str]]:
    """Drop each (engine, prefix)'s tables, every DROP bounded by DROP_TIMEOUT_S; those left standing."""
    left = []
    for uri, prefix in entries:
        engine = Engine(uri)
        try:
            drop_tables(engine, prefix, DROP_TIMEOUT_S)
        except BackendError:
            left.append((uri, prefix))
        finally:
            engine.close()
    return left


RETIRED = "retired_tables"
"""metadata.json key: engine tables of replaced indexes that are still to be dropped (by the next build)."""


def retired_tables(meta: Mapping[str, Any] | None) -> list[tuple[StoreURI, str]]:
    out = []
    for entry in (meta or {}).get(RETIRED) or []:
        if isinstance(entry, dict):
            found = previous_tables({"store": entry})
            if found is not None:
                out.append(found)
    return out


def mark_retired(directory: Path, entries: Sequence[tuple[StoreURI, str]]) -> None:
    """Record tables still to be dropped in an index's metadata.json (written atomically)."""
    from indexing.index_store import METADATA  # noqa: PLC0415

    meta = json.loads((Path(directory) / METADATA).read_text(encoding="utf-8"))
    meta[RETIRED] = [{"uri": uri.public(), "prefix": prefix} for uri, prefix in dict.fromkeys(entries)]
    _write_metadata(directory, meta)
