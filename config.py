"""Configuration: one frozen dataclass passed down explicitly (no global state).

Every tunable of the pipeline lives here so that the evaluation harness can vary
one field at a time with ``dataclasses.replace`` and a run record can snapshot
the whole thing with ``dataclasses.asdict``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

FusionMode = Literal["weighted", "rrf"]
IdfScope = Literal["leaf", "document", "corpus"]


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

    # --- chunking ---------------------------------------------------------
    chunk_size: int = 200
    chunk_overlap: int = 50
    min_chunk_chars: int = 20
    chunk_context: Literal["none", "headings"] = "headings"
    """What a chunk is embedded and BM25-indexed as: its text alone (none), or its document title and
    heading path on a line before the text (headings). The stored text and citations never change."""

    # --- embeddings -------------------------------------------------------
    embedder: str = "auto"
    """auto | hash | local | onnx | openai | use  (see indexing/embedder.py)."""
    embedder_model: str | None = None
    embed_batch_size: int = 64
    hash_dim: int = 384

    # --- BM25 -------------------------------------------------------------
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    bm25_epsilon: float = 0.25
    bm25_idf_scope: IdfScope = "document"
    """IDF over the chunk's whole document: a 3-chunk leaf has no usable IDF (set by evaluation)."""

    # --- query pipeline ---------------------------------------------------
    locator: str = "auto"
    """auto | llm | llm-rerank | keyword | hybrid.  auto = llm when one is configured, else hybrid.
    llm-rerank: the LLM re-orders the hybrid locator's top 10 leaves (a ~10x smaller prompt)."""
    max_located: int = 5
    keyword_top_leaves: int = 3
    hybrid_top_leaves: int = 5
    """Leaves the no-LLM hybrid locator returns."""
    locator_leaf_weight: float = 0.3
    """Share of a leaf's heading+summary similarity in its hybrid locator score (rest: best chunk)."""
    top_k_per_leaf: int = 5
    final_top_k: int = 5
    fusion: FusionMode = "weighted"
    dense_weight: float = 0.5
    bm25_weight: float = 0.5
    rrf_k: int = 60
    reranker: str = "none"
    """none | cross-encoder"""
    reranker_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    candidate_order: Literal["auto", "fused", "union", "section"] = "auto"
    """How step 2 ranks candidates before (or without) rerank: fused = the spec's strict in-leaf
    retrieval, per-leaf fused scores; union = located leaves' chunks re-scored on one scale + leaf
    prior; section = every chunk in scope scored by a linear model over its own and its leaf's,
    section's and document's evidence, the located leaves a prior instead of a cut; auto = section
    within one document, union across several (chosen by evaluation, see README)."""
    ranker_weights: str | None = None
    """Weights file of the section ranker (None: retrieval/ranker_weights.json)."""
    leaf_prior_weight: float = 0.4
    """With candidate_order=union: weight of the locator's belief in a chunk's leaf."""
    safety_net: bool = False
    """candidate_order fused/union: also merge the flat top results (section order scores everything)."""
    safety_net_top_k: int = 5
    toc_budget_tokens: int = 6000

    # --- LLM ----------------------------------------------------------------
    llm: str = "auto"
    """auto | mock | anthropic:MODEL | openai:MODEL"""
    llm_cache: bool = True
    llm_query_budget_s: float = 60.0
    """Wall-clock seconds all LLM calls of one query may take together (retries and waits included)."""
    llm_build_budget_s: float = 1800.0
    """The same for all LLM summary calls of one index build."""
    llm_max_failures: int = 3
    """Failed calls in a row (each after its retries) before a query or build stops calling the LLM."""

    # --- answer (step 3) -----------------------------------------------------
    answer_mode: Literal["extractive", "concatenate"] = "extractive"
    """Answer without an LLM: extractive = the best sentences, best first (default);
    concatenate = the spec's mock, every retrieved chunk quoted whole in step-2 order."""
    answer_max_chars: int = 600
    """Length budget of the extractive answer's quotes (characters)."""
    answer_max_sentences: int = 4
    answer_rank_weight: float = 0.5
    """Share of a sentence's answer score that comes from its chunk's step-2 rank (the rest: the
    sentence's own dense + BM25 match with the question); retrieval saw the leaf and the context."""
    answer_dense_candidates: int = 0
    """Sentences embedded for the dense part of their score (0 = all); the others are ranked out by
    BM25 + rank first. Each costs one embedding (~10 ms on this machine's CPU)."""
    answer_min_relative: float = 0.5
    """A sentence joins the answer only if its fused score is at least this share of the best one's."""
    evidence_floor: float = 0.35
    """Relevance floor: below it the answer says the indexed documents do not answer the question
    (``evidence_found`` false). Compared with the evidence score of retrieval/relevance.py: the best
    retrieved chunk's raw cosine with the question and the share of the question's IDF weight found
    in the retrieved text, combined with dense_weight / bm25_weight; both parts lie in [0, 1]. Chosen
    as the balanced-error threshold on a calibration half of both shared sets, questions asked of
    their own documents vs of unrelated ones (benchmarks/answer_quality.py; figures in README)."""

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_type(name: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif default is None:
        ok = value is None or isinstance(value, str)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        from utils.errors import InputError

        raise InputError(f"config file: {name} must be a {type(default).__name__}, got {value!r}")
    return value


def load_config_file(path: "Path | None", env: "Mapping[str, str]") -> Config:
    """Defaults overridden by a TOML file: ``--config``, else $TREERAG_CONFIG, else ./treerag.toml.

    Keys are Config field names, at the top level or under a ``[treerag]`` table.
    A file that does not exist is only an error when it was named explicitly.
    """
    import tomllib
    from pathlib import Path as _Path

    from utils.errors import InputError

    explicit = path is not None or bool(env.get("TREERAG_CONFIG"))
    p = _Path(path) if path is not None else _Path(env.get("TREERAG_CONFIG") or "treerag.toml")
    if not p.is_file():
        if explicit:
            raise InputError(f"config file {p} not found")
        return Config()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"config file {p} is not valid TOML: {exc}") from None
    data = data.get("treerag", data)
    defaults = Config()
    fields = {f.name for f in dataclasses.fields(Config)}
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            raise InputError(f"config file {p}: unknown setting {key!r}")
        changes[key] = _check_type(key, value, getattr(defaults, key))
    return defaults.replace(**changes)
