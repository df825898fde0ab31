"""The Search contract in retrieval's terms: scopes, statistics scopes, what a lexical score is, and
per-question caches that live on the question (so one index serves several threads)."""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index
from indexing.search import ChunkRows, QueryMemo, Scope, ScoreParams, bm25_kind
from pipeline import Backends, run_retrieval
from retrieval.query import Query
from retrieval.scoring import score_scope

DOCS = {
    "a.md": "# Cats\n\n## Sleep\n\nCats sleep a lot during the day. Cats sleep in the sun.\n\n"
            "## Food\n\nCats eat fish and mice. A cat drinks water.\n",
    "b.md": "# Dogs\n\n## Bark\n\nDogs bark at the mail carrier. Dogs bark at night.\n\n"
            "## Walks\n\nDogs need walks. A dog sleeps after a walk in the sun.\n",
}


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("two")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    cfg = Config(chunk_size=60, chunk_overlap=10)
    build_index(root / "docs", root / "idx", cfg, make_embedder("hash", cfg))
    return load_index(root / "idx")


def ask(text: str) -> Query:
    return Query.build(text, make_embedder("hash", Config()))


def test_a_scope_is_a_leaf_some_documents_or_everything() -> None:
    assert Scope.of_leaf(3).kind == "leaf" and Scope.of_documents({"a.md"}).kind == "documents"
    assert Scope.of_documents(None) == Scope.everything() and Scope.everything().kind == "everything"
    assert Scope.of_documents(["b.md", "a.md"]) == Scope.of_documents({"a.md", "b.md"})  # hashable, order-free
    with pytest.raises(ValueError):
        Scope(leaf=1, documents=frozenset({"a.md"}))


def test_chunk_rows_name_the_statistics_of_each_scope(two) -> None:
    rows = ChunkRows(two.leaf_ptr, two.doc_rows)
    (a0, a1), (b0, b1) = two.doc_rows["a.md"], two.doc_rows["b.md"]
    n = len(two.chunks)
    assert (a0, b1) == (0, n) and a1 == b0
    leaf = next(j for j in range(rows.n_leaves) if rows.leaf(j)[0] >= b0 and rows.leaf(j)[1] > rows.leaf(j)[0])
    s, e = rows.leaf(leaf)
    assert rows.idf_rows(s, e, "leaf") == (s, e)
    assert rows.idf_rows(s, e, "document") == (b0, b1)
    assert rows.idf_rows(s, e, "corpus") == (0, n)
    assert [p for p, _, _ in rows.documents(frozenset({"b.md", "a.md", "gone.md"}))] == ["a.md", "b.md"]
    mixed = np.array([b0, a0, b1 - 1, a1 - 1])
    groups = {span: members.tolist() for members, span in rows.stats_groups(mixed, "document")}
    assert groups == {(a0, a1): [1, 3], (b0, b1): [0, 2]}
    with pytest.raises(ValueError):
        rows.leaf(rows.n_leaves)


def test_files_score_bm25_with_the_statistics_asked_for(two) -> None:
    q = ask("cats sleep in the sun")
    bm, p = two.search.bm25, ScoreParams()
    n = len(two.chunks)
    everything = two.search.score(q, Scope.everything(), "corpus", p)
    assert everything.lexical_kind == bm25_kind("corpus") and everything.complete
    np.testing.assert_array_equal(everything.lexical, bm.score_range(list(q.tokens), 0, n, 0, n))
    per_doc = two.search.score(q, Scope.everything(), "document", p)
    assert per_doc.lexical_kind == bm25_kind("document") and per_doc.rows.tolist() == list(range(n))
    for s, e in two.doc_rows.values():  # each chunk with its own document's statistics
        np.testing.assert_array_equal(per_doc.lexical[s:e], bm.score_range(list(q.tokens), s, e, s, e))
    np.testing.assert_array_equal(per_doc.dense, everything.dense)
    assert not np.array_equal(per_doc.lexical, everything.lexical)  # "sun" is rarer in one document
    s, e = two.doc_rows["b.md"]
    doc = two.search.score(q, Scope.of_documents({"b.md"}), "document", p)
    np.testing.assert_array_equal(doc.lexical, per_doc.lexical[s:e])
    leaf = int(np.searchsorted(two.leaf_ptr, s, side="right")) - 1
    ls, le = int(two.leaf_ptr[leaf]), int(two.leaf_ptr[leaf + 1])
    in_leaf = two.search.score(q, Scope.of_leaf(leaf), "leaf", p)
    assert in_leaf.rows.tolist() == list(range(ls, le)) and in_leaf.lexical_kind == bm25_kind("leaf")
    np.testing.assert_array_equal(in_leaf.lexical, bm.score_range(list(q.tokens), ls, le))
    # candidates re-scored in any order equal the scope's own scores at those rows
    picked = np.array([n - 1, 0, s, 1], dtype=np.int64)
    again = two.search.rescore(q, picked, "document", p)
    assert again.rows.tolist() == picked.tolist()
    np.testing.assert_array_equal(again.lexical, per_doc.lexical[picked])
    np.testing.assert_allclose(again.dense, per_doc.dense[picked], rtol=1e-6)
    # without a vector, dense scores are zeros; without words, lexical scores are
    words_only = two.search.score(Query.build(q.text, None), Scope.everything(), "corpus", p)
    assert not words_only.dense.any() and np.array_equal(words_only.lexical, everything.lexical)
    vector_only = two.search.score(dataclasses.replace(q, tokens=()), Scope.everything(), "corpus", p)
    assert not vector_only.lexical.any()


def test_files_count_term_statistics_of_each_scope_from_the_chunks(two) -> None:
    """term_stats: how many chunks of a scope hold each word, as the chunks' own tokens say."""
    from utils.tokenizer import tokenize

    words = ["cats", "sleep", "sun", "dogs", "absentword"]

    def counted(rows: range) -> tuple[int, dict[str, int]]:
        df: dict[str, int] = {}
        for r in rows:
            for t in set(tokenize(two.chunks[r].text)) & set(words):
                df[t] = df.get(t, 0) + 1
        return len(rows), df

    n = len(two.chunks)
    assert two.search.term_stats(words) == two.search.term_stats(words, Scope.everything()) == counted(range(n))
    s, e = two.doc_rows["b.md"]
    b_only = two.search.term_stats(words, Scope.of_documents({"b.md"}))
    assert b_only == counted(range(s, e)) and "cats" not in b_only[1] and b_only[1]["sun"] >= 1
    both_docs = two.search.term_stats(words, Scope.of_documents({"a.md", "b.md", "not-indexed.md"}))
    assert both_docs == counted(range(n))
    ls, le = int(two.leaf_ptr[1]), int(two.leaf_ptr[2])
    assert two.search.term_stats(words, Scope.of_leaf(1)) == counted(range(ls, le))
    assert two.search.term_stats(words, Scope.of_documents({"not-indexed.md"})) == (0, {})


def test_files_count_the_documents_holding_each_word(two) -> None:
    """document_counts: how many documents hold each word in their chunks' tokens."""
    from utils.tokenizer import tokenize

    cat, sun = tokenize("cats sun")
    words = [cat, "sleep", sun, "absentword"]
    held: dict[str, int] = {}
    for path, (s, e) in two.doc_rows.items():
        tokens = {t for r in range(s, e) for t in tokenize(two.chunks[r].text)}
        for t in tokens & set(words):
            held[t] = held.get(t, 0) + 1
    assert two.search.document_counts(words) == (2, held)
    assert held[sun] == 2 and held[cat] == 1 and "absentword" not in held


class _CountingSearch:
    """The file store, counting how often retrieval asks it to score a scope."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def score(self, *args):
        self.calls += 1
        return self.inner.score(*args)


def test_a_scope_is_scored_once_per_question_scope_and_settings(tmp_path: Path, two) -> None:
    index = load_index(two.path)
    spy = index.search = _CountingSearch(index.search)
    q = ask("dogs bark at night")
    cfg = Config()
    first = score_scope(index, q, Scope.everything(), cfg, "corpus")
    assert score_scope(index, q, Scope.everything(), cfg, "corpus") is first and spy.calls == 1
    score_scope(index, q, Scope.everything(), cfg, "document")  # another statistics scope
    score_scope(index, q, Scope.of_documents({"b.md"}), cfg, "corpus")  # another scope
    score_scope(index, q, Scope.everything(), cfg.replace(bm25_k1=1.2), "corpus")  # other settings
    score_scope(index, q, Scope.everything(), cfg.replace(store_candidates=7), "corpus")
    assert spy.calls == 5
    score_scope(index, ask("dogs bark at night"), Scope.everything(), cfg, "corpus")  # another question
    score_scope(index, dataclasses.replace(q, tokens=("dog",)), Scope.everything(), cfg, "corpus")
    assert spy.calls == 7
    assert not hasattr(index, "derived")  # nothing per question is kept on the shared index


def test_query_memo_keeps_the_first_value_and_its_own_keys() -> None:
    memo = QueryMemo()
    made: list[int] = []
    assert memo.get_or_make("k", lambda: made.append(1) or 1) == 1
    assert memo.get_or_make("k", lambda: made.append(2) or 2) == 1 and made == [1]
    assert memo.get("other") is None
    q = ask("cats")
    assert dataclasses.replace(q).memo is not q.memo


QUESTIONS = ("Why do dogs bark?", "What do cats eat?", "Where do cats sleep?", "Do dogs need walks?")


@pytest.mark.parametrize("order", ["section-joint", "union-learned+net"])
def test_one_index_answers_questions_from_several_threads_as_it_does_one_at_a_time(two, order: str) -> None:
    """The server shares one loaded index between request threads: each question's caches are its
    own, so answers do not depend on which other questions run at the same time."""
    from evaluation.variants import VARIANTS

    cfg = Config().replace(**{"document_order": order, "collection_order": order})
    backends = Backends(embedder=make_embedder("hash", cfg), reranker=None, llm=None)

    def rows(text: str, scope: frozenset[str] | None) -> list[tuple[int, float]]:
        r = run_retrieval(text, two, cfg, backends, None if scope is None else set(scope), orderings=VARIANTS)
        return [(h.row, round(h.score, 6)) for h in r.pool]

    jobs = [(t, s) for t in QUESTIONS for s in (None, frozenset({"a.md"}), frozenset({"b.md"}))]
    alone = {job: rows(*job) for job in jobs}
    assert all(alone.values())
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda job: (job, rows(*job)), jobs * 3))
    for job, got in together:
        assert got == alone[job], job
