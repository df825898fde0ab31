"""Documents in, index directory out: the whole build as named stages over one plan, crash-safe.

    read documents (each kept on disk, only its DocumentInfo held) -> plan (embedder, update or full
    build, store) -> a batch of documents at a time: section tree + summaries, chunks, vectors, BM25
    -> write into a staging directory (chunks, vectors, BM25, graphs, ANN, metadata)
    -> copy into the engine (with --store) -> swap in atomically -> retire replaced engine tables

Everything is written beside the target and swapped in only when complete, so Ctrl-C or kill -9
at any moment leaves the previous index exactly as it was (indexing/build_output.py).
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config import Config
from indexing.build_output import (ReplacedTables, clean_stale_builds, prepare_output, real_output, staging_dir,
                                   swap_in)
from indexing.build_plan import BuildPlan, BuildReport, BuildRequest, UpdateReport, chosen_embedder, make_plan
from indexing.build_write import OldIndexDamaged, Written, write_files
from indexing.delta_update import try_delta_update
from indexing.embedders.base import Embedder
from indexing.embedders.floors import default_floor
from indexing.index_store import looks_like_index
from tree_builder.folder_walk import printable_name
from indexing.doc_spill import DocumentSpill
from tree_builder.document import DocumentInfo
from tree_builder.loader import LoadedInput, read_input
from utils.atomic import recover_directory
from utils.interrupts import resume_interrupts
from utils.paths import index_dir_path
from utils.progress import Progress, note
from utils.progress import stage as progress_stage
from tree_builder.readers.limits import ReadLimits
from utils.dir_lock import exclusive

if TYPE_CHECKING:
    from indexing.seekdb.uri import StoreURI
    from tree_builder.summary import Summarizer
    from utils.llm.types import LLMClient


@dataclass
class _Built:
    """The index in place: what was written, the engine tables it uses, notes for the person."""

    written: Written
    prefix: str | None
    notes: list[str]


def build_index(
    input_path: Path,
    output: Path,
    config: Config,
    embedder: Embedder | None,
    *,
    progress: Progress | None = None,
    summarizer: "Summarizer | None" = None,
    summary_workers: int = 1,
    follow_links: bool = False,
    update: bool = True,
    store: "StoreURI | None" = None,
    kg_llm: "LLMClient | None" = None,
    compact: bool = False,
) -> BuildReport:
    """Build the index of ``input_path`` into ``output`` (``embedder`` None: ``auto``).

    With ``update`` (the default) an index already at ``output`` built with the
    same settings lends the vectors and summaries of what did not change
    (indexing/reuse.py); the result equals a full rebuild. With ``store`` (a
    seekdb URI) the built index is copied into new engine tables and ``output``
    keeps its manifest (indexing/seekdb/); the previous tables are
    dropped only after the new manifest is in place. ``progress`` (utils/progress.py)
    is told the plan and every stage. ``kg_llm``: the (budgeted) LLM client
    ``kg_mode = "llm"`` extracts graphs with (indexing/kg_llm.py).
    """
    output = real_output(index_dir_path(output, "--output"))
    prepare_output(output)
    request = BuildRequest(Path(input_path), output, config, embedder, progress, summarizer, summary_workers,
                           follow_links, update, store, kg_llm, compact)
    try:
        with exclusive(output):  # a second updater now would compute against a version about to be replaced
            report = _build_locked(request)
    finally:
        late = resume_interrupts()  # held back from the commit on (build_output.swap_in)
    if late:
        report.notes.append("Ctrl-C came after the new index was in place: the build is complete")
    return report


def _build_locked(request: BuildRequest) -> BuildReport:
    """The stages, while this process holds the index's lock."""
    t0 = time.perf_counter()
    recover_directory(request.output, looks_like_index)  # a swap a crash interrupted is finished first
    check_store(request.store)
    clean_stale_builds(request.output)
    if request.update and not request.compact:
        outcome = try_delta_update(request, t0)
        if outcome.report is not None:
            return outcome.report
        if outcome.full_reason and outcome.full_reason.startswith("compacting"):
            note(request.progress, outcome.full_reason)
    spill = DocumentSpill(staging_dir(request.output))
    try:
        loaded = read_documents(request, spill)
        with chosen_embedder(request, loaded.documents) as (embedder, why):
            plan = make_plan(request, loaded.documents, embedder, why)
            note(plan.progress, plan.describe())
            replaced = ReplacedTables.at(plan.output)
            plan, built = write_and_swap(plan, loaded, spill, t0)
            notes = built.notes + replaced.retire(plan.output, built.prefix)
    finally:
        spill.remove()
    return _report(plan, loaded, built, notes, time.perf_counter() - t0)


def check_store(store: "StoreURI | None") -> None:
    """An unreachable engine or a refused login is said before any work is done."""
    if store is not None:
        from indexing.seekdb.engine import check_reachable  # noqa: PLC0415 - the engine loads only when used

        check_reachable(store)


def read_documents(request: BuildRequest, spill: DocumentSpill) -> LoadedInput:
    """Every document read once: what the plan needs of it kept (``DocumentInfo``), the document
    itself set aside in ``spill`` for the writing stage, so no two texts are held at once."""
    with progress_stage(request.progress, "reading documents") as st:
        loaded = LoadedInput([])
        infos: list[DocumentInfo] = []
        for doc in read_input(request.input_path, loaded, follow_links=request.follow_links,
                              limits=ReadLimits.from_config(request.config)):
            infos.append(DocumentInfo.of(doc, cjk=request.embedder is None))
            spill.add(doc)
        spill.close()
        loaded.documents = infos
        st.count(len(infos), "documents")
    return loaded


def write_and_swap(plan: BuildPlan, loaded: LoadedInput, spill: DocumentSpill,
                   t0: float) -> tuple[BuildPlan, _Built]:
    """Write into a staging directory, copy into the engine, swap in. A previous index that cannot
    lend what it promised (a bad vector) turns the build into a full one, never a failed one; the
    plan returned says which it was."""
    while True:
        staged = staging_dir(plan.output)
        try:
            if plan.embeds_anything:
                load_model(plan)  # its own stage, not a bar stuck at 0
            written = write_files(plan, staged, spill.documents(), index_metadata(plan, loaded), t0)
            return plan, publish(plan, staged, written)
        except OldIndexDamaged as exc:
            shutil.rmtree(staged, ignore_errors=True)
            if plan.previous is None:
                raise
            plan = plan.full_rebuild(f"the existing index is damaged ({exc})")
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise


def load_model(plan: BuildPlan) -> None:
    """Load the embedding model now, as a stage of its own (models otherwise load on first use)."""
    load = getattr(plan.embedder, "load", None)
    if callable(load):
        with progress_stage(plan.progress, f"loading the embedding model ({plan.embedder.name})"):
            load()


def index_metadata(plan: BuildPlan, loaded: LoadedInput) -> dict[str, Any]:
    """metadata.json as the plan decides it; the writing stage adds counts (nodes, leaves first
    held at 0 so the keys keep their order) and files."""
    docs = plan.documents
    return {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "input": printable_name(str(plan.input_path)),
        "folder_mode": plan.folder_mode,
        "config": plan.config.to_dict(),
        "chunk_context": plan.config.tuning.chunking.chunk_context,
        "embedder": plan.identity,
        "embedder_reason": plan.embedder_reason,
        "relevance_floor": default_floor(plan.identity.get("model_id")).to_dict(),
        "build_settings": plan.settings,
        "counts": {"documents": len(docs), "nodes": 0, "leaves": 0},
        "documents": [d.record() for d in docs],
        "warnings": loaded.warnings,
        "skipped": [{"path": s.rel, "reason": s.reason} for s in loaded.skipped],
        "summarizer": plan.settings["summarizer"],
    }


def publish(plan: BuildPlan, staged: Path, written: Written) -> _Built:
    """The staged index swapped in; with a store, its rows first copied into new engine tables and
    the directory cut down to the manifest (the new tables dropped again if the swap fails)."""
    if plan.store is None:
        with progress_stage(plan.progress, "publishing"):
            return _Built(written, None, swap_in(staged, plan.output))
    from indexing.seekdb.publish import drop_retired, keep_manifest  # noqa: PLC0415
    from indexing.seekdb.publish import publish as copy_rows  # noqa: PLC0415

    with progress_stage(plan.progress, "copying into seekdb", written.chunks, "chunks") as st:
        fields = copy_rows(staged, plan.store, st.advance, plan.config.store_vector_index,
                           plan.config.store_copy_sessions)
    prefix = str(fields["prefix"])
    notes = [str(fields.pop("note"))] if "note" in fields else []
    try:
        keep_manifest(staged, fields)
        notes += swap_in(staged, plan.output)
    except BaseException:
        drop_retired([(plan.store, prefix)])
        raise
    return _Built(written, prefix, notes)


def _report(plan: BuildPlan, loaded: LoadedInput, built: _Built, notes: list[str], seconds: float) -> BuildReport:
    written, changes = built.written, plan.changes
    update = None
    if plan.previous is not None and changes is not None:
        update = UpdateReport(unchanged=len(changes.unchanged), changed=len(changes.changed), new=len(changes.new),
                              removed=len(changes.removed), embedded_chunks=written.embedded)
    return BuildReport(documents=len(plan.documents), nodes=written.nodes, leaves=written.leaves,
                       chunks=written.chunks, seconds=seconds, embed_seconds=written.embed_seconds,
                       warnings=loaded.warnings, loaded=loaded, update=update, rebuild_reason=plan.rebuild_reason,
                       notes=notes, embedder=dict(plan.identity), embedder_reason=plan.embedder_reason,
                       kg=written.kg, plan=plan.describe())
