"""The on-disk index: plain files, validated loading, atomic replacement."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedder import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index
from tests.conftest import ROOT, TEST_PAPER
from utils.errors import IndexFormatError, InputError


def _copy_index(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_index_files_are_plain_data(paper_index_dir: Path) -> None:
    names = {p.name for p in paper_index_dir.iterdir()}
    assert {"metadata.json", "tree.json", "chunks.jsonl", "embeddings.npy"} <= names
    for p in paper_index_dir.iterdir():
        assert p.suffix in (".json", ".jsonl", ".npy"), p.name
        if p.suffix == ".npy":
            arr = np.load(p, allow_pickle=False)  # raises if anything needs unpickling
            assert arr.dtype != object


def test_loaded_index_is_consistent(paper_index) -> None:
    meta = paper_index.metadata
    assert meta["counts"]["chunks"] == len(paper_index.chunks) == paper_index.embeddings.shape[0]
    assert paper_index.embeddings.dtype == np.float32
    assert meta["embedder"]["name"] == "hash"
    text = TEST_PAPER.read_text(encoding="utf-8")
    for c in paper_index.chunks:
        assert text[c.start_char:c.end_char] == c.text
        assert c.source_node_id in paper_index.leaf_rows
        first_line = text[:c.start_char].count("\n") + 1
        assert c.start_line == first_line
        assert c.end_line == text[:c.end_char].count("\n") + 1
    # every leaf with text has chunks, rows are contiguous per leaf
    for leaf in paper_index.leaves:
        if leaf.content.strip():
            s, e = paper_index.leaf_rows[leaf.node_id]
            assert all(paper_index.chunks[r].source_node_id == leaf.node_id for r in range(s, e))


def test_embeddings_open_with_mmap(paper_index) -> None:
    assert isinstance(paper_index.embeddings, np.memmap)


@pytest.mark.parametrize("breakage, needle", [
    ("metadata_garbage", "metadata.json"),
    ("metadata_version", "format version"),
    ("chunks_missing_line", "chunks.jsonl"),
    ("embeddings_truncated", "embeddings.npy"),
    ("embeddings_shape", "embeddings.npy"),
    ("tree_missing", "tree.json"),
    ("pickle_array", "embeddings.npy"),
])
def test_broken_index_fails_with_one_line(paper_index_dir: Path, tmp_path: Path, breakage: str,
                                          needle: str) -> None:
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    if breakage == "metadata_garbage":
        (d / "metadata.json").write_text("{not json", encoding="utf-8")
    elif breakage == "metadata_version":
        meta = json.loads((d / "metadata.json").read_text(encoding="utf-8"))
        meta["format_version"] = 999
        (d / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    elif breakage == "chunks_missing_line":
        lines = (d / "chunks.jsonl").read_text(encoding="utf-8").splitlines(True)
        (d / "chunks.jsonl").write_text("".join(lines[:-1]), encoding="utf-8")
    elif breakage == "embeddings_truncated":
        data = (d / "embeddings.npy").read_bytes()
        (d / "embeddings.npy").write_bytes(data[: len(data) // 2])
    elif breakage == "embeddings_shape":
        np.save(d / "embeddings.npy", np.zeros((3, 7), dtype=np.float32))
    elif breakage == "tree_missing":
        (d / "tree.json").unlink()
    elif breakage == "pickle_array":
        np.save(d / "embeddings.npy", np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(IndexFormatError) as exc:
        load_index(d)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg


def test_missing_index_message(tmp_path: Path) -> None:
    with pytest.raises(IndexFormatError, match="no index at"):
        load_index(tmp_path / "nope")


def test_rebuild_replaces_atomically_and_cleans_up(tmp_path: Path) -> None:
    config = Config()
    out = tmp_path / "index"
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    first = json.loads((out / "metadata.json").read_text())["created_at"]
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    assert load_index(out).metadata["counts"]["chunks"] > 0
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "index"]
    assert leftovers == []
    assert first


def test_refuses_to_replace_a_non_index_directory(tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    config = Config()
    with pytest.raises(InputError, match="not a TreeRAG index"):
        build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    assert (out / "thesis.tex").read_text() == "years of work"


def _make_corpus(folder: Path, n_docs: int, noun: str = "router") -> None:
    folder.mkdir(parents=True)
    para = (f"The adaptive {noun} observes market state and chooses an execution venue. " * 6).strip()
    for i in range(n_docs):
        body = [f"# Document {i}", ""]
        for s in range(1, 6):
            body += [f"## {s} Section {s} of doc {i}", "", para, "", para[:150], ""]
        (folder / f"doc_{i:04d}.md").write_text("\n".join(body), encoding="utf-8")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_build_leaves_old_index_intact(tmp_path: Path, sig: int) -> None:
    config = Config()
    out = tmp_path / "index"
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    corpus = tmp_path / "corpus"
    _make_corpus(corpus, 400)
    cmd = [sys.executable, str(ROOT / "main.py"), "index", "--input", str(corpus), "--output", str(out),
           "--quiet"]
    for delay in (0.3, 0.8, 1.5, 2.5):
        proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        if proc.poll() is not None:
            break  # finished before we could interrupt: nothing more to learn
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert b"Traceback" not in err
        after = {p.name: p.read_bytes() for p in out.iterdir()}
        if after != before:  # the build won the race and swapped in a complete index
            assert load_index(out).metadata["counts"]["documents"] == 400
            return
        assert load_index(out).metadata["counts"]["documents"] == 1
    # temporary build directories of killed builds are cleaned by the next build
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "index"]


# --------------------------------------------------------------------------- consistent reads

def _fingerprint(index) -> tuple:
    """Each part of a loaded index, hashed separately: a mixed load has parts of two versions."""
    import hashlib

    def h(b: bytes) -> str:
        return hashlib.sha256(b).hexdigest()[:16]

    return (
        h(json.dumps(index.metadata["counts"], sort_keys=True).encode()) + index.metadata.get("created_at", ""),
        h("|".join(n.heading_path for n in index.root.iter_preorder()).encode()),
        h("|".join(c.text for c in index.chunks).encode()),
        h(np.asarray(index.embeddings).tobytes()),
        h(np.asarray(index.leaf_embeddings).tobytes()),
        h(np.asarray(index.bm25.doc_len).tobytes()) + h("|".join(index.bm25.terms).encode()),
    )


def test_queries_during_rebuilds_see_exactly_one_version(tmp_path: Path) -> None:
    """A writer swaps two index versions in a loop (the swap every build does); every load
    made meanwhile must be wholly one version, never a mix and never an error."""
    import shutil
    import tempfile
    import threading

    from retrieval.node_locator import hybrid_locate
    from utils.atomic import replace_directory

    config = Config()
    emb = make_embedder("hash", config)
    corpus = tmp_path / "corpus"
    _make_corpus(corpus, 30)
    twin = tmp_path / "twin"  # same shape as B, other words: a mix would not even fail a shape check
    _make_corpus(twin, 30, noun="switch")
    versions = {"A": tmp_path / "A", "B": tmp_path / "B", "C": tmp_path / "C"}
    build_index(TEST_PAPER, versions["A"], config, emb)
    build_index(corpus, versions["B"], config, emb)
    build_index(twin, versions["C"], config, emb)
    prints = {k: _fingerprint(load_index(v)) for k, v in versions.items()}
    assert len({p[2] for p in prints.values()}) == 3
    assert prints["B"][0][:16] == prints["C"][0][:16]  # equal counts
    out = tmp_path / "live" / "index"
    out.parent.mkdir()
    shutil.copytree(versions["A"], out)

    stop = threading.Event()
    swaps = [0]

    def writer() -> None:
        names = ["B", "C", "A"]
        while not stop.is_set():
            src = versions[names[swaps[0] % 3]]
            tmp = Path(tempfile.mkdtemp(prefix=".index.building-", dir=out.parent))
            for f in src.iterdir():  # a fresh directory, written file by file like a build
                shutil.copyfile(f, tmp / f.name)
            replace_directory(tmp, out)
            swaps[0] += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    mixed, errors, loads = [], [], 0
    deadline = time.monotonic() + 20
    try:
        while loads < 200 and time.monotonic() < deadline:
            try:
                index = load_index(out)
                hybrid_locate(index, emb, "adaptive router execution venue", config)
            except IndexFormatError as exc:
                errors.append(str(exc))
                continue
            finally:
                loads += 1
            fp = _fingerprint(index)
            owners = {k for part, _ in enumerate(fp) for k in prints if prints[k][part] == fp[part]}
            if not all(any(prints[k][i] == fp[i] for k in prints) for i in range(len(fp))) or not any(
                    prints[k] == fp for k in prints):
                mixed.append(sorted(owners))
    finally:
        stop.set()
        t.join(timeout=30)
    assert swaps[0] >= 20, "the writer must really race the readers"
    assert errors == [] and mixed == [], f"{len(mixed)} mixed and {len(errors)} failed of {loads} loads"
