"""Indexing over an existing index: only what changed is embedded, and the result equals a full rebuild."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index
from pipeline import TreeRAG
from tests.conftest import run_cli


def _doc(i: int, extra: str = "") -> str:
    return (f"# Report {i}\n\n## Method {i}\n\nThe method of report {i} measures alpha{i} with sensors. "
            f"It uses calibration step {i} twice a day.{extra}\n\n## Results {i}\n\n"
            f"Results of report {i}: accuracy rose by {i} points on the beta{i} benchmark. "
            + " ".join(f"Sentence {k} about gamma{i} and delta{k}." for k in range(40)) + "\n")


def _folder(root: Path, docs: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*.md"):
        old.unlink()
    for name, text in docs.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


class CountingEmbedder:
    """The hash embedder, counting the texts it is asked to embed."""

    def __init__(self, config: Config, fail: bool = False) -> None:
        self.inner = make_embedder("hash", config)
        self.name, self.model_id, self.dim = self.inner.name, self.inner.model_id, self.inner.dim
        self.variant = getattr(self.inner, "variant", self.inner.name)
        self.texts: list[str] = []
        self.fail = fail

    def embed_documents(self, texts, progress=None):
        if self.fail:
            raise KeyboardInterrupt  # what Ctrl-C in the middle of embedding looks like
        self.texts.extend(texts)
        return self.inner.embed_documents(texts, progress=progress)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def _same_index(a: Path, b: Path) -> None:
    ia, ib = load_index(a), load_index(b)
    assert [c.__dict__ for c in ia.chunks] == [c.__dict__ for c in ib.chunks]
    for name in ("nodes.jsonl", "node_table.npy", "node_contents.jsonl", "leaf_chunks.npy", "leafterms_rows.npy"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    np.testing.assert_allclose(ia.embeddings, ib.embeddings, atol=1e-6)
    np.testing.assert_allclose(ia.leaf_embeddings, ib.leaf_embeddings, atol=1e-6)
    for name in ("bm25_vocab.json", "bm25_rows.npy", "bm25_tf.npy", "bm25_doc_len.npy"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = ia.metadata, ib.metadata
    assert ma["documents"] == mb["documents"] and ma["counts"] == mb["counts"]


def test_update_embeds_only_changes_and_equals_a_full_rebuild(tmp_path: Path) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(5)})
    idx = tmp_path / "idx"
    first = CountingEmbedder(config)
    report = build_index(src, idx, config, first)
    assert report.update is None
    n_first = len(first.texts)

    # one changed, one new, one removed
    docs = {f"r{i}.md": _doc(i) for i in range(5) if i != 3}
    docs["r1.md"] = _doc(1, " A new sentence about epsilon.")
    docs["r9.md"] = _doc(9)
    _folder(src, docs)
    upd = CountingEmbedder(config)
    report = build_index(src, idx, config, upd)
    u = report.update
    assert u is not None and (u.unchanged, u.changed, u.new, u.removed) == (3, 1, 1, 1)
    assert "updated 5 document(s): 1 changed, 1 new, 1 removed" in report.summary_line()
    # only the changed document's changed chunk(s) and the new document were embedded
    assert all("report 9" in t or "Report 9" in t or "epsilon" in t or "Report 1" in t for t in upd.texts)
    assert 0 < u.embedded_chunks < n_first / 2

    full = tmp_path / "full"
    build_index(src, full, config, CountingEmbedder(config), update=False)
    _same_index(idx, full)
    q = "Which benchmark did report 9 improve on?"
    a = TreeRAG.open(idx, llm="mock", embedder="hash").run(q)
    b = TreeRAG.open(full, llm="mock", embedder="hash").run(q)
    assert a.answer.text == b.answer.text and a.answer.text
    assert [c.chunk_id for c in a.retrieve.hits] == [c.chunk_id for c in b.retrieve.hits]


def test_nothing_changed_embeds_nothing(tmp_path: Path) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(3)})
    build_index(src, tmp_path / "idx", config, CountingEmbedder(config))
    again = CountingEmbedder(config)
    report = build_index(src, tmp_path / "idx", config, again)
    assert again.texts == [] and report.update is not None and report.update.embedded_chunks == 0


def test_a_renamed_file_reuses_its_vectors(tmp_path: Path) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {"a.md": _doc(1), "b.md": _doc(2)})
    build_index(src, tmp_path / "idx", config, CountingEmbedder(config))
    _folder(src, {"a.md": _doc(1), "c.md": _doc(2)})
    emb = CountingEmbedder(config)
    report = build_index(src, tmp_path / "idx", config, emb)
    assert (report.update.new, report.update.removed) == (1, 1)
    assert emb.texts == []  # same title, same text: the representation and so the vector are the same


@pytest.mark.parametrize("change,reason", [({"chunk_size": 120}, "chunk_size changed (200 -> 120)"),
                                           ({"chunk_context": "none"}, "chunk_context changed"),
                                           ({"hash_dim": 128}, "embedder changed")])
def test_settings_that_change_vectors_force_a_full_rebuild(tmp_path: Path, change: dict, reason: str) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(3)})
    build_index(src, tmp_path / "idx", config, CountingEmbedder(config))
    changed = config.replace(**change)
    emb = CountingEmbedder(changed)
    report = build_index(src, tmp_path / "idx", changed, emb)
    assert report.update is None
    assert report.rebuild_reason is not None and reason in report.rebuild_reason
    assert len(emb.texts) == report.chunks + report.leaves
    build_index(src, tmp_path / "full", changed, CountingEmbedder(changed), update=False)
    _same_index(tmp_path / "idx", tmp_path / "full")


def test_query_settings_do_not_force_a_rebuild(tmp_path: Path) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(2)})
    build_index(src, tmp_path / "idx", config, CountingEmbedder(config))
    report = build_index(src, tmp_path / "idx", config.replace(**{"final_top_k": 9, "dense_weight": 0.7}),
                         CountingEmbedder(config))
    assert report.update is not None and report.rebuild_reason is None


def test_interrupted_update_leaves_the_old_index(tmp_path: Path) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(3)})
    idx = tmp_path / "idx"
    build_index(src, idx, config, CountingEmbedder(config))
    before = {p.name: p.read_bytes() for p in idx.iterdir()}
    _folder(src, {"r0.md": _doc(0, " Changed."), "r1.md": _doc(1)})
    with pytest.raises(KeyboardInterrupt):
        build_index(src, idx, config, CountingEmbedder(config, fail=True))
    assert {p.name: p.read_bytes() for p in idx.iterdir()} == before
    assert len(load_index(idx).metadata["documents"]) == 3
    assert [p.name for p in tmp_path.iterdir() if ".building-" in p.name] == []


class ScriptedSummarizer:
    summarizer_id = "scripted-v1"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def summarize_leaf(self, node):
        self.calls.append(node.heading_path)
        return f"leaf {node.heading}"

    def summarize_parent(self, node, child_summaries):
        self.calls.append(node.heading_path)
        return f"parent {node.heading}: " + "; ".join(child_summaries)[:100]


def test_unchanged_documents_keep_their_summaries(tmp_path: Path) -> None:
    config = Config(embedder="hash", summary_mode="llm")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(3)})
    idx = tmp_path / "idx"
    build_index(src, idx, config, CountingEmbedder(config), summarizer=ScriptedSummarizer())
    _folder(src, {"r0.md": _doc(0), "r1.md": _doc(1), "r2.md": _doc(2, " Changed.")})
    again = ScriptedSummarizer()
    build_index(src, idx, config, CountingEmbedder(config), summarizer=again)
    assert again.calls and all(c.startswith("Report 2") for c in again.calls), again.calls
    full = tmp_path / "full"
    build_index(src, full, config, CountingEmbedder(config), summarizer=ScriptedSummarizer(), update=False)
    _same_index(idx, full)


def test_cli_update_and_settings_note(tmp_path: Path) -> None:
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(2)})
    out = str(tmp_path / "idx")
    assert run_cli("index", "--input", str(src), "--output", out, "--mock").returncode == 0
    (src / "r1.md").write_text(_doc(1, " Changed."), encoding="utf-8")
    proc = run_cli("index", "--input", str(src), "--output", out, "--mock")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("updated 2 document(s): 1 changed, 0 new, 0 removed (re-embedded ")
    cfg = tmp_path / "c.toml"
    cfg.write_text("chunk_size = 150\n")
    proc = run_cli("--config", str(cfg), "index", "--input", str(src), "--output", out, "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "note: rebuilding every document: chunk_size changed (200 -> 150)"
    assert proc.stdout.startswith("indexed 2 document(s)")
    proc = run_cli("--config", str(cfg), "index", "--input", str(src), "--output", out, "--mock", "--rebuild", "--quiet")
    assert proc.returncode == 0 and proc.stdout.startswith("indexed 2 document(s)") and proc.stderr == ""


def test_a_damaged_index_is_rebuilt_not_reused(tmp_path: Path) -> None:
    from indexing.index_files import write_manifest_entry

    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(3)})
    idx = tmp_path / "idx"
    build_index(src, idx, config, CountingEmbedder(config))
    e = np.load(idx / "embeddings.npy")
    e[2, 3] = np.nan  # consistent with its manifest, so the load accepts it: only the vectors are bad
    np.save(idx / "embeddings.npy", e)
    meta = json.loads((idx / "metadata.json").read_text())
    meta["files"]["embeddings.npy"] = write_manifest_entry(idx, "embeddings.npy")
    (idx / "metadata.json").write_text(json.dumps(meta))
    emb = CountingEmbedder(config)
    # an update that changes nothing writes nothing (a delta segment never reads the base's vectors);
    # a compaction lends them, finds the damage and rebuilds
    report = build_index(src, idx, config, emb, compact=True)
    assert report.update is None and "damaged" in report.rebuild_reason
    assert len(emb.texts) == report.chunks + report.leaves
    build_index(src, tmp_path / "full", config, CountingEmbedder(config), update=False)
    _same_index(idx, tmp_path / "full")
