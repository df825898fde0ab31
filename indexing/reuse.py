"""What a previous index can lend to a new build of the same folder (incremental indexing).

Why reuse is keyed by *text*, not by file: a vector is a function of the text
it embeds (the chunk's representation: title, heading path, chunk text) and of
the embedder. Looking old vectors up by a digest of that text (stored at build
time beside the vectors: chunk_text_keys.npy, leaf_text_keys.npy) makes an update
equal to a full rebuild by construction: a renamed file, a moved section or a
chunk whose neighbours changed gets the vector a full rebuild would compute, and
anything whose text differs is embedded afresh. Only documents still present
(by path, or by content hash when moved) lend anything, so the lookup table
stays the size of what can actually be reused; a changed document lends the
chunks its edit did not touch.

Summaries are lent per document: an unchanged document (same path, same content
hash) parses into the same subtree, so its nodes keep their old summaries; the
folder-level parents are summarised again from their (maybe changed) children.

Everything else — parsing, chunking, BM25 — is rebuilt: it is cheap next to
embedding (and LLM summaries), and rebuilding it keeps one code path.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from config import Config
from indexing.index_files import METADATA_MAX_BYTES
from indexing.index_store import CHUNK_KEYS, FORMAT_VERSION, LEAF_KEYS, Index, load_index, read_metadata
from tree_builder.document import Document, DocumentInfo
from tree_builder.tree import TreeNode
from utils.errors import IndexFormatError
from utils.tokenizer import TOKENIZER_VERSION

BUILD_FIELDS = ("max_depth", "summary_mode", "summary_max_chars", "short_section_tokens",
                "chunk_size", "chunk_overlap", "min_chunk_chars", "chunk_units", "chunk_context")
"""Settings that change an index's tree, chunks, summaries or vectors (the rest are query-time or do not
change what is built); an update compares them with the ones the index recorded."""


def build_settings(config: Config, embedder_identity: dict[str, Any], summarizer_id: str,
                   folder_mode: bool) -> dict[str, Any]:
    """Everything that, changed, makes an old index's chunks or vectors wrong for a new build."""
    return {
        "config": {f: config.setting(f) for f in BUILD_FIELDS},
        "embedder": dict(embedder_identity),
        "tokenizer": TOKENIZER_VERSION,
        "summarizer": summarizer_id,
        "folder_mode": folder_mode,
    }


def settings_change(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """One phrase naming the first setting that differs, or None when every one matches."""
    for key in ("embedder", "tokenizer", "summarizer", "folder_mode"):
        if old.get(key) != new[key]:
            if key == "embedder":
                return f"embedder changed ({_describe(old.get(key))} -> {_describe(new[key])})"
            return f"{key} changed ({old.get(key)!r} -> {new[key]!r})"
    old_cfg = old.get("config") or {}
    for f in BUILD_FIELDS:
        if old_cfg.get(f) != new["config"][f]:
            return f"{f} changed ({old_cfg.get(f)!r} -> {new['config'][f]!r})"
    return None


def _describe(identity: Any) -> str:
    if not isinstance(identity, dict):
        return "?"
    return f"{identity.get('model_id', '?')}, {identity.get('dim', '?')} dims"


@dataclass
class DocumentChanges:
    """How the documents of a new build compare with the previous index's."""

    unchanged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def compare_documents(old_docs: list[dict[str, Any]], docs: Sequence[Document | DocumentInfo]) -> DocumentChanges:
    old = {d["path"]: d["content_hash"] for d in old_docs}
    out = DocumentChanges()
    for d in docs:
        if d.path not in old:
            out.new.append(d.path)
        elif old[d.path] == d.content_hash:
            out.unchanged.append(d.path)
        else:
            out.changed.append(d.path)
    current = {d.path for d in docs}
    out.removed = [p for p in old if p not in current]
    return out


class PreviousIndex:
    """An existing index at the output path, opened to lend vectors and summaries.

    Holds the old index memory-mapped; vectors are copied out row by row only
    for texts the new build asks for.
    """

    def __init__(self, index: Index, docs: Sequence[Document | DocumentInfo]) -> None:
        self.index = index
        self.metadata = index.metadata
        self._hashes = {d.content_hash for d in docs}
        self._paths = {d.path for d in docs}
        self._tables: dict[str, dict[bytes, int]] = {}
        self._doc_numbers: dict[str, int] | None = None

    # ------------------------------------------------------------------ vectors

    def _lending_docs(self) -> set[str]:
        """Old documents still there under their path (changed or not) or their content (moved)."""
        return {d["path"] for d in self.metadata["documents"]
                if d["content_hash"] in self._hashes or d["path"] in self._paths}

    def _table(self, name: str) -> dict[bytes, int]:
        """Stored text digest -> row, for the rows of documents that may lend (built once)."""
        table = self._tables.get(name)
        if table is None:
            keys = self.index.text_keys[name]
            lending = self._lending_docs()
            if name == CHUNK_KEYS:
                spans = [self.index.doc_rows[d] for d in lending if d in self.index.doc_rows]
            else:
                positions = self.index.leaf_positions(lending)
                spans = [(int(p), int(p) + 1) for p in positions]
            table = {}
            for a, b in spans:
                block = np.asarray(keys[a:b])
                for i in range(b - a):
                    table.setdefault(block[i].tobytes(), a + i)
            self._tables[name] = table
        return table

    def chunk_vectors(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(found mask, rows) for the chunk representations whose digests are ``keys``."""
        return _lookup(self._table(CHUNK_KEYS), keys)

    def leaf_vectors(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        return _lookup(self._table(LEAF_KEYS), keys)

    # ------------------------------------------------------------------ summaries

    def lend_summaries(self, root: TreeNode, unchanged: set[str]) -> set[str]:
        """Copy old summaries onto the subtrees of unchanged documents under ``root`` (the whole tree
        or a batch of documents); the node ids filled. The old nodes are read from the stored table
        a document at a time, never the whole old tree."""
        new_docs: dict[str, list[TreeNode]] = {}
        for n in root.iter_preorder():
            if n.kind != "root" and n.doc_path in unchanged:
                new_docs.setdefault(n.doc_path, []).append(n)
        filled: set[str] = set()
        for path, nodes in new_docs.items():
            old = self._old_nodes(path)
            same = len(old) == len(nodes) and all(
                key == (b.heading_path, b.kind, b.content_start, b.content_end, len(b.children))
                for (key, _), b in zip(old, nodes))
            if not same:
                continue
            for (_, summary), b in zip(old, nodes):
                b.summary = summary
                filled.add(b.node_id)
        return filled

    def _old_nodes(self, path: str) -> list[tuple[tuple[Any, ...], str]]:
        """(what must match, summary) of each old node of document ``path``, in pre-order."""
        if self._doc_numbers is None:
            self._doc_numbers = {d["path"]: i for i, d in enumerate(self.metadata["documents"])}
        number = self._doc_numbers.get(path)
        if number is None:
            return []
        tree = self.index.tree
        out = []
        for row in tree.document_rows(number).tolist():
            f = tree.fields(row)
            children = int(tree.child_ptr[row + 1] - tree.child_ptr[row])
            out.append(((f["heading_path"], f["kind"], f["content_start"], f["content_end"], children), f["summary"]))
        return out


def _lookup(table: dict[bytes, int], keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    rows = np.array([table.get(k, -1) for k in keys], dtype=np.int64)
    return rows >= 0, rows


def _format_version(path: Path) -> Any:
    try:
        with open(path, "rb") as fh:
            meta = json.loads(fh.read(METADATA_MAX_BYTES))
        return meta.get("format_version") if isinstance(meta, dict) else None
    except (OSError, ValueError, RecursionError):
        return None


def open_previous(output: Path, settings: dict[str, Any], docs: Sequence[Document | DocumentInfo]
                  ) -> tuple[PreviousIndex | None, str | None]:
    """The index already at ``output`` if its build settings match, else (None, why not).

    ``why`` is None when there is simply nothing to update (no index there yet).
    """
    output = Path(output)
    if not (output / "metadata.json").is_file():
        return None, None
    try:
        meta = read_metadata(output)
    except IndexFormatError as exc:
        version = _format_version(output / "metadata.json")
        if version is not None and version != FORMAT_VERSION:
            return None, f"the existing index has format {version} (this TreeRAG writes format {FORMAT_VERSION})"
        return None, f"the existing index cannot be read ({exc})"
    old_settings = meta.get("build_settings")
    if not isinstance(old_settings, dict):
        return None, "the existing index records no build settings"
    change = settings_change(old_settings, settings)
    if change:
        return None, change
    try:
        index = load_index(output)
    except IndexFormatError as exc:
        return None, f"the existing index cannot be read ({exc})"
    return PreviousIndex(index, docs), None
