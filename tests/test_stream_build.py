"""The build that holds a batch of documents at a time writes the index the whole-tree build wrote.

``stream_build_digests.json`` holds the digest of every file the build wrote, with hash embeddings,
before the build streamed, plus the stored BM25 weights and document cards added since (metadata.json without its time stamps,
build id, input path and full settings): the
streaming build must reproduce them byte for byte, whatever its batch and block sizes.
"""
from __future__ import annotations

import hashlib
import json
import os
import weakref
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing import build_sections, build_write, doc_spill
from indexing.embedders.hash_embedder import HashEmbedder
from indexing.index_builder import build_index
from indexing.index_store import verify_index

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = json.loads((Path(__file__).parent / "stream_build_digests.json").read_text())
VOLATILE = ("created_at", "build_seconds", "build_id", "input", "config")
"""``config`` is every setting, query ones included: it changes whenever a setting is added, while
what the build used is in ``build_settings``, which is compared."""


def digests(index: Path) -> dict[str, str]:
    out = {}
    for p in sorted(index.iterdir()):
        if p.name == "metadata.json":
            meta = json.loads(p.read_text())
            for k in VOLATILE:
                meta.pop(k, None)
            out[p.name] = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()
        else:
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _build(src: Path, out: Path, embedder: object | None = None, compact: bool = False) -> object:
    return build_index(src, out, Config(embedder="hash"), embedder or HashEmbedder(384), compact=compact)


def test_a_folder_and_a_file_give_the_bytes_the_whole_tree_build_gave(tmp_path: Path) -> None:
    _build(ROOT / "test_data", tmp_path / "folder")
    _build(ROOT / "test_data" / "test_paper.md", tmp_path / "file")
    assert digests(tmp_path / "folder") == EXPECTED["folder"]
    assert digests(tmp_path / "file") == EXPECTED["file"]
    verify_index(tmp_path / "folder")


def test_batch_and_block_sizes_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_sections, "DOC_BATCH", 1)
    monkeypatch.setattr(build_write, "BLOCK_CHUNKS", 5)  # blocks of chunks and of leaves cross documents
    _build(ROOT / "test_data", tmp_path / "folder")
    assert digests(tmp_path / "folder") == EXPECTED["folder"]


def _corpus(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        sections = "".join(f"## Part {j}\n\nWidget {i} meets gadget {j} in paragraph {i * j}.\n\n" for j in range(3))
        (folder / f"d{i:03d}.md").write_text(f"# Paper {i}\n\nAbout paper {i}.\n\n{sections}", encoding="utf-8")
    return folder


def test_no_more_than_two_batches_of_documents_are_alive_at_once(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents read back are dropped once their batch is written (the memory does not grow with them)."""
    monkeypatch.setattr(build_sections, "DOC_BATCH", 3)
    alive: list[weakref.ref] = []
    most = [0]
    real = doc_spill._document

    def tracked(record: object, i: int) -> object:
        doc = real(record, i)
        alive.append(weakref.ref(doc))
        most[0] = max(most[0], sum(1 for r in alive if r() is not None))
        return doc

    monkeypatch.setattr(doc_spill, "_document", tracked)
    report = _build(_corpus(tmp_path / "docs", 20), tmp_path / "idx")
    assert report.documents == 20 and len(alive) == 20
    assert most[0] <= 2 * 3 + 1


class _FailingEmbedder(HashEmbedder):
    """Fails on its second block: a build stopped halfway through its documents."""

    def __init__(self) -> None:
        super().__init__(384)
        self.calls = 0

    def embed_documents(self, texts: list[str], progress: object = None) -> np.ndarray:
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        return super().embed_documents(texts)


def test_a_build_stopped_halfway_leaves_the_index_and_no_staging(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_write, "BLOCK_CHUNKS", 4)
    docs = _corpus(tmp_path / "docs", 8)
    out = tmp_path / "idx"
    _build(docs, out)
    before = digests(out)
    (docs / "d003.md").write_text("# Paper 3\n\nRewritten.\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        build_index(docs, out, Config(embedder="hash"), _FailingEmbedder(), update=False)
    assert digests(out) == before
    assert [n for n in os.listdir(tmp_path) if ".building-" in n] == []  # no staging, no set-aside documents


def test_a_compacting_update_of_one_changed_document_equals_a_full_build(tmp_path: Path) -> None:
    docs = _corpus(tmp_path / "docs", 40)
    out = tmp_path / "idx"
    _build(docs, out)
    (docs / "d017.md").write_text("# Paper 17\n\nChanged.\n\n## Part 0\n\nA new gadget.\n", encoding="utf-8")
    report = _build(docs, out, compact=True)
    assert report.update is not None and report.update.changed == 1 and report.update.unchanged == 39
    full = tmp_path / "full"
    _build(docs, full)
    assert digests(out) == digests(full)
    verify_index(out)
