"""``SeekdbSearch``: the ``Search`` contract answered by the engine.

A leaf or a document is scored exactly through a metadata filter (``WHERE leaf = ?``, ``WHERE doc = ?``);
a larger scope (the whole collection, or a document past ``ScoreParams.exact_rows``) from the engine's
kNN and full-text candidates, re-scored exactly. The lexical score is the engine's MATCH relevance with
its own statistics, whatever statistics scope is asked for: ``Scores.lexical_kind`` says so.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from config import IdfScope
from indexing.search import (ENGINE_RELEVANCE, EVERYTHING, ChunkRows, Probe, Scope, ScoreParams, Scores,
                             check_finite, concat_scores, empty_scores)
from indexing.seekdb.engine import Engine, FETCH_ROWS
from indexing.seekdb.schema import table_names
from indexing.seekdb.sql import fulltext_query, int_list, placeholders, vector_text
from indexing.seekdb.warm import Warmer, WarmLevel, resolve_level
from utils.beside import Beside
from utils.errors import IndexFormatError


Where = tuple[str, list[Any]]
"""A WHERE condition with its ``%s`` placeholders, and the values the driver sends for them."""


EF_SEARCH_FACTOR = 2
"""The HNSW search beam, as a multiple of the candidates asked for. The engine's default beam (64, or the
LIMIT when larger) found 62% of the true 1,000 nearest of 200k clustered vectors; twice the LIMIT found
80% (+11 ms)."""
KNN_DISTANCE = "COALESCE(d, 1)"
"""A kNN row's packed distance: the engine gives none to a zero vector (NULL, which GROUP_CONCAT would
skip with its row); 1 is the distance whose inner product (``inner_products``) is the zero vector's, 0."""
LEAVES_AHEAD = "seekdb leaves kNN"
"""The question's memo key of a leaf kNN started ahead (``SeekdbSearch._leaves_ahead``)."""
EF_SEARCH_MAX = 100_000
"""The engine refuses a larger ob_hnsw_ef_search."""
TERM_STATS_BATCH = 16
"""Scopes counted by one statement of ``term_stats_many`` (its text grows with scopes × words)."""


PACK_MAX_BYTES = 64 << 20
"""group_concat_max_len of a connection that reads packed candidates (``pack_sql``): far above the
~60 bytes a candidate takes; a longer result would be cut, which ``unpack`` reports."""


def pack_sql(inner: str, columns: Sequence[str], tag: int) -> str:
    """``inner``'s rows as one row: ``tag``, their count, and ``columns`` of every row space-separated.

    Why: the driver parses each row of a result in Python (pymysql), ~3.5 ms of this process's CPU per
    1,000 candidates of a whole-collection scan, and the engine sends each as a packet; packed, the scan
    costs ~0.4 ms here and less in the engine. Numbers only: their text is what the driver would have
    parsed (the same values, tested)."""
    fields = ", ' ', ".join(columns)
    return (f"SELECT {int(tag)} AS k, COUNT(*) AS n, GROUP_CONCAT({fields} SEPARATOR ' ') AS v "
            f"FROM ({inner}) AS p{int(tag)}")


def unpack(count: Any, text: Any, width: int, where: str) -> list[list[str]]:
    """The ``count`` rows of ``width`` fields ``pack_sql`` packed into ``text`` (None: no rows)."""
    if text is None:
        fields: list[str] = []
    else:
        fields = (text.decode("ascii") if isinstance(text, (bytes, bytearray)) else str(text)).split(" ")
    if len(fields) != int(count or 0) * width:
        raise IndexFormatError(f"{where}: {len(fields)} packed values for {int(count or 0)} rows of {width}; "
                               "the engine cut the result (group_concat_max_len)")
    return [fields[i:i + width] for i in range(0, len(fields), width)]


def rest_relevance(query: str, searched: str) -> str:
    """The words of ``query`` (a ``fulltext_query``) that ``searched`` leaves out, as a MATCH query.

    Why: the engine's relevance of several words is the sum of each word's (measured: within 2.3e-16
    relative of a MATCH of all of them, the same order for every one of 20 questions), and the scan has
    already computed the searched words' for each row it keeps. Asking MATCH for every word made the
    engine look each searched word up again in every kept row: the full-text scan (without its inner
    products, 10,000 generated documents) cost 65 ms of the engine's CPU, 32-35 ms this way."""
    kept = set(searched.split(" "))
    return " ".join(w for w in query.split(" ") if w not in kept)


def inner_products(distances: Sequence[Any], qvec: np.ndarray) -> list[float]:
    """Inner products with ``qvec`` from the engine's cosine distances to it: ``(1 - distance) * |q|``.

    Exact up to float rounding (within 2e-7 of the engine's ``inner_product``, measured) because every
    stored vector is L2-normalised or zero (the embedders' contract, ``indexing.embedders``); the engine
    gives no distance to a zero vector (NULL), whose inner product is 0."""
    norm = float(np.linalg.norm(np.asarray(qvec, dtype=np.float64)))
    return [0.0 if d is None else (1.0 - float(d)) * norm for d in distances]


_BODY_WORDS = "CAST(CONCAT(' ', COALESCE(body, ''), ' ') AS BINARY)"
"""A chunk's ``body`` (its tokens, space-separated) with a space at each end, compared as bytes: a
word is held where `` word `` occurs in it (``term_stats`` and ``document_counts`` count so)."""


class SeekdbSearch:
    """``indexing.search.Search`` answered by the engine (see the module docstring)."""

    store = "seekdb"

    def __init__(self, engine: Engine, prefix: str, dim: int, rows: ChunkRows, doc_numbers: Mapping[str, int],
                 scripts: frozenset[str], parallel: bool = True) -> None:
        self.engine = engine
        self.tables = table_names(prefix)
        self.dim = dim
        self.rows = rows
        self.n_chunks = rows.n_chunks
        self.n_leaves = rows.n_leaves
        self.doc_numbers = dict(doc_numbers)
        """Document path -> the ``doc`` column's value."""
        self._scripts = scripts
        self.side: Engine | None = Engine(engine.uri) if parallel else None
        """A second connection: the full-text candidate scan runs on it while the kNN scan runs on
        ``engine`` (None: both in one statement)."""
        self.ahead: Engine | None = Engine(engine.uri) if parallel else None
        """A third connection: a whole-collection question's leaf kNN, started with its chunk scans
        (None: run when asked for)."""
        self.warmer: Warmer | None = None
        """Warming started by ``warm`` (None: none): a kNN waits for its table's vector index to load."""

    def warm(self, level: WarmLevel, long_running: bool = False) -> None:
        """Start loading the engine's vector indexes (and, per ``resolve_level``, reading its tables) on
        connections of their own; returns at once. Once per search: a second call does nothing."""
        what = resolve_level(level, self.engine.uri.embedded, long_running)
        if what == "off" or self.warmer is not None:
            return
        self.warmer = Warmer(self.engine.uri, self.tables, self.dim, read_tables=what == "tables")
        self.warmer.start()

    def _wait_index(self, table: str) -> None:
        if self.warmer is not None:
            self.warmer.wait_index(table)

    # ---------------------------------------------------------- chunk side

    def _dense(self, qvec: np.ndarray, where: Where | None) -> dict[int, float]:
        cond, params = (f" WHERE {where[0]}", where[1]) if where else ("", [])
        got = self.engine.rows(f"SELECT row_id, inner_product(emb, %s) AS d FROM `{self.tables['chunks']}`{cond}",
                               [vector_text(qvec), *params])
        return {int(r): float(s) for r, s in got}

    def _exact(self, qvec: np.ndarray | None, tokens: Sequence[str], where: Where) -> dict[int, tuple[float, float]]:
        """Every row ``where`` selects with its inner product and full-text relevance, in one statement
        (the relevance is 0 where the row does not match, as the engine computes it without a filter;
        the same values as ``_dense`` and a filtered ``_fulltext``: tested)."""
        q = fulltext_query(tokens)
        cols, params = ["row_id"], []
        if qvec is not None:
            cols.append("inner_product(emb, %s) AS d")
            params.append(vector_text(qvec))
        if q is not None:
            cols.append("MATCH(body) AGAINST(%s) AS s")
            params.append(q)
        got = self.engine.rows(f"SELECT {', '.join(cols)} FROM `{self.tables['chunks']}` WHERE {where[0]}",
                               [*params, *where[1]])
        out: dict[int, tuple[float, float]] = {}
        for r in got:
            d = float(r[1]) if qvec is not None else 0.0
            s = float(r[-1]) if q is not None else 0.0
            out[int(r[0])] = (d, s)
        return out

    def _exact_scores(self, qvec: np.ndarray | None, tokens: Sequence[str], rows: np.ndarray,
                      where: Where) -> tuple[np.ndarray, np.ndarray]:
        """(dense, lexical) of ``rows`` (what ``where`` selects, in any order, repeats allowed): a row the
        engine lacks has no vector, which ``check_finite`` reports; without a vector, dense is 0."""
        got = self._exact(qvec, tokens, where)
        missing = (np.nan, 0.0) if qvec is not None else (0.0, 0.0)
        pairs = [got.get(int(r), missing) for r in rows]
        dense = check_finite(np.array([d for d, _ in pairs], dtype=np.float32), f"{self.tables['chunks']}.emb")
        return dense, np.array([s for _, s in pairs], dtype=np.float32)

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

    @staticmethod
    def _beam(limit: int) -> int:
        return min(EF_SEARCH_MAX, max(64, EF_SEARCH_FACTOR * int(limit)))

    def _set_beam(self, limit: int) -> None:
        self.engine.set_session("ob_hnsw_ef_search", self._beam(limit))

    def _knn_sql(self, table: str, key: str, where: Where | None) -> tuple[str, list[Any]]:
        """The engine's approximate nearest rows with the cosine distance its vector index computed
        (``%s``: vector, vector, limit; ``inner_products`` turns them into inner products).

        Why the distance and not ``inner_product(emb, ...)``: the index already holds it, while an inner
        product reads each row's vector from the table, one compressed block per scattered row: at a
        million chunks that was 60-75% of the statement (embedded engine: 75 vs 25 ms for 1,000 rows)."""
        cond, params = (f" WHERE {where[0]}", where[1]) if where else ("", [])
        return (f"SELECT {key}, cosine_distance(emb, %s) AS d FROM `{self.tables[table]}`{cond} "
                f"ORDER BY cosine_distance(emb, %s) APPROXIMATE LIMIT %s", params)

    def _knn(self, qvec: np.ndarray, table: str, key: str, limit: int, where: Where | None = None,
             engine: Engine | None = None) -> dict[int, float]:
        """The approximate ``limit`` nearest rows -> their inner products with ``qvec`` (on ``engine``,
        default this search's connection)."""
        engine = engine or self.engine
        self._wait_index(table)
        engine.set_session("ob_hnsw_ef_search", self._beam(limit))
        engine.set_session("group_concat_max_len", PACK_MAX_BYTES)
        sql, params = self._knn_sql(table, key, where)
        vec = vector_text(qvec)
        (_, n, text), = engine.rows(pack_sql(sql, [key, KNN_DISTANCE], 1), [vec, *params, vec, int(limit)])
        got = unpack(n, text, 2, f"{self.tables[table]} kNN")
        return dict(zip((int(r) for r, _ in got), inner_products([d for _, d in got], qvec)))

    def _scan_words(self, words: Sequence[str], max_share: float) -> list[str]:
        """The words the full-text candidate scan searches: ``words`` without those found in more than
        ``max_share`` of the chunks (the terms table's counts), the rarest one kept when none remain.

        Why: the engine scores every chunk that holds any searched word before it keeps the best, and a
        word in most chunks makes that most of the collection, for little relevance (its IDF is near
        zero). A chunk that holds only such words ranks low in the full-text list anyway."""
        if max_share >= 1 or len(words) < 2:
            return list(words)
        got = self.engine.rows(f"SELECT term, df FROM `{self.tables['terms']}` WHERE term IN "
                               f"({placeholders(len(words))})", list(words))
        df = {str(t): int(c) for t, c in got}
        keep = [w for w in words if df.get(w, 0) <= max_share * self.n_chunks]
        return keep or [min(words, key=lambda w: df.get(w, 0))]

    def _candidate_sql(self, qvec: np.ndarray | None, tokens: Sequence[str], where: Where | None, limit: int,
                       max_share: float) -> list[tuple[str, list[Any]]]:
        """The kNN scan and the full-text scan of ``_candidates``, each with its parameters, each packed
        into one row (``pack_sql``): (1, n, "row distance ...") for the kNN scan, (0, n, "row inner-product
        relevance ...") for the full-text one. The full-text scan searches ``_scan_words``, keeps the rows
        best for those, and reports every word's relevance: that of the searched words, which the scan
        computed, plus that of the others (``rest_relevance``)."""
        q = fulltext_query(tokens)
        vec = None if qvec is None else vector_text(qvec)
        scan = None if q is None else fulltext_query(self._scan_words(q.split(" "), max_share))
        # searching fewer words: rows ordered by those words' relevance (ordering by every word's makes
        # the engine score every word for every row found), reported with every word's
        narrow = scan is not None and scan != q
        rest = None if not narrow or q is None or scan is None else rest_relevance(q, scan)
        parts: list[tuple[str, list[Any]]] = []
        if vec is not None:
            sql, where_params = self._knn_sql("chunks", "row_id", where)
            parts.append((pack_sql(sql, ["row_id", KNN_DISTANCE], 1), [vec, *where_params, vec, int(limit)]))
        if q is not None and scan is not None:
            match = "MATCH(body) AGAINST(%s)"
            cond, cond_params = (f"{where[0]} AND {match}", [*where[1], scan]) if where else (match, [scan])
            dense, dense_params = ("inner_product(emb, %s)", [vec]) if vec is not None else ("0", [])
            cols, order, col_params, relevance = ((f"{match} AS r, {match} AS o", "o", [rest, scan], "r + o") if rest
                                                  else (f"{match} AS s", "s", [q], "s"))
            sql = (f"SELECT row_id, {dense} AS d, {cols} FROM `{self.tables['chunks']}` WHERE {cond} "
                   f"ORDER BY {order} DESC LIMIT %s")
            parts.append((pack_sql(sql, ["row_id", "d", relevance], 0),
                          [*dense_params, *col_params, *cond_params, int(limit)]))
        return parts

    def _candidates(self, qvec: np.ndarray | None, tokens: Sequence[str], where: Where | None,
                    limit: int, max_share: float = 1.0) -> tuple[dict[int, float], dict[int, float]]:
        """The kNN and full-text top ``limit`` rows of the chunks ``where`` selects: (row -> inner product
        for every candidate, row -> relevance for the full-text ones). With ``max_share`` 1 the same rows
        and relevances as ``_knn`` and ``_fulltext``; the inner products those of ``dense`` of their union,
        exactly for the full-text candidates and from the index's distances for the kNN-only ones (tested).

        Both scans at once on two connections (the engine's work is in the scans, the client only waits;
        the server and the embedded engine both run them side by side), else one UNION ALL statement."""
        parts = self._candidate_sql(qvec, tokens, where, limit, max_share)
        if not parts:
            return {}, {}
        if qvec is not None:
            self._set_beam(limit)
        for engine in (self.engine, self.side):
            if engine is not None:
                engine.set_session("group_concat_max_len", PACK_MAX_BYTES)
        if len(parts) == 2 and self.side is not None:
            got = self._both(parts[0], parts[1], before=lambda: self._wait_index("chunks"))
        else:
            if qvec is not None:
                self._wait_index("chunks")
            sql = parts[0][0] if len(parts) == 1 else " UNION ALL ".join(f"({p})" for p, _ in parts)
            got = self.engine.rows(sql, [v for _, ps in parts for v in ps])
        dense: dict[int, float] = {}
        lexical: dict[int, float] = {}
        where_text = f"{self.tables['chunks']} candidates"
        for kind, n, text in sorted(got, key=lambda g: -int(g[0])):  # the kNN's first: a full-text one's is exact
            if int(kind):
                near = unpack(n, text, 2, where_text)
                if qvec is not None:
                    dense.update(zip((int(r) for r, _ in near), inner_products([d for _, d in near], qvec)))
                continue
            for r, d, s in unpack(n, text, 3, where_text):
                dense[int(r)] = float(d)
                lexical[int(r)] = float(s)
        return dense, lexical

    def _both(self, here: tuple[str, list[Any]], there: tuple[str, list[Any]],
              before: Callable[[], None] = lambda: None) -> list[tuple[Any, ...]]:
        """``here`` on this search's connection and ``there`` on the side connection, at once: the rows of
        both, ``here``'s first (the order of the UNION ALL they replace). ``before`` runs after ``there``
        has started and before ``here`` (the kNN waiting for its index to load while the full-text scan runs)."""
        side = self.side
        assert side is not None
        beside = Beside(lambda: side.rows(*there), threaded=True)  # the engine works, this thread only waits
        try:
            before()
            first = self.engine.rows(*here)
        except BaseException:
            try:  # joined even when this statement failed (no scan outlives the question); its error wins
                beside.result()
            except BaseException:  # noqa: BLE001,S110 - the caller sees this statement's failure
                pass
            raise
        return first + beside.result()

    def _filtered(self, query: Probe, start: int, end: int, where: Where | None, params: ScoreParams) -> Scores:
        """The chunks ``[start, end)`` that ``where`` selects (None: every chunk): all of them exactly when
        few, else the engine's nearest neighbours and full-text best, re-scored exactly."""
        if end <= start:
            return empty_scores(ENGINE_RELEVANCE)
        qvec, tokens = query.vector, query.tokens
        if end - start <= params.exact_rows:
            rows = np.arange(start, end, dtype=np.int64)
            dense, lexical = self._exact_scores(qvec, tokens, rows, where or (
                "row_id >= %s AND row_id < %s", [int(start), int(end)]))
            return Scores(rows, dense, lexical, ENGINE_RELEVANCE)
        near, bm = self._candidates(qvec, tokens, where, params.candidates, params.fulltext_max_share)
        rows = np.array(sorted(r for r in near if start <= r < end), dtype=np.int64)
        if not len(rows):
            return empty_scores(ENGINE_RELEVANCE)
        dense = (check_finite(np.array([near[int(r)] for r in rows], dtype=np.float32), f"{self.tables['chunks']}.emb")
                 if qvec is not None else np.zeros(len(rows), dtype=np.float32))
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
        self._leaves_ahead(query, params)
        return self._filtered(query, 0, self.n_chunks, None, params)

    def _leaves_ahead(self, query: Probe, params: ScoreParams) -> None:
        """Start the leaves' kNN of a whole-collection question on the third connection, to run while its
        chunks are scored: the no-LLM locator asks for it next (``leaf_dense`` over every leaf), and
        waiting for it after the chunk scans cost a third of the question's time on a large index. A
        question that never asks (a flat ranking) has cost the engine one kNN search and nothing else."""
        if query.vector is None or self.ahead is None or self.n_leaves <= params.exact_rows:
            return
        key = (LEAVES_AHEAD, params.candidates)
        if query.memo.get(key) is not None:
            return
        qvec, engine, limit = query.vector, self.ahead, params.candidates
        query.memo.put(key, Beside(lambda: self._knn(qvec, "leaves", "leaf", limit, engine=engine), threaded=True))

    def rescore(self, query: Probe, rows: np.ndarray, idf: IdfScope, params: ScoreParams) -> Scores:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return empty_scores(ENGINE_RELEVANCE)
        unique = np.unique(rows)
        dense, lexical = self._exact_scores(query.vector, query.tokens, rows,
                                            (f"row_id IN ({placeholders(len(unique))})", int_list(unique)))
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
            out = np.zeros(self.n_leaves, dtype=np.float32)
            pending = query.memo.get((LEAVES_AHEAD, params.candidates))
            near = pending.result() if isinstance(pending, Beside) else self._knn(qvec, "leaves", "leaf",
                                                                                  params.candidates)
            for leaf, s in near.items():
                out[leaf] = s
            return check_finite(out, f"{table}.emb")
        want = np.arange(self.n_leaves) if leaves is None else np.asarray(leaves, dtype=np.int64)
        if not len(want):
            return np.zeros(0, dtype=np.float32)
        got_rows: list[tuple[Any, ...]] = []
        for i in range(0, len(want), FETCH_ROWS):
            part = np.unique(want[i:i + FETCH_ROWS])
            got_rows += self.engine.rows(f"SELECT leaf, inner_product(emb, %s) AS d FROM `{table}` "
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
        at publish). A leaf or documents counted by the engine over the chunks' ``body`` column, which
        holds exactly the tokens BM25 counted, space-separated: a chunk counts when `` term `` occurs in
        `` body `` compared as bytes, which is what splitting the body on spaces would find (tested).
        Not MATCH, whose parser may drop or split a token the tokenizer kept, and which would then
        undercount without a word; not the bodies read out either: one row comes back, not the
        document's text (the answer step asks this for every document it quotes)."""
        words = sorted(set(tokens))
        if scope.kind == "everything":
            if not words:
                return self.n_chunks, {}
            got = self.engine.rows(f"SELECT term, df FROM `{self.tables['terms']}` WHERE term IN "
                                   f"({placeholders(len(words))})", words)
            return self.n_chunks, {str(t): int(df) for t, df in got if int(df) > 0}
        spans = self._spans(scope)
        n = sum(e - s for s, e in spans)
        # a token with a space (or none at all) is never one of a body's space-separated words
        counted = [w for w in words if w and " " not in w]
        if not spans:
            return n, {}
        counts: dict[str, int] = {}
        for i in range(0, len(spans), FETCH_ROWS):
            part = spans[i:i + FETCH_ROWS]
            total, found = self._count_words(counted, part)
            expected = sum(e - s for s, e in part)
            if total != expected:
                raise IndexFormatError(f"{self.tables['chunks']}: {total} chunk rows in rows "
                                       f"[{part[0][0]}, {part[-1][1]}), expected {expected}; republish the index")
            for w, c in found.items():
                if c:
                    counts[w] = counts.get(w, 0) + c
        return n, counts

    def _count_sql(self, words: Sequence[str], spans: Sequence[tuple[int, int]], tag: int) -> tuple[str, list[Any]]:
        """The statement counting the rows in ``spans`` and how many hold each word; its first column
        is ``tag`` (several such statements are sent as one UNION ALL)."""
        # every column named: unnamed, the engine names it by its text, values included, cut at 256
        # bytes, possibly inside a multi-byte character, which the driver then fails to decode
        sums = [f"SUM(INSTR({_BODY_WORDS}, CAST(%s AS BINARY)) > 0) AS w{i}" for i in range(len(words))]
        cond = " OR ".join(["(row_id >= %s AND row_id < %s)"] * len(spans))
        params: list[Any] = [int(tag), *(f" {w} " for w in words)]
        for s, e in spans:
            params += [s, e]
        return (f"SELECT {', '.join(['%s AS k', 'COUNT(*) AS n', *sums])} FROM `{self.tables['chunks']}` "
                f"WHERE {cond}", params)

    def _count_words(self, words: Sequence[str], spans: Sequence[tuple[int, int]]) -> tuple[int, dict[str, int]]:
        """(rows in ``spans``, how many of them hold each word), counted by the engine in one statement."""
        got = self.engine.rows(*self._count_sql(words, spans, 0))
        row = got[0] if got else (0, 0)
        return int(row[1] or 0), {w: int(c or 0) for w, c in zip(words, row[2:])}

    def document_counts(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """Counted by the engine over the chunks' ``body`` column, as ``term_stats`` counts a scope
        (a document holds a word when one of its chunks' bodies does), in one statement."""
        words = sorted({w for w in tokens if w and " " not in w})
        n = len(self.doc_numbers)
        if not words:
            return n, {}
        cols = [f"COUNT(DISTINCT CASE WHEN INSTR({_BODY_WORDS}, CAST(%s AS BINARY)) > 0 THEN doc END) AS w{i}"
                for i in range(len(words))]
        got = self.engine.rows(f"SELECT {', '.join(cols)} FROM `{self.tables['chunks']}`", [f" {w} " for w in words])
        row = got[0] if got else ()
        return n, {w: int(c) for w, c in zip(words, row) if c}

    def term_stats_many(self, tokens: Sequence[str], scopes: Sequence[Scope]) -> list[tuple[int, dict[str, int]]]:
        """``term_stats(tokens, scope)`` for each scope, the documents' and leaves' counted in one
        statement per TERM_STATS_BATCH scopes (a UNION ALL of the statements ``term_stats`` sends):
        the answer step asks this for every document it quotes, ~13 round trips a question."""
        out: list[tuple[int, dict[str, int]] | None] = [None] * len(scopes)
        words = sorted(set(tokens))
        counted = [w for w in words if w and " " not in w]
        pending: list[tuple[int, list[tuple[int, int]]]] = []
        for i, scope in enumerate(scopes):
            spans = [] if scope.kind == "everything" else self._spans(scope)
            if scope.kind == "everything" or len(spans) > FETCH_ROWS:
                out[i] = self.term_stats(tokens, scope)
            elif not spans:
                out[i] = (0, {})
            else:
                pending.append((i, spans))
        for a in range(0, len(pending), TERM_STATS_BATCH):
            part = pending[a:a + TERM_STATS_BATCH]
            sqls = [self._count_sql(counted, spans, i) for i, spans in part]
            got = {int(r[0]): r for r in self.engine.rows(" UNION ALL ".join(f"({q})" for q, _ in sqls),
                                                            [v for _, p in sqls for v in p])}
            for i, spans in part:
                row = got.get(i, (i, 0))
                total, expected = int(row[1] or 0), sum(e - s for s, e in spans)
                if total != expected:
                    raise IndexFormatError(f"{self.tables['chunks']}: {total} chunk rows in rows "
                                           f"[{spans[0][0]}, {spans[-1][1]}), expected {expected}; republish the index")
                out[i] = (expected, {w: int(c) for w, c in zip(counted, row[2:]) if c and int(c)})
        return [o if o is not None else (0, {}) for o in out]

    def _spans(self, scope: Scope) -> list[tuple[int, int]]:
        """The non-empty row ranges of a leaf or documents scope."""
        if scope.leaf is not None:
            spans = [self.rows.leaf(scope.leaf)]
        else:
            assert scope.documents is not None
            spans = [(s, e) for _, s, e in self.rows.documents(scope.documents)]
        return [(int(s), int(e)) for s, e in spans if e > s]

    def scripts(self) -> frozenset[str]:
        return self._scripts

    def after_question(self) -> None:
        """Nothing to do: the engine holds no pages in this process."""
