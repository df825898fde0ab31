"""Stored BM25 weights (indexing/bm25_impacts.py): the same scores and best rows bit for bit as
computing them, written by a build and by ``upgrade``, checked by ``verify``; an index without them
(built before them, or a delta segment) loads and answers as before."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexing import bm25_impacts
from indexing.bm25_builder import BM25Index
from indexing.bm25_corpus import score_rows, top_rows
from indexing.index_files import write_manifest_entry
from indexing.index_store import load_index, verify_index
from indexing.upgrade import upgrade
from tests.conftest import run_cli
from tests.test_bm25_corpus import QUERIES, _reference_top, _zipf_rows
from tests.test_delta_update import _build, _change, _config, _first, _write
from utils.errors import IndexFormatError, InputError

IMPACT, MAXIMA, PARAMS = bm25_impacts.impact_names()


def _saved(tmp: Path, rows: list[list[str]], impacts: tuple[float, float] | None) -> BM25Index:
    tmp.mkdir(parents=True, exist_ok=True)
    BM25Index.build(rows).save(tmp, impacts=impacts)
    if impacts is None:
        return BM25Index.load(tmp)
    manifest = {name: write_manifest_entry(tmp, name) for name in os.listdir(tmp)}
    (tmp / "metadata.json").write_text(json.dumps({"files": manifest}))
    from indexing.index_files import IndexDir, parse_manifest  # noqa: PLC0415

    with IndexDir(tmp) as files:
        files.hold_all(parse_manifest(manifest, "metadata.json"))
        return BM25Index.load(tmp, files=files)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[BM25Index, BM25Index]:
    """The same rows saved with stored weights (k1 1.5, b 0.75) and without."""
    rows = _zipf_rows(3000, 11)
    root = Path(tmp_path_factory.mktemp("impacts"))
    return _saved(root / "with", rows, (1.5, 0.75)), _saved(root / "without", rows, None)


def test_the_weights_are_the_computed_ones(pair: tuple[BM25Index, BM25Index]) -> None:
    stored, _ = pair
    imp = stored.impacts
    assert imp is not None and imp.k1 == 1.5 and imp.b == 0.75
    for tid in range(stored.vocab_size):
        p0, p1 = int(stored.indptr[tid]), int(stored.indptr[tid + 1])
        want = np.zeros(p1 - p0, np.float32)
        if p1 > p0:
            stored.impacts = None  # the computed path
            want = stored._corpus_term_weights(tid, 1.5, 0.75, imp.avgdl)
            stored.impacts = imp
        got = np.asarray(stored._corpus_term_weights(tid, 1.5, 0.75, imp.avgdl))
        assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32))
        assert imp.maxima[tid] == (want.max() if p1 > p0 else 0)
        assert stored.term_bound(tid, 1.5, 0.75, imp.avgdl) <= 2.5


@pytest.mark.parametrize("tokens", QUERIES)
@pytest.mark.parametrize("k", [1, 10, 400])
def test_scores_and_best_rows_bit_identical(pair: tuple[BM25Index, BM25Index], tokens: list[str], k: int) -> None:
    stored, computed = pair
    a, b = stored.score_range(tokens, 0, stored.n_rows), computed.score_range(tokens, 0, computed.n_rows)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    rows = np.random.default_rng(3).permutation(stored.n_rows)[:500]
    assert np.array_equal(score_rows(stored, tokens, rows).view(np.uint32), b[rows].view(np.uint32))
    got = top_rows(stored, tokens, k)
    assert np.array_equal(got, top_rows(computed, tokens, k))
    assert np.array_equal(got, _reference_top(computed, tokens, k))


def test_other_settings_compute_the_weights(pair: tuple[BM25Index, BM25Index]) -> None:
    """Stored for k1 1.5, b 0.75: asked with other settings the weights are computed (and still equal)."""
    stored, computed = pair
    tid = stored.term_ids["common"]
    assert stored._stored(tid, 1.2, 0.75, stored.impacts.avgdl) is None
    assert stored.term_bound(tid, 1.2, 0.75, stored.impacts.avgdl) == 2.2
    for kw in ({"k1": 1.2}, {"b": 0.5}, {"k1": 2.0, "b": 1.0}):
        for tokens in QUERIES:
            assert np.array_equal(top_rows(stored, tokens, 20, **kw), top_rows(computed, tokens, 20, **kw))
            assert np.array_equal(stored.score_range(tokens, 0, stored.n_rows, **kw),
                                  computed.score_range(tokens, 0, computed.n_rows, **kw))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 300), k1=st.sampled_from([0.0, 0.9, 1.5, 3.0]),
       b=st.sampled_from([0.0, 0.3, 0.75, 1.0]), tokens=st.lists(st.sampled_from(
           ["common", "w0", "w1", "w2", "w5", "w30", "w200", "w399", "unseen"]), min_size=1, max_size=6))
def test_any_corpus_and_settings(tmp_path_factory: pytest.TempPathFactory, seed: int, k: int, k1: float, b: float,
                                 tokens: list[str]) -> None:
    rows = _zipf_rows(600, seed)
    index = _saved(Path(tmp_path_factory.mktemp("any")), rows, (k1, b))
    got = top_rows(index, tokens, k, k1=k1, b=b)
    assert np.array_equal(got, _reference_top(index, tokens, k, k1=k1, b=b))
    index.impacts = None
    assert np.array_equal(got, top_rows(index, tokens, k, k1=k1, b=b))


def _answers(index: Path) -> list[object]:
    from tests.test_delta_update import _answers as answers  # noqa: PLC0415

    return answers(index)


def test_a_build_stores_them_and_upgrade_adds_them_to_an_older_index(tmp_path: Path) -> None:
    src = _write(tmp_path / "src", _first(tmp_path))
    _build(src, tmp_path / "new")
    meta = json.loads((tmp_path / "new" / "metadata.json").read_text())
    assert {IMPACT, MAXIMA, PARAMS} <= set(meta["files"])  # listed in the manifest
    assert load_index(tmp_path / "new").search.bm25.impacts is not None
    verify_index(tmp_path / "new")

    # an index built before them: the same directory without the three files and their entries
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "new", old)
    for name in (IMPACT, MAXIMA, PARAMS):
        (old / name).unlink()
        del meta["files"][name]
    (old / "metadata.json").write_text(json.dumps(meta))
    index = load_index(old)
    assert index.search.bm25.impacts is None
    verify_index(old)
    before = _answers(old)
    assert before == _answers(tmp_path / "new")

    # upgrade a hard-linked copy: the original is not written
    linked = tmp_path / "linked"
    linked.mkdir()
    for p in old.iterdir():
        os.link(p, linked / p.name)
    stamp = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in old.iterdir()}
    r = run_cli("upgrade", "--index", str(linked))
    assert r.returncode == 0, r.stderr
    assert IMPACT in r.stdout
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in old.iterdir()} == stamp
    for name in (IMPACT, MAXIMA, PARAMS):  # what a build writes, byte for byte
        assert (linked / name).read_bytes() == (tmp_path / "new" / name).read_bytes()
    assert oct((linked / IMPACT).stat().st_mode & 0o777) == oct(0o644 & ~_umask())
    assert load_index(linked).search.bm25.impacts is not None
    verify_index(linked)
    assert _answers(linked) == before
    assert not [p.name for p in linked.iterdir() if p.name.startswith(".")]  # no temporary left
    again = run_cli("upgrade", "--index", str(linked))
    assert again.returncode == 0 and "already up to date" in again.stdout


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_delta_segment_has_none_and_a_segmented_index_answers_as_a_full_build(tmp_path: Path) -> None:
    src = _write(tmp_path / "src", _first(tmp_path))
    _build(src, tmp_path / "idx")
    docs = _change(src, _first(tmp_path))
    _build(src, tmp_path / "idx")  # a delta segment
    names = os.listdir(tmp_path / "idx")
    assert any(n.startswith("delta1.") for n in names) and not any(n.startswith("delta1.") and "impact" in n for n in names)
    _build(_write(tmp_path / "src2", docs), tmp_path / "full", config=_config())
    assert _answers(tmp_path / "idx") == _answers(tmp_path / "full")
    verify_index(tmp_path / "idx")
    with pytest.raises(InputError, match="delta segments"):
        upgrade(tmp_path / "idx", 1.5, 0.75)


def _rewrite(index: Path, name: str, data: np.ndarray) -> None:
    """Replace an array file and its manifest entry (damage the size and digest checks cannot see)."""
    np.save(index / name, data, allow_pickle=False)
    meta = json.loads((index / "metadata.json").read_text())
    meta["files"][name] = write_manifest_entry(index, name)
    (index / "metadata.json").write_text(json.dumps(meta))


def test_damaged_weights_are_one_line_errors(tmp_path: Path) -> None:
    src = _write(tmp_path / "src", _first(tmp_path))
    _build(src, tmp_path / "idx")
    good = np.load(tmp_path / "idx" / IMPACT)
    bad = good.copy()
    bad[len(bad) // 2] = np.nextafter(bad[len(bad) // 2], np.float32(0))  # one ulp off
    _rewrite(tmp_path / "idx", IMPACT, bad)
    with pytest.raises(IndexFormatError, match=f"{IMPACT} does not match the postings: 1 weights differ"):
        verify_index(tmp_path / "idx")
    r = run_cli("verify", "--index", str(tmp_path / "idx"))
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr

    maxima = np.load(tmp_path / "idx" / MAXIMA)
    _rewrite(tmp_path / "idx", IMPACT, good)
    _rewrite(tmp_path / "idx", MAXIMA, np.full_like(maxima, 9.0))
    with pytest.raises(IndexFormatError, match="outside"):
        load_index(tmp_path / "idx")

    low = maxima.copy()
    low[int(np.argmax(low))] = 0.0  # a bound below the word's weights: would cut real rows
    _rewrite(tmp_path / "idx", MAXIMA, low)
    with pytest.raises(IndexFormatError, match="does not match the largest weight"):
        verify_index(tmp_path / "idx")
    index = load_index(tmp_path / "idx")
    bm = index.search.bm25
    word = bm.terms[int(np.argmax(maxima))]
    with pytest.raises(IndexFormatError, match="outside its word's maximum"):
        top_rows(bm, [word], 5)

    _rewrite(tmp_path / "idx", MAXIMA, maxima)
    (tmp_path / "idx" / PARAMS).write_text('{"format_version": 1, "k1": 1.5}')
    meta = json.loads((tmp_path / "idx" / "metadata.json").read_text())
    meta["files"][PARAMS] = write_manifest_entry(tmp_path / "idx", PARAMS)
    (tmp_path / "idx" / "metadata.json").write_text(json.dumps(meta))
    r = run_cli("query", "--index", str(tmp_path / "idx"), "--mock", "-q", "alpha1 sensors")
    assert r.returncode != 0 and "does not describe the impacts" in r.stderr and "Traceback" not in r.stderr


def test_upgrade_refuses_what_is_not_an_index(tmp_path: Path) -> None:
    r = run_cli("upgrade", "--index", str(tmp_path / "nothing"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_upgrade_refuses_while_an_update_holds_the_index(tmp_path: Path) -> None:
    """An update renaming in its metadata.json while upgrade writes its own would lose the update's
    delta segment: upgrade takes the lock builds and updates hold, and refuses in one line if taken."""
    from utils.dir_lock import exclusive  # noqa: PLC0415

    src = _write(tmp_path / "src", _first(tmp_path))
    _build(src, tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "metadata.json").read_text())
    for name in (IMPACT, MAXIMA, PARAMS):
        (tmp_path / "idx" / name).unlink()
        del meta["files"][name]
    (tmp_path / "idx" / "metadata.json").write_text(json.dumps(meta))
    with exclusive(tmp_path / "idx"):
        r = run_cli("upgrade", "--index", str(tmp_path / "idx"))
        assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert IMPACT not in json.loads((tmp_path / "idx" / "metadata.json").read_text())["files"]
    r = run_cli("upgrade", "--index", str(tmp_path / "idx"))
    assert r.returncode == 0, r.stderr
    assert IMPACT in json.loads((tmp_path / "idx" / "metadata.json").read_text())["files"]
