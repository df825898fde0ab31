"""Updates as delta segments: the same answers as a full build, nothing written into existing files,
a crash at any publishing step harmless, deltas on deltas, compaction equal to a full build."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing import delta_update
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index, verify_index
from indexing.search import EVERYTHING, ScoreParams
from pipeline import TreeRAG
from retrieval.query import Query
from tests.conftest import run_cli
from tests.test_stream_build import digests
from utils.errors import IndexFormatError

QUESTIONS = ["How does report 1 measure alpha1?", "epsilon sensors", "accuracy on the beta9 benchmark",
             "calibration step twice a day", "gamma4 delta7", "What were the results of report 6?",
             "sensors alpha2 alpha9", "Sentence 12 about gamma11", "zeta omega"]


def _doc(i: int, extra: str = "") -> str:
    return (f"# Report {i}\n\n## Method {i}\n\nThe method of report {i} measures alpha{i} with sensors. "
            f"It uses calibration step {i} twice a day.{extra}\n\n## Results {i}\n\n"
            f"Results of report {i}: accuracy rose by {i} points on the beta{i} benchmark. "
            + " ".join(f"Sentence {k} about gamma{i} and delta{(k * i) % 23}." for k in range(30)) + "\n")


def _write(root: Path, docs: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for old in root.rglob("*.md"):
        if str(old.relative_to(root)) not in docs:
            old.unlink()
    for name, text in docs.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_text(encoding="utf-8") != text:
            p.write_text(text, encoding="utf-8")
    return root


def _config(**kw: object) -> Config:
    return Config(embedder="hash", delta_max_share=1.0, **kw)  # type: ignore[arg-type]


def _build(src: Path, out: Path, **kw: object) -> object:
    config = kw.pop("config", None) or _config()
    return build_index(src, out, config, make_embedder("hash", config), **kw)  # type: ignore[arg-type]


def _first(tmp_path: Path) -> dict[str, str]:
    return {f"r{i}.md": _doc(i) for i in range(8)} | {"sub/a.md": _doc(20), "sub.md": _doc(21)}


def _answers(index: Path, **settings: object) -> list[object]:
    """What a person sees of each question (ids masked: a delta's ids continue after the last)."""
    out = []
    for locator in ("hybrid", "keyword"):
        rag = TreeRAG.open(index, llm="mock", embedder="hash", locator=locator, **settings)
        for q in QUESTIONS:
            for docs in (None, ["r1.md", "r4.md"]):
                rec = rag.run(q, docs)
                hits = [(h.doc_path, h.heading_path, h.start_char, h.end_char,
                         {k: round(float(v), 5) for k, v in (h.scores or {}).items()}) for h in rec.retrieve.hits]
                located = [(n.heading_path, None if n.score is None else round(float(n.score), 5))
                           for n in rec.locate.nodes]
                out.append((locator, q, docs, hits, located, re.sub(r"\b\d{4,}\b", "#", rec.answer.text)))
    return out


def _collection_scores(index: Path) -> dict[tuple[str, int], tuple[float, float]]:
    """Every chunk's whole-collection dense and BM25 score, keyed by document and position."""
    ix = load_index(index)
    emb = make_embedder("hash", Config(embedder="hash"))
    q = Query.build("alpha1 sensors gamma4 beta9 epsilon accuracy", emb)
    s = ix.search.score(q, EVERYTHING, "corpus", ScoreParams(ann="off"))
    return {(ix.chunks[int(r)].doc_path, ix.chunks[int(r)].start_char): (float(d), float(b))
            for r, d, b in zip(s.rows, s.dense, s.lexical)}


def _files(index: Path) -> dict[str, tuple[int, int, str]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(index.iterdir())}


def _change(src: Path, docs: dict[str, str]) -> dict[str, str]:
    """One changed, one new, one removed document."""
    docs = dict(docs)
    docs["r1.md"] = _doc(1, " A new sentence about epsilon and zeta.")
    docs["r55.md"] = _doc(55, " Omega zeta here.")
    del docs["r3.md"]
    _write(src, docs)
    return docs


def test_an_update_writes_a_delta_and_answers_as_a_full_build(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    _build(src, idx)
    before = _files(idx)
    _change(src, _first(tmp_path))
    report = _build(src, idx)
    u = report.update
    assert (u.changed, u.new, u.removed, u.delta) == (1, 1, 1, 1)
    assert "as delta segment 1" in report.summary_line()
    after = _files(idx)
    assert {n: after[n] for n in before if n != "metadata.json"} == \
        {n: v for n, v in before.items() if n != "metadata.json"}  # no existing file written, not even touched
    assert all(n.startswith(("delta1.", "sources.")) for n in set(after) - set(before))
    _build(src, full, update=False)
    a, b = load_index(idx), load_index(full)
    assert a.tree.doc_paths == b.tree.doc_paths
    assert [d["path"] for d in a.metadata["documents"]] == [d["path"] for d in b.metadata["documents"]]
    assert a.metadata["counts"] | {"vocabulary": 0} == b.metadata["counts"] | {"vocabulary": 0}
    assert [(c.doc_path, c.heading_path, c.text) for c in a.chunks] == [(c.doc_path, c.heading_path, c.text)
                                                                        for c in b.chunks]
    np.testing.assert_array_equal(np.asarray(a.embeddings), np.asarray(b.embeddings))
    np.testing.assert_array_equal(a.tree.toc_tokens, b.tree.toc_tokens)
    assert _collection_scores(idx) == _collection_scores(full)  # BM25 with the live collection's statistics
    assert _answers(idx) == _answers(full)
    verify_index(idx)


def test_a_second_update_on_top_of_a_delta(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    _build(src, idx)
    docs = _change(src, _first(tmp_path))
    _build(src, idx)
    docs["r55.md"] = _doc(55, " Omega again, changed twice.")  # a delta's document changed again
    docs["r6.md"] = _doc(6, " Zeta in a base document.")
    del docs["sub/a.md"]
    _write(src, docs)
    report = _build(src, idx)
    assert report.update.delta == 2 and (report.update.changed, report.update.removed) == (2, 1)
    meta = json.loads((idx / "metadata.json").read_text())
    assert len(meta["segments"]["segments"]) == 3 and len(meta["segments"]["deleted"]) == 5
    _build(src, full, update=False)
    assert _collection_scores(idx) == _collection_scores(full)
    assert _answers(idx) == _answers(full)
    assert "intact" in verify_index(idx).line(idx)
    # nothing changed: nothing read, nothing written
    before = _files(idx)
    report = _build(src, idx)
    assert report.update.delta is None and report.update.changed == 0 and _files(idx) == before


def test_an_update_that_only_removes_documents(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    _build(src, idx)
    docs = _first(tmp_path)
    del docs["r2.md"], docs["sub/a.md"]
    _write(src, docs)
    report = _build(src, idx)
    assert (report.update.removed, report.update.delta) == (2, None)
    assert not any(n.startswith("delta") for n in os.listdir(idx))
    _build(src, full, update=False)
    assert _collection_scores(idx) == _collection_scores(full)
    assert _answers(idx) == _answers(full)
    assert "intact" in verify_index(idx).line(idx)


def test_only_changed_and_new_documents_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tree_builder.loader as readers  # every folder read goes through the loader's read_document

    src = _write(tmp_path / "docs", _first(tmp_path))
    idx = tmp_path / "idx"
    _build(src, idx)
    _change(src, _first(tmp_path))
    read, digested = [], []
    real_read, real_digest = readers.read_document, delta_update._text_digest
    monkeypatch.setattr(readers, "read_document", lambda path, rel, *a, **k: read.append(rel) or real_read(path, rel, *a, **k))
    monkeypatch.setattr(delta_update, "_text_digest", lambda f, n: digested.append(f.rel) or real_digest(f, n))
    _build(src, idx)
    assert sorted(read) == ["r1.md", "r55.md"]
    assert "r1.md" in digested and len(digested) == 9  # the base records no file stamps: digested once
    read.clear()
    digested.clear()
    (src / "r2.md").write_text(_doc(2, " Changed."), encoding="utf-8")
    _build(src, idx)
    assert read == ["r2.md"] and digested == ["r2.md"]  # the others: size and time as recorded


@pytest.mark.parametrize("step", ["staged", "moved delta1.chunks.jsonl", "moved sources.",
                                  "manifest written", "manifest renamed"])
def test_a_crash_at_any_publishing_step_leaves_a_readable_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                step: str) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    _build(src, idx)
    old_answers = _answers(idx)

    def crash(at: str) -> None:
        if at.startswith(step):
            raise KeyboardInterrupt  # what kill -9 there leaves behind, without the process dying

    monkeypatch.setattr(delta_update, "checkpoint", crash)
    _change(src, _first(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        _build(src, idx)
    monkeypatch.setattr(delta_update, "checkpoint", lambda at: None)
    assert "intact" in verify_index(idx).line(idx)
    published = step == "manifest renamed"
    assert (_answers(idx) == old_answers) != published
    assert [n for n in os.listdir(tmp_path) if ".building-" in n] == []
    report = _build(src, idx)  # the next update removes what the crash left and publishes
    listed = set(json.loads((idx / "metadata.json").read_text())["files"]) | {"metadata.json"}
    assert set(os.listdir(idx)) == listed
    assert report.update.delta == (None if published else 1)
    _build(src, full, update=False)
    assert _answers(idx) == _answers(full)


def test_an_update_keeps_the_manifests_permissions(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx = tmp_path / "idx"
    _build(src, idx)
    os.chmod(idx / "metadata.json", 0o640)  # e.g. an index shared with one group only
    _change(src, _first(tmp_path))
    report = _build(src, idx)
    assert report.update.delta == 1
    assert os.stat(idx / "metadata.json").st_mode & 0o777 == 0o640
    assert not [n for n in os.listdir(idx) if n.startswith(".metadata.json")]


def test_compaction_equals_a_full_build(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    _build(src, idx)
    _change(src, _first(tmp_path))
    _build(src, idx)
    report = _build(src, idx, compact=True)
    assert report.update is not None and report.update.delta is None and report.update.embedded_chunks == 0
    _build(src, full, update=False)
    assert digests(idx) == digests(full)  # byte for byte: the merged index is a full build's
    assert not any(n.startswith("delta") for n in os.listdir(idx))


def test_past_the_delta_share_an_update_compacts(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    _build(src, idx)
    _change(src, _first(tmp_path))
    report = _build(src, idx, config=_config().replace(delta_max_share=0.1))  # 3 of 10 documents rewritten
    assert report.update is not None and report.update.delta is None
    _build(src, full, update=False)
    assert digests(idx) == digests(full)


def test_an_update_needs_no_write_into_a_hard_linked_copy(tmp_path: Path) -> None:
    """The benchmark's way to update a read-only index: a farm of hard links, then the update."""
    src = _write(tmp_path / "docs", _first(tmp_path))
    original, farm = tmp_path / "orig", tmp_path / "farm"
    _build(src, original)
    before = _files(original)
    farm.mkdir()
    for p in original.iterdir():
        os.link(p, farm / p.name)
    _change(src, _first(tmp_path))
    assert _build(src, farm).update.delta == 1
    assert _files(original) == before
    assert "intact" in verify_index(original).line(original)


def test_a_delta_over_an_index_with_an_ann(tmp_path: Path) -> None:
    """The base's ANN proposes its rows (deleted ones dropped); the delta's rows are scanned exactly."""
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx = tmp_path / "idx"
    config = _config(ann="on")
    _build(src, idx, config=config)
    assert (idx / "ann_chunks.faiss").exists()
    _change(src, _first(tmp_path))
    assert _build(src, idx, config=config).update.delta == 1
    ix = load_index(idx)
    emb = make_embedder("hash", Config(embedder="hash"))
    q = Query.build("Omega zeta here.", emb)
    s = ix.search.score(q, EVERYTHING, "corpus", ScoreParams(ann="auto", ann_candidates=20))
    assert not s.complete
    exact = ix.search.score(q, EVERYTHING, "corpus", ScoreParams(ann="off"))
    in_delta = [i for i, r in enumerate(exact.rows) if ix.chunks[int(r)].doc_path in ("r1.md", "r55.md")]
    best_new = int(exact.rows[in_delta[int(np.argmax(exact.dense[in_delta]))]])
    assert best_new in set(s.rows.tolist())  # a delta row: scanned exactly
    assert np.array_equal(s.dense, exact.dense[np.searchsorted(exact.rows, s.rows)])  # re-scored exactly
    assert all(ix.chunks[int(r)].doc_path != "r3.md" for r in s.rows)
    assert "ANN files hold the codes" in verify_index(idx).line(idx)


def test_the_cli_updates_with_a_delta_and_verify_reads_it(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(12)})
    idx = tmp_path / "idx"
    assert run_cli("index", "--input", str(src), "--output", str(idx), "--mock").returncode == 0
    (src / "r5.md").write_text(_doc(5, " Zeta."), encoding="utf-8")
    r = run_cli("index", "--input", str(src), "--output", str(idx), "--mock")
    assert r.returncode == 0 and "1 changed, 0 new, 0 removed" in r.stdout and "as delta segment 1" in r.stdout
    r = run_cli("verify", "--index", str(idx))
    assert r.returncode == 0 and "intact" in r.stdout
    r = run_cli("info", "--index", str(idx))
    assert "1 delta segment(s), 1 replaced or removed document(s) deleted" in r.stdout
    r = run_cli("index", "--input", str(src), "--output", str(idx), "--mock", "--compact")
    assert r.returncode == 0 and "delta segment" not in r.stdout
    assert not any(n.startswith("delta") for n in os.listdir(idx))


def test_a_damaged_segment_table_is_one_line(tmp_path: Path) -> None:
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx = tmp_path / "idx"
    _build(src, idx)
    _change(src, _first(tmp_path))
    _build(src, idx)
    meta = json.loads((idx / "metadata.json").read_text())
    meta["segments"]["order"] = meta["segments"]["order"][1:]
    (idx / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="order must list every live document once"):
        load_index(idx)
    r = run_cli("verify", "--index", str(idx))
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
