"""The ANN index for whole-collection search (indexing/ann_index.py): recall, round trip, refusal of
damaged files, updates equal to a fresh encoding, ``verify``, and that only whole-collection scopes use it."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing import ann_build, ann_index
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_files import write_manifest_entry
from indexing.index_store import load_index, verify_index
from retrieval.candidates import rank_scored
from retrieval.scoring import flat_scores
from indexing.search import Scope
from pipeline import make_backends, run_pipeline
from retrieval.query import Query
from retrieval.scoring import score_params
from tests.conftest import run_cli
from utils.errors import IndexFormatError

ON = Config().replace(embedder="hash", ann="on", ann_candidates=60, ann_probe=0.5)


def _vocab(rng: random.Random, n: int) -> list[str]:
    syll = ["ba", "ko", "ri", "tu", "me", "sa", "lo", "vi", "da", "ne", "pu", "gha", "zo", "fe"]
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(syll) for _ in range(rng.randint(2, 4))))
    return sorted(out)


def _corpus(root: Path, n_docs: int, seed: int = 7, changed: int | None = None) -> Path:
    """Documents of sections and paragraphs over a shared vocabulary plus per-document topic words."""
    rng = random.Random(seed)
    vocab = _vocab(rng, 900)
    root.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        topic = rng.sample(vocab, 12)
        parts = [f"# Document {d}\n"]
        for s in range(6):
            parts.append(f"## Part {d}.{s} {rng.choice(topic)}\n")
            for _ in range(3):
                words = [rng.choice(topic) if rng.random() < 0.3 else rng.choice(vocab) for _ in range(45)]
                parts.append(" ".join(words) + ".\n")
        if d == changed:
            parts.append("## Added part\n" + " ".join(vocab[k * 7 % len(vocab)] for k in range(60)) + ".\n")
        (root / f"doc-{d:03d}.md").write_text("\n".join(parts), encoding="utf-8")
    return root


def _queries(index, n: int = 25, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = index.chunks[rng.randrange(len(index.chunks))].text.split()
        out.append(" ".join(rng.sample(words, min(5, len(words)))))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ann")
    docs = _corpus(root / "docs", 40)
    build_index(docs, root / "index", ON, make_embedder("hash", ON))
    return docs, root / "index"


def test_build_writes_ann_files_listed_in_the_manifest(built: tuple[Path, Path]) -> None:
    _, index_dir = built
    meta = json.loads((index_dir / "metadata.json").read_text())
    assert set(meta["ann"]) == {"chunks", "leaves"}
    for kind, entry in meta["ann"].items():
        assert entry["file"] in meta["files"]
        assert entry["rows"] == meta["counts"][kind]
    index = load_index(index_dir)
    assert set(index.search.ann) == {"chunks", "leaves"}
    assert index.search.ann["chunks"].rows == len(index.chunks)


def test_recall_of_the_exact_top_k_among_candidates(built: tuple[Path, Path]) -> None:
    index = load_index(built[1])
    embedder = make_embedder("hash", ON)
    ann = index.search.ann["chunks"]
    recalls = []
    for q in _queries(index):
        qvec = embedder.embed_query(q)
        exact = np.argsort(-(np.asarray(index.embeddings) @ qvec), kind="stable")[:20]
        cand = ann.search(qvec, ON.tuning.store.ann_candidates, ON.tuning.store.ann_probe)
        recalls.append(len(set(exact.tolist()) & set(cand.tolist())) / 20)
    assert np.mean(recalls) >= 0.9, recalls


def test_only_whole_collection_scopes_use_candidates(built: tuple[Path, Path]) -> None:
    index = load_index(built[1])
    embedder = make_embedder("hash", ON)
    q = Query.build(_queries(index, 1)[0], embedder)
    qvec = q.dense_vector
    n = len(index.chunks)
    whole = index.search.score(q, Scope.everything(), "corpus", score_params(ON))
    assert 0 < len(whole.rows) < n and not whole.complete
    np.testing.assert_allclose(whole.dense, np.asarray(index.embeddings)[whole.rows] @ qvec, rtol=1e-5, atol=1e-6)
    exact = index.search.score(q, Scope.everything(), "corpus", score_params(ON.replace(ann="off")))
    assert len(exact.rows) == n and exact.complete
    np.testing.assert_allclose(whole.lexical, exact.lexical[whole.rows], rtol=1e-6)
    path, (start, end) = next(iter(index.doc_rows.items()))
    doc = index.search.score(q, Scope.of_documents({path}), "document", score_params(ON))
    assert doc.rows.tolist() == list(range(start, end)) and doc.complete
    leaves = index.search.leaf_dense(q, None, score_params(ON))
    full = np.asarray(index.leaf_embeddings) @ qvec
    picked = np.flatnonzero(leaves)
    assert 0 < len(picked) < len(full)
    np.testing.assert_allclose(leaves[picked], full[picked], rtol=1e-5, atol=1e-6)
    assert np.argmax(full) in picked
    # the leaves of this question's chunk candidates are scored too; another question never sees them
    cand_leaves = np.unique(np.searchsorted(index.leaf_ptr, whole.rows, side="right") - 1)
    np.testing.assert_allclose(leaves[cand_leaves], full[cand_leaves], rtol=1e-5, atol=1e-6)
    fresh = index.search.leaf_dense(Query.build(q.text, embedder), None, score_params(ON))
    assert set(np.flatnonzero(fresh).tolist()) < set(picked.tolist()), "only the ANN's own leaves"


def test_ranking_with_ann_matches_exact_scoring(built: tuple[Path, Path]) -> None:
    index = load_index(built[1])
    embedder = make_embedder("hash", ON)
    overlaps = []
    for q in _queries(index):
        question = Query.build(q, embedder)
        tops = []
        for cfg in (ON, ON.replace(ann="off")):  # one question, two settings: two entries of its memo
            tops.append([h.row for h in rank_scored(index, flat_scores(index, question, cfg), 5, cfg.tuning.ranking.fused, q, "flat")])
        overlaps.append(len(set(tops[0]) & set(tops[1])) / 5)
    assert np.mean(overlaps) >= 0.9, overlaps


def test_forced_on_builds_in_memory_for_an_index_without_ann(tmp_path: Path, built: tuple[Path, Path]) -> None:
    off = Config(embedder="hash", ann="off")
    build_index(built[0], tmp_path / "plain", off, make_embedder("hash", off))
    index = load_index(tmp_path / "plain")
    assert not (tmp_path / "plain" / "ann_chunks.faiss").exists() and index.search.ann == {}
    q = Query(_queries(index, 1)[0], (), make_embedder("hash", off).embed_query(_queries(index, 1)[0]))
    n = len(index.chunks)
    assert len(index.search.score(q, Scope.everything(), "corpus", score_params(Config(ann="auto"))).rows) == n
    got = index.search.score(q, Scope.everything(), "corpus", score_params(ON))
    assert len(got.rows) < n and "chunks" in index.search.ann


def test_auto_builds_only_from_the_row_threshold(tmp_path: Path, built: tuple[Path, Path]) -> None:
    n_chunks = load_index(built[1]).metadata["counts"]["chunks"]
    cfg = Config().replace(embedder="hash", ann="auto", ann_min_rows=n_chunks)
    build_index(built[0], tmp_path / "a", cfg, make_embedder("hash", cfg))
    assert set(json.loads((tmp_path / "a" / "metadata.json").read_text())["ann"]) == {"chunks"}
    assert not ann_build.wanted("auto", n_chunks + 1, n_chunks)
    assert ann_build.wanted("on", 10 ** 9, 1) and not ann_build.wanted("off", 0, 10 ** 6)


def test_round_trip_equals_the_index_built_in_memory(built: tuple[Path, Path]) -> None:
    index = load_index(built[1])
    loaded = index.search.ann["chunks"]
    fresh = ann_index.AnnIndex.build(index.embeddings, len(index.chunks), index.embeddings.shape[1], "mem")
    for a, b in zip(ann_build.entries(loaded.index), ann_build.entries(fresh.index)):
        np.testing.assert_array_equal(a, b)
    qvec = make_embedder("hash", ON).embed_query("alpha beta")
    np.testing.assert_array_equal(loaded.search(qvec, 50, 0.5), fresh.search(qvec, 50, 0.5))


def _rewrite_manifest(index_dir: Path, name: str) -> None:
    meta_path = index_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["files"][name] = write_manifest_entry(index_dir, name)
    meta_path.write_text(json.dumps(meta))


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_a_changed_ann_file_is_refused_in_one_line(tmp_path: Path, built: tuple[Path, Path]) -> None:
    index_dir = _copy(built[1], tmp_path / "idx")
    path = index_dir / "ann_chunks.faiss"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="ann_chunks.faiss"):
        load_index(index_dir)
    r = run_cli("query", "--index", str(index_dir), "--mock", "--no-log", "-q", "anything")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "ann_chunks.faiss" in r.stderr


def test_a_garbage_ann_file_with_a_matching_manifest_is_refused(tmp_path: Path, built: tuple[Path, Path]) -> None:
    index_dir = _copy(built[1], tmp_path / "idx")
    (index_dir / "ann_leaves.faiss").write_bytes(b"IwPQ" + bytes(range(256)) * 8)
    _rewrite_manifest(index_dir, "ann_leaves.faiss")
    with pytest.raises(IndexFormatError, match="ann_leaves.faiss is not a readable ANN index"):
        load_index(index_dir)


def test_an_ann_file_of_other_rows_is_refused(tmp_path: Path, built: tuple[Path, Path]) -> None:
    index_dir = _copy(built[1], tmp_path / "idx")
    meta_path = index_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["ann"]["chunks"]["nlist"] += 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="metadata.json says"):
        load_index(index_dir)


def test_verify_catches_codes_that_do_not_match_the_vectors(tmp_path: Path, built: tuple[Path, Path]) -> None:
    index_dir = _copy(built[1], tmp_path / "idx")
    assert "ANN" in verify_index(index_dir).line(index_dir)
    index = load_index(index_dir)
    ann = index.search.ann["chunks"]
    lists, codes = ann_build.by_row(ann.index, ann.rows, ann.name)
    far = int(np.argmin(np.asarray(index.embeddings) @ np.asarray(index.embeddings)[0]))
    lists[[0, far]], codes[[0, far]] = lists[[far, 0]], codes[[far, 0]]  # two rows' entries swapped
    bad = ann_build.assemble(ann_build.empty_copy(ann.index), lists, codes)
    del index, ann
    import faiss

    faiss.write_index(bad, str(index_dir / "ann_chunks.faiss"))
    _rewrite_manifest(index_dir, "ann_chunks.faiss")
    load_index(index_dir)  # the shape is right: only verify re-encodes the vectors
    with pytest.raises(IndexFormatError, match="does not match the vectors"):
        verify_index(index_dir)


@pytest.mark.parametrize("quantizer", ["flat", "hnsw"])
def test_update_encodes_only_new_rows_and_equals_a_fresh_encoding(tmp_path: Path, quantizer: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if quantizer == "hnsw":
        monkeypatch.setattr(ann_build, "HNSW_MIN_LISTS", 1)
    docs = _corpus(tmp_path / "docs", 30)
    emb = make_embedder("hash", ON)
    build_index(docs, tmp_path / "index", ON, emb)
    _corpus(tmp_path / "docs", 30, changed=4)
    report = build_index(docs, tmp_path / "index", ON, emb, compact=True)  # the full rewrite (not a delta)
    assert report.update is not None and report.update.changed == 1
    meta = json.loads((tmp_path / "index" / "metadata.json").read_text())
    assert 0 < meta["ann"]["chunks"]["reused_rows"] < meta["counts"]["chunks"]
    assert meta["ann"]["chunks"]["quantizer"] == quantizer
    index = load_index(tmp_path / "index")
    verify_index(tmp_path / "index")
    ann = index.search.ann["chunks"]
    lists, codes = ann_build.by_row(ann.index, ann.rows, ann.name)
    want_lists, want_codes = ann_build.encode(ann.index, np.asarray(index.embeddings))
    assert (lists != want_lists).sum() + (codes != want_codes).any(axis=1).sum() == 0
    # results equal a full rebuild (its own quantizer) on the whole-collection flat ranking
    build_index(docs, tmp_path / "rebuilt", ON, emb, update=False)
    rebuilt = load_index(tmp_path / "rebuilt")
    assert json.loads((tmp_path / "rebuilt" / "metadata.json").read_text())["ann"]["chunks"]["reused_rows"] == 0
    same = []
    for q in _queries(index):
        tops = [[h.row for h in rank_scored(ix, flat_scores(ix, Query.build(q, emb), ON), 5, ON.tuning.ranking.fused, q, "flat")]
                for ix in (index, rebuilt)]
        same.append(tops[0] == tops[1])
    assert np.mean(same) >= 0.9, same


def test_plan_keeps_k_means_fed() -> None:
    small = ann_build.plan(300, 384)
    assert small.nlist == 300 // ann_build.MIN_PER_CENTROID and small.nbits < 8 and 384 % small.m == 0
    big = ann_build.plan(1_000_000, 384)
    assert (big.nlist, big.m, big.nbits, big.quantizer) == (4000, 48, 8, "flat")
    assert ann_build.plan(979_420, 384).nlist == 3959  # 10,000 generated documents
    # past a million rows the lists stay ~250 rows long; the graph quantizer only where it is asked for
    assert ann_build.plan(10_500_000, 384) == ann_build.AnnShape(42_000, 48, 8, "flat")
    assert ann_build.plan(4_100_000, 384).nlist == 16_400


def test_many_lists_train_two_level_centroids_filed_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann_build, "TWO_LEVEL_MIN_LISTS", 1)
    x = _clusters(6000, 32, 40)
    ann = ann_index.AnnIndex.build(x, len(x), 32, "mem", ann_build.AnnShape(60, 8, 6))
    assert ann.quantizer == "flat"
    centroids = ann.index.quantizer.reconstruct_n(0, 60)
    lists, _ = ann_build.by_row(ann.index, len(x), "mem")
    scores = x @ centroids.T  # exact filing: every row under its nearest centroid (float slack for ties)
    assert (scores.max(axis=1) - scores[np.arange(len(x)), lists] <= 1e-5).all()
    ann_index.verify(ann, x)
    qvec = _clusters(1, 32, 40, seed=9)[0]
    exact = set(np.argsort(-(x @ qvec))[:20].tolist())
    assert len(exact & set(ann.search(qvec, 200, 0.3).tolist())) >= 16
    assert ann_build.plan(10, 7).m == 1


def _read_advice(path: Path) -> dict[str, bool]:
    """File name -> whether this process maps it with the scattered-read advice (smaps flag ``rr``)."""
    out: dict[str, bool] = {}
    current = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if len(head) >= 6 and "-" in head[0] and head[5].startswith(str(path)):
            current = Path(head[5]).name
        elif line.startswith("VmFlags:") and current is not None:
            out[current] = out.get(current, False) or " rr" in line
            current = None
    return out


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux smaps")
def test_scattered_reads_are_advised_only_where_a_question_reads_scattered(built: tuple[Path, Path],
                                                                            paper_index_dir: Path) -> None:
    """Records always, vectors only when an ANN picks the rows (an exact scan wants read-ahead)."""
    index = load_index(built[1])
    advice = _read_advice(built[1].resolve())
    assert advice["chunks.jsonl"] and advice["nodes.jsonl"] and advice["chunk_offsets.npy"]
    assert advice["embeddings.npy"] and advice["leaf_embeddings.npy"]
    # the postings and row pointers (a question requests its terms' postings itself) and faiss's lists
    assert all(advice[f"{p}_{n}.npy"] for p in ("bm25", "leafterms") for n in ("rows", "tf", "row_terms", "row_indptr"))
    assert advice["ann_chunks.faiss"] and advice["ann_leaves.faiss"]
    assert not advice["bm25_doc_len.npy"]  # summed whole: read-ahead is right
    exact = load_index(paper_index_dir)
    advice = _read_advice(paper_index_dir.resolve())
    assert advice["chunks.jsonl"] and not advice["embeddings.npy"] and not advice["leaf_embeddings.npy"]
    del index, exact


def test_row_reader_takes_a_sparse_sample_row_by_row(tmp_path: Path) -> None:
    """Training's sample comes from the vector file without reading every block: same rows either way."""
    x = np.random.default_rng(3).standard_normal((5000, 16)).astype(np.float32)
    np.save(tmp_path / "v.npy", x)
    reader = ann_build.RowReader(tmp_path / "v.npy", 5000, 16)
    rows = np.array([0, 7, 4095, 4999], dtype=np.int64)
    np.testing.assert_array_equal(ann_build._take(reader, rows), x[rows])
    np.testing.assert_array_equal(reader.take(rows[::-1]), x[rows[::-1]])
    dense = np.arange(0, 5000, 2)
    np.testing.assert_array_equal(ann_build._take(reader, dense), x[dense])  # the block path
    with pytest.raises(IndexError):
        reader.take(np.array([5000]))


# --------------------------------------------------------------------------- the HNSW coarse quantizer

@pytest.fixture(scope="module")
def built_hnsw(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An index whose ANN files use the HNSW quantizer (its threshold lowered to every list count)."""
    root = tmp_path_factory.mktemp("ann_hnsw")
    docs = _corpus(root / "docs", 40)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ann_build, "HNSW_MIN_LISTS", 1)
        build_index(docs, root / "index", ON, make_embedder("hash", ON))
    return docs, root / "index"


def _clusters(n: int, dim: int, centres: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim))
    x = c[rng.integers(0, centres, n)] + 0.6 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_hnsw_index_is_written_loaded_memory_mapped_and_found_by_recall(built_hnsw: tuple[Path, Path],
                                                                      built: tuple[Path, Path]) -> None:
    """Same corpus and settings as ``built`` (flat quantizer): the recall stays within a few points."""
    meta = json.loads((built_hnsw[1] / "metadata.json").read_text())
    assert {e["quantizer"] for e in meta["ann"].values()} == {"hnsw"}
    recall = {}
    for name, index_dir in (("hnsw", built_hnsw[1]), ("flat", built[1])):
        index = load_index(index_dir)
        ann = index.search.ann["chunks"]
        assert ann.quantizer == name and ann.shape.quantizer == name
        embedder = make_embedder("hash", ON)
        got = []
        for q in _queries(index):
            qvec = embedder.embed_query(q)
            exact = np.argsort(-(np.asarray(index.embeddings) @ qvec), kind="stable")[:20]
            got.append(len(set(exact.tolist()) & set(ann.search(qvec, ON.tuning.store.ann_candidates, ON.tuning.store.ann_probe).tolist())) / 20)
        recall[name] = float(np.mean(got))
    assert recall["hnsw"] >= 0.85 and recall["hnsw"] >= recall["flat"] - 0.05, recall
    assert "ANN" in verify_index(built_hnsw[1]).line(built_hnsw[1])


def test_hnsw_build_is_deterministic_and_round_trips(built_hnsw: tuple[Path, Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann_build, "HNSW_MIN_LISTS", 1)
    index = load_index(built_hnsw[1])
    loaded = index.search.ann["chunks"]
    fresh = ann_index.AnnIndex.build(index.embeddings, len(index.chunks), index.embeddings.shape[1], "mem")
    assert fresh.quantizer == "hnsw"
    for a, b in zip(ann_build.entries(loaded.index), ann_build.entries(fresh.index)):
        np.testing.assert_array_equal(a, b)
    qvec = make_embedder("hash", ON).embed_query("alpha beta")
    np.testing.assert_array_equal(loaded.search(qvec, 50, 0.5), fresh.search(qvec, 50, 0.5))


def test_hnsw_probing_equals_a_flat_quantizer_over_the_same_centroids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the filing is approximate: a question scans exactly the lists a flat quantizer would pick."""
    import faiss

    monkeypatch.setattr(ann_build, "HNSW_MIN_LISTS", 1)
    x = _clusters(6000, 32, 40)
    ann = ann_index.AnnIndex.build(x, len(x), 32, "mem", ann_build.AnnShape(60, 8, 6, "hnsw"))
    flat = ann_build.empty_copy(ann.index)
    assert ann_build.quantizer_kind(flat) == "hnsw"
    q = faiss.IndexFlatIP(32)
    q.add(ann.index.quantizer.reconstruct_n(0, 60))
    as_flat = faiss.IndexIVFPQ(q, 32, 60, 8, 6, faiss.METRIC_INNER_PRODUCT)
    faiss.copy_array_to_vector(faiss.vector_to_array(ann.index.pq.centroids), as_flat.pq.centroids)
    as_flat.is_trained = True
    lists, codes = ann_build.by_row(ann.index, len(x), "mem")
    il = as_flat.invlists
    for lst in range(60):
        ids = np.flatnonzero(lists == lst).astype(np.int64)
        part = np.ascontiguousarray(codes[ids])
        if len(ids):
            il.add_entries(lst, len(ids), faiss.swig_ptr(ids), faiss.swig_ptr(part))
    as_flat.ntotal = len(x)
    flat_ann = ann_index.AnnIndex(as_flat, len(x), "flat")
    assert flat_ann.quantizer == "flat"
    for seed in range(5):
        qvec = _clusters(1, 32, 40, seed=100 + seed)[0]
        for probe in (0.05, 0.3, 1.0):
            np.testing.assert_array_equal(ann.search(qvec, 200, probe), flat_ann.search(qvec, 200, probe))


def test_hnsw_verify_accepts_a_better_list_and_catches_a_worse_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph's filing is approximate: a row stored under a list at least as good as the graph's pick
    (e.g. its exact nearest) is not damage; a row stored under a worse list is."""
    monkeypatch.setattr(ann_build, "HNSW_MIN_LISTS", 1)
    monkeypatch.setattr(ann_build, "HNSW_M", 2)  # a sparse graph with a short search misses often
    monkeypatch.setattr(ann_build, "HNSW_EF_SEARCH", 1)
    x = _clusters(8000, 32, 150, seed=3)
    ann = ann_index.AnnIndex.build(x, len(x), 32, "mem", ann_build.AnnShape(200, 8, 6, "hnsw"))
    centroids = ann.index.quantizer.reconstruct_n(0, 200)
    graph_lists, _ = ann_build.by_row(ann.index, len(x), "mem")
    exact = np.argmax(x @ centroids.T, axis=1)
    assert (exact != graph_lists).sum() > 50  # the graph really is approximate here
    codes = ann.index.pq.compute_codes(np.ascontiguousarray(x - centroids[exact]))
    better = ann_index.AnnIndex(ann_build.assemble(ann_build.empty_copy(ann.index), exact, codes), len(x), "better")
    ann_index.verify(better, x)  # every row under its exact nearest list: as good as the graph's pick or better
    ann_index.verify(ann, x)
    worst = np.argmin(x @ centroids.T, axis=1)
    lists = graph_lists.copy()
    lists[:3] = worst[:3]
    worse = ann_index.AnnIndex(ann_build.assemble(ann_build.empty_copy(ann.index), lists,
                                                  ann_build.by_row(ann.index, len(x), "mem")[1]), len(x), "worse")
    with pytest.raises(IndexFormatError, match="3 of 8000 rows"):
        ann_index.verify(worse, x)


def test_a_quantizer_other_than_metadata_says_is_refused(tmp_path: Path, built_hnsw: tuple[Path, Path]) -> None:
    index_dir = _copy(built_hnsw[1], tmp_path / "idx")
    meta_path = index_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["ann"]["chunks"]["quantizer"] = "flat"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="metadata.json says"):
        load_index(index_dir)
    meta["ann"]["chunks"]["quantizer"] = "graph"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="quantizer must be one of"):
        load_index(index_dir)


def test_two_level_centroids_gives_every_list() -> None:
    x = _clusters(4000, 16, 30, seed=5)
    c = ann_build.two_level_centroids(x, 90)
    assert c.shape == (90, 16) and np.isfinite(c).all()


@pytest.mark.parametrize("ann", ["on", "off"])
def test_leaf_ranking_per_scored_row_equals_the_pass_over_every_leaf(built: tuple[Path, Path], ann: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The locator ranks the leaves of the scored rows (``SparseScores``) when few rows were scored; the
    located leaves, their scores, the candidates and the TOC are those of the pass over every leaf."""
    from retrieval import node_locator

    index = load_index(built[1])
    config = ON.replace(ann=ann)
    emb = make_embedder("hash", ON)
    doc = sorted({c.doc_path for c in index.chunks})[3]
    got: dict[str, list[object]] = {}
    for mode, share in (("sparse", 0), ("dense", 10 ** 9)):
        monkeypatch.setattr(node_locator, "SPARSE_ROW_SHARE", share)
        out = got.setdefault(mode, [])
        for q in _queries(index, n=8):
            for scope in (None, {doc}):
                query = Query.build(q, emb)
                r = node_locator.hybrid_locate(index, query, config.replace(toc_budget_tokens=400), scope)
                out.append([(n.node_id, n.score) for n in r.nodes] + [(n.node_id, n.score) for n in r.candidates])
                out.append(node_locator.toc_for_prompt(index, Query.build(q, emb), config.replace(toc_budget_tokens=400),
                                                       scope))
    assert got["sparse"] == got["dense"]


@pytest.mark.parametrize("threaded", [True, False])
def test_whole_collection_scores_with_leaves_found_beside_equal_those_found_after(
        built: tuple[Path, Path], threaded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that says it will rank every leaf next (``LEAVES_WANTED``) gets the leaves' ANN scan done
    beside the chunks' scoring, on a second thread or not: the chunk scores and the leaf similarities are
    the same values as without the hint, and the memo holds the leaves' scan for ``leaf_dense``."""
    from indexing import file_search
    from indexing.search import LEAVES_WANTED
    from utils import beside

    real = beside.SharedCalls
    monkeypatch.setattr(file_search, "SharedCalls", lambda calls: real(calls, threaded=threaded))
    index = load_index(built[1])
    emb = make_embedder("hash", ON)
    params = score_params(ON)
    for q in _queries(index, n=6):
        got = []
        for hint in (False, True):
            query = Query.build(q, emb)
            if hint:
                query.memo.put(LEAVES_WANTED, True)
            whole = index.search.score(query, Scope.everything(), "corpus", params)
            found_beside = query.memo.get((file_search.LEAF_NEAR, params))
            assert (found_beside is not None) == hint
            got.append((whole.rows, whole.dense, whole.lexical, index.search.leaf_dense(query, None, params)))
        for a, b in zip(*got):
            np.testing.assert_array_equal(a, b)


def test_a_failing_scan_beside_is_raised_in_the_question(built: tuple[Path, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    index = load_index(built[1])
    query = Query.build(_queries(index, n=1)[0], make_embedder("hash", ON))

    def broken(*_: object, **__: object) -> np.ndarray:
        raise RuntimeError("scan failed")

    monkeypatch.setattr(index.search.ann["chunks"], "search", broken)
    with pytest.raises(RuntimeError, match="scan failed"):
        index.search.score(query, Scope.everything(), "corpus", score_params(ON))


def test_read_pages_are_released_only_past_the_mapped_budget(built: tuple[Path, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget a question's pages are released once its answer is built (after_question, on a
    background thread), never in the middle of the question."""
    from indexing import index_files

    index = load_index(built[1])
    emb = make_embedder("hash", ON)
    released: list[int] = []
    monkeypatch.setattr(index_files, "release_pages", lambda *arrays: released.append(len(arrays)))
    for budget, resident, want in ((0, 10.0, True), (768, 10.0, False), (768, 900.0, True), (768, None, True)):
        released.clear()
        monkeypatch.setattr(index_files, "resident_mb", lambda r=resident: r)
        query = Query.build(_queries(index, n=1)[0], emb)
        params = score_params(ON.replace(query_mapped_mb=budget))
        index.search.score(query, Scope.everything(), "corpus", params)
        index.search.leaf_dense(query, None, params)
        assert released == []  # not while the question is being answered
        index.search.after_question()
        index.search.pages.wait()
        assert bool(released) == want, (budget, resident)
        if want:
            assert released == [4]  # the chunks' and leaves' vectors and the postings, in one release
        index.search.after_question()
        index.search.pages.wait()
        assert len(released) == int(want)  # nothing due: nothing released again


def _mapped_kb(path: Path) -> int:
    """Resident kB of this process's mappings of the file ``path`` (/proc/self/smaps; other tests' indexes
    may map files of the same name)."""
    total, inside = 0, False
    want = str(path.resolve())
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                inside = line.rstrip("\n").endswith(want)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("kept_mb", [1024, 0])
def test_the_ann_lists_stay_mapped_across_questions_within_their_budget(built: tuple[Path, Path], kept_mb: int) -> None:
    """Past query_mapped_mb a question's pages are released, but the ANN files' pages stay mapped while
    those files total at most query_ann_kept_mb (the next question scans 30% of the lists again);
    with 0 they are released with the rest. The answers are the same either way."""
    index = load_index(built[1])
    meta = json.loads((built[1] / "metadata.json").read_text())
    ann_files = [built[1] / e["file"] for e in meta["ann"].values()]
    vectors = built[1] / "embeddings.npy"
    assert all(index.search.ann[k].mapped_bytes > 0 for k in meta["ann"])  # faiss maps the lists
    emb = make_embedder("hash", ON)
    config = ON.replace(query_mapped_mb=0, query_ann_kept_mb=kept_mb)  # 0: released after every question
    got = []
    for q in _queries(index, n=3):
        query = Query.build(q, emb)
        scores = index.search.score(query, Scope.everything(), "corpus", score_params(config))
        leaves = index.search.leaf_dense(query, None, score_params(config))
        got.append((scores.rows.tolist(), scores.dense.tolist(), leaves.tolist()))
        assert all(_mapped_kb(f) > 0 for f in ann_files) and _mapped_kb(vectors) > 0  # read: resident
        index.search.after_question()
        index.search.pages.wait()
        if kept_mb:
            assert all(_mapped_kb(f) > 0 for f in ann_files)
        else:
            assert sum(_mapped_kb(f) for f in ann_files) == 0
        assert _mapped_kb(vectors) == 0  # every other file's pages released
    reference = load_index(built[1])
    for q, want in zip(_queries(reference, n=3), got):
        query = Query.build(q, emb)
        params = score_params(ON.replace(query_mapped_mb=1 << 20))
        scores = reference.search.score(query, Scope.everything(), "corpus", params)
        assert (scores.rows.tolist(), scores.dense.tolist(),
                reference.search.leaf_dense(query, None, params).tolist()) == want


def test_ann_files_are_kept_only_within_the_budget(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The release keeps the ANN files (real paths) when they total at most ann_kept_mb, none past it; two
    questions due before one release keep only what both asked to keep."""
    from indexing import index_files

    index = load_index(built[1])
    search = index.search
    total = sum(a.mapped_bytes for a in search.ann.values())
    want = {str((built[1] / a.name).resolve()) for a in search.ann.values()}
    assert search._ann_kept(score_params(ON)) == (frozenset(want), total) and total > 0
    assert search._ann_kept(score_params(ON.replace(query_ann_kept_mb=0))) == (frozenset(), 0)
    below = math.floor(total / (1 << 20)) if total >= 1 << 20 else 0
    assert search._ann_kept(score_params(ON.replace(query_ann_kept_mb=below))) == (frozenset(), 0)
    # the kept files' size is added to the budget the process's resident size is compared with
    budgets: list[int] = []
    monkeypatch.setattr(search.pages, "due", lambda limit, keep=frozenset(): budgets.append(limit))
    for mapped_mb in (768, 0):
        search._release_due(score_params(ON.replace(query_mapped_mb=mapped_mb)))
    search._release_due(score_params(ON.replace(query_ann_kept_mb=0)))
    assert budgets == [768 + math.ceil(total / (1 << 20)), 0, 768]
    monkeypatch.undo()
    seen: list[frozenset[str]] = []
    monkeypatch.setattr("utils.mapped_pages.release_mappings", lambda directory, keep=frozenset(): seen.append(keep))
    monkeypatch.setattr(index_files, "resident_mb", lambda: 900.0)
    search.pages.due(768, frozenset(want))
    search.pages.settle()
    search.pages.due(768, frozenset(want))
    search.pages.due(768, frozenset())
    search.pages.settle()
    assert seen == [frozenset(want), frozenset()]


def test_the_least_similar_rows_come_from_at_most_far_max_lists(built: tuple[Path, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The least similar rows are searched in ann_probe / 4 of the lists, at most FAR_MAX_LISTS of them."""
    from indexing import file_search

    index = load_index(built[1])
    ann = index.search.ann["chunks"]
    nlist = int(ann.index.nlist)
    chosen: list[int] = []
    real = ann._choose
    monkeypatch.setattr(ann, "_choose", lambda scores, nprobe, far=False: chosen.append(nprobe) or real(scores, nprobe, far))
    monkeypatch.setattr(ann, "_spans", ann._spans if ann._spans is not None else np.zeros((nlist, 4), np.int64))
    query = Query.build(_queries(index, n=1)[0], make_embedder("hash", ON))
    near = math.ceil(ON.tuning.store.ann_probe * nlist)
    for cap, want in ((1 << 20, math.ceil(ON.tuning.store.ann_probe / 4 * nlist)), (2, 2)):
        chosen.clear()
        monkeypatch.setattr(file_search, "FAR_MAX_LISTS", cap)
        index.search.score(query, Scope.everything(), "corpus", score_params(ON))
        assert sorted(chosen) == sorted([near, want]), (cap, chosen)
    assert len(ann.search(query.vector, 5, 1.0, max_lists=1)) == 5  # one list still gives rows


def test_pages_due_are_released_before_the_next_question_without_after_question(
        built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that only retrieves (never calls after_question) still keeps the process small: the
    release due from one question runs before the next whole-collection question maps anything."""
    from indexing import index_files

    index = load_index(built[1])
    emb = make_embedder("hash", ON)
    events: list[str] = []
    monkeypatch.setattr(index_files, "release_pages", lambda *arrays: events.append("release"))
    monkeypatch.setattr(index_files, "resident_mb", lambda: 900.0)
    ann = index.search.ann["chunks"]
    real = ann.search
    monkeypatch.setattr(ann, "search", lambda *a, **k: (events.append("scan"), real(*a, **k))[1])
    params = score_params(ON)
    first, second = (Query.build(q, emb) for q in _queries(index, n=2))
    index.search.score(first, Scope.everything(), "corpus", params)
    assert "release" not in events
    events.clear()
    index.search.score(second, Scope.everything(), "corpus", params)
    assert events[0] == "release" and events.count("release") == 1 and "scan" in events


def test_run_pipeline_releases_after_the_answer(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole question through run_pipeline leaves its pages' release to the background, after its record."""
    from indexing import index_files

    index = load_index(built[1])
    released: list[int] = []
    monkeypatch.setattr(index_files, "release_pages", lambda *arrays: released.append(len(arrays)))
    monkeypatch.setattr(index_files, "resident_mb", lambda: 900.0)
    config = ON.replace(query_mapped_mb=768)
    record = run_pipeline(_queries(index, n=1)[0], index, config, make_backends(index, config, None))
    index.search.pages.wait()
    assert record.retrieve.hits and released == [4]


@pytest.mark.parametrize("budget", [400, 1500])
def test_whole_collection_toc_equals_the_toc_of_every_document(built: tuple[Path, Path], budget: int) -> None:
    """The whole-collection TOC walks leaf numbers and sums the costs without listing every node; what
    it shows is what the same question shows scoped to every document (exact scoring: the same scores)."""
    from retrieval import node_locator

    index = load_index(built[1])
    config = ON.replace(ann="off", toc_budget_tokens=budget)
    emb = make_embedder("hash", ON)
    every = {c.doc_path for c in index.chunks} | set(index.tree.doc_paths)
    for q in _queries(index, n=6):
        whole = node_locator.toc_for_prompt(index, Query.build(q, emb), config)
        scoped = node_locator.toc_for_prompt(index, Query.build(q, emb), config, every)
        assert whole == scoped and 0 < whole[1] < len(index.tree) - 1


def test_proposals_grow_with_the_list_count(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Below GROWTH_LISTS lists the ANN proposes ann_candidates; past it, more (the cube root of the
    list ratio by default), and a whole-collection question re-scores them all."""
    index = load_index(built[1])
    ann = index.search.ann["chunks"]
    nlist = int(ann.index.nlist)
    assert ann.proposals(60, 1 / 3) == 60 and ann.proposals(60, 0) == 60
    monkeypatch.setattr(ann_index, "GROWTH_LISTS", nlist / 8)
    assert ann.proposals(60, 1 / 3) == 120 and ann.proposals(60, 0) == 60
    emb = make_embedder("hash", ON)
    query = Query.build(_queries(index, n=1)[0], emb)
    asked: list[int] = []
    real = ann.search_parts
    monkeypatch.setattr(ann, "search_parts", lambda q, k, probe, parts, **kw: asked.append(k) or real(q, k, probe, parts, **kw))
    index.search.score(query, Scope.everything(), "corpus", score_params(ON))
    assert asked[0] == 120  # the nearest rows (the few least similar come from search)
    asked.clear()
    index.search.score(Query.build(_queries(index, n=1)[0], emb), Scope.everything(), "corpus",
                       score_params(ON.replace(ann_candidates_growth=0)))
    assert asked[0] == 60


@pytest.mark.parametrize("which", ["flat", "hnsw"])
def test_a_scan_split_into_parts_and_merged_finds_what_one_scan_finds(
        which: str, built: tuple[Path, Path], built_hnsw: tuple[Path, Path]) -> None:
    """search_parts deals the chosen lists to the parts; merge_parts of their best rows is search's answer."""
    index = load_index((built if which == "flat" else built_hnsw)[1])
    ann = index.search.ann["chunks"]
    emb = make_embedder("hash", ON)
    for q in _queries(index, n=6):
        qvec = Query.build(q, emb).vector
        for k, probe, parts in ((60, 0.3, 2), (200, 0.1, 2), (25, 0.5, 3), (60, 0.3, 1)):
            calls = ann.search_parts(qvec, k, probe, parts)
            assert len(calls) == min(parts, math.ceil(probe * ann.index.nlist))
            got = ann.merge_parts([c() for c in calls], k)
            want = ann.search(qvec, k, probe)
            assert sorted(got.tolist()) == sorted(want.tolist()) and len(got) == len(want)


@pytest.mark.parametrize("which", ["flat", "hnsw"])
def test_a_mapped_index_reads_ahead_the_lists_it_scans_and_finds_what_faiss_finds(
        which: str, built: tuple[Path, Path], built_hnsw: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The list table read from faiss's memory agrees with faiss's own answers for every list; a search
    requests exactly the codes and ids of the lists it probes, then returns what faiss's search returns."""
    import faiss

    from utils import mapped_pages

    index = load_index((built if which == "flat" else built_hnsw)[1])
    for kind, ann in index.search.ann.items():
        spans = ann._spans
        assert spans is not None, kind
        il = faiss.downcast_InvertedLists(ann.index.invlists)
        for lst in range(ann.index.nlist):
            size = il.list_size(lst)
            assert spans[lst, 1] - spans[lst, 0] == size * ann.index.code_size
            assert spans[lst, 3] - spans[lst, 2] == size * 8
            if size:
                assert spans[lst, 0] == int(il.get_codes(lst)) and spans[lst, 2] == int(il.get_ids(lst))
        advised: list[tuple[np.ndarray, np.ndarray]] = []
        monkeypatch.setattr(mapped_pages, "will_need", lambda s, e: advised.append((s, e)) or len(s))
        vecs = index.embeddings if kind == "chunks" else index.leaf_embeddings
        rng = np.random.default_rng(5)
        for _ in range(5):
            qvec = np.asarray(vecs[int(rng.integers(len(vecs)))], dtype=np.float32)
            advised.clear()
            got = ann.search(qvec, 50, 0.3)
            nprobe = int(np.ceil(0.3 * ann.index.nlist))
            if which == "flat":
                _, want = ann.index.search(qvec.reshape(1, -1), 50, params=faiss.SearchParametersIVF(nprobe=nprobe))
                assert np.array_equal(got, want[0][want[0] >= 0])
            _, lists = ann.index.quantizer.search(qvec.reshape(1, -1), nprobe) if which == "flat" else \
                faiss.downcast_index(faiss.downcast_index(ann.index.quantizer).storage).search(qvec.reshape(1, -1), nprobe)
            (starts, ends), = advised
            want_spans = spans[lists[0]]
            assert sorted(zip(starts.tolist(), ends.tolist())) == sorted(
                [*zip(want_spans[:, 0].tolist(), want_spans[:, 1].tolist()),
                 *zip(want_spans[:, 2].tolist(), want_spans[:, 3].tolist())])


def test_an_index_in_memory_has_no_list_table_and_searches_as_before(built: tuple[Path, Path]) -> None:
    index = load_index(built[1])
    vecs = np.asarray(index.embeddings)
    ann = ann_index.AnnIndex.build(vecs, len(vecs), vecs.shape[1], "in memory")
    assert ann._spans is None
    assert len(ann.search(vecs[3], 20, 0.5)) == 20


@pytest.mark.parametrize("which", ["flat", "hnsw"])
def test_the_lists_come_from_one_product_the_same_every_time(which: str, built: tuple[Path, Path],
                                                              built_hnsw: tuple[Path, Path]) -> None:
    """A question's lists (nearest and least similar) come from one product with the centroids: the lists
    faiss's exact search over the same centroids picks, best first with ties by list number, and the same
    bits on every asking, from any thread."""
    import threading

    import faiss

    index = load_index((built if which == "flat" else built_hnsw)[1])
    for kind, ann in index.search.ann.items():
        store = faiss.downcast_index(ann.index.quantizer)
        store = faiss.downcast_index(store.storage) if which == "hnsw" else store
        vecs = index.embeddings if kind == "chunks" else index.leaf_embeddings
        rng = np.random.default_rng(11)
        for _ in range(4):
            qvec = np.asarray(vecs[int(rng.integers(len(vecs)))], dtype=np.float32)
            for nprobe in sorted({1, min(7, ann.index.nlist), ann.index.nlist}):
                for far in (False, True):
                    dist, lists = ann._choose(ann.centroid_scores(qvec), nprobe, far)
                    want_d, want_l = store.search((-qvec if far else qvec).reshape(1, -1), nprobe)
                    assert lists.shape == (1, nprobe) and len(set(lists[0].tolist())) == nprobe
                    assert np.allclose(dist[0], want_d[0], atol=1e-5)  # the same lists' scores, last bits aside
                    # the same lists up to ties at the cut (within float slack of the last one taken)
                    cut = float(dist[0, -1])
                    differ = set(lists[0].tolist()) ^ set(want_l[0].tolist())
                    assert all(abs(float(-ann.centroid_scores(qvec).values()[lst] if far else
                                         ann.centroid_scores(qvec).values()[lst]) - cut) < 1e-5 for lst in differ)
                    d = dist[0]
                    assert np.all(d[:-1] >= d[1:])  # best first
                    ties = d[:-1] == d[1:]
                    assert np.all(lists[0][:-1][ties] < lists[0][1:][ties])  # ties by list number
            seen: list[tuple[bytes, bytes]] = []

            def ask() -> None:
                d, lst = ann._choose(ann.centroid_scores(qvec), 7)
                seen.append((d.tobytes(), lst.tobytes()))

            ask()
            t = threading.Thread(target=ask)
            t.start()
            t.join()
            ask()
            assert len(set(seen)) == 1  # bit-identical every time


def test_the_least_similar_rows_share_the_questions_product(built: tuple[Path, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``far`` searches the negated question's best rows from the shared product: the rows a search for the
    negated question finds, and a whole-collection question computes its chunks' product once."""
    index = load_index(built[1])
    ann = index.search.ann["chunks"]
    rng = np.random.default_rng(4)
    for _ in range(5):
        qvec = np.asarray(index.embeddings[int(rng.integers(len(index.embeddings)))], dtype=np.float32)
        product = ann.centroid_scores(qvec)
        for k, probe, cap in ((16, 0.1, None), (16, 0.3, 2), (40, 1.0, None)):
            far = ann.search(qvec, k, probe, cap, scores=product, far=True)
            assert np.array_equal(far, ann.search(-qvec, k, probe, cap))
            assert np.array_equal(ann.search(qvec, k, probe, cap), ann.search(qvec, k, probe, cap, scores=product))
    products: list[int] = []
    real = ann.centroid_scores
    monkeypatch.setattr(ann, "centroid_scores", lambda q: products.append(1) or real(q))
    query = Query.build(_queries(index, n=1)[0], make_embedder("hash", ON))
    index.search.score(query, Scope.everything(), "corpus", score_params(ON))
    assert len(products) == 1
