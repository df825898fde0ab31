"""The build's writing stage: chunks, vectors (embedded, or lent by the previous index), BM25,
graphs, the ANN and metadata.json, written into a staging directory a block of chunks at a time.

Why blocks: memory stays that of BLOCK_CHUNKS chunks and a batch of documents whatever the
collection's size; what grows with it is per row and small (index_writer.py, bm25_builder.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from indexing.bm25_builder import BM25Builder
from indexing.build_plan import BuildPlan
from indexing.build_sections import section_batches
from indexing.chunker import Chunk, chunk_leaf
from indexing.index_store import text_key
from indexing.index_writer import IndexWriter
from indexing.kg_graph import GraphStats
from indexing.kg_store import GraphWriter, make_extractor
from indexing.leaf_terms import leaf_words
from indexing.representation import chunk_representation, leaf_text_for_embedding
from indexing.reuse import PreviousIndex
from tree_builder.document import Document
from tree_builder.markdown_headings import line_starts
from tree_builder.tree import TreeNode, new_root
from utils.errors import IndexFormatError, InputError
from utils.progress import Stage
from utils.progress import stage as progress_stage
from utils.tokenizer import tokenize
from indexing import ann_index

BLOCK_CHUNKS = 2048
"""Chunks chunked, tokenised, embedded and written together: memory per block, not per index."""


class OldIndexDamaged(Exception):
    """The previous index could not lend what it promised (a bad record or vector): the build
    starts again without it rather than fail."""


@dataclass
class Written:
    """What the writing stage produced."""

    chunks: int = 0
    nodes: int = 0
    """Nodes below the root."""
    leaves: int = 0
    embedded: int = 0
    """Chunks embedded anew (the rest were lent by the previous index)."""
    embed_seconds: float = 0.0
    kg: GraphStats | None = None


@dataclass
class _Vectors:
    """Vectors for texts: lent by the previous index when it has the same text, else embedded; the
    previous rows they came from are kept for the ANN, which then re-encodes only new rows."""

    plan: BuildPlan
    written: Written
    bar: Stage
    old_rows: dict[str, list[np.ndarray]] = field(default_factory=lambda: {"chunk": [], "leaf": []})
    """Per new row, the previous index's row its vector came from (-1: embedded anew)."""

    def of(self, texts: list[str], kind: str) -> np.ndarray:
        t = time.perf_counter()
        source = self.plan.previous
        if source is None:
            found = np.zeros(len(texts), dtype=bool)
            vecs = np.zeros((len(texts), int(self.plan.identity["dim"])), dtype=np.float32)
        else:
            vecs, found, rows = _reuse(source, texts, kind)
            self.old_rows[kind].append(np.where(found, rows, -1))
        todo = np.flatnonzero(~found)
        self.bar.advance(len(texts) - int(todo.size))  # lent by the previous index
        if todo.size:
            told = [0]

            def advance(n: int) -> None:  # per batch of the encoder: the bar moves from the first second
                told[0] += n
                self.bar.advance(n)

            vecs[todo] = self.plan.embedder.embed_documents([texts[i] for i in todo], progress=advance)
            self.bar.advance(int(todo.size) - told[0])  # an embedder that reports no batches
        if kind == "chunk":
            self.written.embedded += int(todo.size)
        self.written.embed_seconds += time.perf_counter() - t
        return vecs

    def previous_rows(self) -> dict[str, np.ndarray] | None:
        """chunks/leaves -> the previous row of each new row's vector (None for a full build)."""
        if self.plan.previous is None:
            return None
        return {k: np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64)
                for k, v in (("chunks", self.old_rows["chunk"]), ("leaves", self.old_rows["leaf"]))}


def write_files(plan: BuildPlan, staged: Path, documents: Iterable[Document], metadata: dict[str, Any],
                t0: float) -> Written:
    """Write the whole index into ``staged`` from ``documents`` (read again, in the plan's order), a
    batch of documents at a time: their nodes, chunks with vectors, leaf vectors, BM25 and graph
    input; then the BM25 merge, graphs, the ANN and ``metadata`` (completed with counts) with the
    manifest."""
    writer = IndexWriter(staged, int(plan.identity["dim"]), plan.first_node)
    written = Written()
    try:
        bar = progress_stage(plan.progress, "indexing documents", len(plan.documents), "documents")
        with bar:
            stream = _Stream(plan, writer, _Vectors(plan, written, progress_stage(None, "")))
            stream.run(documents, bar)
        written.chunks, written.nodes, written.leaves = writer.n_chunks, writer.n_nodes - 1, writer.n_leaves
        if not written.chunks:
            raise InputError(f"{plan.input_path}: no text to index")
        with progress_stage(plan.progress, "writing the index") as st:
            index = stream.bm25.finish()
            metadata["counts"].update(nodes=written.nodes, leaves=written.leaves)
            metadata["counts"].update(chunks=written.chunks, vocabulary=index.vocab_size)
            if stream.graphs is not None:
                metadata["kg"] = stream.graphs.write(staged)
                written.kg = stream.graphs.stats
            metadata["build_seconds"] = round(time.perf_counter() - t0, 3)
            writer.finish(metadata, index, stream.leaf_terms.finish(),
                          derived=lambda d: _ann_fields(d, metadata, plan, stream.vectors.previous_rows()),
                          impacts=(plan.config.tuning.bm25.bm25_k1, plan.config.tuning.bm25.bm25_b)
                          if plan.bm25_impacts and plan.store is None else None)  # an engine keeps its own postings
            st.count(written.chunks, "chunks")
    finally:
        writer.close()
    return written


class _Stream:
    """The per-document state of the writing stage: blocks of chunks and leaves waiting for their
    vectors, and the BM25, leaf-term and graph builders they feed.

    Chunks and leaves are embedded in blocks of BLOCK_CHUNKS that run across documents, cut where
    the whole tree's walk would cut them (a chunk block after the leaf that fills it, a leaf block
    every BLOCK_CHUNKS leaves), so an embedder sees the batches it saw when the tree was held whole.
    """

    def __init__(self, plan: BuildPlan, writer: IndexWriter, vectors: _Vectors) -> None:
        self.plan, self.writer, self.vectors = plan, writer, vectors
        self.bm25 = BM25Builder()
        self.leaf_terms = BM25Builder()
        self.graphs = _graph_writer(plan)
        self.block: list[Chunk] = []
        self.texts: list[str] = []
        self.leaf_texts: list[str] = []

    def run(self, documents: Iterable[Document], bar: Stage) -> None:
        self.writer.add_root(new_root())
        infos = self.plan.documents
        number = 0
        for batch in section_batches(self.plan, documents):
            for sections in batch:
                doc = sections.document
                if number >= len(infos) or infos[number].path != doc.path:
                    raise ValueError(f"{doc.path}: read back out of order")
                self._document(doc, self.writer.add_nodes(sections.nodes, number))
                number += 1
            bar.advance(len(batch))
        self.flush_chunks()
        self.flush_leaves()

    def _document(self, doc: Document, leaves: list[TreeNode]) -> None:
        config, starts = self.plan.config, line_starts(doc.text)
        for leaf in leaves:
            chunks = chunk_leaf(leaf, doc.text, config, starts, doc.page_starts)
            for c in chunks:
                text = chunk_representation(c, doc.title, config.tuning.chunking.chunk_context)
                self.bm25.add(tokenize(text))
                self.block.append(c)
                self.texts.append(text)
            if self.graphs is not None:
                self.graphs.add_leaf(leaf.node_id, len(leaf.content), [c.text for c in chunks], leaf.heading_path)
            if len(self.block) >= BLOCK_CHUNKS:
                self.flush_chunks()
            self.leaf_terms.add(leaf_words(leaf))
            self.leaf_texts.append(leaf_text_for_embedding(leaf))
            if len(self.leaf_texts) >= BLOCK_CHUNKS:
                self.flush_leaves()

    def flush_chunks(self) -> None:
        if self.block:
            self.writer.add_chunks(self.block, self.vectors.of(self.texts, "chunk"), self.texts)
        self.block, self.texts = [], []

    def flush_leaves(self) -> None:
        if self.leaf_texts:
            self.writer.add_leaf_vectors(self.vectors.of(self.leaf_texts, "leaf"), self.leaf_texts)
        self.leaf_texts = []


def _ann_fields(directory: Path, metadata: dict[str, Any], plan: BuildPlan,
                rows: dict[str, np.ndarray] | None) -> dict[str, Any]:
    """The ANN files of a finished vector set (indexing/ann_index.py): an update re-encodes only new rows."""
    counts = {"chunks": metadata["counts"]["chunks"], "leaves": metadata["counts"]["leaves"]}
    previous = getattr(plan.previous.index.search, "ann", None) if plan.previous is not None else None
    try:
        ann = ann_index.write_all(directory, counts, int(metadata["embedder"]["dim"]), plan.config.ann,
                                  plan.config.tuning.store.ann_min_rows, previous, rows)
    except IndexFormatError as exc:
        if plan.previous is None:
            raise
        raise OldIndexDamaged(str(exc)) from None
    return {"ann": ann} if ann else {}


def _graph_writer(plan: BuildPlan) -> GraphWriter | None:
    """The long-leaf graph writer of this build (None when kg_mode is off); an update's previous
    index lends the graphs of leaves whose chunks did not change."""
    if plan.config.kg_mode == "off":
        return None
    extractor, extractor_id = make_extractor(plan.config, plan.kg_llm)
    previous = getattr(plan.previous.index, "kg", None) if plan.previous is not None else None
    return GraphWriter(plan.config, extractor, previous, extractor_id)


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
        raise OldIndexDamaged(str(exc)) from None
    out = np.zeros((len(texts), old.shape[1]), dtype=np.float32)
    hit = np.flatnonzero(found)
    if hit.size:
        order = np.argsort(rows[hit], kind="stable")  # ascending rows: sequential reads of a memmap
        out[hit[order]] = old[rows[hit][order]]
        if not np.isfinite(out[hit]).all():
            raise OldIndexDamaged("its vectors hold NaN or infinite values")
    return out, found, np.asarray(rows, dtype=np.int64)
