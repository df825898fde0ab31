"""Index records and vectors read lazily from engine tables, a batch of rows at a time, so an engine-backed index needs no local copy."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from indexing.index_files import loads_strict
from indexing.seekdb.engine import Engine, FETCH_ROWS
from indexing.seekdb.sql import int_list, parse_vec, placeholders
from utils.errors import IndexFormatError


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
        got = self.engine.rows(f"SELECT {self.column} FROM `{self.table}` WHERE row_id = %s", (int(i),))
        if not got:
            raise IndexFormatError(f"{self.where(i)} is missing")
        return self._decode(got[0][0], int(i))

    def raw_many(self, rows: Sequence[int]) -> dict[int, Any]:
        """Several rows' values in one statement per FETCH_ROWS: a question reads tens of records,
        and one statement each is a round trip each."""
        want = sorted({int(r) for r in rows})
        out: dict[int, Any] = {}
        for a in range(0, len(want), FETCH_ROWS):
            part = want[a:a + FETCH_ROWS]
            for r, value in self.engine.rows(f"SELECT row_id, {self.column} FROM `{self.table}` "
                                             f"WHERE row_id IN ({placeholders(len(part))})", int_list(part)):
                out[int(r)] = self._decode(value, int(r))
        missing = [r for r in want if r not in out]
        if missing:
            raise IndexFormatError(f"{self.where(missing[0])} is missing")
        return out

    def _decode(self, value: Any, i: int) -> Any:
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
        else:
            want = np.asarray(key, dtype=np.int64).reshape(-1)
            if len(want) and (want.min() < 0 or want.max() >= self.n):
                raise IndexError("row out of range")
        out = np.zeros((len(want), self.shape[1]), dtype=self.dtype)
        if len(want):
            got = {}
            for part in self._batches(want, isinstance(key, slice)):
                for r, v in self.engine.rows(*part):
                    got[int(r)] = v
            for i, r in enumerate(want.tolist()):
                if r not in got:
                    raise IndexFormatError(f"{self.table}: row {r} is missing")
                out[i] = self._decode(got[r], r)
        if not isinstance(key, slice) and np.ndim(key) == 0:
            return out[0]
        return out

    def _batches(self, want: np.ndarray, contiguous: bool) -> list[tuple[str, list[int]]]:
        """The SELECTs that read rows ``want``, FETCH_ROWS rows at most each: ranges for a slice, else IN lists."""
        head = f"SELECT {self.key}, {self.column} FROM `{self.table}` WHERE "
        if contiguous:
            a, b = int(want[0]), int(want[-1]) + 1
            return [(head + f"{self.key} >= %s AND {self.key} < %s", [s, min(b, s + FETCH_ROWS)])
                    for s in range(a, b, FETCH_ROWS)]
        unique = np.unique(want)
        return [(head + f"{self.key} IN ({placeholders(len(part))})", int_list(part))
                for part in (unique[i:i + FETCH_ROWS] for i in range(0, len(unique), FETCH_ROWS))]
