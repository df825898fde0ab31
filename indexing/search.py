"""What retrieval asks of an index's chunks and leaves, wherever they are stored: the ``Search`` contract.

Why an interface: the same three-step pipeline runs on two stores. The files of an index
directory (``indexing/file_search.FileSearch``: memory-mapped vectors and BM25 postings) and a
database engine (``indexing/seekdb/search.SeekdbSearch``: kNN and full-text search inside
seekdb/OceanBase). Retrieval scores chunks only through these calls, so it never knows which
store answers.

Why scopes, not row ranges: retrieval means "this leaf", "these documents" or "everything", and
"with the statistics of the chunk's leaf, its document or the corpus". Said that way, a store
answers without working backwards from row numbers (an engine filters ``WHERE leaf = ?`` or
``WHERE doc = ?``), and a store that cannot honour a statistics scope says so in the result
(``Scores.lexical_kind``) instead of returning something else under the name BM25.

Rows: chunk ``i`` is row ``i`` (a leaf's and a document's chunks are contiguous rows); leaf ``j``
is the ``j``-th leaf in pre-order. A store may answer a large scope with its best candidates only
(``Scores.rows`` then lists fewer rows than the scope holds): every caller reads the rows it was given.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Literal, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from indexing.search_params import IdfScope
from utils.errors import IndexFormatError

T = TypeVar("T")


@dataclass(frozen=True)
class Scope:
    """The chunks a question is scored against: one leaf, some documents, or the whole collection.

    Build one with ``everything()``, ``of_leaf(j)`` or ``of_documents(paths)``; a document the index
    does not hold is simply not scored.
    """

    leaf: int | None = None
    """Leaf number (pre-order), or None."""
    documents: frozenset[str] | None = None
    """Document paths, or None (with ``leaf`` None: everything)."""

    def __post_init__(self) -> None:
        if self.leaf is not None and self.documents is not None:
            raise ValueError("a scope is a leaf or a set of documents, not both")

    @classmethod
    def everything(cls) -> "Scope":
        return cls()

    @classmethod
    def of_leaf(cls, leaf: int) -> "Scope":
        return cls(leaf=int(leaf))

    @classmethod
    def of_documents(cls, paths: Sequence[str] | frozenset[str] | set[str] | None) -> "Scope":
        """The documents ``paths``; None means every document (``everything()``)."""
        return cls() if paths is None else cls(documents=frozenset(paths))

    @property
    def kind(self) -> Literal["leaf", "documents", "everything"]:
        if self.leaf is not None:
            return "leaf"
        return "everything" if self.documents is None else "documents"


EVERYTHING = Scope.everything()
"""The whole collection (a default argument: ``Scope`` is immutable)."""


@dataclass(frozen=True)
class LexicalKind:
    """What a store's lexical score is, so nothing downstream mistakes one for another."""

    measure: Literal["bm25", "engine"]
    """``bm25``: TreeRAG's BM25Okapi; ``engine``: a database engine's own full-text relevance."""
    idf: IdfScope | None = None
    """For ``bm25``: whose statistics (IDF, average length) it used. None for an engine's relevance,
    whose statistics are the engine's own whatever was asked."""

    def describe(self) -> str:
        if self.measure == "bm25":
            return f"BM25 with {self.idf} statistics"
        return "the engine's full-text relevance (its own statistics)"


def bm25_kind(idf: IdfScope) -> LexicalKind:
    return LexicalKind("bm25", idf)


ENGINE_RELEVANCE = LexicalKind("engine")


@dataclass(frozen=True, eq=False)
class Scores:
    """Dense and lexical scores of chunk rows, for one question and one scope."""

    rows: np.ndarray
    """Index rows scored (int64, ascending within each document of the scope)."""
    dense: np.ndarray
    """Dot product of each row's vector with the question's (float32; zeros without a question vector)."""
    lexical: np.ndarray
    """Each row's lexical score (float32); what it is: ``lexical_kind``."""
    lexical_kind: LexicalKind
    complete: bool = True
    """False when a store answered a large scope from candidates (``rows`` is then a subset)."""


def empty_scores(kind: LexicalKind) -> Scores:
    z = np.zeros(0, dtype=np.float32)
    return Scores(np.zeros(0, dtype=np.int64), z, z, kind)


def concat_scores(parts: Sequence[Scores], kind: LexicalKind) -> Scores:
    """Scores of several scopes side by side (``kind`` for the empty case)."""
    if not parts:
        return empty_scores(kind)
    if len(parts) == 1:
        return parts[0]
    return Scores(np.concatenate([p.rows for p in parts]), np.concatenate([p.dense for p in parts]),
                  np.concatenate([p.lexical for p in parts]), parts[0].lexical_kind,
                  all(p.complete for p in parts))


@dataclass(frozen=True)
class ScoreParams:
    """The query-time settings a store scores with (config.py: bm25_*, store_*, ann*)."""

    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25
    exact_rows: int = 4096
    """An engine scores a scope of at most this many rows exactly; a larger one from candidates."""
    candidates: int = 1000
    """Rows each of an engine's kNN and full-text search contributes for a larger scope."""
    fulltext_max_share: float = 1.0
    """An engine's full-text candidates are searched without the question's words found in more than this
    share of the chunks (each candidate's relevance still counts every word); 1: every word."""
    ann: str = "auto"
    """The file store's whole-collection dense search: auto/on = from its ANN index, off = exact (config.ann)."""
    ann_candidates: int = 1000
    ann_candidates_growth: float = 1 / 3
    ann_probe: float = 0.3
    mapped_mb: int = 768
    """The file store keeps the pages a question read mapped until the process's RSS passes this (config
    ``query_mapped_mb``; 0: released after every question)."""
    ann_kept_mb: int = 1024
    """The file store keeps its ANN files' pages mapped across questions when those files together are at
    most this many MB, whatever ``mapped_mb`` says (config ``query_ann_kept_mb``; 0: never)."""


LEAVES_WANTED = "search.leaves_wanted"
"""Memo key a caller sets (to True) before scoring the whole collection when it will ask for every
leaf's dense similarity (``leaf_dense(query, None, ...)``) right after: the hybrid locator and the
TOC it cuts. A store may start that work beside the chunks' scoring; the results do not change."""


class QueryMemo:
    """Values computed for one question, kept for the rest of its run.

    Why on the question: the locator and the section ranker score the same scope for the same
    question one after the other, and a store may leave something for a later call of the same
    question (the file store's ANN candidates). Kept on the question, these die with it, can never
    answer another question, and need no key for the question itself; keys name everything else
    the value depends on (scope, statistics scope, settings). The lock makes one memo safe to
    share between threads working on the same question.
    """

    def __init__(self) -> None:
        self._values: dict[Hashable, object] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            return self._values.get(key)

    def put(self, key: Hashable, value: object) -> None:
        with self._lock:
            self._values[key] = value

    def get_or_make(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value under ``key``, made (outside the lock: it may query a store) when absent."""
        with self._lock:
            if key in self._values:
                return self._values[key]  # type: ignore[return-value]
        value = make()
        with self._lock:
            return self._values.setdefault(key, value)  # type: ignore[return-value]


class Probe(Protocol):
    """A question as a store sees it (retrieval.query.Query is one)."""

    @property
    def tokens(self) -> Sequence[str]: ...

    @property
    def vector(self) -> np.ndarray | None:
        """None: score lexically only (dense scores are zeros)."""
        ...

    @property
    def memo(self) -> QueryMemo: ...


class Search(Protocol):
    """Scores of chunks and leaves for one question: the contract every store implements."""

    store: str
    """"files" or the engine's name, for messages and the audit record."""

    def score(self, query: Probe, scope: Scope, idf: IdfScope, params: ScoreParams) -> Scores:
        """Dense and lexical scores of every chunk in ``scope`` (or of a large scope's best candidates).

        ``idf``: BM25's statistics come from each chunk's own leaf, its own document, or the whole
        corpus. A store that cannot honour it returns another ``lexical_kind`` and says which.
        """
        ...

    def rescore(self, query: Probe, rows: np.ndarray, idf: IdfScope, params: ScoreParams) -> Scores:
        """Dense and lexical scores of the given chunk rows (candidates found earlier), in that order,
        each with the ``idf`` statistics of its own leaf, document or the corpus."""
        ...

    def dense(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Dot products of the given chunk rows' vectors with ``vector`` (float32)."""
        ...

    def leaf_dense(self, query: Probe, leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        """Dot products of the leaves' heading+summary vectors with the question's; all leaves for None.

        For all leaves a store may leave leaves outside its nearest neighbours at 0."""
        ...

    def leaf_keyword(self, tokens: Sequence[str], leaves: np.ndarray | None, params: ScoreParams) -> np.ndarray:
        """Per leaf (all, or the given ones in that order): how well its heading path + summary match the
        question's words (the file store: sum of log(1 + n/df) over the distinct words, n and df over
        those leaves; an engine: its full-text relevance)."""
        ...

    def term_stats(self, tokens: Sequence[str], scope: Scope = EVERYTHING) -> tuple[int, dict[str, int]]:
        """(chunks in ``scope``, how many of them hold each token; tokens held by none are left out).

        What the statistics behind a BM25 IDF are, for callers that score text the store does not
        hold (the extractive answer's sentences) with the IDF of a document or of the corpus. Exact
        in every store: a store that cannot count a scope raises rather than answer zero."""
        ...

    def document_counts(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(documents in the index, how many of them hold each token in their chunks; tokens held by
        none are left out). Why: a word of a document's card names that document only when few
        documents' texts use it ("Adobe"); a word every filing uses ("operating", "results") names
        none, though it be on one card only. Exact in every store."""
        ...

    def scripts(self) -> frozenset[str]:
        """Writing systems ("latin", "cjk") that occur in the index's vocabulary."""
        ...

    def after_question(self) -> None:
        """A question's answer is built: housekeeping that must not delay it (the file store releases
        the pages it mapped, in the background) starts now; a store with none does nothing."""
        ...

    def warm(self, level: str, long_running: bool = False) -> None:
        """Start, in the background, what a first question would otherwise wait for (Config.store_prewarm;
        ``long_running``: the process will answer many questions). Returns at once; a store with
        nothing to warm does nothing."""
        ...


def leaves_of_rows(leaf_ptr: np.ndarray, rows: Any) -> np.ndarray:
    """The leaf position that owns each chunk row (leaf i owns rows ``[leaf_ptr[i], leaf_ptr[i+1])``; a
    leaf without rows starts where the next one does, so a row belongs to the last leaf starting at or
    before it)."""
    return np.searchsorted(leaf_ptr, np.asarray(rows, dtype=np.int64), side="right") - 1


@dataclass(frozen=True)
class ChunkRows:
    """Where a scope's chunks are, as every store lays them out: leaf ``j`` owns rows
    ``[leaf_ptr[j], leaf_ptr[j+1])``; each document's rows are contiguous (``doc_rows``)."""

    leaf_ptr: np.ndarray
    doc_rows: Mapping[str, tuple[int, int]]
    """Document path -> its rows (documents with chunks only)."""
    _doc_starts: np.ndarray = field(init=False, repr=False)
    _doc_ends: np.ndarray = field(init=False, repr=False)
    _doc_paths: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        paths = list(self.doc_rows)
        n = len(paths)
        rngs = self.doc_rows.values()
        starts = np.fromiter((a for a, _ in rngs), dtype=np.int64, count=n)
        ends = np.fromiter((b for _, b in rngs), dtype=np.int64, count=n)
        order = np.lexsort((ends, starts))  # by (start, end): the order sorting the spans gave
        object.__setattr__(self, "_doc_starts", starts[order])
        object.__setattr__(self, "_doc_ends", ends[order])
        object.__setattr__(self, "_doc_paths", tuple(paths[i] for i in order.tolist()))

    @property
    def n_chunks(self) -> int:
        return int(self.leaf_ptr[-1]) if len(self.leaf_ptr) else 0

    @property
    def n_leaves(self) -> int:
        return max(len(self.leaf_ptr) - 1, 0)

    def leaf(self, j: int) -> tuple[int, int]:
        if not 0 <= j < self.n_leaves:
            raise ValueError(f"leaf {j} is outside the index's {self.n_leaves} leaves")
        return int(self.leaf_ptr[j]), int(self.leaf_ptr[j + 1])

    def documents(self, paths: frozenset[str]) -> list[tuple[str, int, int]]:
        """(path, start, end) of the documents in ``paths`` that have chunks, in row order."""
        return sorted(((p, *self.doc_rows[p]) for p in paths if p in self.doc_rows), key=lambda t: t[1])

    def document_of(self, row: int) -> tuple[str, int, int]:
        """(path, start, end) of the document holding chunk ``row``."""
        i = int(np.searchsorted(self._doc_starts, row, side="right")) - 1
        if i < 0 or row >= int(self._doc_ends[i]):
            raise ValueError(f"chunk row {row} is in no document")
        return self._doc_paths[i], int(self._doc_starts[i]), int(self._doc_ends[i])

    @property
    def n_documents(self) -> int:
        return len(self._doc_starts)

    def documents_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """The document number (row order) of each chunk row."""
        return np.searchsorted(self._doc_starts, np.asarray(rows, dtype=np.int64), side="right") - 1

    def idf_rows(self, start: int, end: int, idf: IdfScope) -> tuple[int, int]:
        """The rows whose statistics BM25 uses for chunks ``[start, end)`` of one leaf or document."""
        if idf == "leaf" or end <= start:
            return start, end
        if idf == "document":
            _, a, z = self.document_of(start)
            return a, z
        return 0, self.n_chunks

    def stats_groups(self, rows: np.ndarray, idf: IdfScope) -> list[tuple[np.ndarray, tuple[int, int]]]:
        """``rows`` split by the statistics each is scored with: (positions into ``rows``, idf rows)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return []
        if idf == "corpus":
            return [(np.arange(len(rows)), (0, self.n_chunks))]
        if idf == "document":
            keys = self.documents_of_rows(rows)
            if int(keys.min()) < 0 or bool(np.any(rows >= self._doc_ends[keys])):
                raise ValueError("a chunk row is in no document")

            def span(k: int) -> tuple[int, int]:
                return int(self._doc_starts[k]), int(self._doc_ends[k])
        else:
            keys = leaves_of_rows(self.leaf_ptr, rows)
            span = self.leaf
        order = np.argsort(keys, kind="stable")
        uniq, first = np.unique(keys[order], return_index=True)
        return [(members, span(int(k))) for k, members in zip(uniq.tolist(), np.split(order, first[1:]))]


def check_finite(scores: np.ndarray, name: str) -> np.ndarray:
    """A non-finite score means a corrupt vector: NaN would silently reorder rankings."""
    if not np.isfinite(scores).all():
        raise IndexFormatError(f"{name} holds NaN or infinite values; rebuild the index")
    return scores
