"""The fixed three-step pipeline: locate -> retrieve + rerank -> synthesise.

No loops, no tool calls, no decisions beyond recorded fallbacks. The result
is a typed ``RunRecord`` (utils/run_record.py: every step's output, timing,
providers, fallbacks, usage, the index's build settings and the query's
settings); it becomes a dict only where it is printed as JSON, served or logged.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Protocol

from config import BUILD_ONLY_SETTINGS, Config
from indexing.embedders.base import Embedder
from indexing.embedders.memo import memoized
from indexing.index_store import Index
from retrieval.context_assembly import AssembledContext, assemble_planned
from retrieval.breadth import aspect_pool, sub_questions
from retrieval.pool_lead import lead_pool
from retrieval.candidates import StageHits, scope_documents
from retrieval.ordering import Ask, Ordering, keep
from retrieval.query_plan import QueryPlan, plan_query, read_as_one
from retrieval.rerankers import Reranker, make_reranker, reranker_record
from retrieval.retriever import ORDERINGS, make_retriever
from retrieval.locators import make_locator
from retrieval.query import Query
from retrieval.relevance import evidence_found, evidence_strength, index_floor
from retrieval.synthesizer import is_chinese, synthesize
from retrieval.types import BreadthParams, Fallback, LocateResult, RetrievedChunk
from utils.llm.budget import BudgetedLLM, with_budget
from utils.llm.types import LLMClient, UsageMeter
from utils.errors import InputError
from utils.run_record import (AnswerStep, BuildSettings, ContextPassage, ContextRecord, Evidence, FallbackRecord,
                              GraphNode, GraphPath, GraphRecord, IndexUse, LLMUse, LocatedLeaf, LocateStep, Providers,
                              Quote, RerankerUse, RetrievedHit, RetrieveStep, Route, RunRecord, StageHit, Stages,
                              Scores, Usage, query_settings)
from utils.record_json import from_mapping, to_json
from utils.tokenizer import is_stopword_only

if TYPE_CHECKING:
    from retrieval.graph_channel import GraphUse
    from utils.run_log import RunLog


@dataclass
class Backends:
    """Loaded models, built once per process (interactive mode reuses them)."""

    embedder: Embedder
    reranker: Reranker | None
    """None: no reranker, the fused order stands."""
    llm: LLMClient | None
    """None: no LLM; locating and synthesis take their no-LLM paths. A mock client is stored as None."""

    def __post_init__(self) -> None:
        if not has_real_llm(self.llm):
            self.llm = None


def has_real_llm(llm: LLMClient | None) -> bool:
    """False for None and for the mock client, which ``make_llm`` returns when nothing is configured."""
    return llm is not None and getattr(llm, "provider", "mock") != "mock"


class Span(Protocol):
    """What a citation is made of: a chunk, a context passage's chunk or a section (``page_start`` /
    ``page_end`` too when the document has pages)."""

    doc_path: str
    start_line: int
    end_line: int


def citation(chunk: Span) -> str:
    """``report.pdf:p12`` / ``p12-p13`` for a paged source, else ``doc.md:L12-L15``."""
    first = getattr(chunk, "page_start", 0)
    if first:
        last = getattr(chunk, "page_end", 0) or first
        return f"{chunk.doc_path}:p{first}" + (f"-p{last}" if last != first else "")
    lines = (f"L{chunk.start_line}" if chunk.start_line == chunk.end_line
             else f"L{chunk.start_line}-L{chunk.end_line}")
    return f"{chunk.doc_path}:{lines}"


def _stage_hit(rc: RetrievedChunk, rank: int, score: float) -> StageHit:
    c = rc.chunk
    return StageHit(chunk_id=c.chunk_id, node_id=c.source_node_id, rank=rank, score=round(float(score), 4),
                    score_details=_scores(rc), excerpt=c.text[:300], doc_path=c.doc_path,
                    start_char=c.start_char, end_char=c.end_char)


def _scores(rc: RetrievedChunk) -> dict[str, float | bool | int | str | None]:
    """A hit's scores as plain values (numpy scalars would not survive JSON)."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in rc.retrieval_detail.items()}


def stage_hits(stages: StageHits) -> Stages:
    """Every stage's own candidates, each ranked by that stage's own score."""
    out = Stages()
    for name, key in (("keyword", "bm25_score"), ("vector", "dense_score"), ("fusion", "fused_score"),
                      ("rerank", "rerank_score")):
        setattr(out, name, [_stage_hit(rc, i, rc.retrieval_detail.get(key, rc.score))
                            for i, rc in enumerate(getattr(stages, name), 1)])
    return out


def ordering_score(final: list[RetrievedChunk]) -> str:
    """Which score ordered step 2's list: rerank, section, union or fused (utils.render.order_of)."""
    from utils.render import order_of

    return order_of(final[0].retrieval_detail) if final else "fused"


def retrieved_hit(rc: RetrievedChunk, rank: int) -> RetrievedHit:
    """A chunk of step 2's list as the record keeps it."""
    c = rc.chunk
    return RetrievedHit(rank=rank, chunk_id=c.chunk_id, node_id=c.source_node_id, text=c.text,
                        heading_path=c.heading_path, doc_path=c.doc_path, start_char=c.start_char,
                        end_char=c.end_char, start_line=c.start_line, end_line=c.end_line,
                        page_start=c.page_start or None, page_end=c.page_end or None,
                        citation=citation(c), source=rc.source, sub_query=rc.sub_query, scores=_scores(rc))


def context_record(ctx: AssembledContext) -> ContextRecord:
    """The assembled context as the record keeps it: passage N is the answer's [N]."""
    return ContextRecord(budget=ctx.budget, used=ctx.used, hits_read=ctx.hits_read,
                         passages=[ContextPassage(**p.to_dict(), citation=citation(p.chunk) if p.chunk else "")
                                   for p in ctx.passages])


def graph_record(use: "GraphUse") -> GraphRecord:
    """What the graph channel did in one leaf (a ``retrieval.graph_channel.GraphUse``)."""
    return GraphRecord(leaf=use.leaf_id, heading_path=use.heading_path, seeds=list(use.seeds),
                       nodes=[GraphNode(name, round(float(ppr), 4)) for name, ppr in use.nodes],
                       paths=[GraphPath(p.head, p.relation, p.tail, round(float(p.weight), 4), list(p.chunk_ids))
                              for p in use.paths],
                       added=list(use.added))


def locate(query: Query, index: Index, config: Config, backends: Backends,
           doc_paths: set[str] | None, usage: UsageMeter) -> LocateResult:
    return make_locator(config.locator, index, config, backends.llm, usage).locate(query, doc_paths)


@dataclass
class Retrieval:
    """Steps 1 and 2: what the evaluation scores and synthesis reads."""

    located: LocateResult | None
    final: list[RetrievedChunk]
    stages: StageHits
    fallbacks: list[Fallback]
    timing_ms: dict[str, float]
    stopword_only: bool = False
    question: Query | None = None
    """The question as built once (text, tokens, vector): synthesis reuses it."""
    pool: list[RetrievedChunk] = field(default_factory=list)
    """The ranked hits the context is assembled from: the whole question's, with each part's own
    taking turns for a multi-part question (``final``, step 2's list, is the whole question's top k)."""
    plan: QueryPlan | None = None
    """The question's route (overview / detail / multi-part) and parts."""
    graph: list["GraphUse"] = field(default_factory=list)
    """What the graph channel did in each located long leaf (retrieval/graph_channel.GraphUse)."""


def query_budget(llm: LLMClient | None, config: Config) -> LLMClient | None:
    """``llm`` behind one query's wall-clock budget. A query stops calling a provider after its first
    failed call (already retried): the fallback then arrives at once instead of after a second
    timeout for synthesis (``llm_max_failures`` is for index builds)."""
    return with_budget(llm, config.llm_query_budget_s, max_failures=1)


StepHook = Callable[[str, dict[str, Any]], None]
"""Told each step's part of the run record (its JSON keys, ``RunRecord.part``) as soon as it exists (``"step1"``, ``"step2"``,
``"context"``, ``"answer"``; between the last two, ``"answer_delta"`` with each piece of an LLM's answer
as it is written): a server streams them, so a reader sees step 1 while step 3 still runs. An
exception it raises (a client gone) ends the query there."""


def locate_step(loc: LocateResult, plan: QueryPlan | None) -> LocateStep:
    """Step 1 as the record keeps it."""
    return LocateStep(thinking=loc.thinking, locator=loc.locator,
                      nodes=[LocatedLeaf(n.node_id, n.sub_query, n.heading_path, n.score) for n in loc.nodes],
                      toc_nodes=loc.toc_nodes,
                      route=None if plan is None else Route(plan.route, list(plan.aspects), plan.reason))


def question_plan(query: str, index: Index, breadth: BreadthParams, doc_paths: set[str] | None) -> QueryPlan:
    """The question's route, with a multi-part question over several documents read as one
    (retrieval/query_plan.py, ``read_as_one``): every arm and the pipeline plan through here."""
    return read_as_one(plan_query(query, breadth.query_routing), query, scope_documents(index, doc_paths))


def run_retrieval(query: str, index: Index, config: Config, backends: Backends,
                  doc_paths: set[str] | None = None, usage: UsageMeter | None = None,
                  on_step: StepHook | None = None,
                  orderings: Mapping[str, Ordering] = ORDERINGS) -> Retrieval:
    """Locate, then step 2 once for the question and once for each of its parts: the exact path
    `query` and `eval` share (``orderings``: the table ``config.tuning.ranking`` names its orderings in;
    evaluation passes its variants too)."""
    usage = usage if usage is not None else UsageMeter()
    stages = StageHits()
    # one model call per distinct text across locating and retrieval
    # (run_pipeline passes a budgeted LLM covering synthesis too; other callers get one for locating)
    llm = backends.llm if isinstance(backends.llm, BudgetedLLM) else query_budget(backends.llm, config)
    backends = Backends(memoized(backends.embedder), backends.reranker, llm)
    if is_stopword_only(query):
        return Retrieval(None, [], stages, [], {}, stopword_only=True)
    retriever = make_retriever(index, config, backends.embedder, backends.reranker, orderings)
    fallbacks: list[Fallback] = []
    timing: dict[str, float] = {}
    t = time.perf_counter()
    question = Query.build(query, backends.embedder)  # tokenised and embedded once, here
    plan = question_plan(query, index, config.tuning.breadth, doc_paths)
    loc = locate(question, index, config, backends, doc_paths, usage)
    timing["locate"] = (time.perf_counter() - t) * 1000
    fallbacks.extend(loc.fallbacks)
    if on_step is not None:
        on_step("step1", {**to_json(locate_step(loc, plan)), "fallbacks": [f.to_dict() for f in fallbacks]})

    found = retriever.retrieve(Ask(question, loc.nodes, doc_paths, loc.candidates, stages), fallbacks, timing,
                               fill=True)
    final = found.ranked[:config.final_top_k]
    pool = found.pool
    if final and "rerank_score" in final[0].retrieval_detail:
        stages.rerank = list(final)

    parts = sub_questions(plan, loc.nodes, query) if config.tuning.breadth.aspect_retrieval else []
    if parts:
        t = time.perf_counter()
        part_config = config.replace(locator="hybrid")  # the parts never cost another LLM call

        def for_part(text: str) -> list[RetrievedChunk]:
            q = Query.build(text, backends.embedder)
            part_loc = locate(q, index, part_config, backends, doc_paths, usage)
            return retriever.retrieve(Ask(q, part_loc.nodes, doc_paths, part_loc.candidates), fallbacks).ranked

        pool = aspect_pool(pool, parts, for_part, keep(config))
        timing["parts"] = (time.perf_counter() - t) * 1000
    pool = lead_pool(question, pool, index, config)
    return Retrieval(loc, final, stages, fallbacks, timing, question=question, pool=pool, plan=plan,
                     graph=found.graph)


def run_pipeline(query: str, index: Index, config: Config, backends: Backends,
                 doc_paths: set[str] | None = None, on_step: StepHook | None = None,
                 orderings: Mapping[str, Ordering] = ORDERINGS) -> RunRecord:
    """One question through the three steps: its typed run record (``orderings``: as for
    ``run_retrieval``)."""
    t_start = time.perf_counter()
    usage = UsageMeter()
    # one wall-clock budget and circuit breaker for every LLM call of this query, and one query
    # embedding shared by retrieval, the relevance floor and the extractive answer
    backends = Backends(memoized(backends.embedder), backends.reranker, query_budget(backends.llm, config))
    record = RunRecord(run_id=uuid.uuid4().hex, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       query=query, context=context_record(AssembledContext([], config.context_budget_chars, 0, 0)))
    llm = backends.llm
    r = run_retrieval(query, index, config, backends, doc_paths, usage, on_step, orderings)
    fallbacks = r.fallbacks
    timing = r.timing_ms
    if r.stopword_only:
        record.notice = ("该问题只包含停用词或标点，没有可检索的内容，请换一种问法。" if is_chinese(query) else
                         "The question has only stop-words or punctuation: nothing to search for. "
                         "Please rephrase it with content words.")
        record.answer.text = record.notice
    else:
        loc = r.located
        assert loc is not None
        plan = r.plan
        assert plan is not None
        record.locate = locate_step(loc, plan)
        record.retrieve = RetrieveStep(hits=[retrieved_hit(rc, i) for i, rc in enumerate(r.final, 1)],
                                       stages=stage_hits(r.stages), graph=[graph_record(u) for u in r.graph],
                                       order=ordering_score(r.final))
        if on_step is not None:
            on_step("step2", record.part("step2"))

        t = time.perf_counter()
        ctx = assemble_planned(index, r.pool, config.context_budget_chars, plan, config.tuning.context)
        timing["context"] = (time.perf_counter() - t) * 1000
        record.context = context_record(ctx)
        if on_step is not None:
            on_step("context", record.part("context"))

        t = time.perf_counter()
        # the floor judges step 2's list (what retrieval is scored on), the answer reads the context
        question = r.question
        assert question is not None  # built whenever the question is not stop-words only
        strength = evidence_strength(question, r.final, index)
        floor = index_floor(index, config)
        found, named = evidence_found(question, r.final, strength, floor)
        answer = synthesize(question, r.final, llm, fallbacks, usage, config=config, index=index,
                            embedder=backends.embedder, cite=citation, evidence_found=found,
                            context=ctx.passages, graph=r.graph, on_text=_answer_deltas(on_step))
        record.answer = AnswerStep(text=answer.text, evidence_found=found, mode=answer.mode,
                                   truncated=answer.truncated,
                                   quotes=[from_mapping(Quote, q, "answer_quotes") for q in answer.quotes],
                                   evidence=Evidence(**strength.to_dict(), statistic=floor.statistic,
                                                     floor=floor.value, floor_source=floor.source,
                                                     named_section=named))
        timing["synthesize"] = (time.perf_counter() - t) * 1000
        if on_step is not None:
            on_step("answer", record.part("answer"))
    timing["total"] = (time.perf_counter() - t_start) * 1000
    record.timing_ms = {k: round(v, 2) for k, v in timing.items()}
    reranker = reranker_record(backends.reranker)
    record.providers = Providers(
        llm=_llm_use(llm), embedder=dict(index.embedder_identity),
        reranker=RerankerUse(name=str(reranker["name"]), model=reranker["model"],
                             answered=not any(f.step == "rerank" for f in fallbacks)),
        locator=record.locate.locator)
    record.fallbacks = [FallbackRecord(f.step, f.reason, f.used) for f in fallbacks]
    record.usage = Usage(**usage.to_dict())
    record.index = index_use(index)
    record.config = query_settings(config.to_dict(), BUILD_ONLY_SETTINGS)
    index.search.after_question()  # the answer is built: the store's housekeeping, off the question's path
    return record


def index_use(index: Index) -> IndexUse:
    """The index a run read: which build, how large, and the settings it was built with."""
    from tree_builder.folder_walk import printable_name

    meta = index.metadata
    return IndexUse(path=printable_name(str(index.path)), created_at=meta.get("created_at"),
                    embedder=dict(index.embedder_identity), embedder_reason=meta.get("embedder_reason"),
                    build_id=meta.get("build_id"), documents=meta["counts"]["documents"],
                    chunks=meta["counts"]["chunks"], build_settings=BuildSettings.from_metadata(meta, BUILD_ONLY_SETTINGS))


def _answer_deltas(on_step: StepHook | None) -> Callable[[str], None] | None:
    """The LLM's answer as ``answer_delta`` steps (``{"text": piece}``), for a hook that streams."""
    if on_step is None:
        return None
    return lambda piece: on_step("answer_delta", {"text": piece})


def _llm_use(llm: LLMClient | None) -> LLMUse:
    """Which LLM was configured and whether it answered: a provider that never replied (nothing
    listening, a bad key) must not be named as if it wrote the answer."""
    if llm is None:
        return LLMUse()
    answered = getattr(llm, "answered", None)
    failed = getattr(llm, "failed", 0)
    return LLMUse(provider=llm.provider, model=llm.model,
                  answered=bool(answered) if answered is not None else True, failed=bool(failed))


def query_embedder(identity: dict[str, Any], config: Config, name: str | None = None) -> Embedder:
    """The embedder that matches an index's recorded identity, refusing any other.

    An index built with all-MiniLM-L6-v2 under torch is queried with the int8
    ONNX runtime of the same model (measured interchangeable, see
    ``indexing.embedders.factory.compatible``) so a one-shot query never imports torch.
    """
    from indexing.embedders.base import MINILM_ID
    from indexing.embedders.factory import compatible, embedder_identity, make_embedder
    from utils.errors import IncompatibleIndexError

    if name is None:
        name = identity.get("name", "hash")
        if name == "local" and identity.get("model_id") == MINILM_ID:
            name = "onnx"
        if name == "hash":
            config = config.replace(hash_dim=int(identity.get("dim", config.hash_dim)))
        elif name in ("local", "openai"):
            config = config.replace(embedder_model=identity.get("model_path") or identity.get("model_id"))
    embedder = make_embedder(name, config)
    mine = embedder_identity(embedder)
    if not compatible(identity, mine):
        raise IncompatibleIndexError(
            f"the index was built with embedder {identity.get('name')} ({identity.get('model_id')}, "
            f"dim {identity.get('dim')}) but the query would use {mine['name']} ({mine['model_id']}, "
            f"dim {mine['dim']}); rebuild the index or drop --embedder")
    return embedder


def make_backends(index: Index, config: Config, llm: LLMClient | None,
                  embedder_name: str | None = None, long_running: bool = False) -> Backends:
    """Embedder from the index's own identity (so queries match the build), reranker from config.

    The store starts warming first (Config.store_prewarm), so that an engine loads its vector indexes
    while the embedder loads and the first question is embedded; ``long_running``: this process will
    answer many questions."""
    index.search.warm(config.store_prewarm, long_running)
    embedder = query_embedder(index.embedder_identity, config, embedder_name)
    return Backends(embedder=embedder, reranker=make_reranker(config), llm=llm)


# --------------------------------------------------------------------------- Python API

@dataclass(frozen=True)
class ChunkHit:
    """One retrieved chunk as a caller reads it: the text, where it is, how it scored."""

    rank: int
    text: str
    doc_path: str
    heading_path: str
    lines: tuple[int, int]
    pages: tuple[int, int] | None
    citation: str
    scores: Scores
    source: str
    """tree (from a located section) | net (reached outside them)."""

    @property
    def order(self) -> str:
        """Which score ordered the list: rerank, section, union or fused. Which one is present depends
        on the index (one document: section; a collection: union) and the reranker, so a caller
        reading ``scores["section_score"]`` would fail on a collection."""
        from utils.render import order_of

        return order_of(self.scores)

    @property
    def score(self) -> float:
        """The score this chunk was ranked by (see ``order``), whatever the index."""
        value = self.scores.get(f"{self.order}_score", 0.0)
        return float(value) if isinstance(value, (int, float)) else 0.0


@dataclass(frozen=True)
class QueryResult:
    """What ``TreeRAG.ask`` returns; ``to_dict()`` is exactly what ``main.py query --json`` prints."""

    query: str
    answer: str
    evidence_found: bool
    chunks: tuple[ChunkHit, ...]
    located: tuple[LocatedLeaf, ...]
    """Step 1's leaves: node_id, heading_path, sub_query, score."""
    timing_ms: dict[str, float]
    fallbacks: tuple[FallbackRecord, ...]
    run_id: str
    record: RunRecord
    """The whole run record (every step, providers, usage, the index's build settings)."""
    truncated: bool = False
    """The LLM stopped at its token limit: ``answer`` is incomplete."""

    def to_dict(self) -> dict[str, Any]:
        return self.record.to_dict()

    @classmethod
    def from_record(cls, record: RunRecord) -> "QueryResult":
        hits = tuple(
            ChunkHit(rank=h.rank, text=h.text, doc_path=h.doc_path, heading_path=h.heading_path,
                     lines=(h.start_line, h.end_line),
                     pages=(h.page_start, h.page_end or h.page_start) if h.page_start else None,
                     citation=h.citation, scores=dict(h.scores), source=h.source)
            for h in record.retrieve.hits)
        return cls(query=record.query, answer=record.answer.text, evidence_found=record.answer.evidence_found,
                   chunks=hits, located=tuple(record.locate.nodes), timing_ms=dict(record.timing_ms),
                   fallbacks=tuple(record.fallbacks), run_id=record.run_id, record=record,
                   truncated=record.answer.truncated)


def _require_type(value: Any, types: tuple[type, ...], name: str, wanted: str) -> None:
    if not isinstance(value, types):
        raise InputError(f"{name} must be {wanted}, got {type(value).__name__}")


class TreeRAG:
    """The query pipeline for a Python program: open an index once, ask many questions.

    >>> rag = TreeRAG.open("index/", llm="auto", final_top_k=3)
    >>> r = rag.ask("What is AdaRouter's accuracy on EUR/USD?")
    >>> r.answer, r.chunks[0].citation

    Settings are ``config.py`` field names, validated like a config file's. ``llm`` is a spec as for
    ``--llm`` ("auto" reads ANTHROPIC_API_KEY / OPENAI_API_KEY / OPENAI_BASE_URL from ``env``).
    Nothing is logged unless ``log`` names a run-log file (then ``main.py history/show`` list it).
    """

    def __init__(self, index: Index, config: Config, backends: Backends, run_log: "RunLog | None" = None,
                 orderings: Mapping[str, Ordering] = ORDERINGS) -> None:
        self.index, self.config, self.backends, self.run_log = index, config, backends, run_log
        self.orderings = orderings
        make_retriever(index, config, backends.embedder, backends.reranker, orderings)  # an unknown name fails here

    @classmethod
    def open(cls, index_dir: Any, llm: str | None = "auto", *, embedder: str | None = None, log: Any = None,
             env: Any = None, llm_timeout: float = 60.0, use_cache: bool | None = None,
             notice: Callable[[str], None] | None = None, config: Config | None = None,
             long_running: bool = False, orderings: Mapping[str, Ordering] = ORDERINGS,
             **settings: Any) -> "TreeRAG":
        """The one way an index is opened for questions (``main.py query``/``interactive`` use it too).

        ``config`` (already validated) or ``settings`` (config.py names, validated here) or both;
        ``use_cache`` False asks the LLM every time but still refreshes its cache (default:
        ``config.llm_cache``); ``notice`` gets one-line notices (default: none); ``long_running``: this
        process will answer many questions, so an embedded engine warms its tables too (Config.store_prewarm);
        ``orderings``: the table ``config.tuning.ranking`` names its orderings in (an experiment may pass
        ``evaluation.variants.VARIANTS``).
        """
        import os
        import sys
        from pathlib import Path

        from config import coerce_setting
        from indexing.index_store import load_index
        from utils.llm.factory import default_cache_dir, make_llm, resolve_llm_spec

        from config import parse_seconds
        from utils.paths import index_dir_path

        # the CLI's parser checks its flags; a Python caller's arguments are checked here, each a
        # one-line InputError naming the argument (not an AttributeError, or every later call
        # failing as "cannot connect" because the timeout was nan)
        index_path = index_dir_path(index_dir, "index_dir")
        _require_type(llm, (str, type(None)), "llm", "a provider spec such as 'openai:MODEL', or None")
        _require_type(embedder, (str, type(None)), "embedder", "an embedder name, or None")
        _require_type(use_cache, (bool, type(None)), "use_cache", "True, False or None")
        _require_type(config, (Config, type(None)), "config", "a config.Config, or None")
        if notice is not None and not callable(notice):
            raise InputError("notice must be a function of one string, or None")
        llm_timeout = parse_seconds(llm_timeout, "llm_timeout")
        env = os.environ if env is None else env
        changes = {name: coerce_setting(name, value) for name, value in settings.items()}
        config = Config.of(changes) if config is None else config.replace(**changes)
        index = load_index(index_path)
        spec = resolve_llm_spec(llm, env, None if config.llm == "auto" else config.llm)
        client = make_llm(spec, env, cache_dir=default_cache_dir(env),
                          use_cache=config.llm_cache if use_cache is None else use_cache,
                          timeout=llm_timeout, notice=notice)
        backends = make_backends(index, config, client, embedder, long_running)
        run_log = None
        if log is not None:
            from utils.run_log import RunLog

            run_log = RunLog(Path(log), warn=notice or (lambda msg: print(msg, file=sys.stderr)),
                             max_runs=config.run_log_max_runs)
        return cls(index, config, backends, run_log, orderings)

    def run(self, question: str, documents: list[str] | None = None,
            on_step: StepHook | None = None) -> RunRecord:
        """One question through the pipeline: its typed run record (``to_dict()`` is what ``query --json``
        prints), logged when a run log is open. ``documents`` (index-relative paths) limits it to those
        documents; ``on_step`` is told each step's keys as they are ready (see ``StepHook``)."""
        if not isinstance(question, str):
            raise InputError(f"the question must be a string, got {type(question).__name__}")
        if not question.strip():
            raise InputError("empty question")
        doc_paths = None
        if documents is not None:
            kind = type(documents).__name__
            try:
                documents = None if isinstance(documents, (str, bytes)) else list(documents)
            except TypeError:
                documents = None
            if documents is None or not all(isinstance(d, str) for d in documents):
                raise InputError(f"documents must be a list of index-relative paths (strings), got {kind}")
            unknown = sorted(set(documents) - set(self.index.doc_rows))
            if unknown:
                raise InputError(f"not in the index: {', '.join(unknown[:3])}")
            doc_paths = set(documents)
        record = run_pipeline(question.strip(), self.index, self.config, self.backends, doc_paths, on_step,
                              self.orderings)
        # "logged" tells the printed footer whether `show` can find this run: the log keeps the
        # copy that says True; a run not recorded (no log, or the log failed) says False
        record.logged = self.run_log is not None
        if self.run_log is not None:
            record.logged = self.run_log.record(record)
        return record

    def ask(self, question: str, documents: list[str] | None = None) -> QueryResult:
        """Answer one question (see ``run``) as a typed result."""
        return QueryResult.from_record(self.run(question, documents))
