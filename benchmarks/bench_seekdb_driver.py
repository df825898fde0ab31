"""The embedded seekdb engine through pymysql with driver parameters (what the store uses) against
pylibseekdb's own cursor with the values written into the SQL text (the former way), in one process.

    python benchmarks/bench_seekdb_driver.py [--quick] [--rows N] [--repeats N] [--workdir DIR] [--json OUT]

Both talk to the same embedded database and the same table. The baseline is the former way:
pylibseekdb's cursor takes SQL text only, so every value was escaped into it by hand; the store now
sends values as pymysql parameters over the engine's local socket. Measured, alternating A and B
each repeat so that a change in the machine's load hits both: bulk INSERT (rows of the chunks
table's shape: text, a JSON record, a 384-value vector), an IN-list read of vectors (updates and
``verify``), inner products over an IN list (a leaf's exact scores), and single-record reads
(``EngineRecords.raw``, one statement each). Ratios are pymysql / former way (below 1: faster).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Headline, Report, banner, base_parser, machine_info, machine_line, pick, ratio,  # noqa: E402
                    stats, table, workdir_of)

DIM = 384


class FormerCursor:
    """pylibseekdb's cursor, values escaped into the SQL text by pymysql's converters (the former way)."""

    def __init__(self, database: str) -> None:
        import pylibseekdb

        self.conn = pylibseekdb.connect(database=database, autocommit=True)

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        from pymysql.converters import escape_item

        if params is not None:
            sql = sql % tuple(escape_item(p, "utf8mb4") for p in params)
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
            try:
                return list(cur.fetchall() or [])
            except Exception:  # noqa: BLE001 - a statement without a result set
                return []
        finally:
            cur.close()

    def run(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.rows(sql, params)


def _rows(n: int, seed: int) -> list[tuple[Any, ...]]:
    from indexing.seekdb.sql import vector_text

    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    words = ["contract", "router", "合同", "履行", "it's", "back\\slash", "accuracy", "bandit"]
    out = []
    for i in range(n):
        body = " ".join(words[(i + k) % len(words)] for k in range(60))
        record = json.dumps({"chunk_id": f"c{i}", "text": body * 2, "heading_path": "A > B 'x'"}, ensure_ascii=False)
        out.append((i, i // 4, body, record, vector_text(vecs[i])))
    return out


def _insert(engine: Any, name: str, rows: list[tuple[Any, ...]]) -> None:
    from indexing.seekdb.schema import insert_rows

    insert_rows(engine, name, ("row_id", "leaf", "body", "record", "emb"), rows)


def main() -> None:
    ap = base_parser(__doc__)
    ap.add_argument("--rows", type=int, default=None, help="rows per table (quick 4,000, full 20,000)")
    ap.add_argument("--repeats", type=int, default=None, help="A/B rounds (quick 3, full 5)")
    args = ap.parse_args()
    n_rows = pick(args.rows, args.quick, 4000, 20000)
    repeats = pick(args.repeats, args.quick, 3, 5)
    work = workdir_of(args) / "seekdb-driver"
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    info = machine_info()
    banner(f"seekdb embedded: pymysql parameters vs values in SQL text ({n_rows:,} rows, {repeats} rounds)")
    print(machine_line(info))

    from indexing.seekdb.engine import Engine
    from indexing.seekdb.uri import parse_store_uri
    from indexing.seekdb.sql import placeholders, vector_text

    driver = Engine(parse_store_uri(f"seekdb://{work / 'db'}"), create=True)
    driver.rows("SELECT 1")  # opens the embedded engine and creates the database
    former = FormerCursor(driver.uri.database)
    ways: dict[str, Any] = {"former": former, "pymysql": driver}
    rows = _rows(n_rows, 0)
    qvec = vector_text(np.ones(DIM, dtype=np.float32) / np.sqrt(DIM))
    ids = list(range(0, n_rows, max(1, n_rows // 4096)))[:4096]
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}

    def timed(way: str, what: str, fn: Callable[[], Any]) -> None:
        """Wall time, and this process's CPU time (the client side; the engine runs in its own process)."""
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.setdefault((way, what), []).append(time.perf_counter() - t)
        cpu.setdefault((way, what), []).append(time.process_time() - c)

    for r in range(repeats):
        for way in (("former", "pymysql") if r % 2 == 0 else ("pymysql", "former")):
            engine = ways[way]
            name = f"bench_{way}"
            engine.rows(f"DROP TABLE IF EXISTS `{name}`")
            engine.rows(f"CREATE TABLE `{name}` (row_id BIGINT PRIMARY KEY, leaf INT NOT NULL, body LONGTEXT, "
                        f"record LONGTEXT NOT NULL, emb VECTOR({DIM}) NOT NULL, KEY k_leaf (leaf))")
            timed(way, "insert", lambda: _insert(engine, name, rows))
            timed(way, "read vectors", lambda: engine.rows(
                f"SELECT row_id, emb FROM `{name}` WHERE row_id IN ({placeholders(len(ids))})", ids))
            timed(way, "inner products", lambda: engine.rows(
                f"SELECT row_id, inner_product(emb, %s) FROM `{name}` WHERE row_id IN ({placeholders(len(ids))})",
                [qvec, *ids]))
            timed(way, "200 record reads", lambda: [engine.rows(
                f"SELECT record FROM `{name}` WHERE row_id = %s", [i]) for i in range(0, 200 * 7, 7)])
    for way in ways:
        ways[way].rows(f"DROP TABLE IF EXISTS `bench_{way}`")
    driver.close()

    report = Report("seekdb_driver", sys.argv[1:], info, params={"rows": n_rows, "repeats": repeats})
    lines = []
    for what in ("insert", "read vectors", "inner products", "200 record reads"):
        a, b = stats(times[("former", what)]), stats(times[("pymysql", what)])
        ca, cb = stats(cpu[("former", what)]), stats(cpu[("pymysql", what)])
        lines.append([what, f"{a.p50 * 1000:.1f}", f"{b.p50 * 1000:.1f}", f"{ratio(b.p50, a.p50):.2f}",
                      f"{ca.p50 * 1000:.1f}", f"{cb.p50 * 1000:.1f}", f"{ratio(cb.p50, ca.p50):.2f}"])
        report.results[what] = {"former_s": a.to_dict(4), "pymysql_s": b.to_dict(4),
                                "former_cpu_s": ca.to_dict(4), "pymysql_cpu_s": cb.to_dict(4)}
        report.headlines.append(Headline(f"embedded, {what}: pymysql parameters", b.p50 * 1000, "ms",
                                         ratio=ratio(b.p50, a.p50), ratio_of="values in SQL text, pylibseekdb cursor"))
    print(table(["operation", "former wall ms", "pymysql wall ms", "x former", "former CPU ms", "pymysql CPU ms",
                 "x former"], lines))
    print("(medians over the rounds; CPU: this process, the client side: the engine runs in a process of its own)")
    rate = n_rows / stats(times[("pymysql", "insert")]).p50
    print(f"insert rate through pymysql parameters: {rate:,.0f} rows/s")
    report.finish(args.json)


if __name__ == "__main__":
    os.environ.setdefault("TELEMETRY_ENABLED", "false")
    main()
