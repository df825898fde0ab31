"""Step 1: find the leaves that hold the answer.

Three locators share one result type:
- ``llm``: the spec's prompt over the serialised tree, with a parser that
  survives the messy JSON small models return, and a recorded fallback;
- ``keyword``: the spec's mock (query tokens vs heading + summary);
- ``hybrid``: no LLM, scores every leaf by dense similarity and BM25 of its
  chunks and of its heading path + summary (tree search in the style of PageIndex).
"""
from __future__ import annotations

import re
from typing import Collection, Iterator, Sequence

import numpy as np

from config import Config
from indexing.index_store import Index
from indexing.node_table import KINDS, LeafList
from indexing.search import LEAVES_WANTED, leaves_of_rows
from retrieval.doc_cards import leaf_card_factors
from retrieval.named_sections import named_kinds, titled_leaf
from retrieval.scoring import flat_scores, score_params
from retrieval.types import Fallback, LocatedNode, LocateResult
from tree_builder.tree import TreeNode
from retrieval.locate_prompts import LOCATE_SYSTEM, NODE_LOCATE_PROMPT, tree_for_prompt
from tree_builder.doc_card import DocumentCard
from tree_builder.visualizer import HEADER, card_line, join_blocks, node_block
from utils.errors import BackendError
from utils.llm.cached import forget_reply
from utils.llm.replies import extract_json_object
from utils.llm.types import LLMClient, UsageMeter
from utils.similarity import ScoreArray, SparseScores, best_first, min_max_normalize, top_order
from retrieval.query import Query
from utils.tokenizer import estimate_tokens

MAX_RESULTS = 5
LOCATOR_CANDIDATES = 20
"""Leaves the hybrid locator lists as candidates (the audit record; the LLM re-ranker's pool)."""
MAX_EXPANDED_LEAVES = 3


def scoped_leaves(index: Index, doc_paths: set[str] | None) -> Sequence[TreeNode]:
    """The leaves of the documents in scope, in index order (built only when read)."""
    if doc_paths is None:
        return index.leaves
    return LeafList(index.tree, index.leaf_positions(doc_paths))


# --------------------------------------------------------------------------- keyword

def keyword_locate(index: Index, query: Query, config: Config,
                   doc_paths: set[str] | None = None) -> LocateResult:
    """The spec's mock: IDF-weighted overlap of query tokens with heading + summary.

    A leaf scores sum(log(1 + n / df(t))) over the query words t in its heading
    path + summary, n and df counted over the leaves in scope; read from the
    leaf-word postings built at index time (indexing/leaf_terms.py).
    """
    q = sorted(set(query.tokens))
    positions = None if doc_paths is None else index.leaf_positions(doc_paths)
    scores = index.search.leaf_keyword(q, positions, score_params(config))
    top = [i for i in top_order(scores, config.tuning.locator.keyword_top_leaves) if scores[i] > 0]
    leaves = [index.leaves[int(i if positions is None else positions[i])] for i in top]
    nodes = [LocatedNode(leaf.node_id, query.text, leaf.heading_path, round(float(scores[i]), 4))
             for leaf, i in zip(leaves, top)]
    thinking = (f"keyword match of {q} against headings and summaries"
                if nodes else "no heading or summary shares a word with the query")
    return LocateResult(nodes=nodes, thinking=thinking, locator="keyword")


# --------------------------------------------------------------------------- hybrid

def _leaf_row_starts(index: Index) -> tuple[np.ndarray, np.ndarray]:
    """Per leaf (index order): first chunk row, and whether it has any rows.

    A leaf without rows starts where the next leaf does (leaf_ptr), so reduceat
    stays monotone; such leaves are masked by ``has``.
    """
    ptr = np.asarray(index.leaf_ptr)
    return ptr[:-1], np.diff(ptr) > 0


def _leaf_max_scaled(values: np.ndarray, rows: np.ndarray, n: int, starts: np.ndarray) -> np.ndarray:
    """Per leaf: the best of its scored rows' values, min-max normalised over all scored rows (0 when
    none of its rows was scored).

    Equal to normalising every row first and then taking each leaf's maximum, because min-max
    scaling is increasing; but the million-row pass is one reduceat over the raw float32 scores
    and only the leaf maxima are scaled (at 10,000 documents: 1.05M rows, 410k leaves).
    """
    ok = np.isfinite(values)
    finite = values[ok]
    if not ok.all():  # a non-finite score counts as not scored, as min_max_normalize treats it
        values = np.where(ok, values, -np.inf)
    full = np.full(n + 1, -np.inf, dtype=np.float32)  # +1: reduceat needs every start < len
    if len(rows) == n and (n == 0 or (rows[0] == 0 and rows[-1] == n - 1)):
        full[:n] = values  # the whole index, in row order
    else:
        full[rows] = values
    best = np.maximum.reduceat(full, starts)
    out = np.zeros(len(best), dtype=np.float64)
    scored = np.isfinite(best)
    if finite.size:
        out[scored] = min_max_normalize(best[scored], lo=float(finite.min()), hi=float(finite.max()))
    return out


def _leaf_max_sparse(values: np.ndarray, rows: np.ndarray, ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(leaves, scaled maxima) of the leaves that own a scored row: ``_leaf_max_scaled`` at those leaves.

    Why: an ANN question scores a few thousand of the million rows of a 10,000-document index;
    a pass over every row (the reduceat) and every leaf cost more than scoring them. Here each
    scored row finds its leaf (``ptr``: leaf i owns rows [ptr[i], ptr[i+1])), and the maxima are
    taken over the scored rows only. Same values: same float32 maxima, same min-max range.
    """
    rows = np.asarray(rows, dtype=np.int64)
    values = np.asarray(values)
    if len(rows) > 1 and bool(np.any(rows[1:] < rows[:-1])):
        order = np.argsort(rows, kind="stable")
        rows, values = rows[order], values[order]
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    ok = np.isfinite(values)
    finite = values[ok]
    if not ok.all():  # a non-finite score counts as not scored, as min_max_normalize treats it
        values = np.where(ok, values, -np.inf)
    leaf = leaves_of_rows(ptr, rows)
    first = np.flatnonzero(np.concatenate([[True], leaf[1:] != leaf[:-1]]))
    best = np.maximum.reduceat(values.astype(np.float32), first)
    out = np.zeros(len(first), dtype=np.float64)
    scored = np.isfinite(best)
    if finite.size:
        out[scored] = min_max_normalize(best[scored], lo=float(finite.min()), hi=float(finite.max()))
    return leaf[first], out


SPARSE_ROW_SHARE = 8
"""Scored rows fewer than 1/8 of the index: the leaf maxima are taken per scored row (an ANN question,
a scope), else in one pass over every row (an exact whole-collection scan)."""


def hybrid_leaf_scores(index: Index, query: Query, config: Config,
                       doc_paths: set[str] | None = None) -> tuple[Sequence[TreeNode], ScoreArray]:
    """Score every leaf in scope; higher is better.

    A leaf is as good as its best chunk (dense and BM25, each min-max
    normalised across the scope) plus how well its heading path + summary
    matches the query densely. When few rows were scored (the ANN's candidates, a scope) the
    result is a ``SparseScores``: only the leaves with a scored row or a heading similarity
    above 0 can score above 0, and everything after follows those leaves, not the forest.
    """
    leaves = scoped_leaves(index, doc_paths)
    if not leaves:
        return leaves, np.zeros(0, dtype=np.float32)
    if doc_paths is None:  # every leaf's heading similarity is asked for next: a store may start on it now
        query.memo.put(LEAVES_WANTED, True)
    scores = flat_scores(index, query, config, doc_paths, idf_scope="corpus")
    n = len(index.chunks)
    # whole collection: leaf i is position i (no arange of millions of leaves a question)
    leaf_idx = None if doc_paths is None else index.leaf_positions(doc_paths)
    n_leaves = len(leaves)
    # raw cosine, not min-max: near-equal heading similarities must not be stretched to 0..1
    raw_dense = index.search.leaf_dense(query, leaf_idx, score_params(config))
    w = config.tuning.locator.locator_leaf_weight
    if len(scores.rows) * SPARSE_ROW_SHARE < n:
        ptr = np.asarray(index.leaf_ptr)
        owners, best_dense = _leaf_max_sparse(scores.dense, scores.rows, ptr)
        _, best_bm25 = _leaf_max_sparse(scores.lexical, scores.rows, ptr)  # the same rows: the same leaves
        if leaf_idx is None:
            pos, inside = owners, owners < n_leaves
        else:
            pos = np.searchsorted(leaf_idx, owners)
            inside = pos < n_leaves
            inside[inside] = leaf_idx[pos[inside]] == owners[inside]
        # clipped only where read: one pass over the leaves (the > 0 test), not three
        at = np.union1d(pos[inside], np.flatnonzero(raw_dense > 0))
        chunk_part = np.zeros(len(at), dtype=np.float64)
        chunk_part[np.searchsorted(at, pos[inside])] = (config.tuning.ranking.dense_weight * best_dense[inside]
                                                        + config.tuning.ranking.bm25_weight * best_bm25[inside])
        total = (1 - w) * chunk_part + w * np.clip(raw_dense[at], 0.0, 1.0)
        total = _weigh_by_cards(index, query, at if leaf_idx is None else leaf_idx[at], total)
        return leaves, SparseScores(n_leaves, at.astype(np.int64), total.astype(np.float32))
    leaf_dense = np.clip(raw_dense, 0.0, 1.0)
    if leaf_idx is None:
        leaf_idx = np.arange(n_leaves)
    starts, has_rows = _leaf_row_starts(index)
    best_dense_all = np.where(has_rows, _leaf_max_scaled(scores.dense, scores.rows, n, starts), 0.0)
    best_bm25_all = np.where(has_rows, _leaf_max_scaled(scores.lexical, scores.rows, n, starts), 0.0)
    chunk_part = (config.tuning.ranking.dense_weight * best_dense_all[leaf_idx]
                  + config.tuning.ranking.bm25_weight * best_bm25_all[leaf_idx])
    total = _weigh_by_cards(index, query, leaf_idx, (1 - w) * chunk_part + w * leaf_dense)
    return leaves, total.astype(np.float32)


def _weigh_by_cards(index: Index, query: Query, positions: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``total`` (scores of the leaves at ``positions``, index leaf numbers) with the leaves of the
    documents the question names by their cards raised (retrieval.doc_cards); unchanged when the
    cards tell no document in scope apart (one document, or an index built before cards)."""
    factors = leaf_card_factors(index, query, positions)
    return total if factors is None else total * factors


def with_named_sections(index: Index, query: Query, leaves: Sequence[TreeNode], total: ScoreArray,
                        picked: list[int], doc_paths: set[str] | None) -> tuple[list[int], dict[int, float]]:
    """``picked`` (scoped leaf numbers, best first) with the leaf titled as each section the question
    names (retrieval.named_sections) in the document of the best pick, placed after it and scored as
    it (returned as {leaf: score}); they replace the weakest picks, so as many leaves are located."""
    kinds = named_kinds(query.text)
    if not kinds or not picked:
        return picked, {}
    scoped = None if doc_paths is None else np.asarray(index.leaf_positions(doc_paths))
    tree = index.tree
    best = picked[0] if scoped is None else int(scoped[picked[0]])
    mine = np.asarray(index.leaf_positions({tree.doc_paths[int(tree.doc[tree.leaf_rows[best]])]}))
    local = mine if scoped is None else np.searchsorted(scoped, mine)
    headings = [(int(j), leaves[int(j)].heading, float(total[int(j)])) for j in local]
    named = [j for j in dict.fromkeys(titled_leaf(k, headings) for k in kinds) if j is not None and j != picked[0]]
    out = picked[:1] + named + [i for i in picked[1:] if i not in named]
    return out[:len(picked)], {j: float(total[picked[0]]) for j in named}


def hybrid_locate(index: Index, query: Query, config: Config,
                  doc_paths: set[str] | None = None) -> LocateResult:
    """Needs the question's vector: the no-LLM locator without an embedder is ``keyword_locate``."""
    leaves, total = hybrid_leaf_scores(index, query, config, doc_paths)
    order = top_order(total, max(config.tuning.locator.hybrid_top_leaves, LOCATOR_CANDIDATES))
    picked = [i for i in order[:config.tuning.locator.hybrid_top_leaves] if total[i] > 0]
    picked, named = with_named_sections(index, query, leaves, total, picked, doc_paths)
    shown = np.asarray(order[:LOCATOR_CANDIDATES], dtype=np.int64)
    if doc_paths is not None:  # leaves[i] is leaf positions[i] of the index (whole collection: i)
        shown = np.asarray(index.leaf_positions(doc_paths))[shown]
    index.prefetch_leaves(shown.tolist())
    text = query.text
    nodes = [LocatedNode(leaves[i].node_id, text, leaves[i].heading_path, round(named.get(i, float(total[i])), 4))
             for i in picked]
    cands = [LocatedNode(leaves[i].node_id, text, leaves[i].heading_path, round(float(total[i]), 4))
             for i in order[:LOCATOR_CANDIDATES]]
    thinking = (f"no LLM: ranked {len(leaves)} leaves by dense + BM25 similarity of their chunks "
                f"and headings to the query")
    if named:
        thinking += "; located the sections the question names: " + "; ".join(leaves[j].heading for j in named)
    return LocateResult(nodes=nodes, thinking=thinking, locator="hybrid", candidates=cands)


def no_llm_locate(index: Index, query: Query, config: Config,
                  doc_paths: set[str] | None = None) -> LocateResult:
    """What step 1 does without an LLM's answer (none configured, or it failed): the hybrid locator,
    or the keyword match when the question has no vector (no embedder loaded). The one place that decides it."""
    if query.vector is not None:
        return hybrid_locate(index, query, config, doc_paths)
    return keyword_locate(index, query, config, doc_paths)


# --------------------------------------------------------------------------- LLM

def _normalise_title(s: str) -> str:
    s = re.sub(r"\s+", " ", s).strip().lower()
    return s


class ScopeIds(Collection[str]):
    """Ids of every node (the root excepted) of the documents in scope, answered from the node table."""

    def __init__(self, index: Index, doc_paths: set[str] | None) -> None:
        self.tree = index.tree
        self.docs = None if doc_paths is None else np.array(
            [i for i, p in enumerate(self.tree.doc_paths) if p in doc_paths], dtype=np.int64)

    def _rows(self) -> np.ndarray:
        if self.docs is None:
            return np.arange(1, len(self.tree))
        return np.flatnonzero(np.isin(self.tree.doc, self.docs))

    def __contains__(self, node_id: object) -> bool:
        row = self.tree.row_of_id(node_id)
        return bool(row) and (self.docs is None or int(self.tree.doc[row]) in self.docs)

    def __iter__(self) -> Iterator[str]:
        return (self.tree.id_of(int(r)) for r in self._rows())

    def __len__(self) -> int:
        return len(self._rows())


def _resolve_id(raw: object, index: Index, allowed: Collection[str]) -> str | None:
    """An id as the model wrote it -> a node id: "7", 7, "[0007]", "<0007>", "node_0007", or a heading."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, (int, float)) and float(raw).is_integer():
        cand = f"{int(raw):04d}"
        return cand if cand in allowed else None
    s = str(raw).strip()
    # brackets as the prompt shows them ("[0007]") or as its "<...>" placeholders suggest ("<0007>")
    m = re.fullmatch(r"[\[<]?\s*(?:node[_ -]?)?(\d{1,7})\s*[\]>]?", s, re.I)
    if m:
        cand = f"{int(m.group(1)):04d}"
        return cand if cand in allowed else None
    # a heading (or heading path) instead of an id
    t = _normalise_title(re.sub(r"\s*\(叶子节点\)\s*$", "", s))
    for nid in allowed:
        node = index.nodes[nid]
        if t in (_normalise_title(node.heading), _normalise_title(node.heading_path)):
            return nid
    for nid in allowed:
        if _normalise_title(index.nodes[nid].heading_path).endswith(t) and len(t) >= 4:
            return nid
    return None


def parse_locator_response(text: str, index: Index, query: str,
                           doc_paths: set[str] | None = None) -> tuple[list[LocatedNode], str, list[str]]:
    """Repair and validate an LLM's locating answer. Returns (nodes, thinking, problems)."""
    problems: list[str] = []
    obj = extract_json_object(text)
    if obj is None:
        return [], "", ["no JSON object in the response"]
    thinking = obj.get("thinking") if isinstance(obj.get("thinking"), str) else ""
    results = obj.get("results")
    if not isinstance(results, list):
        return [], thinking, ["no 'results' list in the JSON"]
    allowed = ScopeIds(index, doc_paths)
    out: list[LocatedNode] = []
    seen: set[str] = set()
    for item in results:
        if len(out) >= MAX_RESULTS:
            problems.append(f"more than {MAX_RESULTS} results: kept the first {MAX_RESULTS}")
            break
        if isinstance(item, dict):
            raw_id = item.get("node_id", item.get("id", item.get("node")))
            sub = item.get("sub_query")
        else:
            raw_id, sub = item, None
        nid = _resolve_id(raw_id, index, allowed)
        if nid is None:
            problems.append(f"unknown node id {raw_id!r} dropped")
            continue
        sub_query = sub.strip() if isinstance(sub, str) and sub.strip() else query
        node = index.nodes[nid]
        if node.is_leaf:
            targets = [node]
        else:
            leaves = node.leaves()
            if len(leaves) > MAX_EXPANDED_LEAVES:
                problems.append(f"non-leaf {nid} has {len(leaves)} leaves: dropped")
                continue
            problems.append(f"non-leaf {nid} replaced by its {len(leaves)} leaves")
            targets = leaves
        for leaf in targets:
            if leaf.node_id in seen or len(out) >= MAX_RESULTS:
                continue
            seen.add(leaf.node_id)
            out.append(LocatedNode(leaf.node_id, sub_query, leaf.heading_path))
    return out, thinking, problems


def toc_for_prompt(index: Index, query: Query, config: Config,
                   doc_paths: set[str] | None = None) -> tuple[str, int]:
    """The serialised tree, cut to the TOC budget around the best no-LLM leaves.

    Returns (text, number of nodes shown). Every node's token cost was summed at
    build time (node_toc_tokens.npy) and ancestors come from the node table, so
    a forest of millions of characters is never re-serialised or re-counted per
    query and only the nodes shown are read: leaves are added best-first with
    the ancestors they need until the next one would not fit.
    """
    tree = index.tree
    costs = tree.toc_tokens
    allowed: np.ndarray | None = None  # None: every node but the root (no 5.3M-row list per question)
    if doc_paths is None:
        total = tree.toc_total()
    else:
        numbers = [i for i, p in enumerate(tree.doc_paths) if p in doc_paths]
        allowed = np.flatnonzero(np.isin(tree.doc, numbers)) if numbers else np.zeros(0, dtype=np.int64)
        total = int(costs[allowed].sum())
    header = estimate_tokens(HEADER) + 2
    cards = _shown_cards(index, doc_paths)
    card_cost = {d: estimate_tokens(card_line(c, 0)) for d, c in cards.items()}
    total += sum(card_cost.values())
    if header + total <= config.tuning.locator.toc_budget_tokens or query.vector is None:
        rows = np.arange(1, len(tree)) if allowed is None else allowed
        return _serialize_rows(index, rows, cards), len(rows)
    _, scores = hybrid_leaf_scores(index, query, config, doc_paths)
    positions = None if doc_paths is None else index.leaf_positions(doc_paths)  # None: leaf i is position i
    included = np.zeros(len(tree), dtype=bool)
    used = header
    for i in best_first(scores):
        new = [int(tree.leaf_rows[i if positions is None else positions[i]])]
        parent = int(tree.parent[new[0]])
        while parent > 0 and not included[parent]:  # row 0, the root, is never shown
            new.append(parent)
            parent = int(tree.parent[parent])
        cost = int(costs[new].sum()) + sum(card_cost.get(tree.doc_paths[int(tree.doc[r])], 0)
                                           for r in new if tree.kind[r] == DOCUMENT_KIND)
        if used + cost > config.tuning.locator.toc_budget_tokens:
            break
        included[new] = True
        used += cost
    rows = np.flatnonzero(included)
    return _serialize_rows(index, rows, cards), len(rows)


DOCUMENT_KIND = KINDS.index("document")


def _shown_cards(index: Index, doc_paths: set[str] | None) -> dict[str, DocumentCard]:
    """The cards of the documents in scope that say more than a title (a collection's TOC shows
    them under each document's heading); none for an index built before cards."""
    out: dict[str, DocumentCard] = {}
    for d in index.metadata.get("documents") or []:
        if not isinstance(d, dict) or (doc_paths is not None and d.get("path") not in doc_paths):
            continue
        card = DocumentCard.from_record(d.get("card"))
        if card is not None and card_line(card, 0):
            out[d["path"]] = card
    return out


def _serialize_rows(index: Index, rows: np.ndarray, cards: dict[str, DocumentCard] | None = None) -> str:
    """``serialize_tree`` of exactly these node rows (a set closed under ancestors), in pre-order."""
    tree = index.tree
    blocks = []
    for r in np.sort(rows):
        node = tree.node(int(r))
        card = cards.get(node.doc_path) if cards and node.kind == "document" else None
        blocks.append(node_block(node, int(tree.depth[r]), card=card))
    return join_blocks(blocks)


def ask_for_leaves(index: Index, llm: LLMClient, query: Query, config: Config,
                   doc_paths: set[str] | None, usage: UsageMeter | None, *, prompt: str, max_tokens: int, locator: str,
                   shown: int, allowed: set[str] | None = None, failure: str = "LLM locating failed",
                   candidates: list[LocatedNode] | None = None) -> LocateResult:
    """One locating call: the reply parsed and repaired (kept to ``allowed`` ids when given), the
    problems recorded, and on any failure the no-LLM locator's answer with the reason; an
    unusable reply is dropped from the LLM cache."""
    reason: str | None = None
    raw: str | None = None
    try:
        resp = llm.generate(prompt, json_mode=True, max_tokens=max_tokens, system=LOCATE_SYSTEM)
        raw = resp.text
        if usage is not None:
            usage.add(resp.usage)
        nodes, thinking, problems = parse_locator_response(raw, index, query.text, doc_paths)
        if allowed is not None:
            kept = [n for n in nodes if n.node_id in allowed]
            if len(kept) < len(nodes):
                problems.append(f"{len(nodes) - len(kept)} leaf id(s) outside the candidates dropped")
            nodes = kept
        if nodes:
            res = LocateResult(nodes=nodes, thinking=thinking, locator=locator, toc_nodes=shown,
                               raw_response=raw, candidates=list(candidates or []))
            if problems:
                res.fallbacks.append(Fallback("locate", "; ".join(problems)[:500], "repaired LLM output"))
            return res
        reason = "; ".join(problems) or "no valid leaf in the LLM's answer"
        forget_reply(llm, resp)  # only replies that parsed and were used stay cached
    except BackendError as exc:
        reason = str(exc)
    res = no_llm_locate(index, query, config, doc_paths)  # never worse than no LLM at all
    res.fallbacks.insert(0, Fallback("locate", f"{failure}: {reason}"[:500], f"{res.locator} locator"))
    res.toc_nodes = shown
    res.raw_response = raw
    return res


def llm_locate(index: Index, llm: LLMClient, query: Query, config: Config,
               doc_paths: set[str] | None = None, usage: UsageMeter | None = None) -> LocateResult:
    """The spec's LLM locating, falling back (recorded) to the no-LLM locator on any failure."""
    toc, shown = toc_for_prompt(index, query, config, doc_paths)
    prompt = NODE_LOCATE_PROMPT.format(query=" ".join(query.text.split()),
                                       serialized_tree=tree_for_prompt(toc))
    return ask_for_leaves(index, llm, query, config, doc_paths, usage, prompt=prompt,
                          max_tokens=800, locator="llm", shown=shown)
