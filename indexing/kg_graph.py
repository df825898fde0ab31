"""The data contract of a long leaf's local knowledge graph, and its checked JSON form.

Why a graph per leaf and not per document: a graph over a whole document grows hub nodes (the
paper's own name, "model", a statute's "国家") that every path runs through, which makes graph
diffusion noisy and costly. Inside one long section the entities are few and specific, and the
graph links facts the chunker cut apart.

Every node and edge names the chunks whose text states it by their position ``k`` in the leaf:
chunk ``k`` of leaf ``L`` is chunk id ``L_chunk_kk`` (indexing/chunker.py), so a graph is
meaningful only together with the chunks it was built from (its ``key`` digests them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from utils.errors import IndexFormatError

NODE_TYPES = ("entity", "acronym", "term", "quantity", "ref", "concept", "event")
"""entity: a name; acronym: an abbreviation (its expansion an alias); term: a defined term; quantity:
a number with a unit; ref: a cross-reference (Section 3, 第十条); concept: a noun phrase; event: what
an LLM reports as one."""
MAX_NAME_CHARS = 200
MAX_LIST = 10_000


@dataclass(frozen=True)
class GraphParams:
    """Which leaves get a graph and how large it grows (build: indexing/kg_store.py, kg_llm.py), and how
    the graph channel lifts chunks at query time (retrieval/graph_channel.py); docs/graph.md."""

    kg_min_leaf_chars: int = field(default=3000, metadata={"build": True})
    """Leaves with more content characters than this get a graph (``index --kg-min-leaf-chars``)."""
    kg_max_nodes: int = field(default=400, metadata={"build": True})
    """Most nodes one leaf's graph keeps (the most mentioned)."""
    kg_llm_window_chars: int = field(default=6000, metadata={"build": True})
    """kg_mode=llm: characters of a leaf one extraction prompt reads."""
    kg_llm_max_tokens: int = field(default=2048, metadata={"build": True})
    """kg_mode=llm: most tokens one extraction reply may generate (a CPU-served model writes a few a
    second); a reply cut at the cap keeps its complete entries."""
    kg_max_leaves: int = 3
    """Located leaves (best first) the graph channel searches."""
    kg_top_chunks: int = 2
    """Chunks one leaf's graph channel adds after the leaf's best candidate."""
    kg_subgraph_nodes: int = 8
    """Nodes of the subgraph kept by personalised PageRank (seeds included)."""
    kg_require_bridge: bool = True
    """Add only chunks sharing a node the question does not name with the leaf's best retrieved chunk
    (one hop from what retrieval found); off: any high-scoring chunk."""
    kg_ppr_restart: float = 0.5
    """Restart probability of the personalised PageRank walk (high: stay near the seeds)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "kg_min_leaf_chars": (0, math.inf), "kg_max_nodes": (1, 100_000), "kg_llm_window_chars": (500, math.inf),
        "kg_llm_max_tokens": (64, 32_768), "kg_max_leaves": (1, math.inf), "kg_top_chunks": (0, math.inf),
        "kg_subgraph_nodes": (1, 10_000), "kg_ppr_restart": (0.01, 1)}


@dataclass
class KGNode:
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    """Positions in the leaf of the chunks that mention the node (ascending)."""


@dataclass
class KGEdge:
    head: int
    tail: int
    relation: str
    weight: float
    chunks: list[int] = field(default_factory=list)
    """Positions in the leaf of the chunks whose text states the relation (ascending)."""


@dataclass
class LeafGraph:
    leaf_id: str
    key: str
    """Digest of what the graph was extracted from (mode, extractor version, the leaf's chunk texts):
    an update reuses the graph of a leaf whose key is unchanged."""
    mode: str
    nodes: list[KGNode] = field(default_factory=list)
    edges: list[KGEdge] = field(default_factory=list)
    llm_calls: int = 0
    tokens: int = 0

    def degrees(self) -> list[int]:
        deg = [0] * len(self.nodes)
        for e in self.edges:
            deg[e.head] += 1
            deg[e.tail] += 1
        return deg

    def max_degree(self) -> int:
        return max(self.degrees(), default=0)

    def to_record(self) -> dict[str, Any]:
        return {"leaf": self.leaf_id, "key": self.key, "mode": self.mode,
                "nodes": [[n.name, n.type, n.aliases, n.chunks] for n in self.nodes],
                "edges": [[e.head, e.tail, e.relation, round(e.weight, 4), e.chunks] for e in self.edges],
                "llm_calls": self.llm_calls, "tokens": self.tokens}

    @classmethod
    def from_record(cls, rec: Any, where: str, n_chunks: int | None = None) -> "LeafGraph":
        """Parse and check one stored graph: every reference in range, every field its type."""
        def bad(what: str) -> IndexFormatError:
            return IndexFormatError(f"{where}: {what}")

        if not isinstance(rec, dict):
            raise bad("not a JSON object")
        leaf, key, mode = rec.get("leaf"), rec.get("key"), rec.get("mode")
        if not all(isinstance(v, str) for v in (leaf, key, mode)):
            raise bad("leaf, key and mode must be strings")
        nodes_raw, edges_raw = rec.get("nodes"), rec.get("edges")
        if not isinstance(nodes_raw, list) or not isinstance(edges_raw, list) \
                or len(nodes_raw) > MAX_LIST or len(edges_raw) > MAX_LIST * 10:
            raise bad("nodes and edges must be lists of bounded length")

        def positions(v: Any) -> list[int]:
            if not isinstance(v, list) or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 0
                                                  and (n_chunks is None or k < n_chunks) for k in v):
                raise bad(f"chunk positions {str(v)[:60]} are not chunks of the leaf")
            return v

        nodes: list[KGNode] = []
        for n in nodes_raw:
            if not (isinstance(n, list) and len(n) == 4 and isinstance(n[0], str) and n[1] in NODE_TYPES
                    and isinstance(n[2], list) and all(isinstance(a, str) for a in n[2])):
                raise bad(f"node {str(n)[:60]} is not [name, type, aliases, chunks]")
            nodes.append(KGNode(n[0], n[1], list(n[2]), positions(n[3])))
        edges: list[KGEdge] = []
        for e in edges_raw:
            if not (isinstance(e, list) and len(e) == 5 and all(isinstance(x, int) and not isinstance(x, bool)
                                                               and 0 <= x < len(nodes) for x in e[:2])
                    and isinstance(e[2], str) and isinstance(e[3], (int, float)) and not isinstance(e[3], bool)
                    and e[3] >= 0):
                raise bad(f"edge {str(e)[:60]} is not [head, tail, relation, weight, chunks] over its nodes")
            edges.append(KGEdge(e[0], e[1], e[2], float(e[3]), positions(e[4])))
        calls, tokens = rec.get("llm_calls", 0), rec.get("tokens", 0)
        if not isinstance(calls, int) or not isinstance(tokens, int):
            raise bad("llm_calls and tokens must be integers")
        return cls(leaf, key, mode, nodes, edges, calls, tokens)


@dataclass
class GraphStats:
    """What a build reports about its graphs (the seed's hub problem is ``max_degree``)."""

    mode: str = "off"
    min_leaf_chars: int = 0
    graphs: int = 0
    nodes: int = 0
    edges: int = 0
    max_degree: int = 0
    max_degree_leaf: str = ""
    extracted: int = 0
    reused: int = 0
    seconds: float = 0.0
    llm_calls: int = 0
    tokens: int = 0
    failed: int = 0
    """LLM extractions that fell back to the rules (an error, an unusable reply, the budget)."""

    def add(self, g: LeafGraph, reused: bool) -> None:
        self.graphs += 1
        self.nodes += len(g.nodes)
        self.edges += len(g.edges)
        d = g.max_degree()
        if d > self.max_degree:
            self.max_degree, self.max_degree_leaf = d, g.leaf_id
        if reused:
            self.reused += 1
        else:
            self.extracted += 1
            self.llm_calls += g.llm_calls
            self.tokens += g.tokens

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: Any) -> "GraphStats":
        out = cls()
        if isinstance(d, dict):
            for k in out.__dict__:
                if k in d and isinstance(d[k], type(getattr(out, k))):
                    setattr(out, k, d[k])
        return out

    def line(self) -> str:
        """``graphs for 35 long leaves (> 3000 chars, rules): 1234 nodes, 2345 edges, max degree 41 ...``"""
        if self.mode == "off":
            return "graphs: off"
        per = self.seconds / self.extracted if self.extracted else 0.0
        llm = f", {self.llm_calls} LLM calls, {self.tokens} tokens" if self.mode == "llm" else ""
        failed = f", {self.failed} fell back to rules" if self.failed else ""
        # a leaf whose reply failed is extracted by rules in milliseconds: say the mean mixes both
        averaged = ", fallbacks included" if self.failed else ""
        return (f"graphs for {self.graphs} long leaves (> {self.min_leaf_chars} chars, {self.mode}): "
                f"{self.nodes} nodes, {self.edges} edges, max degree {self.max_degree}"
                + (f" ({self.max_degree_leaf})" if self.max_degree_leaf else "")
                + f"; {self.extracted} extracted, {self.reused} reused in {self.seconds:.1f} s "
                f"({per:.3f} s per extracted leaf{averaged}{llm}{failed})")
