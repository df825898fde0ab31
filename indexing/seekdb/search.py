"""``SeekdbSearch``: the ``Search`` contract answered by the engine.

A leaf or a document is scored exactly through a metadata filter (``WHERE leaf = ?``, ``WHERE doc = ?``);
a larger scope (the whole collection, or a document past ``ScoreParams.exact_rows``) from the engine's
kNN and full-text candidates, re-scored exactly. The lexical score is the engine's MATCH relevance with
its own statistics, whatever statistics scope is asked for: ``Scores.lexical_kind`` says so.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from config import IdfScope
from indexing.search import (ENGINE_RELEVANCE, EVERYTHING, ChunkRows, Probe, Scope, ScoreParams, Scores,
                             check_finite, concat_scores, empty_scores)
from indexing.seekdb.engine import Engine, FETCH_ROWS
from indexing.seekdb.schema import table_names
from indexing.seekdb.sql import fulltext_query, int_list, placeholders, vector_text
from utils.errors import IndexFormatError


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

    def __init__(self, engine: Engine, prefix: str, dim: int, rows: ChunkRows, doc_numbers: Mapping[str, int],
                 scripts: frozenset[str]) -> None:
        self.engine = engine
        self.tables = table_names(prefix)
        self.dim = dim
        self.rows = rows
        self.n_chunks = rows.n_chunks
        self.n_leaves = rows.n_leaves
        self.doc_numbers = dict(doc_numbers)
        """Document path -> the ``doc`` column's value."""
        self._scripts = scripts

    # ---------------------------------------------------------- chunk side

    def _dense(self, qvec: np.ndarray, where: Where | None) -> dict[int, float]:
        cond, params = (f" WHERE {where[0]}", where[1]) if where else ("", [])
        got = self.engine.rows(f"SELECT row_id, inner_product(emb, %s) FROM `{self.tables['chunks']}`{cond}",
                               [vector_text(qvec), *params])
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

    def _filtered(self, query: Probe, start: int, end: int, where: Where | None, params: ScoreParams) -> Scores:
        """The chunks ``[start, end)`` that ``where`` selects (None: every chunk): all of them exactly when
        few, else the engine's nearest neighbours and full-text best, re-scored exactly."""
        if end <= start:
            return empty_scores(ENGINE_RELEVANCE)
        qvec, tokens = query.vector, query.tokens
        if end - start <= params.exact_rows:
            rows = np.arange(start, end, dtype=np.int64)
            dense = np.zeros(end - start, dtype=np.float32)
            if qvec is not None:
                got = self._dense(qvec, where)
                dense = np.array([got.get(int(r), np.nan) for r in rows], dtype=np.float32)
            bm = self._fulltext(tokens, where)
            lexical = np.array([bm.get(int(r), 0.0) for r in rows], dtype=np.float32)
            return Scores(rows, check_finite(dense, f"{self.tables['chunks']}.emb"), lexical, ENGINE_RELEVANCE)
        cand: set[int] = set()
        if qvec is not None:
            cand.update(r for r in self._knn(qvec, "chunks", "row_id", params.candidates, where) if start <= r < end)
        bm = self._fulltext(tokens, where, params.candidates)
        cand.update(r for r in bm if start <= r < end)
        rows = np.array(sorted(cand), dtype=np.int64)
        if not len(rows):
            return empty_scores(ENGINE_RELEVANCE)
        dense = self.dense(qvec, rows) if qvec is not None else np.zeros(len(rows), dtype=np.float32)
        lexical = np.array([bm.get(int(r), 0.0) for r in rows], dtype=np.float32)
        return Scores(rows, dense, lexical, ENGINE_RELEVANCE, complete=False)

    def score(self, query: Probe, scope: Scope, idf: IdfScope, params: ScoreParams) -> Scores:
        """``idf`` is not honoured: the engine's relevance uses its own statistics (``ENGINE_RELEVANCE``)."""
        if scope.leaf is not None:
            start, end = self.rows.leaf(scope.leaf)
            return self._filtered(query, start, end, ("leaf = %s", [int(scope.leaf)]), params)
        if scope.documents is not None:
            return concat_scores([self._filtered(query, s, e, ("doc = %s", [int(self.doc_numbers[path])]), params)
                                  for path, s, e in self.rows.documents(scope.documents)], ENGINE_RELEVANCE)
        return self._filtered(query, 0, self.n_chunks, None, params)

    def rescore(self, query: Probe, rows: np.ndarray, idf: IdfScope, params: ScoreParams) -> Scores:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return empty_scores(ENGINE_RELEVANCE)
        dense = (np.zeros(len(rows), dtype=np.float32) if query.vector is None
                 else self.dense(query.vector, rows))
        unique = np.unique(rows)
        got = self._fulltext(query.tokens, (f"row_id IN ({placeholders(len(unique))})", int_list(unique)))
        lexical = np.array([got.get(int(r), 0.0) for r in rows], dtype=np.float32)
        return Scores(rows, dense, lexical, ENGINE_RELEVANCE)

    def dense(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        unique = np.unique(rows)
        got = self._dense(vector, (f"row_id IN ({placeholders(len(unique))})", int_list(unique)))
        return check_finite(np.array([got.get(int(r), np.nan) for r in rows], dtype=np.float32),
                            f"{self.tables['chunks']}.emb")

    # ---------------------------------------------------------- leaf side

    def leaf_dense(self, query: Probe, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        table = self.tables["leaves"]
        qvec = query.vector
        if qvec is None:
            return np.zeros(self.n_leaves if leaves is None else len(leaves), dtype=np.float32)
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

    def term_stats(self, tokens: Sequence[str], scope: Scope = EVERYTHING) -> tuple[int, dict[str, int]]:
        """The whole collection from the terms table (each term's chunk count, copied from the postings
        at publish). A leaf or documents from the chunks' ``body`` column, which holds exactly the tokens
        BM25 counted, space-separated: counted here rather than with MATCH, whose parser may drop or
        split a token the tokenizer kept, and which would then undercount without a word."""
        words = sorted(set(tokens))
        if scope.kind == "everything":
            if not words:
                return self.n_chunks, {}
            got = self.engine.rows(f"SELECT term, df FROM `{self.tables['terms']}` WHERE term IN "
                                   f"({placeholders(len(words))})", words)
            return self.n_chunks, {str(t): int(df) for t, df in got if int(df) > 0}
        if scope.leaf is not None:
            spans = [self.rows.leaf(scope.leaf)]
        else:
            assert scope.documents is not None
            spans = [(s, e) for _, s, e in self.rows.documents(scope.documents)]
        n = sum(e - s for s, e in spans)
        want = set(words)
        counts: dict[str, int] = {}
        for start, end in spans:
            for a in range(start, end, FETCH_ROWS):
                b = min(end, a + FETCH_ROWS)
                got = self.engine.rows(f"SELECT body FROM `{self.tables['chunks']}` WHERE row_id >= %s AND "
                                       f"row_id < %s", [int(a), int(b)])
                if len(got) != b - a:
                    raise IndexFormatError(f"{self.tables['chunks']}: {len(got)} chunk rows in [{a}, {b}), "
                                           f"expected {b - a}; republish the index")
                for (body,) in got:
                    text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else (body or "")
                    for t in want.intersection(text.split(" ")):
                        counts[t] = counts.get(t, 0) + 1
        return n, counts

    def scripts(self) -> frozenset[str]:
        return self._scripts
