"""The on-disk index: plain files, validated loading, atomic replacement."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index, verify_index
from tests.conftest import ROOT, TEST_PAPER, run_cli
from utils.errors import IndexFormatError, InputError


def _copy_index(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_index_files_are_plain_data(paper_index_dir: Path) -> None:
    names = {p.name for p in paper_index_dir.iterdir()}
    assert {"metadata.json", "nodes.jsonl", "node_table.npy", "chunks.jsonl", "embeddings.npy"} <= names
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
    ("tree_missing", "nodes.jsonl"),
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
        (d / "nodes.jsonl").unlink()
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
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("index", ".index.lock")]
    assert leftovers == []  # the lock file stays: removing it would let two updaters lock different files
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


def _wait_until_started(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until the process is running TreeRAG's code (numpy is mapped, which main.py imports after
    it installs its Ctrl-C handler): a signal during the interpreter's own start-up is not the
    program's to handle, and on a loaded machine start-up alone can take more than the delays below."""
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if "numpy" in maps.read_text():
                return
        except OSError:
            return  # the process has ended: the caller's poll() sees it
        time.sleep(0.01)


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
        _wait_until_started(proc)
        time.sleep(delay)
        if proc.poll() is not None:
            break  # finished before we could interrupt: nothing more to learn
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=240)  # a hang detector: a loaded machine may take minutes
        assert b"Traceback" not in err
        after = {p.name: p.read_bytes() for p in out.iterdir()}
        if after != before:  # the build won the race and swapped in a complete index
            assert load_index(out).metadata["counts"]["documents"] == 400
            return
        assert load_index(out).metadata["counts"]["documents"] == 1
    # temporary build directories of killed builds are cleaned by the next build
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index.lock", "corpus", "index"]


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
        h(np.asarray(index.search.bm25.doc_len).tobytes()) + h("|".join(index.search.bm25.terms).encode()),
    )


def test_queries_during_rebuilds_see_exactly_one_version(tmp_path: Path) -> None:
    """A writer swaps two index versions in a loop (the swap every build does); every load
    made meanwhile must be wholly one version, never a mix and never an error."""
    import shutil
    import tempfile
    import threading

    from retrieval.node_locator import hybrid_locate
    from retrieval.query import Query
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
    # counts, not a time window: read until 200 loads AND 20 swaps happened, however slow the machine
    # (the safety limit only stops a broken writer from hanging the suite)
    safety = time.monotonic() + 600
    try:
        while (loads < 200 or swaps[0] < 20) and time.monotonic() < safety and t.is_alive():
            try:
                index = load_index(out)
                hybrid_locate(index, Query.build("adaptive router execution venue", emb), config)
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


# --------------------------------------------------------------------------- hostile index files

def _restamp(d: Path) -> None:
    """Rewrite the manifest after tampering, as a hostile index author would."""
    from indexing.index_files import write_manifest_entry

    meta = json.loads((d / "metadata.json").read_text(encoding="utf-8"))
    if "files" not in meta:
        return
    meta["files"] = {name: write_manifest_entry(d, name) for name in meta["files"]
                     if (d / name).is_file() and not (d / name).is_symlink()}
    (d / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")


def _edit_jsonl(d: Path, fn) -> None:
    rows = [json.loads(x) for x in (d / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]
    fn(rows)
    _write_jsonl(d, "".join(json.dumps(r) + "\n" for r in rows))


def _write_jsonl(d: Path, text: str) -> None:
    """chunks.jsonl and the offsets of its lines, as a build would write them."""
    data = text.encode("utf-8")
    (d / "chunks.jsonl").write_bytes(data)
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    np.save(d / "chunk_offsets.npy", np.asarray([0] + ends, dtype=np.int64))


def _edit_nodes(d: Path, fn) -> None:
    """Rewrite nodes.jsonl (and its offsets) after ``fn`` edits the list of node records."""
    rows = [json.loads(x) for x in (d / "nodes.jsonl").read_text(encoding="utf-8").splitlines()]
    fn(rows)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
    (d / "nodes.jsonl").write_bytes(data)
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    np.save(d / "node_offsets.npy", np.asarray([0] + ends, dtype=np.int64))


def _first_leaf(rows: list[dict]) -> dict:
    assert rows[1]["heading"] == "Abstract"  # the test paper's first node, a leaf
    return rows[1]


def _write_node_line(d: Path, line: str) -> None:
    lines = (d / "nodes.jsonl").read_text(encoding="utf-8").splitlines(True)
    data = "".join([line + "\n"] + lines[1:]).encode("utf-8")
    (d / "nodes.jsonl").write_bytes(data)
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    np.save(d / "node_offsets.npy", np.asarray([0] + ends, dtype=np.int64))


def _edit_table(d: Path, fn) -> None:
    t = np.load(d / "node_table.npy")
    fn(t)
    np.save(d / "node_table.npy", t)


def _nan_embeddings(d: Path) -> None:
    e = np.load(d / "embeddings.npy")
    e[3, 5] = np.nan
    np.save(d / "embeddings.npy", e)


def _inf_doc_len(d: Path) -> None:
    a = np.load(d / "bm25_doc_len.npy")
    a[0] = np.inf
    np.save(d / "bm25_doc_len.npy", a)


HOSTILE = {
    "nan_embeddings": (_nan_embeddings, "embeddings.npy"),
    "inf_bm25_doc_len": (_inf_doc_len, "bm25_doc_len.npy"),
    "negative_offset": (lambda d: _edit_jsonl(d, lambda r: r[2].update(start_char=-5)), "chunks.jsonl line 3"),
    "end_before_start": (lambda d: _edit_jsonl(d, lambda r: r[1].update(end_char=0)), "chunks.jsonl line 2"),
    "duplicate_chunk_id": (lambda d: _edit_jsonl(d, lambda r: r[4].update(chunk_id=r[3]["chunk_id"])),
                           "chunks.jsonl line 5"),
    "duplicate_node_id": (lambda d: _edit_nodes(d, lambda r: r[3].update(node_id=r[2]["node_id"])),
                          "nodes.jsonl line 4"),
    "float_level": (lambda d: _edit_nodes(d, lambda r: _first_leaf(r).update(level=1.5)), "nodes.jsonl line 2"),
    "bool_level": (lambda d: _edit_nodes(d, lambda r: _first_leaf(r).update(level=True)), "nodes.jsonl line 2"),
    "negative_node_offset": (lambda d: _edit_nodes(d, lambda r: _first_leaf(r).update(start_char=-1)),
                             "nodes.jsonl line 2"),
    "parent_after_child": (lambda d: _edit_table(d, lambda t: t.__setitem__((2, 0), 5)), "node_table.npy"),
    "unknown_kind": (lambda d: _edit_table(d, lambda t: t.__setitem__((2, 2), 9)), "node_table.npy"),
    "unlisted_document": (lambda d: _edit_table(d, lambda t: t.__setitem__((2, 1), 7)), "node_table.npy"),
    "nan_literal_in_chunks": (lambda d: _write_jsonl(d,
        (d / "chunks.jsonl").read_text().replace('"start_line": 3', '"start_line": NaN', 1)), "chunks.jsonl"),
    "deep_node_line": (lambda d: _write_node_line(d, "[" * 100_000), "nodes.jsonl line 1"),
    "deep_vocab": (lambda d: (d / "bm25_vocab.json").write_text("[" * 100_000), "bm25_vocab.json"),
    "deep_chunk_line": (lambda d: _write_jsonl(d, "[" * 100_000 + "\n" + "".join(
        (d / "chunks.jsonl").read_text().splitlines(True)[1:])), "chunks.jsonl line 1"),
}


READ_WHEN_USED = {"nan_embeddings", "negative_offset", "end_before_start", "duplicate_chunk_id",
                  "nan_literal_in_chunks", "deep_chunk_line", "duplicate_node_id", "float_level", "bool_level",
                  "negative_node_offset", "deep_node_line"}
"""Records and vectors a load does not read (they are read when a query uses them, and by verify)."""


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_but_consistent_index_is_refused_in_one_line(paper_index_dir: Path, tmp_path: Path,
                                                            case: str) -> None:
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    tamper, needle = HOSTILE[case]
    tamper(d)
    _restamp(d)
    if case in READ_WHEN_USED:
        load_index(d)
        check = verify_index
    else:
        check = load_index
    with pytest.raises(IndexFormatError) as exc:
        check(d)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg


def test_a_bad_record_is_one_line_when_a_query_reads_it(paper_index_dir: Path, tmp_path: Path) -> None:
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    _edit_jsonl(d, lambda rows: [r.update(start_char=-5) for r in rows])
    _restamp(d)
    proc = run_cli("query", "--index", str(d), "--mock", "-q", "What is the encoder design?")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("error: chunks.jsonl line ") and "start_char is negative" in proc.stderr


def test_load_samples_large_files_and_verify_reads_every_byte(paper_index_dir: Path, tmp_path: Path) -> None:
    from indexing.index_files import (SAMPLE_BLOCK, SAMPLE_BLOCKS, SAMPLE_WHOLE_MAX, IndexDir, parse_manifest,
                                      write_manifest_entry)

    d = _copy_index(paper_index_dir, tmp_path / "idx")
    meta = json.loads((d / "metadata.json").read_text())
    big = np.zeros((SAMPLE_WHOLE_MAX // 4 + 4096, 1), dtype=np.float32)
    np.save(d / "pad.npy", big)  # a file large enough to be sampled, listed in the manifest

    meta["files"]["pad.npy"] = write_manifest_entry(d, "pad.npy")
    (d / "metadata.json").write_text(json.dumps(meta))
    size = (d / "pad.npy").stat().st_size
    step = (size - SAMPLE_BLOCK) // (SAMPLE_BLOCKS - 1)
    with open(d / "pad.npy", "r+b") as fh:  # a byte between two sampled blocks
        fh.seek(SAMPLE_BLOCK + step // 2)
        fh.write(b"\x01")
    manifest = parse_manifest(meta["files"], "metadata.json")
    with IndexDir(d) as files:
        files.manifest = manifest
        files.read_array("pad.npy")  # the sample does not see it
    with IndexDir(d, verify=True) as files:
        files.manifest = manifest
        with pytest.raises(IndexFormatError, match="pad.npy does not match the sha256"):
            files.read_array("pad.npy")
    with open(d / "pad.npy", "r+b") as fh:  # a sampled block
        fh.seek(size - 10)
        fh.write(b"\x01")
    with IndexDir(d) as files:
        files.manifest = manifest
        with pytest.raises(IndexFormatError, match="pad.npy does not match the sha256"):
            files.read_array("pad.npy")


def test_verify_command(paper_index_dir: Path, tmp_path: Path) -> None:
    proc = run_cli("verify", "--index", str(paper_index_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"index at {paper_index_dir} is intact: ")
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    _nan_embeddings(d)
    _restamp(d)
    proc = run_cli("verify", "--index", str(d))
    assert proc.returncode != 0
    assert proc.stderr.strip() == "error: embeddings.npy holds NaN or infinite values; rebuild the index"


def test_deeply_nested_metadata_is_one_line(paper_index_dir: Path, tmp_path: Path) -> None:
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    (d / "metadata.json").write_text("[" * 100_000)
    with pytest.raises(IndexFormatError, match="metadata.json is nested too deeply"):
        load_index(d)


def test_file_changed_after_build_is_detected(paper_index_dir: Path, tmp_path: Path) -> None:
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    _edit_jsonl(d, lambda r: r[0].update(text=r[0]["text"].replace("a", "e")))  # same size, other bytes
    with pytest.raises(IndexFormatError, match="chunks.jsonl does not match the sha256"):
        load_index(d)


def test_manifest_names_every_file_with_size_and_hash(paper_index_dir: Path) -> None:
    import hashlib

    meta = json.loads((paper_index_dir / "metadata.json").read_text())
    assert len(meta["build_id"]) == 32
    on_disk = {p.name for p in paper_index_dir.iterdir()} - {"metadata.json"}
    assert set(meta["files"]) == on_disk
    for name, entry in meta["files"].items():
        data = (paper_index_dir / name).read_bytes()
        assert entry["size"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
        if len(data) <= (1 << 20):  # a small file's sample covers every byte
            h = hashlib.sha256(len(data).to_bytes(8, "little"))
            h.update(data)
            assert entry["sample"] == h.hexdigest()


@pytest.mark.parametrize("name", ["nodes.jsonl", "metadata.json", "embeddings.npy"])
def test_fifo_index_file_is_refused_without_hanging(paper_index_dir: Path, tmp_path: Path, name: str) -> None:
    import os

    d = _copy_index(paper_index_dir, tmp_path / "idx")
    (d / name).unlink()
    os.mkfifo(d / name)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_index(d)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)

    t = threading.Thread(target=load, daemon=True)  # a hang must fail the test, not stall the suite
    t.start()
    t.join(timeout=120)
    assert outcome, "load_index hung on a FIFO"
    assert isinstance(outcome[0], IndexFormatError) and f"{name} is a FIFO" in str(outcome[0])


def test_chunks_linked_to_dev_zero_is_refused_without_reading(paper_index_dir: Path, tmp_path: Path) -> None:
    """In a child process capped at 3 GB of address space and 60 s, so a regression fails instead of OOM."""
    import resource

    d = _copy_index(paper_index_dir, tmp_path / "idx")
    (d / "chunks.jsonl").unlink()
    (d / "chunks.jsonl").symlink_to("/dev/zero")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    code = ("import sys; from indexing.index_store import load_index; from utils.errors import IndexFormatError\n"
            "try:\n    load_index(sys.argv[1])\nexcept IndexFormatError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(d)], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300, preexec_fn=cap)
    assert proc.stdout.strip() == "chunks.jsonl is a symbolic link; index files must be regular files", proc.stderr


def test_file_larger_than_declared_is_not_read(paper_index_dir: Path, tmp_path: Path) -> None:
    d = _copy_index(paper_index_dir, tmp_path / "idx")
    with open(d / "chunks.jsonl", "ab") as fh:
        fh.write(b" " * 10_000_000)
    with pytest.raises(IndexFormatError, match="chunks.jsonl has .* bytes but metadata.json declares"):
        load_index(d)


def test_fifo_index_file_from_the_cli_is_one_line(paper_index_dir: Path, tmp_path: Path) -> None:
    import os

    from tests.conftest import run_cli

    d = _copy_index(paper_index_dir, tmp_path / "idx")
    (d / "nodes.jsonl").unlink()
    os.mkfifo(d / "nodes.jsonl")
    proc = run_cli("query", "--index", str(d), "--query", "epochs", "--no-log", timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: nodes.jsonl is a FIFO; index files must be regular files"


def test_a_tree_deeper_than_any_document_is_refused() -> None:
    from indexing.node_table import NodeTable
    from indexing.records import Records

    n = 100
    table = np.zeros((n, 3), dtype=np.int32)
    table[0] = (-1, -1, 0)
    table[1:, 0] = np.arange(n - 1)  # every node the child of the one before it
    table[1:, 1] = 0
    table[1:, 2] = 2
    empty = Records(b"", np.zeros(n + 1, dtype=np.int64), "nodes.jsonl")
    with pytest.raises(IndexFormatError, match="node_table.npy: tree is nested deeper than 64 levels"):
        NodeTable(table, empty, empty, ["a.md"]).check("node_table.npy")
    table[1:, 0] = 0  # a flat tree of the same size is fine
    NodeTable(table, empty, empty, ["a.md"]).check("node_table.npy")


def test_records_requested_ahead_read_the_same(paper_index_dir: Path) -> None:
    """``prefetch_chunks`` on files asks the disk for the lines (and their leaves' nodes and texts)
    together; what is read afterwards is what a plain read returns."""
    plain = load_index(paper_index_dir)
    ahead = load_index(paper_index_dir)
    rows = list(range(0, len(ahead.chunks), 3))
    ahead.prefetch_chunks(rows)
    ahead.prefetch_chunks([-5, len(ahead.chunks) + 9])  # out of range: nothing to ask for
    assert [ahead.chunks[r] for r in rows] == [plain.chunks[r] for r in rows]
    leaf_rows = ahead.tree.leaf_rows[:5].tolist()
    assert [ahead.tree.content(r) for r in leaf_rows] == [plain.tree.content(r) for r in leaf_rows]
