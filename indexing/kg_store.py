"""Long-leaf graphs on disk: plain JSON lines and .npy tables, written with the index, read lazily.

Layout (only when the index was built with graphs; ``metadata.json["kg"]`` says so):

    kg_graphs.jsonl + kg_graph_offsets.npy   one graph per line (kg_graph.LeafGraph.to_record)
    kg_leaves.npy                            int64 per leaf (pre-order): its line in kg_graphs.jsonl, or -1

Why a line per leaf: a query reads the graphs of the few leaves it located, never the whole file;
an update lends an unchanged leaf's line (by its key) to the new build as is.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from indexing.kg_graph import GraphStats, LeafGraph
from indexing.records import Records, check_offsets
from utils.errors import IndexFormatError
from indexing.kg_extract import extract_rules, graph_key

if TYPE_CHECKING:
    from config import Config
    from indexing.index_files import IndexDir
    from indexing.node_table import NodeTable
    from tree_builder.tree import TreeNode

KG_GRAPHS = "kg_graphs.jsonl"
KG_OFFSETS = "kg_graph_offsets.npy"
KG_LEAVES = "kg_leaves.npy"
KG_FILES = (KG_GRAPHS, KG_OFFSETS, KG_LEAVES)
GRAPH_CACHE = 256

Extractor = Callable[[str, Sequence[str], str], LeafGraph]
"""(leaf id, the leaf's chunk texts, its heading path) -> its graph (the writer fills in the key)."""


class GraphWriter:
    """Collects the build's long-leaf graphs, leaf by leaf in the tree's order, then writes the files.

    ``previous``: graphs of the index being replaced, by key; a leaf whose key is among them reuses
    its graph instead of extracting it again (an update costs only the changed leaves).
    """

    def __init__(self, config: "Config", extractor: Extractor, previous: "GraphTable | None" = None,
                 extractor_id: str = "") -> None:
        self.mode = config.kg_mode
        self.min_chars = config.tuning.graph.kg_min_leaf_chars
        self.extractor = extractor
        self.extractor_id = extractor_id
        self.previous = previous
        self.lines: list[bytes] = []
        self.rows: list[int] = []
        self.stats = GraphStats(mode=self.mode, min_leaf_chars=self.min_chars)

    def add_leaf(self, leaf_id: str, content_chars: int, chunk_texts: Sequence[str], heading_path: str = "") -> None:
        """Called once per leaf in order; a graph only for leaves longer than the threshold."""
        if content_chars <= self.min_chars or not chunk_texts:
            self.rows.append(-1)
            return
        key = graph_key(self.mode, chunk_texts, self.extractor_id)
        graph = self.previous.by_key(key, leaf_id) if self.previous is not None else None
        reused = graph is not None
        if graph is None:
            t = time.perf_counter()
            graph = self.extractor(leaf_id, chunk_texts, heading_path)
            graph.key = key
            self.stats.seconds += time.perf_counter() - t
            if graph.mode != self.mode:  # the LLM failed and the rules stood in: never lent to a later build
                self.stats.failed += 1
                graph.key = "fallback:" + key
        graph.leaf_id = leaf_id
        self.stats.add(graph, reused)
        self.rows.append(len(self.lines))
        self.lines.append(json.dumps(graph.to_record(), ensure_ascii=False, allow_nan=False).encode("utf-8")
                          + b"\n")

    def write(self, directory: Path) -> dict[str, Any]:
        """The files, and the stats metadata.json keeps under "kg"."""
        directory = Path(directory)
        offsets = np.zeros(len(self.lines) + 1, dtype=np.int64)
        with open(directory / KG_GRAPHS, "wb") as fh:
            for i, line in enumerate(self.lines):
                fh.write(line)
                offsets[i + 1] = offsets[i] + len(line)
        np.save(directory / KG_OFFSETS, offsets, allow_pickle=False)
        np.save(directory / KG_LEAVES, np.asarray(self.rows, dtype=np.int64), allow_pickle=False)
        self.stats.seconds = round(self.stats.seconds, 3)
        return self.stats.to_dict()


class GraphHost(Protocol):
    """What the graphs read of the loaded index that holds them (``index_store.Index``): its manifest,
    tree and leaf -> chunk rows, and the ``kg`` slot they fill. A protocol, so the index loader can
    attach graphs without this module importing it back."""

    metadata: dict[str, Any]
    tree: "NodeTable"
    leaves: Sequence["TreeNode"]
    leaf_rows: Mapping[str, tuple[int, int]]
    leaf_ptr: np.ndarray
    kg: Any


class GraphTable:
    """The graphs of one loaded index: a leaf's graph parsed and checked when first asked for."""

    def __init__(self, records: Any, leaf_rows: np.ndarray, index: GraphHost, stats: GraphStats) -> None:
        self.records = records
        self.leaf_rows = leaf_rows
        self.index = index
        self.stats = stats
        self._cache: dict[int, LeafGraph] = {}
        self._keys: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def row(self, row: int) -> LeafGraph:
        hit = self._cache.get(row)
        if hit is None:
            rec = self.records.raw(row)
            where = self.records.where(row)
            leaf_id = rec.get("leaf") if isinstance(rec, dict) else None
            rows = self.index.leaf_rows.get(leaf_id) if isinstance(leaf_id, str) else None
            if rows is None:
                raise IndexFormatError(f"{where}: the graph names no leaf of the index")
            hit = LeafGraph.from_record(rec, where, rows[1] - rows[0])
            if len(self._cache) >= GRAPH_CACHE:
                self._cache.clear()
            self._cache[row] = hit
        return hit

    def for_leaf(self, leaf_id: str) -> LeafGraph | None:
        """The leaf's graph, or None when the leaf is short (or unknown)."""
        tree = self.index.tree
        node_row = tree.row_of_id(leaf_id)
        pos = -1 if node_row is None else int(tree.leaf_of_row[node_row])
        if pos < 0:
            return None
        row = int(self.leaf_rows[pos])
        if row < 0:
            return None
        g = self.row(row)
        if g.leaf_id != leaf_id:
            raise IndexFormatError(f"{KG_LEAVES} gives leaf {leaf_id} the graph of {g.leaf_id}")
        return g

    def by_key(self, key: str, leaf_id: str) -> LeafGraph | None:
        """The stored graph extracted from exactly this text (for an update), or None."""
        if self._keys is None:
            self._keys = {}
            for r in range(len(self.records)):
                rec = self.records.raw(r)
                if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                    self._keys[rec["key"]] = r
        r = self._keys.get(key)
        if r is None:
            return None
        rec = self.records.raw(r)
        n_chunks = None
        rows = self.index.leaf_rows.get(leaf_id)
        if rows is not None:
            n_chunks = rows[1] - rows[0]
        return LeafGraph.from_record(rec, self.records.where(r), n_chunks)

    def leaves_with_graphs(self) -> list[str]:
        leaves = self.index.leaves
        return [leaves[int(p)].node_id for p in np.flatnonzero(self.leaf_rows >= 0)]


def attach(index: GraphHost, files: "IndexDir") -> None:
    """Give ``index`` its graphs when the build wrote them (``index.kg``; None otherwise)."""
    meta = index.metadata.get("kg")
    if not isinstance(meta, dict) or meta.get("mode", "off") == "off":
        return
    offsets = files.read_array(KG_OFFSETS, mmap=False)
    data = files.map_bytes(KG_GRAPHS)
    check_offsets(offsets, len(offsets) - 1, len(data), KG_GRAPHS, KG_OFFSETS)
    attach_records(index, files, Records(data, offsets, KG_GRAPHS))


def attach_records(index: GraphHost, files: "IndexDir", records: Any) -> None:
    """``index.kg`` over graph records from either store (a file's lines, or an engine table's rows)
    and the leaf -> record table kg_leaves.npy, checked against each other."""
    meta = index.metadata.get("kg") or {}
    n_leaves = len(index.leaf_ptr) - 1
    leaf_rows = files.read_array(KG_LEAVES, mmap=False)
    if leaf_rows.dtype != np.int64 or leaf_rows.shape != (n_leaves,):
        raise IndexFormatError(f"{KG_LEAVES} has shape {leaf_rows.shape} {leaf_rows.dtype}, "
                               f"expected ({n_leaves},) int64")
    n = len(records)
    used = leaf_rows[leaf_rows >= 0]
    if int(leaf_rows.min(initial=-1)) < -1 or (used.size and (int(used.max()) >= n
                                                              or len(np.unique(used)) != used.size)) \
            or used.size != n:
        raise IndexFormatError(f"{KG_LEAVES} does not give each graph of {KG_GRAPHS} to one leaf")
    index.kg = GraphTable(records, leaf_rows, index, GraphStats.from_dict(meta))


def verify_graphs(index: GraphHost) -> GraphStats | None:
    """Read and check every graph (``verify``); the sizes and the largest degree, recomputed."""
    table = getattr(index, "kg", None)
    if table is None:
        return None
    out = GraphStats(mode=table.stats.mode, min_leaf_chars=table.stats.min_leaf_chars)
    for leaf_id in table.leaves_with_graphs():
        g = table.for_leaf(leaf_id)
        assert g is not None
        out.add(g, reused=True)
    out.reused = 0
    return out


def make_extractor(config: "Config", llm: Any = None, usage: Any = None) -> tuple[Extractor, str]:
    """(the extractor for ``config.kg_mode``, its identity for graph keys)."""
    params = config.tuning.graph

    def rules(leaf_id: str, texts: Sequence[str], heading_path: str = "") -> LeafGraph:
        return extract_rules(leaf_id, texts, params.kg_max_nodes)

    if config.kg_mode == "llm":
        from indexing.kg_llm import LLMGraphExtractor  # noqa: PLC0415

        ext = LLMGraphExtractor(llm, params, usage, fallback=rules)
        return ext.extract, ext.extractor_id
    return rules, f"max_nodes={params.kg_max_nodes}"
