"""BM25Index: identical to rank_bm25.BM25Okapi for any row range and IDF scope; safe on disk."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from indexing.bm25_builder import (DOC_LEN_FILE, FILES, INDPTR_FILE, ROW_TERMS_FILE, ROWS_FILE, TF_FILE, VOCAB_FILE,
                                   BM25Index)
from utils.errors import IndexFormatError

_TERMS = st.sampled_from([f"t{i}" for i in range(10)] + ["中文", "法律"])
_CORPUS = st.lists(st.lists(_TERMS, max_size=8), min_size=1, max_size=15)
_QUERY = st.lists(st.one_of(_TERMS, st.just("unseen")), min_size=1, max_size=6)
# k1 > 0: at k1 = 0 rank_bm25 computes 0/0 for every absent term and its NaN
# wipes out the whole row; BM25Index scores such a row by its present terms.
_PARAMS = st.tuples(st.floats(0.01, 3.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))


def _all(index, query, **kw):
    """Every row with corpus-wide IDF: the range scorer over the whole index."""
    return index.score_range(query, 0, index.n_rows, **kw)


def _has_tokens(corpus: list[list[str]]) -> bool:
    return sum(map(len, corpus)) > 0


def _okapi(corpus: list[list[str]], query: list[str], **kw: float) -> np.ndarray:
    """rank_bm25's scores, with its 0/0 (b = 1 on an empty row) read as the 0
    it means; BM25Index returns 0 there."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(BM25Okapi(corpus, **kw).get_scores(query), nan=0.0)


@settings(max_examples=300, deadline=None)
@given(corpus=_CORPUS, query=_QUERY, data=st.data(), params=_PARAMS)
def test_matches_rank_bm25_for_leaf_document_and_corpus_scopes(corpus, query, data, params) -> None:
    k1, b, eps = params
    index = BM25Index.build(corpus)
    n = len(corpus)
    s = data.draw(st.integers(0, n - 1))
    e = data.draw(st.integers(s + 1, n))
    a = data.draw(st.integers(0, s))
    z = data.draw(st.integers(e, n))
    kw = {"k1": k1, "b": b, "epsilon": eps}
    if _has_tokens(corpus):  # rank_bm25 divides by zero otherwise
        want = _okapi(corpus, query, **kw)
        np.testing.assert_allclose(_all(index, query, **kw), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(index.score_range(query, s, e, 0, n, **kw), want[s:e], rtol=1e-5, atol=1e-5)
    if _has_tokens(corpus[s:e]):
        want = _okapi(corpus[s:e], query, **kw)
        np.testing.assert_allclose(index.score_range(query, s, e, **kw), want, rtol=1e-5, atol=1e-5)
    if _has_tokens(corpus[a:z]):
        want = _okapi(corpus[a:z], query, **kw)[s - a:e - a]
        np.testing.assert_allclose(index.score_range(query, s, e, a, z, **kw), want, rtol=1e-5, atol=1e-5)


def test_negative_idf_floor_and_duplicate_query_tokens_match_rank_bm25() -> None:
    corpus = [["a", "b"], ["a", "c"], ["a", "d", "d"], ["e"]]  # "a" in 3 of 4 rows: negative idf
    index = BM25Index.build(corpus)
    for q in (["a"], ["a", "a", "d"], ["d", "d", "d"]):
        np.testing.assert_allclose(_all(index, q), BM25Okapi(corpus).get_scores(q), rtol=1e-6)
    assert (_all(index, ["a"])[:3] > 0).all(), "the epsilon floor keeps common terms positive"


def test_scores_are_float32_of_range_length() -> None:
    index = BM25Index.build([["x"], ["y"], ["x", "y"]])
    got = index.score_range(["x"], 1, 3)
    assert got.dtype == np.float32 and got.shape == (2,)


def test_defined_zero_cases() -> None:
    index = BM25Index.build([["a", "b"], [], ["c"], [], []])
    assert index.score_range(["a"], 2, 2).shape == (0,), "empty range"
    assert _all(index, ["zzz"]).tolist() == [0.0] * 5, "unknown term"
    assert _all(index, []).tolist() == [0.0] * 5, "empty query"
    got = index.score_range(["a"], 3, 5)
    assert got.tolist() == [0.0, 0.0], "a scope of empty rows (rank_bm25 divides by zero)"
    got = index.score_range(["a"], 1, 2)
    assert got.tolist() == [0.0] and not np.isnan(got).any()
    got = _all(index, ["a", "zzz"], k1=0.0)  # rank_bm25: 0/0 = NaN everywhere
    assert np.isfinite(got).all() and got[0] > 0 and got[1:].tolist() == [0.0] * 4
    # two rows both containing the only term: idf = ln(0.5/2.5) < 0 and the
    # average idf is that same value: rank_bm25 gives negative scores here, so do we.
    same = BM25Index.build([["q"], ["q"]])
    np.testing.assert_allclose(_all(same, ["q"]), BM25Okapi([["q"], ["q"]]).get_scores(["q"]), rtol=1e-6)


def test_empty_index() -> None:
    index = BM25Index.build([])
    assert index.n_rows == 0 and index.vocab_size == 0
    assert _all(index, ["a"]).shape == (0,)


def test_out_of_range_rows_are_a_bug_not_garbage() -> None:
    index = BM25Index.build([["a"], ["b"]])
    for args in ((0, 3), (-1, 1), (2, 1)):
        with pytest.raises(ValueError):
            index.score_range(["a"], *args)
    with pytest.raises(ValueError):
        index.score_range(["a"], 0, 1, 0, 5)


def test_postings_layout() -> None:
    index = BM25Index.build([["b", "a", "b"], ["a"], ["c", "b"]])
    assert index.terms == ["b", "a", "c"]
    assert index.indptr.tolist() == [0, 2, 4, 5]
    assert index.rows.tolist() == [0, 2, 0, 1, 2]
    assert index.tf.tolist() == [2, 1, 1, 1, 1]
    assert index.doc_len.tolist() == [3.0, 1.0, 2.0]
    assert index.indptr.dtype == np.int64 and index.rows.dtype == np.int32 and index.doc_len.dtype == np.float32


def _corpus(seed: int = 0, rows: int = 60) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[f"w{int(x)}" for x in rng.zipf(1.5, size=rng.integers(0, 12)) if x < 50] for _ in range(rows)]


@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_roundtrip(tmp_path: Path, mmap: bool) -> None:
    corpus = _corpus()
    index = BM25Index.build(corpus)
    index.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)
    loaded = BM25Index.load(tmp_path, mmap=mmap)
    assert loaded.n_rows == 60 and loaded.terms == index.terms
    q = ["w1", "w2", "w7", "w1"]
    np.testing.assert_array_equal(_all(loaded, q), _all(index, q))
    np.testing.assert_array_equal(loaded.score_range(q, 10, 20, 5, 40), index.score_range(q, 10, 20, 5, 40))
    assert not any(p.suffix == ".pkl" for p in tmp_path.iterdir())


def _saved(tmp_path: Path) -> Path:
    BM25Index.build(_corpus()).save(tmp_path)
    return tmp_path


def _expect_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(IndexFormatError) as exc:
        BM25Index.load(tmp_path)
    assert name in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("name", FILES)
def test_missing_file_is_named(tmp_path: Path, name: str) -> None:
    (_saved(tmp_path) / name).unlink()
    _expect_error(tmp_path, name)


def test_wrong_dtype_or_shape_is_named(tmp_path: Path) -> None:
    d = _saved(tmp_path)
    np.save(d / TF_FILE, np.load(d / TF_FILE).astype(np.float64))
    _expect_error(d, TF_FILE)
    d = _saved(tmp_path)
    np.save(d / DOC_LEN_FILE, np.zeros(3, dtype=np.float32))
    _expect_error(d, DOC_LEN_FILE)


def test_pickled_object_array_is_refused(tmp_path: Path) -> None:
    d = _saved(tmp_path)
    np.save(d / ROWS_FILE, np.array([object()] * 3, dtype=object), allow_pickle=True)
    _expect_error(d, ROWS_FILE)


def test_corrupt_files_are_named(tmp_path: Path) -> None:
    d = _saved(tmp_path)
    (d / INDPTR_FILE).write_bytes(b"garbage")
    _expect_error(d, INDPTR_FILE)
    d = _saved(tmp_path)
    (d / VOCAB_FILE).write_text("{not json", encoding="utf-8")
    _expect_error(d, VOCAB_FILE)


def _postings_error(d: Path, name: str, query: list[str]) -> None:
    """Damaged postings: ``check_postings`` (verify) names the file, and so does a query reading them
    (whole-corpus and range scoring, each in a freshly loaded index)."""
    with pytest.raises(IndexFormatError) as exc:
        BM25Index.load(d).check_postings()
    assert name in str(exc.value) and "\n" not in str(exc.value)
    for start, end in ((0, 60), (5, 40)):
        with pytest.raises(IndexFormatError) as exc:
            BM25Index.load(d).score_range(query, start, end, 0, 60)
        assert name in str(exc.value) and "\n" not in str(exc.value)


def _term_with_postings(d: Path, at_least: int) -> tuple[int, np.ndarray]:
    indptr = np.load(d / INDPTR_FILE)
    return int(np.argmax(np.diff(indptr) >= at_least)), indptr


def test_damaged_postings_are_caught_by_verify_and_where_a_query_reads_them(tmp_path: Path) -> None:
    """Loading checks the pointer tables only (a cold start must not read every posting); the postings
    themselves are checked in full by ``check_postings`` and per term when a query reads them."""
    d = _saved(tmp_path)
    clean = BM25Index.load(d)
    t, indptr = _term_with_postings(d, 2)
    term = clean.terms[t]
    other = next(w for w in clean.terms if w != term and clean.indptr[clean.term_ids[w]] > indptr[t + 1])
    want_other = _all(clean, [other])
    rows = np.load(d / ROWS_FILE)
    tf = np.load(d / TF_FILE)
    for name, arr, bad in (
            (ROWS_FILE, rows, lambda a: a.__setitem__(indptr[t], 10_000)),  # out of range
            (ROWS_FILE, rows, lambda a: a.__setitem__(slice(indptr[t], indptr[t] + 2), a[indptr[t]:indptr[t] + 2][::-1].copy())),
            (TF_FILE, tf, lambda a: a.__setitem__(indptr[t], 0))):
        damaged = arr.copy()
        bad(damaged)
        np.save(d / name, damaged)
        loaded = BM25Index.load(d)  # structure only: loads
        np.testing.assert_array_equal(_all(loaded, [other]), want_other)  # untouched terms score exactly
        _postings_error(d, name, [term])
        np.save(d / name, arr)
    np.testing.assert_array_equal(_all(BM25Index.load(d), [term]), _all(clean, [term]))


def test_row_terms_outside_the_vocabulary_are_caught(tmp_path: Path) -> None:
    d = _saved(tmp_path)
    row_terms = np.load(d / ROW_TERMS_FILE)
    bad = row_terms.copy()
    bad[3] = 10_000
    np.save(d / ROW_TERMS_FILE, bad)
    loaded = BM25Index.load(d)
    with pytest.raises(IndexFormatError) as exc:
        loaded.check_postings()
    assert ROW_TERMS_FILE in str(exc.value)
    with pytest.raises(IndexFormatError) as exc:  # a leaf-sized scope counts its terms from row_terms
        loaded.score_range(["w1"], 0, 10)
    assert ROW_TERMS_FILE in str(exc.value) and "\n" not in str(exc.value)


def test_other_tokenizer_or_format_version_is_refused(tmp_path: Path) -> None:
    d = _saved(tmp_path)
    vocab = json.loads((d / VOCAB_FILE).read_text(encoding="utf-8"))
    (d / VOCAB_FILE).write_text(json.dumps({**vocab, "tokenizer": "other-1"}), encoding="utf-8")
    _expect_error(d, VOCAB_FILE)
    (d / VOCAB_FILE).write_text(json.dumps({**vocab, "format_version": 99}), encoding="utf-8")
    _expect_error(d, VOCAB_FILE)


def test_scope_cache_does_not_change_results() -> None:
    corpus = _corpus(seed=3, rows=80)
    index = BM25Index.build(corpus)
    first = index.score_range(["w1", "w3"], 20, 30, 0, 80, epsilon=0.25)
    again = index.score_range(["w1", "w3"], 20, 30, 0, 80, epsilon=0.25)
    other_eps = index.score_range(["w1", "w3"], 20, 30, 0, 80, epsilon=0.9)
    np.testing.assert_array_equal(first, again)
    want = BM25Okapi(corpus, epsilon=0.9).get_scores(["w1", "w3"])[20:30]
    np.testing.assert_allclose(other_eps, want, rtol=1e-5, atol=1e-6)


@given(corpus=_CORPUS)
@settings(max_examples=50, deadline=None)
def test_property_leaf_ranges_equal_separate_leaf_indexes(corpus) -> None:
    """The spec's one-BM25Okapi-per-leaf, reproduced from one shared index."""
    assume(all(row for row in corpus))
    index = BM25Index.build(corpus)
    cuts = sorted({0, len(corpus), *range(0, len(corpus), 3)})
    for s, e in zip(cuts, cuts[1:]):
        for q in (["t1"], ["t2", "中文"], ["t3", "t3"]):
            np.testing.assert_allclose(index.score_range(q, s, e), BM25Okapi(corpus[s:e]).get_scores(q),
                                       rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("run_postings", [1, 7, 64])
def test_spilled_build_writes_the_same_files_as_the_in_memory_build(tmp_path: Path, run_postings: int) -> None:
    """Past ``run_postings`` a build spills sorted runs to disk and merges them; the saved index must be
    byte for byte the one an in-memory build saves, and the scratch directory must go away."""
    from indexing import bm25_spill
    from indexing.bm25_builder import BM25Builder

    corpus = _corpus(seed=5, rows=300)
    memory, spilled = BM25Builder(), BM25Builder(run_postings=run_postings, spill_dir=tmp_path)
    for toks in corpus:
        memory.add(toks)
        spilled.add(toks)
    a, b = memory.finish(), spilled.finish()
    assert b.spill_owner is not None and a.spill_owner is None
    scratch = b.spill_owner.directory
    assert scratch.parent == tmp_path and scratch.is_dir()
    q = ["w1", "w2", "w9", "w1"]
    np.testing.assert_array_equal(_all(b, q), _all(a, q))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    BM25Index.load(tmp_path / "b").check_postings()
    del b, spilled
    import gc

    gc.collect()
    assert not scratch.exists()
    assert bm25_spill.MERGE_BLOCK_POSTINGS > 0


def test_merge_in_small_blocks_keeps_terms_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge block smaller than one term's postings still writes every term complete and in row order."""
    from indexing import bm25_spill
    from indexing.bm25_builder import BM25Builder

    monkeypatch.setattr(bm25_spill, "MERGE_BLOCK_POSTINGS", 3)
    corpus = _corpus(seed=6, rows=200)
    memory, spilled = BM25Builder(), BM25Builder(run_postings=50, spill_dir=tmp_path)
    for toks in corpus:
        memory.add(toks)
        spilled.add(toks)
    a, b = memory.finish(), spilled.finish()
    for name in ("indptr", "rows", "tf", "row_indptr", "row_terms", "doc_len"):
        np.testing.assert_array_equal(np.asarray(getattr(b, name)), np.asarray(getattr(a, name)), err_msg=name)
