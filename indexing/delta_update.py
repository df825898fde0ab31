"""An update that writes only what changed: a delta segment, deletes, one rename of the manifest.

Why: a full rebuild reads every document again and rewrites every file (tens of GB at 100,000
documents, beside the old copy: docs/scale.md, "One changed document"), for one changed file. An update

1. finds what changed without reading unchanged documents: a file whose size and modification time
   are those the index recorded is unchanged; any other is digested (a Markdown or text file is only
   decoded, not parsed) and compared with the index's content hash; only the changed and new ones
   are read (``find_changes``);
2. indexes those documents alone, exactly as a full build would (the same stages, ids continuing
   after the index's last node), into a staging directory (``write_delta``);
3. publishes (``publish``): the staged files renamed into the index directory under a fresh
   ``deltaN.`` prefix, then a new ``metadata.json`` (the old manifest plus the new files, the
   segments, the deleted documents) written to a temporary name, forced to disk and renamed over the
   old one. Until that rename the old manifest names only the old files, so a crash at any step
   leaves the old index whole; files a crash left unnamed are removed by the next update.

The index read afterwards (indexing/segments.py) is the full build of the changed folder with the
changed documents moved to the end. Past ``delta_max_share`` of the documents rewritten, or
``delta_max_segments`` deltas (config.py), the update compacts instead: the full rewrite (``--compact`` asks for
it), which lends every unchanged vector and summary and equals a full build.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from indexing.build_output import SOURCES_PREFIX, is_delta_file, staging_dir
from indexing.build_plan import BuildPlan, BuildReport, BuildRequest, UpdateReport
from indexing.index_files import fsync_directory, replace_manifest, IndexDir, parse_manifest, write_manifest_entry
from indexing.reuse import build_settings, settings_change
from indexing.segments import SEGMENTS, SegmentInfo, SegmentsMeta, delta_prefix
from tree_builder.document import Document, DocumentInfo
from tree_builder.folder_walk import FoundFile, Skipped, walk_folder, printable_name
from utils.errors import IndexFormatError, InputError
from utils.interrupts import defer_interrupts
from utils.progress import note
from utils.progress import stage as progress_stage
from indexing.embedders.factory import embedder_identity, make_embedder
from indexing.index_store import read_metadata, load_index
from tree_builder.documents import text_content_hash
from tree_builder.loader import read_or_skip, walk_warnings
from tree_builder.readers.limits import ReadLimits
from utils.bounded_read import read_bounded

TEXT_KINDS = ("md", "txt")
"""Formats whose content hash is the decoded text's: digested without parsing."""


def checkpoint(step: str) -> None:
    """Called between the publishing steps (a no-op): tests replace it to crash the update there."""


@dataclass
class Changes:
    """What an update found: documents unchanged, changed, new and removed, and what it read."""

    unchanged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
    """The changed and new documents, read, in path order."""
    stamps: dict[str, list[int]] = field(default_factory=dict)
    """Path -> [size, mtime_ns] of every live document after the update."""
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    """Every live document's path in the folder's walk order (a full build's document order)."""

    @property
    def any(self) -> bool:
        return bool(self.changed or self.new or self.removed)


@dataclass(frozen=True)
class Outcome:
    """A finished delta update's report, or why the update must be a full rewrite (None: no index)."""

    report: BuildReport | None = None
    full_reason: str | None = None


def try_delta_update(request: BuildRequest, t0: float) -> Outcome:
    """Update the index at ``request.output`` with a delta segment, or say why it must be rewritten."""
    meta = _current_metadata(request.output)
    if meta is None:
        return Outcome()
    why = _not_deltable(request, meta)
    if why:
        return Outcome(full_reason=why)
    embedder, reason = _embedder(request, meta)
    identity = embedder_identity(embedder)
    settings = build_settings(request.config, identity, getattr(request.summarizer, "summarizer_id", "extractive"),
                              True)
    change = settings_change(meta.get("build_settings") or {}, settings)
    if change:
        return Outcome(full_reason=change)
    segments = _segments_of(meta)
    with progress_stage(request.progress, "finding changed documents") as st:
        changes = find_changes(request, meta, segments)
        st.count(len(changes.stamps), "documents")
    if not changes.stamps:
        return Outcome(full_reason="no readable documents are left")
    rewritten = sum(len(s.documents) for s in segments.segments[1:]) + len(segments.deleted) \
        + len(changes.documents) + len(changes.removed)
    share = request.config.delta_max_share
    if rewritten > share * max(len(changes.stamps), 1):
        return Outcome(full_reason=f"compacting: {rewritten} documents rewritten since the last full build, "
                                   f"more than delta_max_share {share:.0%} of {len(changes.stamps)}")
    if changes.documents and segments.deltas + 1 > request.config.delta_max_segments:
        return Outcome(full_reason=f"compacting: the index holds {segments.deltas} delta segments")
    plan_line = _describe(request, changes, identity, reason)
    note(request.progress, plan_line)
    # nothing changed: nothing is written (files only touched are digested again next time)
    written = publish(request, meta, segments, changes, embedder, reason, identity, settings, t0) if changes.any else None
    counts = meta["counts"] if written is None else written.counts
    report = BuildReport(documents=counts["documents"], nodes=counts["nodes"], leaves=counts["leaves"],
                         chunks=counts["chunks"], seconds=time.perf_counter() - t0,
                         embed_seconds=written.embed_seconds if written else 0.0,
                         warnings=changes.warnings,
                         update=UpdateReport(unchanged=len(changes.unchanged), changed=len(changes.changed),
                                             new=len(changes.new), removed=len(changes.removed),
                                             embedded_chunks=written.chunks if written else 0,
                                             delta=written.segment if written else None),
                         embedder=dict(identity), embedder_reason=reason, plan=plan_line)
    return Outcome(report=report)


def _describe(request: BuildRequest, changes: Changes, identity: dict[str, Any], reason: str) -> str:
    """The plan's line, as ``BuildPlan.describe`` words a full build's, saying it is a delta segment."""
    n = len(changes.order)
    source = f"{printable_name(str(request.input_path))} ({n} document{'s' if n != 1 else ''})"
    summaries = getattr(request.summarizer, "summarizer_id", None) or "extractive"
    return (f"plan: update {printable_name(str(request.output))} from {source}: {len(changes.unchanged)} unchanged, "
            f"{len(changes.changed)} changed, {len(changes.new)} new, {len(changes.removed)} removed; a delta "
            f"segment; embedder {identity.get('name')} ({identity.get('model_id')}; {reason}); summaries "
            f"{summaries}; graphs off; store files")


# --------------------------------------------------------------------------- what may be updated

def _current_metadata(output: Path) -> dict[str, Any] | None:
    if not (output / "metadata.json").is_file():
        return None
    try:
        return read_metadata(output)
    except IndexFormatError:
        return None


def _not_deltable(request: BuildRequest, meta: dict[str, Any]) -> str | None:
    """Why this update cannot be a delta (then it rewrites the index), or None."""
    if not request.update:
        return "--rebuild"
    if request.store is not None or "store" in meta:
        return "an engine store is rewritten whole"
    if not Path(request.input_path).is_dir():
        return "a single-file input is rebuilt whole"
    if request.config.kg_mode != "off" or ("kg" in meta and (meta["kg"] or {}).get("mode", "off") != "off"):
        return "long-leaf graphs are rebuilt whole"
    return None


def _embedder(request: BuildRequest, meta: dict[str, Any]) -> tuple[Any, str]:
    """The embedder of the delta: the one asked for, or for ``auto`` the index's own (an update
    keeps it; a full build or ``--compact`` chooses again from every document)."""
    if request.embedder is not None:
        return request.embedder, "asked for (--embedder, --mock or the config)"
    return make_embedder(str(meta["embedder"]["name"]), request.config), str(meta.get("embedder_reason", ""))


def _segments_of(meta: dict[str, Any]) -> SegmentsMeta:
    """The index's segments; a fully built index is one base segment."""
    if SEGMENTS in meta:
        return SegmentsMeta.parse(meta[SEGMENTS])
    c = meta["counts"]
    base = SegmentInfo("", c["nodes"] + 1, c["leaves"], c["chunks"], tuple(d["path"] for d in meta["documents"]))
    return SegmentsMeta((base,), frozenset(), tuple(range(len(base.documents))))


# --------------------------------------------------------------------------- changes

def _stamp(f: FoundFile) -> list[int] | None:
    try:
        st = os.stat(f.path)
    except OSError:
        return None
    return [int(st.st_size), int(st.st_mtime_ns)]


def _text_digest(f: FoundFile, limit: int) -> str | None:
    """The content hash a Markdown or text file would get, from its bytes, without parsing it."""
    try:
        return text_content_hash(read_bounded(f.path, limit=limit, what=f.rel), f.rel)
    except (InputError, OSError):
        return None


def find_changes(request: BuildRequest, meta: dict[str, Any], segments: SegmentsMeta) -> Changes:
    """Compare the folder with the index's documents; read only what is new or changed."""
    limits = ReadLimits.from_config(request.config)
    walk = walk_folder(Path(request.input_path), request.follow_links)
    inside = None if request.follow_links else Path(request.input_path)
    known = {d["path"]: d for d in meta["documents"]}
    stamps = _recorded_stamps(request.output, meta, segments)
    out = Changes(skipped=list(walk.skipped))
    out.warnings.extend(walk_warnings(walk.skipped))
    seen: set[str] = set()
    for f in walk.files:
        stamp = _stamp(f)
        old = known.get(f.rel)
        if old is not None and stamp is not None:
            same = stamps.get(f.rel) == stamp
            if not same and f.kind in TEXT_KINDS:
                same = _text_digest(f, limits.max_input_bytes) == old["content_hash"]
            if same:
                out.unchanged.append(f.rel)
                out.stamps[f.rel] = stamp
                seen.add(f.rel)
                continue
        doc = read_or_skip(f, limits, inside, out.skipped, out.warnings)
        if doc is None:
            continue
        seen.add(f.rel)
        out.stamps[f.rel] = stamp or [0, 0]
        if old is not None and old["content_hash"] == doc.content_hash:
            out.unchanged.append(f.rel)
            continue
        (out.changed if old is not None else out.new).append(f.rel)
        out.documents.append(doc)
    out.removed = [p for p in known if p not in seen]
    out.order = [f.rel for f in walk.files if f.rel in out.stamps]
    return out


def _recorded_stamps(output: Path, meta: dict[str, Any], segments: SegmentsMeta) -> dict[str, list[int]]:
    """The file stamps the last update recorded (none for a fully built index)."""
    name = (meta.get(SEGMENTS) or {}).get("sources")
    if not isinstance(name, str) or not name.startswith(SOURCES_PREFIX):
        return {}
    try:
        with IndexDir(output) as files:
            files.manifest = parse_manifest(meta["files"], "metadata.json")
            raw = files.read_json(name)
    except IndexFormatError:
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, list)} if isinstance(raw, dict) else {}


# --------------------------------------------------------------------------- writing

@dataclass(frozen=True)
class DeltaWritten:
    segment: int | None
    """The delta segment written (None: the update only deleted documents)."""
    chunks: int
    counts: dict[str, int]
    embed_seconds: float


def write_delta(request: BuildRequest, meta: dict[str, Any], segments: SegmentsMeta, changes: Changes,
                embedder: Any, reason: str, identity: dict[str, Any], settings: dict[str, Any],
                staged: Path, t0: float) -> Any:
    """The changed documents indexed into ``staged`` as a full build would index them, their node ids
    after the index's last one; the ``Written`` of the build stage."""
    from indexing.build_write import write_files  # noqa: PLC0415

    docs = sorted(changes.documents, key=lambda d: d.path)
    infos = [DocumentInfo.of(d) for d in docs]
    plan = BuildPlan(input_path=Path(request.input_path), output=request.output,
                     config=dataclasses.replace(request.config, ann="off"), documents=infos, folder_mode=True,
                     embedder=embedder, embedder_reason=reason, identity=identity, settings=settings,
                     previous=None, changes=None, rebuild_reason=None, store=None, summarizer=request.summarizer,
                     summary_workers=request.summary_workers, kg_llm=None, progress=request.progress,
                     first_node=segments.node_starts()[-1], bm25_impacts=False)
    if docs:
        load = getattr(embedder, "load", None)
        if callable(load):
            load()
    metadata = {"counts": {"documents": len(infos), "nodes": 0, "leaves": 0},
                "documents": [d.record() for d in infos], "embedder": identity}
    return write_files(plan, staged, iter(docs), metadata, t0)


def publish(request: BuildRequest, meta: dict[str, Any], segments: SegmentsMeta, changes: Changes, embedder: Any,
            reason: str, identity: dict[str, Any], settings: dict[str, Any], t0: float) -> DeltaWritten:
    """Write the delta beside the index, move its files in under a fresh prefix, then rename the new
    manifest over the old one (the one step that changes what a reader sees). Only removals: no delta,
    a manifest with more deleted documents."""
    output = request.output
    remove_unlisted(output, meta)
    index = load_index(output)  # the version this delta extends (the build holds the index's lock)
    if index.metadata["build_id"] != meta["build_id"]:
        raise IndexFormatError(f"the index at {output} changed while it was being updated")
    build_id = uuid.uuid4().hex
    sources = f"{SOURCES_PREFIX}{build_id}.json"
    k = segments.deltas + 1 if changes.documents else None
    prefix = delta_prefix(k) if k is not None else ""
    staged = staging_dir(output)
    entries: dict[str, Any] = {}
    staged_meta: dict[str, Any] | None = None
    written = None
    try:
        if k is not None:
            written = write_delta(request, meta, segments, changes, embedder, reason, identity, settings, staged, t0)
            staged_meta = json.loads((staged / "metadata.json").read_text(encoding="utf-8"))
            entries = {prefix + n: e for n, e in staged_meta["files"].items()}
        _write_json(staged / sources, changes.stamps)
        entries[sources] = write_manifest_entry(staged, sources)
        fsync_directory(staged)
        checkpoint("staged")
        for name in sorted(entries):
            os.rename(staged / (name[len(prefix):] if name.startswith(prefix) and prefix else name), output / name)
            checkpoint("moved " + name)
        fsync_directory(output)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    new_meta = _next_metadata(index, meta, segments, changes, staged_meta, prefix, entries, build_id, sources)
    defer_interrupts()  # the manifest's rename commits the update: Ctrl-C from here is reported after it
    replace_manifest(output, new_meta, checkpoint=checkpoint)
    old_sources = (meta.get(SEGMENTS) or {}).get("sources")
    if isinstance(old_sources, str) and old_sources.startswith(SOURCES_PREFIX):
        try:  # no reader reads it (only an update, which holds the lock): unlisted now, removed
            os.unlink(output / old_sources)
        except OSError:
            pass
    return DeltaWritten(segment=k, chunks=written.chunks if written else 0, counts=dict(new_meta["counts"]),
                        embed_seconds=written.embed_seconds if written else 0.0)


def _next_metadata(index: Any, meta: dict[str, Any], segments: SegmentsMeta, changes: Changes,
                   staged_meta: dict[str, Any] | None, prefix: str, entries: dict[str, Any], build_id: str,
                   sources: str) -> dict[str, Any]:
    """The manifest after this update: segments, deletes, live documents and counts, every file."""
    physical = segments.physical_documents()
    live_number = {p: i for i, p in enumerate(physical) if i not in segments.deleted}
    gone = {live_number[p] for p in changes.changed + changes.removed}
    deleted = segments.deleted | frozenset(gone)
    numbers = {p: i for i, p in enumerate(physical) if i not in deleted}
    parts = segments.segments
    c = {"nodes": 0, "leaves": 0, "chunks": 0}
    records = {d["path"]: d for d in meta["documents"]}
    if staged_meta is not None:
        new_docs = [d["path"] for d in staged_meta["documents"]]
        c = staged_meta["counts"]
        parts = parts + (SegmentInfo(prefix, c["nodes"] + 1, c["leaves"], c["chunks"], tuple(new_docs)),)
        numbers.update({p: len(physical) + j for j, p in enumerate(new_docs)})
        records.update({d["path"]: d for d in staged_meta["documents"]})
    seg = SegmentsMeta(parts, deleted, tuple(numbers[p] for p in changes.order))
    out = dict(meta)
    out["documents"] = [records[p] for p in changes.order]
    old = meta["counts"]
    removed = _removed_counts(index, set(changes.changed + changes.removed))
    out["counts"] = {k: v for k, v in old.items() if k != "vocabulary"} | {
        "documents": len(changes.order), "nodes": old["nodes"] - removed[0] + c["nodes"],
        "leaves": old["leaves"] - removed[1] + c["leaves"], "chunks": old["chunks"] - removed[2] + c["chunks"]}
    out[SEGMENTS] = seg.to_dict() | {"sources": sources}
    files = {n: e for n, e in meta["files"].items() if not n.startswith(SOURCES_PREFIX)}
    files.update(entries)
    out["files"] = files
    out["build_id"] = build_id
    out["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    out["warnings"] = changes.warnings
    out["skipped"] = [{"path": s.rel, "reason": s.reason} for s in changes.skipped]
    return out


def _removed_counts(index: Any, paths: set[str]) -> tuple[int, int, int]:
    """Nodes, leaves and chunks of the live documents ``paths`` of the loaded ``index``."""
    nodes = leaves = chunks = 0
    tree = index.tree
    for number, path in enumerate(tree.doc_paths):
        if path in paths:
            rows = tree.document_rows(number)
            nodes += len(rows)
            lv = tree.leaf_of_row[rows]
            lv = lv[lv >= 0]
            leaves += len(lv)
            if len(lv):
                chunks += int(index.leaf_ptr[int(lv.max()) + 1] - index.leaf_ptr[int(lv.min())])
    return nodes, leaves, chunks


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(value, fh, ensure_ascii=False, allow_nan=False)
        fh.flush()
        os.fsync(fh.fileno())


def remove_unlisted(output: Path, meta: dict[str, Any]) -> list[str]:
    """Delete files of deltas a crash left unpublished (named ``deltaN.*`` or a temporary manifest,
    not in the manifest): they were never part of any version a reader could open."""
    listed = set(meta.get("files", {}))
    removed = []
    for name in _names(output):
        if is_delta_file(name) and name not in listed:
            try:
                os.unlink(output / name)
                removed.append(name)
            except OSError:
                pass
    return removed


def _names(output: Path) -> Iterator[str]:
    with os.scandir(output) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                yield e.name

