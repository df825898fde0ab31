"""The run record: what one question did, step by step, as typed data.

``pipeline.run_pipeline`` builds a ``RunRecord``; the terminal (``utils.render``), the SQLite log
(``utils.run_log``), the server and the Python API read its attributes. It becomes a dict only at
the edges, through one pair: ``RunRecord.to_dict`` (what ``query --json`` prints, ``/api/query``
returns and the log stores) and ``RunRecord.from_dict`` (a logged run read back, of this version
or an older one). The JSON keys are flat (``step1_nodes``, ``step2_retrieved``, ...) for the
consumers written against the first version; the step records group them in Python.

Version 2 (``record_version``) records the index's build settings (read from its
``metadata.json``: what it was built with) apart from the query's settings (``config``: only the
settings a query reads), always writes every key, and is the first to carry a version. A version-1
record (no ``record_version``) reads with no build settings and its ``config`` cut to the query's
settings, since its build-time values were the querying process's defaults, not the index's.

Only this module knows the key names; nothing here imports the pipeline, so every layer can read it.
The conversion itself (dataclass to JSON and back, and the schema) is ``utils.record_json``.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from utils.oneline import one_line
from utils.record_json import RecordError, dataclass_schema, from_mapping, key, kind_of, to_json

RECORD_VERSION = 2
"""Written as ``record_version``; a record without one is version 1."""

Setting = str | int | float | bool | None
"""A JSON scalar: a setting's value, a score, an identity field."""

Scores = dict[str, Setting]
"""A hit's scores by name (dense_score, bm25_score, fused_score, rerank_score, graph_lifted...)."""

V1_BUILD_ONLY_SETTINGS = (
    "max_depth", "summary_mode", "summary_max_chars", "short_section_tokens",
    "max_input_bytes", "max_unpacked_bytes", "max_html_elements", "max_html_depth", "max_headings",
    "chunk_size", "chunk_overlap", "min_chunk_chars", "chunk_units", "chunk_context",
    "embedder", "embedder_model", "embed_batch_size", "embed_workers", "hash_dim",
    "ann_min_rows", "kg_mode", "kg_min_leaf_chars", "kg_max_nodes", "kg_llm_window_chars",
    "summary_workers", "store", "llm_build_budget_s", "llm_max_failures",
)
"""The build-time settings a version-1 record's ``config`` held (it recorded every setting): dropped
when such a record is read. A fixed fact about old records; today's list is config.BUILD_ONLY_SETTINGS,
derived from the settings' own fields, and passed in by whoever makes a record."""

# ----------------------------------------------------------------------------- step 1

@dataclass
class LocatedLeaf:
    node_id: str = ""
    sub_query: str = ""
    heading_path: str = ""
    score: float | None = None
    """The locator's own score where it has one (keyword, hybrid); None from an LLM."""


@dataclass
class Route:
    """How the question was read: overview, detail or multi-part (retrieval/query_plan.py)."""

    route: str = "detail"
    aspects: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class LocateStep:
    """Step 1: the leaves the locator chose, and why."""

    thinking: str = key("step1_thinking", "")
    locator: str | None = key("step1_locator")
    nodes: list[LocatedLeaf] = key("step1_nodes", factory=list)
    toc_nodes: int | None = key("step1_toc_nodes")
    """Nodes the LLM was shown (its TOC budget); None when no LLM was asked."""
    route: Route | None = key("step1_route")
    """None on a question that never reached step 1 (stop-words only) and in old records."""



# ----------------------------------------------------------------------------- step 2

@dataclass
class StageHit:
    """One candidate as one stage (keyword, vector, fusion, rerank) ranked it."""

    chunk_id: str = ""
    node_id: str = ""
    rank: int = 0
    score: float = 0.0
    score_details: Scores = field(default_factory=dict)
    excerpt: str = ""
    doc_path: str = ""
    start_char: int = 0
    end_char: int = 0


@dataclass
class Stages:
    """Every stage's own ranked candidates, so "why was this chunk dropped?" has an answer."""

    keyword: list[StageHit] = field(default_factory=list)
    vector: list[StageHit] = field(default_factory=list)
    fusion: list[StageHit] = field(default_factory=list)
    rerank: list[StageHit] = field(default_factory=list)

    NAMES = ("keyword", "vector", "fusion", "rerank")

    def of(self, name: str) -> list[StageHit]:
        return list(getattr(self, name))


@dataclass
class RetrievedHit:
    """A chunk of step 2's final list, with where it is and how it scored."""

    rank: int = 0
    chunk_id: str = ""
    node_id: str = ""
    text: str = ""
    heading_path: str = ""
    doc_path: str = ""
    start_char: int = 0
    end_char: int = 0
    start_line: int = 0
    end_line: int = 0
    page_start: int | None = None
    page_end: int | None = None
    citation: str = ""
    source: str = "tree"
    """tree (from a located section) | net (reached outside them)."""
    sub_query: str = ""
    scores: Scores = field(default_factory=dict)


@dataclass
class GraphNode:
    name: str = ""
    ppr: float = 0.0


@dataclass
class GraphPath:
    head: str = ""
    relation: str = ""
    tail: str = ""
    score: float = 0.0
    chunks: list[str] = field(default_factory=list)


@dataclass
class GraphRecord:
    """What the graph channel did in one located long leaf."""

    leaf: str = ""
    heading_path: str = ""
    seeds: list[str] = field(default_factory=list)
    nodes: list[GraphNode] = field(default_factory=list)
    paths: list[GraphPath] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


@dataclass
class RetrieveStep:
    """Step 2: the final list, each stage's candidates, the graph channel's work."""

    hits: list[RetrievedHit] = key("step2_retrieved", factory=list)
    stages: Stages = key("stages", factory=Stages)
    graph: list[GraphRecord] = key("graph", factory=list)
    order: str | None = key("step2_order")
    """Which score ordered ``hits``: rerank, section, union or fused (None before step 2 ran)."""


# ----------------------------------------------------------------------------- context and answer

@dataclass
class ContextPassage:
    """A passage the answer step read; passage N is the answer's [N]."""

    doc_path: str = ""
    node_id: str = ""
    heading_path: str = ""
    start_char: int = 0
    end_char: int = 0
    ranks: list[int] = field(default_factory=list)
    start_line: int | None = None
    end_line: int | None = None
    page_start: int | None = None
    page_end: int | None = None
    text: str = ""
    citation: str = ""


@dataclass
class ContextRecord:
    budget: int = 0
    used: int = 0
    hits_read: int = 0
    passages: list[ContextPassage] = field(default_factory=list)


@dataclass
class Quote:
    """One sentence of an extractive answer, with the evidence numbers it came from."""

    ranks: list[int] = field(default_factory=list)
    text: str = ""
    citation: str = ""
    heading_path: str = ""
    doc_path: str = ""
    start_char: int = 0
    end_char: int = 0
    score: float = 0.0
    dense: float = 0.0
    article: str | None = field(default=None, metadata={"omit_none": True})
    """A statute's article number, when the quote is one."""
    read: str | None = field(default=None, metadata={"omit_none": True})
    """For a figure read from a table row: the row and column(s) it was read from."""


@dataclass
class Evidence:
    """How strong step 2's evidence was, and the floor it was judged against."""

    score: float = 0.0
    lift_score: float = 0.0
    best_dense: float = 0.0
    coverage: float = 0.0
    background: float = 0.0
    statistic: str = ""
    floor: float | None = None
    floor_source: str = ""
    named_section: str = ""
    """The section the question names (a financial statement) when step 2's best hit lies in it: the
    evidence is found though its figures share few of the question's words (``relevance.named_section_found``)."""


@dataclass
class AnswerStep:
    """Step 3: the answer and how it was written."""

    text: str = key("answer", "")
    evidence_found: bool = key("evidence_found", False)
    mode: str | None = key("answer_mode")
    """llm | extractive | concatenate; None when no answer was written (a notice instead)."""
    truncated: bool = key("answer_truncated", False)
    quotes: list[Quote] = key("answer_quotes", factory=list)
    evidence: Evidence | None = key("evidence_strength")


# ----------------------------------------------------------------------------- around the steps

@dataclass
class FallbackRecord:
    """A degraded path the run took (never silent)."""

    step: str = ""
    reason: str = ""
    used: str = ""


@dataclass
class Usage:
    """LLM tokens and cost of the run (cost None: a model without a known price)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0
    cached_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class LLMUse:
    """Which LLM was configured and whether it answered (a provider that never replied is not named
    as if it wrote the answer)."""

    provider: str = "mock"
    model: str | None = None
    answered: bool = False
    failed: bool = False


@dataclass
class RerankerUse:
    name: str = "none"
    model: str | None = None
    answered: bool = True


@dataclass
class Providers:
    llm: LLMUse = field(default_factory=LLMUse)
    embedder: dict[str, Setting] = field(default_factory=dict)
    reranker: RerankerUse = field(default_factory=RerankerUse)
    locator: str | None = None


@dataclass
class BuildSettings:
    """What the index was built with, from its own metadata.json (not the querying process's)."""

    config: dict[str, Setting] = field(default_factory=dict)
    """The build-time settings (config.BUILD_ONLY_SETTINGS) as the build recorded them."""
    embedder: dict[str, Setting] = field(default_factory=dict)
    """The embedder the build used (``config.embedder`` may say ``auto``: this says which)."""
    tokenizer: str | None = None
    summarizer: str | None = None
    """extractive, or the LLM that wrote the summaries the locator reads."""
    folder_mode: bool | None = None

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], build_only: Collection[str]) -> "BuildSettings | None":
        """The settings an index's metadata.json records (``build_only``: the names of the build-time
        settings); None when it records none (an index older than build settings). A setting it does
        not record is left out, never defaulted."""
        recorded = metadata.get("build_settings")
        built_with = metadata.get("config")
        if not isinstance(recorded, Mapping) and not isinstance(built_with, Mapping):
            return None
        recorded = recorded if isinstance(recorded, Mapping) else {}
        built_with = built_with if isinstance(built_with, Mapping) else {}
        chunking = recorded.get("config")
        chunking = chunking if isinstance(chunking, Mapping) else {}
        # the full config the build recorded, then the settings reuse compares (the same values)
        config = {name: _scalar(built_with[name]) for name in build_only if name in built_with}
        config.update({str(name): _scalar(v) for name, v in chunking.items()})
        embedder = recorded.get("embedder", metadata.get("embedder"))
        return cls(config=config,
                   embedder={str(k): _scalar(v) for k, v in embedder.items()} if isinstance(embedder, Mapping) else {},
                   tokenizer=_str_or_none(recorded.get("tokenizer")),
                   summarizer=_str_or_none(recorded.get("summarizer", metadata.get("summarizer"))),
                   folder_mode=_bool_or_none(recorded.get("folder_mode", metadata.get("folder_mode"))))


def _scalar(value: Any) -> Setting:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _bool_or_none(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


@dataclass
class IndexUse:
    """The index that answered: where, which build, how large, and what it was built with."""

    path: str = ""
    created_at: str | None = None
    embedder: dict[str, Setting] = field(default_factory=dict)
    embedder_reason: str | None = None
    build_id: str | None = None
    documents: int = 0
    chunks: int = 0
    build_settings: BuildSettings | None = None
    """None: the index records none, or the run was logged before records carried them."""


def query_settings(settings: Mapping[str, Any], build_only: Collection[str]) -> dict[str, Setting]:
    """A config's settings a query reads (the ``build_only`` names left out)."""
    return {k: _scalar(v) for k, v in settings.items() if k not in build_only}


# ----------------------------------------------------------------------------- the record

@dataclass
class RunRecord:
    """One question's run: every step's output, what it cost, what it ran on."""

    run_id: str
    created_at: str
    query: str
    notice: str | None = None
    """Set instead of an answer when the question cannot be searched (stop-words only)."""
    locate: LocateStep = field(default_factory=LocateStep, metadata={"flat": True})
    retrieve: RetrieveStep = field(default_factory=RetrieveStep, metadata={"flat": True})
    context: ContextRecord = field(default_factory=ContextRecord)
    answer: AnswerStep = field(default_factory=AnswerStep, metadata={"flat": True})
    timing_ms: dict[str, float] = field(default_factory=dict)
    providers: Providers = field(default_factory=Providers)
    fallbacks: list[FallbackRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    index: IndexUse = field(default_factory=IndexUse)
    config: dict[str, Setting] = field(default_factory=dict)
    """The query's settings (``query_settings``); the index's are ``index.build_settings``."""
    logged: bool = False
    """Whether the run log holds this run (so ``show`` can find it)."""
    record_version: int = RECORD_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON values, every key present, in the first version's order."""
        flat = to_json(self)
        flat["record_version"] = RECORD_VERSION
        return {k: flat[k] for k in KEY_ORDER}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunRecord":
        """A record from its JSON object, of this version or an older one; a RecordError (one line)
        for anything else."""
        if not isinstance(data, Mapping):
            raise RecordError(f"a run record is a JSON object, not {kind_of(data)}")
        version = data.get("record_version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RecordError(f"record_version {one_line(repr(version), 40)} is not a version number")
        if version > RECORD_VERSION:
            raise RecordError(f"the run was recorded by a newer TreeRAG (record version {version}; "
                              f"this one reads up to {RECORD_VERSION})")
        record = from_mapping(cls, data)
        if version == 1:  # its config was the querying process's: the build-time values were not the index's
            record.config = query_settings(record.config, V1_BUILD_ONLY_SETTINGS)
            record.index.build_settings = None
        record.record_version = version
        return record

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of ``to_dict`` (every key required, in order), derived from the same type
        hints ``from_dict`` reads, so the OpenAPI description cannot drift from what is sent."""
        schema = dataclass_schema(cls)
        properties = {**schema["properties"], "record_version": {"type": "integer", "const": RECORD_VERSION}}
        return {"type": "object", "properties": {k: properties[k] for k in KEY_ORDER}, "required": list(KEY_ORDER)}

    def part(self, step: str) -> dict[str, Any]:
        """The keys of one step as the event stream sends them (``STEP_KEYS``), serialised from that
        step's record alone (a server sends one per step while the query runs)."""
        flat = {"context": to_json(self.context)} if step == "context" else to_json(
            {"step1": self.locate, "step2": self.retrieve, "answer": self.answer}[step])
        return {k: flat[k] for k in STEP_KEYS[step]}



KEY_ORDER = ("record_version", "run_id", "created_at", "query", "notice", "step1_thinking", "step1_locator",
             "step1_nodes", "step2_retrieved", "stages", "context", "answer", "evidence_found",
             "step1_toc_nodes", "graph", "step2_order", "step1_route", "answer_mode", "answer_truncated",
             "answer_quotes", "evidence_strength", "timing_ms", "providers", "fallbacks", "usage", "index",
             "config", "logged")
"""The JSON keys in order: the first version's (``record_version`` and ``graph`` added)."""

STEP_KEYS = {
    "step1": ("step1_thinking", "step1_locator", "step1_nodes", "step1_toc_nodes", "step1_route"),
    "step2": ("step2_retrieved", "step2_order", "stages"),
    "context": ("context",),
    "answer": ("answer", "answer_mode", "answer_truncated", "answer_quotes", "evidence_found",
               "evidence_strength"),
}
"""Each step's keys, as the server streams them the moment the step is done."""

