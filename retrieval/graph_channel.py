"""The graph channel: inside a located long leaf, the chunks that state the question's subgraph.

Why: a long leaf is chunked into many 200-character windows; a question whose answer joins two
facts of the leaf ("the corpus AdaRouter was trained on ... how many tokens it has") matches the
first fact's chunk and not the second's, which names the corpus but not AdaRouter. The leaf's graph
links the two through the entity they share. HippoRAG-style: the question's (and the locator's
sub-query's) entities are matched to the leaf's nodes, personalised PageRank from those seeds picks
a small subgraph, and the chunks that state its edges are scored; the best of them join the leaf's
candidates right after the leaf's best chunk (where the leaf's own retrieval put its best), with
the graph score recorded in ``score_details``. The subgraph's edges become the "graph path" lines
the synthesis prompt reads next to the evidence, each citing the chunk that states it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from config import Config
from indexing.kg_extract import norm_key, question_mentions
from indexing.kg_graph import GraphParams, LeafGraph
from retrieval.query import Query
from retrieval.types import LocatedNode, RetrievedChunk
from utils.llm.prompt_text import escape_evidence
from utils.oneline import one_line
from utils.tokenizer import tokenize

if TYPE_CHECKING:
    from indexing.index_store import Index

PPR_ITERATIONS = 30
MIN_SEED_MATCH = 0.5
MIN_CHUNK_SHARE = 0.2
"""A chunk joins the candidates only with at least this share of the leaf's best graph score."""
"""Share of a node's name tokens the question must contain for the node to be a seed."""


@dataclass(frozen=True)
class GraphPath:
    head: str
    relation: str
    tail: str
    weight: float
    chunk_ids: tuple[str, ...]

    def line(self) -> str:
        return f"{self.head} -[{self.relation}]-> {self.tail}"

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head, "relation": self.relation, "tail": self.tail, "score": round(self.weight, 4),
                "chunks": list(self.chunk_ids)}


@dataclass
class GraphUse:
    """What the graph channel did in one located leaf (recorded in the run and shown by ``show``)."""

    leaf_id: str
    heading_path: str
    seeds: list[str] = field(default_factory=list)
    nodes: list[tuple[str, float]] = field(default_factory=list)
    """The subgraph's nodes with their PageRank mass, best first."""
    paths: list[GraphPath] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    """Chunk ids the channel added to (or lifted in) the leaf's candidates."""

    def to_dict(self) -> dict[str, Any]:
        return {"leaf": self.leaf_id, "heading_path": self.heading_path, "seeds": self.seeds,
                "nodes": [{"name": n, "ppr": round(p, 4)} for n, p in self.nodes],
                "paths": [p.to_dict() for p in self.paths], "added": self.added}


def _tokens(text: str) -> set[str]:
    return set(tokenize(text))


SEED_TYPE_WEIGHT = {"entity": 1.0, "acronym": 1.0, "term": 1.0, "ref": 1.0, "event": 1.0, "concept": 0.5,
                    "quantity": 0.0}
"""A name the question shares with the leaf says more than a common noun it shares; a number alone
says too little to start a walk from."""
SEED_CHUNK_WEIGHT = 0.5
"""A seed's own mass counts half in a chunk's score: chunks naming the question's entities are what
dense + BM25 find already; the channel is for the chunks one hop away."""


def match_seeds(graph: LeafGraph, texts: Sequence[str]) -> dict[int, float]:
    """Node -> seed weight: nodes the question names (by merge key or alias), or whose name's
    words the question mostly contains. A node mentioned all over the leaf says less about where
    the answer is, so its weight falls with the square root of its chunk count."""
    keys: set[str] = set()
    toks: set[str] = set()
    for t in texts:
        keys |= {k for k, _ in question_mentions(t)}
        toks |= _tokens(t)
    out: dict[int, float] = {}
    for i, n in enumerate(graph.nodes):
        names = [n.name, *n.aliases]
        if any(norm_key(a) in keys for a in names):
            share = 1.0
        else:
            share = 0.0
            for a in names:
                nt = _tokens(a)
                if nt:
                    share = max(share, len(nt & toks) / len(nt))
        weight = share * SEED_TYPE_WEIGHT.get(n.type, 1.0)
        if share >= MIN_SEED_MATCH and weight > 0:
            out[i] = weight / math.sqrt(max(1, len(n.chunks)))
    return out


def personalized_pagerank(graph: LeafGraph, seeds: dict[int, float], restart: float) -> np.ndarray:
    """Stationary mass of a walk that restarts at the seeds with probability ``restart`` per step."""
    n = len(graph.nodes)
    s = np.zeros(n)
    for i, w in seeds.items():
        s[i] = w
    if n == 0 or s.sum() <= 0:
        return s
    s /= s.sum()
    w = np.zeros((n, n))
    for e in graph.edges:
        w[e.head, e.tail] += e.weight
        w[e.tail, e.head] += e.weight
    out_w = w.sum(axis=1, keepdims=True)
    p = np.divide(w, out_w, out=np.zeros_like(w), where=out_w > 0)
    dangling = out_w[:, 0] <= 0
    r = s.copy()
    for _ in range(PPR_ITERATIONS):
        r = restart * s + (1 - restart) * (r @ p + r[dangling].sum() * s)
    return r


def chunk_scores(graph: LeafGraph, ppr: np.ndarray, seeds: dict[int, float]) -> dict[int, float]:
    """Chunk position -> the PageRank mass of the nodes it states (HippoRAG's passage score), a
    seed's at SEED_CHUNK_WEIGHT."""
    out: dict[int, float] = {}
    for i, n in enumerate(graph.nodes):
        m = float(ppr[i]) * (SEED_CHUNK_WEIGHT if i in seeds else 1.0)
        if m <= 0:
            continue
        for k in n.chunks:
            out[k] = out.get(k, 0.0) + m
    return out


def bridge_chunks(graph: LeafGraph, seeds: dict[int, float], ppr: np.ndarray, anchor_k: int) -> set[int]:
    """Chunks one hop from the anchor: those naming a node the anchor chunk names that the question
    does not (the bridge of "X was trained on Z ... Z holds 4.2 million sentences")."""
    bridges = [i for i, n in enumerate(graph.nodes) if anchor_k in n.chunks and i not in seeds and ppr[i] > 0]
    return {k for i in bridges for k in graph.nodes[i].chunks if k != anchor_k}


def leaf_graph_channel(index: "Index", leaf: LocatedNode, graph: LeafGraph, texts: Sequence[str],
                       params: GraphParams, anchor_row: int | None = None) -> tuple[GraphUse, list[tuple[int, float, int]]]:
    """The leaf's subgraph and its chunks as (row, graph score, subgraph edges stated), best first.

    With ``kg_require_bridge`` and the leaf's best retrieved chunk (``anchor_row``), only chunks
    that share a non-question node with that chunk are returned (``bridge_chunks``)."""
    use = GraphUse(leaf.node_id, leaf.heading_path)
    seeds = match_seeds(graph, texts)
    use.seeds = [graph.nodes[i].name for i in sorted(seeds, key=lambda i: -seeds[i])]
    if not seeds:
        return use, []
    ppr = personalized_pagerank(graph, seeds, params.kg_ppr_restart)
    order = [int(i) for i in np.argsort(-ppr, kind="stable") if ppr[i] > 0][:params.kg_subgraph_nodes]
    use.nodes = [(graph.nodes[i].name, float(ppr[i])) for i in order]
    scores = chunk_scores(graph, ppr, seeds)
    first_row = index.leaf_rows[leaf.node_id][0]
    if params.kg_require_bridge and anchor_row is not None:
        allowed = bridge_chunks(graph, seeds, ppr, anchor_row - first_row)
        scores = {k: v for k, v in scores.items() if k in allowed}
    ranked = sorted(scores, key=lambda k: (-scores[k], k))
    top = scores[ranked[0]] if ranked else 0.0
    # the paths: edges of the subgraph, and edges the best chunks state from a subgraph node
    keep = set(order)
    best = set(ranked[:max(1, params.kg_top_chunks)])
    scored_edges = []
    for j, e in enumerate(graph.edges):
        inside = e.head in keep and e.tail in keep
        stated = (e.head in keep or e.tail in keep) and best.intersection(e.chunks)
        if e.chunks and (inside or stated):
            scored_edges.append((float(ppr[e.head] + ppr[e.tail]) * math.log1p(e.weight), j))
    scored_edges.sort(key=lambda x: (-x[0], x[1]))
    n_edges: dict[int, int] = {}
    for _, j in scored_edges:
        for k in graph.edges[j].chunks:
            n_edges[k] = n_edges.get(k, 0) + 1
    leaf_id = leaf.node_id
    use.paths = [GraphPath(graph.nodes[graph.edges[j].head].name, graph.edges[j].relation,
                           graph.nodes[graph.edges[j].tail].name, score,
                           tuple(f"{leaf_id}_chunk_{k:02d}" for k in graph.edges[j].chunks[:3]))
                 for score, j in scored_edges[:params.kg_subgraph_nodes]]
    return use, [(first_row + k, scores[k] / top if top > 0 else 0.0, n_edges.get(k, 0)) for k in ranked]


def apply_graph_channel(index: "Index", question: Query, located: Sequence[LocatedNode],
                        candidates: list[RetrievedChunk], config: Config) -> tuple[list[RetrievedChunk], list[GraphUse]]:
    """``candidates`` with each graph-bearing located leaf's best graph chunks placed right after the
    leaf's best candidate (a chunk already at or above that place keeps it), and what was done."""
    table = getattr(index, "kg", None)
    params = config.tuning.graph
    if not config.kg_channel or table is None or not located or params.kg_top_chunks <= 0:
        return candidates, []
    text = question.text
    uses: list[GraphUse] = []
    out = list(candidates)
    for leaf in located:
        if len(uses) >= params.kg_max_leaves:
            break
        graph = table.for_leaf(leaf.node_id)
        if graph is None:
            continue
        texts = [text] if leaf.sub_query in ("", text) else [text, leaf.sub_query]
        anchor = next((c.row for c in out if c.chunk.source_node_id == leaf.node_id), None)
        use, ranked = leaf_graph_channel(index, leaf, graph, texts, params, anchor)
        uses.append(use)
        out = _fuse(index, out, leaf, ranked, params.kg_top_chunks, use, question)
    return out, uses


def _fuse(index: "Index", cands: list[RetrievedChunk], leaf: LocatedNode, ranked: list[tuple[int, float, int]],
          top_chunks: int, use: GraphUse, question: Query) -> list[RetrievedChunk]:
    """Rank fusion: the leaf's best candidate stays first; its best graph chunks that retrieval did not
    already place within the next ``top_chunks`` (kg_top_chunks) follow it (a chunk
    the leaf's retrieval had not kept enters with its dense score recorded; BM25 is not recomputed)."""
    qvec = question.vector
    if not ranked:
        return cands
    anchor = next((i for i, c in enumerate(cands) if c.chunk.source_node_id == leaf.node_id), None)
    if anchor is None:
        return cands
    anchor_hit = cands[anchor]
    pos = {c.row: i for i, c in enumerate(cands)}
    lifted: list[RetrievedChunk] = []
    drop: set[int] = set()
    for g_rank, (row, gscore, n_edges) in enumerate(ranked, 1):
        if len(lifted) >= top_chunks or gscore < MIN_CHUNK_SHARE:
            break
        detail = {"graph_score": round(gscore, 4), "graph_rank": g_rank, "graph_edges": n_edges}
        i = pos.get(row)
        if i is not None and i <= anchor + top_chunks:  # retrieval reads it this early already
            cands[i] = cands[i].with_scores(cands[i].score, **detail)
            continue
        if i is not None:
            drop.add(i)
            base = cands[i]
            hit = base.with_scores(anchor_hit.score, **{**detail, "graph_lifted": 1,
                                                        "score_before_graph": round(base.score, 4)})
        else:
            dense = float(index.search.dense(qvec, np.array([row]))[0]) if qvec is not None else 0.0
            made = RetrievedChunk.at(index, row, dense, 0.0, 0.0, leaf.sub_query or question.text, "tree")
            hit = made.with_scores(anchor_hit.score, **{**detail, "graph_lifted": 1})
        lifted.append(hit)
        use.added.append(hit.chunk.chunk_id)
    if not lifted:
        return cands
    kept = [c for i, c in enumerate(cands) if i not in drop]
    at = next(i for i, c in enumerate(kept) if c.row == anchor_hit.row) + 1
    return kept[:at] + lifted + kept[at:]


# --------------------------------------------------------------------------- showing graphs

def prompt_block(uses: Sequence[GraphUse], read: Sequence[tuple[int, RetrievedChunk]], chinese: bool,
                 index: "Index | None" = None) -> str:
    """The graph path lines for the synthesis prompt, each citing the evidence that states it.

    An edge's chunk is cited by the number of the evidence passage that contains it; an edge whose
    chunk the context did not take is cited by its chunk id and heading path.
    """
    lines: list[str] = []
    for use in uses:
        for p in use.paths:
            cites = []
            for cid in p.chunk_ids:
                n = _evidence_number(cid, read, index)
                cites.append(f"[证据{n}]" if n is not None else f"({cid})")
            lines.append(f"- {escape_evidence(one_line(p.line()))} {' '.join(dict.fromkeys(cites))}"
                         f" — {escape_evidence(one_line(use.heading_path))}")
    if not lines:
        return ""
    head = ("图路径（长章节内实体之间的关系，由规则或模型从原文抽取；每条后是陈述它的证据，请以原文证据为准）:"
            if chinese else
            "图路径 / graph paths (relations between entities of a long section, extracted from the text; "
            "each cites the evidence stating it; the evidence text prevails):")
    return "<graph>\n" + head + "\n" + "\n".join(lines) + "\n</graph>"


def _evidence_number(chunk_id: str, read: Sequence[tuple[int, RetrievedChunk]], index: "Index | None") -> int | None:
    """The evidence item holding the chunk: the same chunk, or a passage whose span covers its middle."""
    span = None
    if index is not None:
        leaf, _, k = chunk_id.rpartition("_chunk_")
        rows = index.leaf_rows.get(leaf)
        if rows is not None and k.isdigit() and rows[0] + int(k) < rows[1]:
            c = index.chunks[rows[0] + int(k)]
            span = (c.doc_path, (c.start_char + c.end_char) // 2)
    for n, rc in read:
        c = rc.chunk
        if c.chunk_id == chunk_id or (span is not None and c.doc_path == span[0]
                                      and c.start_char <= span[1] < c.end_char):
            return n
    return None


def graph_listing(index: "Index") -> list[dict[str, Any]]:
    """Every leaf with a graph: its size and largest degree (the hub check)."""
    out = []
    for leaf_id in index.kg.leaves_with_graphs():
        g = index.kg.for_leaf(leaf_id)
        node = index.get_node(leaf_id)
        out.append({"leaf": leaf_id, "heading_path": node.heading_path if node else "",
                    "nodes": len(g.nodes), "edges": len(g.edges), "max_degree": g.max_degree()})
    return out


def leaf_graph_dict(index: "Index", g: LeafGraph) -> dict[str, Any]:
    node = index.get_node(g.leaf_id)
    deg = g.degrees()

    def ids(ks: list[int]) -> list[str]:
        return [f"{g.leaf_id}_chunk_{k:02d}" for k in ks]

    return {"leaf": g.leaf_id, "heading_path": node.heading_path if node else "", "mode": g.mode,
            "max_degree": max(deg, default=0),
            "nodes": [{"id": i, "name": n.name, "type": n.type, "aliases": n.aliases, "degree": deg[i],
                       "chunks": ids(n.chunks)} for i, n in enumerate(g.nodes)],
            "edges": [{"head": g.nodes[e.head].name, "relation": e.relation, "tail": g.nodes[e.tail].name,
                       "weight": round(e.weight, 4), "chunks": ids(e.chunks)} for e in g.edges]}


def leaf_graph_text(index: "Index", g: LeafGraph) -> str:
    d = leaf_graph_dict(index, g)
    lines = [f"{d['leaf']}  {d['heading_path']}",
             f"{len(d['nodes'])} nodes, {len(d['edges'])} edges, max degree {d['max_degree']} ({g.mode})", "", "nodes:"]
    for n in sorted(d["nodes"], key=lambda n: (-n["degree"], n["id"])):
        alias = f" (= {', '.join(n['aliases'])})" if n["aliases"] else ""
        chunks = ", ".join(c.rsplit("_", 1)[1] for c in n["chunks"][:8])
        lines.append(f"  [{n['type']}] {n['name']}{alias}  degree {n['degree']}  chunks {chunks}")
    lines += ["", "edges:"]
    for e in sorted(d["edges"], key=lambda e: -e["weight"]):
        chunks = ", ".join(c.rsplit("_", 1)[1] for c in e["chunks"][:8])
        lines.append(f"  {e['head']} -[{e['relation']}]-> {e['tail']}  weight {e['weight']:g}  chunks {chunks}")
    return "\n".join(lines)
