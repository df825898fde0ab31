"""Whole-collection BM25 top rows on an index with delta segments: the same rows and bit-identical
scores as scoring every live row, ties included, and the same as a full build of the changed folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing import bm25_corpus
from indexing.bm25_builder import BM25Index
from indexing.bm25_corpus import score_rows, top_rows
from indexing.embedders.factory import make_embedder
from indexing.index_store import load_index
from indexing.search import EVERYTHING, ScoreParams
from indexing.segment_bm25 import SegmentBM25
from retrieval.query import Query
from tests.test_delta_update import _build, _change, _doc, _first, _write

QUESTIONS = ["zeta omega", "report sentence zeta", "alpha1 sensors gamma4 beta9 epsilon accuracy",
             "results report 6 delta0", "sentence 12 about gamma11 and delta4", "omega again zeta zeta report",
             "calibration step twice a day", "result", "nothing-like-this"]
SETTINGS = [{}, {"k1": 0.4, "b": 0.0, "epsilon": 0.0}, {"k1": 2.5, "b": 1.0, "epsilon": 1.0}]


def _reference_top(index: SegmentBM25 | BM25Index, tokens: list[str], k: int, **kw: float) -> np.ndarray:
    """Every row scored, best first, ties by the lower row: the first k positives, ascending."""
    scores = index.score_range(tokens, 0, index.n_rows, **kw)
    rows = np.flatnonzero(scores > 0)
    order = np.lexsort((rows, -scores[rows]))
    return np.sort(rows[order[:k]])


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[SegmentBM25, BM25Index]:
    """Two updates (a changed, a new, removed documents, one changed twice: documents moved out of the
    base's order), and a full build of the same folder."""
    tmp = Path(tmp_path_factory.mktemp("segbm25"))
    src = _write(tmp / "docs", _first(tmp))
    idx, full = tmp / "idx", tmp / "full"
    _build(src, idx)
    docs = _change(src, _first(tmp))
    _build(src, idx)
    docs["r55.md"] = _doc(55, " Omega again, changed twice.")
    docs["r6.md"] = _doc(6, " Zeta in a base document.")
    del docs["sub/a.md"]
    _write(src, docs)
    assert _build(src, idx).update.delta == 2  # type: ignore[attr-defined]
    _build(src, full, update=False)
    seg, whole = load_index(idx).search.bm25, load_index(full).search.bm25
    assert isinstance(seg, SegmentBM25) and isinstance(whole, BM25Index)
    assert len(seg.parts) == 3 and not seg.runs.monotone
    return seg, whole


def _tokens(text: str) -> list[str]:
    return list(Query.build(text, make_embedder("hash", Config(embedder="hash"))).tokens)


@pytest.mark.parametrize("kw", SETTINGS)
@pytest.mark.parametrize("text", QUESTIONS)
def test_top_rows_on_segments_match_every_live_row_and_a_full_build(indexes: tuple[SegmentBM25, BM25Index],
                                                                    text: str, kw: dict[str, float]) -> None:
    seg, whole = indexes
    tokens = _tokens(text)
    every = seg.score_range(tokens, 0, seg.n_rows, **kw)
    assert np.array_equal(every, whole.score_range(tokens, 0, whole.n_rows, **kw))
    for k in range(1, seg.n_rows + 2):  # every cut, so every tie at one
        got = top_rows(seg, tokens, k, **kw)
        assert np.array_equal(got, _reference_top(seg, tokens, k, **kw)), k
        assert np.array_equal(got, top_rows(whole, tokens, k, **kw)), k
    rows = np.random.default_rng(3).permutation(seg.n_rows)[:60]  # any order, as candidates come
    got_scores = score_rows(seg, tokens, rows, **kw)
    assert got_scores.dtype == np.float32
    assert np.array_equal(got_scores, every[rows])
    assert np.array_equal(got_scores, score_rows(whole, tokens, rows, **kw))


def test_the_cuts_compared_include_ties(indexes: tuple[SegmentBM25, BM25Index]) -> None:
    """The comparison above is only as good as its ties: some cut falls inside a run of equal scores."""
    seg, _ = indexes
    scores = seg.score_range(_tokens("report sentence zeta"), 0, seg.n_rows)
    best = np.sort(scores[scores > 0])[::-1]
    assert np.any(best[1:] == best[:-1])


def test_segments_take_the_bound_path_not_every_row(indexes: tuple[SegmentBM25, BM25Index],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: a rare word's best rows end the search before the word found in every row is
    weighed, and no row is scored wholesale. (With candidates as cheap to score as a posting is to read:
    on this small corpus reading the frequent word is otherwise the cheaper.)"""
    monkeypatch.setattr(bm25_corpus, "SEARCH_COST", 0)
    seg, whole = indexes
    tokens = _tokens("calibration report")  # in a tenth of the rows; in every row
    k = 3
    want = _reference_top(seg, tokens, k)
    weighed: list[tuple[int, int]] = []
    for s, part in enumerate(seg.parts):
        real = part._corpus_term_weights

        def weights(tid: int, *args: float, _s: int = s, _real: object = real) -> np.ndarray:
            weighed.append((_s, tid))
            return _real(tid, *args)  # type: ignore[operator]

        monkeypatch.setattr(part, "_corpus_term_weights", weights)
        monkeypatch.setattr(part, "score_range", lambda *a, **kw: pytest.fail("scored a whole segment"))
    monkeypatch.setattr(seg, "score_range", lambda *a, **kw: pytest.fail("scored every row"))
    assert np.array_equal(top_rows(seg, tokens, k), want)
    assert np.array_equal(top_rows(seg, tokens, k), top_rows(whole, tokens, k))
    frequent = [(s, p.term_ids["report"]) for s, p in enumerate(seg.parts) if "report" in p.term_ids]
    assert frequent and not set(frequent) & set(weighed)


def test_a_segmented_index_answers_whole_collection_candidates_from_top_rows(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """FileSearch's ANN path on a segmented index asks ``top_rows`` and gets a full build's candidates."""
    src = _write(tmp_path / "docs", _first(tmp_path))
    idx, full = tmp_path / "idx", tmp_path / "full"
    config = Config(embedder="hash", delta_max_share=1.0, ann="on")
    _build(src, idx, config=config)
    _change(src, _first(tmp_path))
    assert _build(src, idx, config=config).update.delta == 1  # type: ignore[attr-defined]
    _build(src, full, config=config, update=False)
    import indexing.file_search as file_search

    asked: list[str] = []
    real = file_search.top_rows

    def spy(index: object, *args: object) -> np.ndarray:
        asked.append(type(index).__name__)
        return real(index, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(file_search, "top_rows", spy)
    q = Query.build("Omega zeta here, report", make_embedder("hash", Config(embedder="hash")))
    params = ScoreParams(ann="auto", ann_candidates=5)
    a, b = (load_index(p).search.score(q, EVERYTHING, "corpus", params) for p in (idx, full))
    assert asked == ["SegmentBM25", "BM25Index"]
    seg_bm25 = load_index(idx).search.bm25
    best = top_rows(seg_bm25, list(q.tokens), 5)
    assert set(best.tolist()) <= set(a.rows.tolist())
    assert np.array_equal(a.lexical[np.searchsorted(a.rows, best)],
                          seg_bm25.score_range(list(q.tokens), 0, seg_bm25.n_rows)[best])
    lex_a = dict(zip(a.rows.tolist(), a.lexical.tolist()))
    lex_b = dict(zip(b.rows.tolist(), b.lexical.tolist()))
    assert all(lex_a[r] == lex_b[r] for r in best.tolist())
