"""``SeekdbSearch``: retrieval's scoring calls answered by the engine (exact inside a leaf or document, kNN + full text across the collection)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from indexing.search import ScoreParams, RangeScores, check_finite, empty_scores
from indexing.seekdb.engine import Engine, FETCH_ROWS
from indexing.seekdb.schema import table_names
from indexing.seekdb.sql import fulltext_query, int_list, placeholders, vector_text


Where = tuple[str, list[Any]]
"""A WHERE condition with its ``%s`` placeholders, and the values the driver sends for them."""


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

    def _filter(self, start: int, end: int) -> Where:
        doc = self._doc_of_range.get((start, end))
        if doc is not None:
            return "doc = %s", [int(doc)]
        leaf = int(np.searchsorted(self.leaf_ptr, start, side="right")) - 1
        if 0 <= leaf < self.n_leaves and int(self.leaf_ptr[leaf]) == start and int(self.leaf_ptr[leaf + 1]) == end:
            return "leaf = %s", [leaf]
        return "row_id >= %s AND row_id < %s", [int(start), int(end)]

    def _dense(self, qvec: np.ndarray, where: Where) -> dict[int, float]:
        got = self.engine.rows(f"SELECT row_id, inner_product(emb, %s) FROM `{self.tables['chunks']}` "
                               f"WHERE {where[0]}", [vector_text(qvec), *where[1]])
        return {int(r): float(s) for r, s in got}

    def _fulltext(self, tokens: Sequence[str], where: Where | None, limit: int | None = None,
                  table: str = "chunks", key: str = "row_id") -> dict[int, float]:
        q = fulltext_query(tokens)
        if q is None:
            return {}
        match = "MATCH(body) AGAINST(%s)"
        cond, params = (f"{where[0]} AND {match}", [*where[1], q]) if where else (match, [q])
        tail, last = (" ORDER BY s DESC LIMIT %s", [int(limit)]) if limit else ("", [])
        got = self.engine.rows(f"SELECT {key}, {match} AS s FROM `{self.tables[table]}` WHERE {cond}{tail}",
                               [q, *params, *last])
        return {int(r): float(s) for r, s in got}

    def _knn(self, qvec: np.ndarray, table: str, key: str, limit: int, where: Where | None = None) -> list[int]:
        self.engine.set_session("ob_hnsw_ef_search", min(EF_SEARCH_MAX, max(64, EF_SEARCH_FACTOR * int(limit))))
        cond, params = (f" WHERE {where[0]}", where[1]) if where else ("", [])
        got = self.engine.rows(f"SELECT {key} FROM `{self.tables[table]}`{cond} ORDER BY cosine_distance(emb, "
                               f"%s) APPROXIMATE LIMIT %s", [*params, vector_text(qvec), int(limit)])
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
        unique = np.unique(rows)
        got = self._dense(qvec, (f"row_id IN ({placeholders(len(unique))})", int_list(unique)))
        return check_finite(np.array([got.get(int(r), np.nan) for r in rows], dtype=np.float32),
                            f"{self.tables['chunks']}.emb")

    def bm25_rows(self, tokens: Sequence[str], rows: np.ndarray, idf: tuple[int, int],
                  params: ScoreParams) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        unique = np.unique(rows)
        got = self._fulltext(tokens, (f"row_id IN ({placeholders(len(unique))})", int_list(unique)))
        return np.array([got.get(int(r), 0.0) for r in rows], dtype=np.float32)

    # ---------------------------------------------------------- leaf side

    def leaf_dense(self, qvec: np.ndarray, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        table = self.tables["leaves"]
        if leaves is None and self.n_leaves > params.exact_rows:
            near = self._knn(qvec, "leaves", "leaf", params.candidates)
            out = np.zeros(self.n_leaves, dtype=np.float32)
            if near:
                got = self.engine.rows(f"SELECT leaf, inner_product(emb, %s) FROM `{table}` "
                                       f"WHERE leaf IN ({placeholders(len(near))})",
                                       [vector_text(qvec), *int_list(near)])
                for leaf, s in got:
                    out[int(leaf)] = float(s)
            return check_finite(out, f"{table}.emb")
        want = np.arange(self.n_leaves) if leaves is None else np.asarray(leaves, dtype=np.int64)
        if not len(want):
            return np.zeros(0, dtype=np.float32)
        got_rows: list[tuple[Any, ...]] = []
        for i in range(0, len(want), FETCH_ROWS):
            part = np.unique(want[i:i + FETCH_ROWS])
            got_rows += self.engine.rows(f"SELECT leaf, inner_product(emb, %s) FROM `{table}` "
                                         f"WHERE leaf IN ({placeholders(len(part))})",
                                         [vector_text(qvec), *int_list(part)])
        got = {int(leaf): float(s) for leaf, s in got_rows}
        return check_finite(np.array([got.get(int(j), np.nan) for j in want], dtype=np.float32), f"{table}.emb")

    def leaf_keyword(self, tokens: Sequence[str], leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        """The engine's full-text relevance of each leaf's heading path + summary words."""
        want = None if leaves is None else np.asarray(leaves, dtype=np.int64)
        where: Where | None = None
        if want is not None:
            if not len(want):
                return np.zeros(0, dtype=np.float64)
            unique = np.unique(want)
            where = (f"leaf IN ({placeholders(len(unique))})", int_list(unique))
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
                               f"({placeholders(len(words))})", words)
        return self.n_chunks, {str(t): int(df) for t, df in got}

    def scripts(self) -> frozenset[str]:
        return self._scripts
