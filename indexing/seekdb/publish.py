"""A staged file index copied into new engine tables, the manifest directory it leaves, and the previous tables retired only after the swap."""
from __future__ import annotations

import json
import os
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from indexing.file_search import FileSearch
from indexing.index_files import fsync_directory, write_manifest_entry
from indexing.index_store import METADATA, load_index
from indexing.seekdb.engine import Engine
from indexing.seekdb.schema import (create_tables, drop_tables, ensure_memory_budget, forward_terms,
                                    index_tables, insert_rows, memory_budget_needed)
from indexing.seekdb.sql import vector_text
from indexing.seekdb.uri import StoreURI, store_uri_of
from utils.atomic import atomic_write_text
from utils.errors import BackendError, IndexFormatError, InputError
from utils.tokenizer import vocabulary_scripts


DROP_TIMEOUT_S = 30.0
"""How long one DROP TABLE of a replaced index may wait. A DROP takes ~0.2 s, but an embedded engine
that had just built a large index in this process held a lock on the previous index's tables, and the
DROP waited without end (ob_query_timeout, ob_trx_lock_timeout and lock_wait_timeout do not bound a
DDL's wait for a lock; measured at 1,000 documents, while the same DROP from a fresh process took
0.2 s). It is cancelled instead, and the next build drops those tables."""

COPY_STEP = 2048
"""Rows formatted per batch while the engine executes the previous batch."""


Row = tuple[Any, ...]
"""One table row's values, in the order of its columns (sent as driver parameters)."""


def prepared(make: Callable[[int, int], list[Row]], n: int,
             step: int = COPY_STEP) -> Iterator[tuple[int, list[Row]]]:
    """(rows, their values) for rows [0, n) in batches; each batch is made (records as JSON, vectors
    as text) in a helper thread while the caller sends the one before (the driver waits on the
    engine's socket without the GIL)."""
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


def send_batches(engine: Engine, sessions: int, table: str, columns: Sequence[str],
                 batches: Iterator[tuple[int, list[Row]]], advance: Callable[[int], None] | None = None) -> None:
    """Every batch inserted into ``table``, on ``sessions`` connections at once (``engine`` and more to
    its store): each inserts whole batches while the next are formatted. At most ``sessions`` batches
    are in flight, so memory stays that of a few batches; the first failure stops the copy."""
    if sessions <= 1:
        for count, values in batches:
            insert_rows(engine, table, columns, values)
            if advance:
                advance(count)
        return
    idle: queue.SimpleQueue[Engine] = queue.SimpleQueue()
    opened = [Engine(engine.uri, create=True) for _ in range(sessions - 1)]
    for e in (engine, *opened):
        idle.put(e)

    def insert(values: list[Row]) -> None:
        e = idle.get()
        try:
            insert_rows(e, table, columns, values)
        finally:
            idle.put(e)

    try:
        with ThreadPoolExecutor(max_workers=sessions, thread_name_prefix="seekdb-insert") as pool:
            flying: list[tuple[int, Future[None]]] = []
            for count, values in batches:
                while len(flying) >= sessions:
                    n, done = flying.pop(0)
                    done.result()
                    if advance:
                        advance(n)
                flying.append((count, pool.submit(insert, values)))
            for n, done in flying:
                done.result()
                if advance:
                    advance(n)
    finally:
        for e in opened:
            e.close()


def publish(staged: Path, uri: StoreURI, advance: Callable[[int], None] | None = None,
            vector_index: str = "hnsw", sessions: int = 1) -> dict[str, Any]:
    """Copy a complete file index (``staged``) into new engine tables; the manifest fields for metadata.json.

    On any failure the new tables are dropped and the error propagates: the previous index (its
    manifest and tables) is untouched. ``advance(n)`` is told of every n chunks copied (a progress bar).
    A ``note`` field, when present, is for the person building and not for the manifest.
    ``vector_index`` and ``sessions``: Config.store_vector_index and store_copy_sessions.
    """
    index = load_index(staged)
    meta = index.metadata
    dim = int(meta["embedder"]["dim"])
    prefix = "treerag_" + str(meta["build_id"])[:16]
    engine = Engine(uri, create=True)
    try:
        n_chunks, n_leaves = len(index.chunks), len(index.leaves)
        sizes = {"chunks": n_chunks, "leaves": n_leaves}
        needed = memory_budget_needed(n_chunks + n_leaves, dim, vector_index)
        note = ensure_memory_budget(engine, needed) if uri.embedded else None
        names = create_tables(engine, prefix, dim, sizes, vector_index)
        search = index.search
        if not isinstance(search, FileSearch):
            raise IndexFormatError(f"{staged} is not a file index: only a staged file build is published")
        bm = search.bm25
        chunk_bodies = forward_terms(bm.terms, bm.indptr, bm.rows, bm.tf, n_chunks)
        lt = search.leaf_terms
        leaf_bodies = forward_terms(lt.terms, lt.indptr, lt.rows, lt.tf, n_leaves)
        leaf_of_row = np.repeat(np.arange(n_leaves, dtype=np.int64), np.diff(index.leaf_ptr))
        leaf_docs = index.tree.doc[index.tree.leaf_rows]
        records = index.chunks.records  # type: ignore[attr-defined]
        keys = index.text_keys
        def chunk_values(a: int, b: int) -> list[Row]:
            bodies = chunk_bodies(a, b)
            vecs = np.asarray(index.embeddings[a:b])
            ks = np.asarray(keys["chunk_text_keys.npy"][a:b])
            values = []
            for i, r in enumerate(range(a, b)):
                leaf = int(leaf_of_row[r])
                values.append((r, leaf, int(leaf_docs[leaf]), bodies[i], json.dumps(records.raw(r), ensure_ascii=False),
                               ks[i].tobytes().hex(), vector_text(vecs[i])))
            return values

        def leaf_values(a: int, b: int) -> list[Row]:
            bodies = leaf_bodies(a, b)
            vecs = np.asarray(index.leaf_embeddings[a:b])
            ks = np.asarray(keys["leaf_text_keys.npy"][a:b])
            return [(j, int(leaf_docs[j]), bodies[j - a], ks[j - a].tobytes().hex(), vector_text(vecs[j - a]))
                    for j in range(a, b)]

        tree = index.tree

        def node_values(a: int, b: int) -> list[Row]:
            return [(r, json.dumps(tree.records.raw(r), ensure_ascii=False),
                     json.dumps(tree.contents.raw(r), ensure_ascii=False)) for r in range(a, b)]

        send_batches(engine, sessions, names["chunks"], ("row_id", "leaf", "doc", "body", "record", "tkey", "emb"),
                     prepared(chunk_values, n_chunks), advance)
        send_batches(engine, sessions, names["leaves"], ("leaf", "doc", "body", "tkey", "emb"),
                     prepared(leaf_values, n_leaves))
        send_batches(engine, sessions, names["nodes"], ("row_id", "record", "content"), prepared(node_values, len(tree)))
        df = np.diff(np.asarray(bm.indptr))
        # a "word" over 512 characters (a run of symbols) is left out: the relevance floor then
        # counts it as unseen, the most informative, as it counts any word the index lacks
        terms = [(t, int(df[i])) for i, t in enumerate(bm.terms) if len(t) <= 512]
        insert_rows(engine, names["terms"], ("term", "df"), terms)
        graphs = getattr(index, "kg", None)
        if graphs is not None:  # kg_leaves.npy stays in the manifest directory; the records go here
            owner = {int(row): int(pos) for pos, row in enumerate(graphs.leaf_rows) if row >= 0}
            insert_rows(engine, names["kg"], ("row_id", "leaf", "record"),
                        [(r, owner[r], json.dumps(graphs.records.raw(r), ensure_ascii=False))
                         for r in range(len(graphs))])
        index_tables(engine, names, sizes, vector_index)
        fields: dict[str, Any] = {"uri": uri.public(), "prefix": prefix, "vector_index": vector_index,
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
KG_LEAVES_FILE = "kg_leaves.npy"
"""Kept too when the index has long-leaf graphs: which leaf owns which row of the kg table."""


def keep_manifest(directory: Path, store_fields: dict[str, Any]) -> None:
    """Turn a staged file index into an engine index's manifest directory: only the structure files
    stay, and metadata.json names the store and lists what is left (written last, fsynced)."""
    directory = Path(directory)
    meta = json.loads((directory / METADATA).read_text(encoding="utf-8"))
    keep = set(MANIFEST_FILES) | ({KG_LEAVES_FILE} if (directory / KG_LEAVES_FILE).is_file() else set())
    for name in os.listdir(directory):
        if name != METADATA and name not in keep:
            os.unlink(directory / name)
    meta["store"] = dict(store_fields)
    meta["files"] = {name: write_manifest_entry(directory, name) for name in sorted(keep)}
    _write_metadata(directory, meta)


def _write_metadata(directory: Path, meta: Mapping[str, Any]) -> None:
    """metadata.json replaced atomically and durably (the file, then its directory, fsynced)."""
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
    meta = json.loads((Path(directory) / METADATA).read_text(encoding="utf-8"))
    meta[RETIRED] = [{"uri": uri.public(), "prefix": prefix} for uri, prefix in dict.fromkeys(entries)]
    _write_metadata(directory, meta)
