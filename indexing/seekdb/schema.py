"""The four tables of an engine-backed index: their DDL, vector and full-text indexes, the engine's memory budget, bulk inserts and drops."""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from indexing.seekdb.engine import Engine
from indexing.seekdb.sql import TABLE_PREFIX, checked_name, placeholders


TABLES = ("chunks", "leaves", "nodes", "terms", "kg")
"""kg: the long-leaf graphs (one JSON record a row, as kg_graphs.jsonl holds them; empty without graphs)."""


def table_names(prefix: str) -> dict[str, str]:
    """The tables of the index whose prefix is ``prefix``, checked here once against TABLE_PREFIX:
    table names are the only run-time text in SQL besides placeholders (they cannot be parameters)."""
    checked_name(prefix, TABLE_PREFIX)
    return {t: f"{prefix}_{t}" for t in TABLES}


FULLTEXT = "FULLTEXT INDEX ft_body (body) WITH PARSER space PARSER_PROPERTIES=(min_token_size=1)"
VECTOR_INDEX_TYPES = ("hnsw", "hnsw_sq", "hnsw_bq")
"""The engine's in-memory graph indexes (Config.store_vector_index): float32, 8-bit and 1-bit vectors.
Its table-based IVF indexes were not taken: their recall and latency were not measured here."""


def vector_with(vector_index: str) -> str:
    """The WITH clause of a vector index of ``vector_index`` type (checked: it becomes SQL text)."""
    if vector_index not in VECTOR_INDEX_TYPES:
        raise ValueError(f"unknown vector index type {vector_index!r}")
    return f"WITH (DISTANCE=cosine, TYPE={vector_index}, LIB=vsag)"


def vector_index_sql(vector_index: str) -> str:
    """The vector index clause of a CREATE TABLE."""
    return f"VECTOR INDEX vi_emb (emb) {vector_with(vector_index)}"

DEFER_INDEX_ROWS = 20_000
"""A table of more rows gets its full-text and vector indexes after its rows are loaded: 20k rows
loaded at 13,700 rows/s then indexed (4 s FTS, 16 s HNSW) beat 760 rows/s indexing row by row;
a small table pays ~1 s per index built afterwards, so it is indexed as it is filled."""


def create_tables(engine: Engine, prefix: str, dim: int, rows: Mapping[str, int],
                  vector_index: str = "hnsw") -> dict[str, str]:
    names = table_names(prefix)
    dim = int(dim)
    vector = vector_index_sql(vector_index)
    for t in names.values():
        engine.run(f"DROP TABLE IF EXISTS `{t}`")

    def indexes(table: str) -> str:
        return "" if rows[table] > DEFER_INDEX_ROWS else f", {FULLTEXT}, {vector}"

    engine.run(f"CREATE TABLE `{names['chunks']}` (row_id BIGINT PRIMARY KEY, leaf INT NOT NULL, doc INT NOT NULL, "
               f"body LONGTEXT, record LONGTEXT NOT NULL, tkey CHAR(32) NOT NULL, emb VECTOR({dim}) NOT NULL, "
               f"KEY k_leaf (leaf), KEY k_doc (doc){indexes('chunks')})")
    engine.run(f"CREATE TABLE `{names['leaves']}` (leaf BIGINT PRIMARY KEY, doc INT NOT NULL, body LONGTEXT, "
               f"tkey CHAR(32) NOT NULL, emb VECTOR({dim}) NOT NULL, KEY k_doc (doc){indexes('leaves')})")
    engine.run(f"CREATE TABLE `{names['nodes']}` (row_id BIGINT PRIMARY KEY, record LONGTEXT NOT NULL, "
               f"content LONGTEXT NOT NULL)")
    engine.run(f"CREATE TABLE `{names['terms']}` (term VARCHAR(512) COLLATE utf8mb4_bin PRIMARY KEY, df INT NOT NULL)")
    engine.run(f"CREATE TABLE `{names['kg']}` (row_id BIGINT PRIMARY KEY, leaf BIGINT NOT NULL, record LONGTEXT NOT NULL)")
    return names


def build_parallelism() -> int:
    """Threads asked for when an index is built over loaded rows: HNSW over 50k rows went from
    1,248 to 1,900 rows/s with PARALLEL(2) on 2 cores (the full-text build is unchanged by it). A hint:
    a server caps it at what it allows."""
    return max(1, min(os.cpu_count() or 1, 16))


def index_tables(engine: Engine, names: Mapping[str, str], rows: Mapping[str, int],
                 vector_index: str = "hnsw") -> None:
    """Full-text (TreeRAG's tokens, split on spaces) and HNSW (cosine) indexes over the loaded rows
    of the tables ``create_tables`` left without them."""
    hint = f"/*+ PARALLEL({build_parallelism()}) */"
    vector = vector_with(vector_index)
    for kind in ("chunks", "leaves"):
        if rows[kind] <= DEFER_INDEX_ROWS:
            continue
        table = names[kind]
        engine.run(f"CREATE {hint} FULLTEXT INDEX ft_body ON `{table}` (body) WITH PARSER space "
                   f"PARSER_PROPERTIES=(min_token_size=1)")
        engine.run(f"CREATE {hint} VECTOR INDEX vi_emb ON `{table}` (emb) {vector}")


GIB = 1 << 30


def memory_budget_needed(vector_rows: int, dim: int, vector_index: str = "hnsw") -> int:
    """Bytes an embedded engine should be allowed for HNSW indexes over ``vector_rows`` vectors.

    seekdb holds an HNSW index in memory (the vectors, float32, plus the graph) and pylibseekdb creates
    an embedded database with a 1 GB budget: copying 10,000 documents (1.46M vectors) failed with
    "No memory or server runtime memory limit reached" (code 4013), and an engine that built them on
    5 GB (1.39M vectors, 2.1 GB) could not load them back for a query (code 7604, "Not enough memory"
    in its log) where 8 GB could. Three times the vectors' bytes covers the graph, the build's working
    set and a load; 1 GB is left for everything else the engine keeps. A quantised index holds a
    byte a dimension at most (8-bit codes; the 1-bit index's re-ranking codes) and its graph's
    neighbour lists (16 links of 4 bytes at the base layer, twice that counted), three times over.
    """
    if vector_index == "hnsw":
        return GIB + 3 * vector_rows * dim * 4
    return GIB + 3 * vector_rows * (dim + 128)


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
    engine.run("ALTER SYSTEM SET memory_budget = %s", (f"{want // GIB}G",))
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




def drop_tables(engine: Engine, prefix: str, timeout_s: float | None = None) -> None:
    for t in table_names(prefix).values():
        sql = f"DROP TABLE IF EXISTS `{t}`"
        engine.run(sql) if timeout_s is None else engine.run_bounded(sql, timeout_s)


INSERT_ROWS = 500
"""Rows per INSERT statement, at most."""

INSERT_BYTES = 4 << 20
"""Bytes per INSERT statement, at most (the engine refuses packets over 16 MB; a section's text can be large)."""


def insert_rows(engine: Engine, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """``rows`` (one value per column, passed as driver parameters) in INSERT statements of at most
    INSERT_ROWS rows and about INSERT_BYTES of values each."""
    head = f"INSERT INTO `{table}` ({','.join(columns)}) VALUES "
    batch: list[Sequence[Any]] = []
    size = 0

    def send() -> None:
        engine.run(head + placeholders(len(batch), len(columns)), [v for row in batch for v in row])

    for row in rows:
        n = _row_bytes(row)
        if batch and (len(batch) >= INSERT_ROWS or size + n > INSERT_BYTES):
            send()
            batch, size = [], 0
        batch.append(row)
        size += n
    if batch:
        send()


def _row_bytes(row: Sequence[Any]) -> int:
    """About how many bytes a row's values take in the statement (strings may double when escaped;
    the packet limit is four times INSERT_BYTES)."""
    return sum(len(v) + 3 if isinstance(v, (str, bytes)) else 21 for v in row) + 3


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
