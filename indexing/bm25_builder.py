"""One BM25 index over every chunk of an index, able to score any row range.

The spec builds one ``rank_bm25.BM25Okapi`` per leaf and keeps it on the node.
That cannot be saved without pickle, and a leaf of three chunks has no usable
IDF. So the index is stored once, as term postings (CSC: for each term, the
rows containing it, ascending, with their term frequencies), plus each row's
distinct terms (CSR). From that, ``score_range`` reproduces BM25Okapi exactly
for *any* contiguous rows ``[start, end)`` with IDF/avgdl taken over any
contiguous scope ``[idf_start, idf_end)`` - a leaf's chunks and a document's
chunks are contiguous rows, so "leaf", "document" and "corpus" IDF are all
one call, and the per-leaf default equals ``BM25Okapi(leaf_chunks)``.

rank_bm25 semantics reproduced (v0.2.2, ``BM25Okapi``):
    idf(t)   = ln(N - n_t + 0.5) - ln(n_t + 0.5)      n_t = rows of the scope containing t
    a terms with idf < 0 gets  epsilon * average_idf, average_idf = mean idf over
             every term that occurs in the scope (before the floor)
    score(q) = sum over query tokens (duplicates count again) of
               idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    a token absent from the scope scores 0.
Where rank_bm25 divides by zero (empty scope; every row of the scope empty)
this returns zeros: no evidence, not NaN.

Files (``np.save``, loaded with ``allow_pickle=False``, mmap by default):
    bm25_vocab.json      {"format_version", "tokenizer", "n_rows", "terms": [...]}
    bm25_indptr.npy      int64 (V+1,)  term t's postings are [indptr[t], indptr[t+1])
    bm25_rows.npy        int32 (nnz,)  row of each posting, ascending within a term
    bm25_tf.npy          int32 (nnz,)  term frequency of each posting
    bm25_doc_len.npy     float32 (N,)  tokens per row (duplicates included)
    bm25_row_indptr.npy  int64 (N+1,)  row r's distinct terms are [row_indptr[r], row_indptr[r+1])
    bm25_row_terms.npy   int32 (nnz,)  term ids, per row
The row-wise copy exists so the average IDF of a small scope (a leaf) costs
O(its postings), not O(vocabulary); it doubles a small file.
"""
from __future__ import annotations

import json
import threading
from array import array
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from indexing import bm25_impacts
from indexing.bm25_impacts import Impacts, saturated_weights
from indexing.bm25_spill import PostingSpill, place_file
from utils.errors import IndexFormatError
from utils.idf import okapi
from utils.tokenizer import TOKENIZER_VERSION
from indexing.index_files import IndexDir
from indexing import index_files


FORMAT_VERSION = 1
VOCAB_FILE = "bm25_vocab.json"
INDPTR_FILE = "bm25_indptr.npy"
ROWS_FILE = "bm25_rows.npy"
TF_FILE = "bm25_tf.npy"
DOC_LEN_FILE = "bm25_doc_len.npy"
ROW_INDPTR_FILE = "bm25_row_indptr.npy"
ROW_TERMS_FILE = "bm25_row_terms.npy"
FILES: tuple[str, ...] = (VOCAB_FILE, INDPTR_FILE, ROWS_FILE, TF_FILE, DOC_LEN_FILE,
                          ROW_INDPTR_FILE, ROW_TERMS_FILE)
"""Every file ``save`` writes (for an index store that lists or checks its files)."""
PREFIX = "bm25_"


def file_names(prefix: str = PREFIX) -> tuple[str, ...]:
    """The seven files of one BM25 index saved under ``prefix`` (an index holds more than one)."""
    return tuple(prefix + name[len(PREFIX):] for name in FILES)

_SCOPE_CACHE_MAX = 4096
RUN_POSTINGS = 1 << 22
"""Postings a build holds before spilling them to disk as a sorted run (4M: ~32 MB of buffers, ~100 MB
while one is sorted; a 10,000-document build has 21M postings, 100,000 documents ~210M)."""
WEIGHT_CACHE_POSTINGS = 1 << 23
"""Corpus term weights kept (float32 each, 32 MB): the postings of a few hundred frequent query terms.
Only queried terms are weighted: weighting every posting at once read the whole postings file
(0.4 s and 340 MB at 10,000 documents) on a process's first whole-collection question."""


def rows_between(postings: np.ndarray, start: int, end: int) -> tuple[int, int]:
    """Positions ``[lo, hi)`` of the postings whose rows fall in ``[start, end)`` (``postings`` ascending).

    Why the keys take the postings' own dtype: ``np.searchsorted`` casts the *array* to the common
    type of array and keys, so int64 keys (what a tuple of Python ints becomes) on the int32 postings
    copied the whole posting list (7.8M rows of one frequent term at 100,000 documents: ~8 ms) for
    each two-key lookup. Row numbers fit the postings' dtype: they are stored in it.
    """
    top = int(np.iinfo(postings.dtype).max)
    n = len(postings)
    lo = 0 if start <= 0 else n if start > top else int(np.searchsorted(postings, postings.dtype.type(start)))
    hi = 0 if end <= 0 else n if end > top else int(np.searchsorted(postings, postings.dtype.type(end)))
    return lo, max(lo, hi)


def term_idf(n: float, df: int, eps_idf: float) -> float:
    """Okapi BM25's IDF of a word found in ``df`` of ``n`` rows; a negative one (a word in more than half
    of them) is floored to ``eps_idf``, as rank_bm25 does. One function because every scoring path (a
    range, the collection's candidates, a segmented index) must give bit-identical scores."""
    idf = okapi(n, df)
    return eps_idf if idf < 0 else idf


class BM25Index:
    """Immutable BM25 statistics for N rows (chunks), scored by row range.

    The only mutable parts are caches of values derived from the immutable
    arrays: ``_scope_cache`` holds per-scope (N, avgdl, average_idf), so
    repeated queries over one document or the corpus do not recount its
    vocabulary; ``_corpus_weights`` holds, for the last (k1, b) used with the
    corpus scope, the saturated term weights
    ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` (float32) of the postings
    of the terms queried so far (up to ``WEIGHT_CACHE_POSTINGS``), which turns a repeated
    corpus-IDF term into one multiply-add per posting; ``_checked_terms`` the terms whose
    postings were checked when first read (``postings``).
    """

    def __init__(self, terms: list[str], indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray,
                 doc_len: np.ndarray, row_indptr: np.ndarray, row_terms: np.ndarray,
                 tokenizer: str = TOKENIZER_VERSION) -> None:
        self.terms = terms
        self.indptr = indptr
        self.rows = rows
        self.tf = tf
        self.doc_len = doc_len
        self.row_indptr = row_indptr
        self.row_terms = row_terms
        self.tokenizer = tokenizer
        self._term_ids: dict[str, int] | None = None
        self._scope_cache: dict[tuple[int, int], tuple[float, float, float]] = {}
        self._corpus_weights: dict[int, np.ndarray] = {}
        self._weights_of: tuple[float, float, float] | None = None
        self._checked_terms: set[int] = set()
        self._requested: set[int] = set()
        """Terms whose postings were requested from the disk ahead (``will_need``), once a process."""
        self._lock = threading.Lock()
        self.names: tuple[str, str, str] = (ROWS_FILE, TF_FILE, ROW_TERMS_FILE)
        """The postings' file names (rows, tf, row terms), for errors about them."""
        self.row_indptr_name = ROW_INDPTR_FILE
        self.spilled: dict[str, Path] = {}
        """File name -> the finished ``.npy`` a spilled build wrote (``save`` moves it into place)."""
        self.spill_owner: object = None
        """Keeps a spilled build's scratch directory alive as long as this index reads from it."""
        self.impacts: Impacts | None = None
        """The postings' stored collection-scope weights (indexing/bm25_impacts.py), when the index has them."""
        self._impacts_checked: set[int] = set()

    # ------------------------------------------------------------------ build

    @classmethod
    def build(cls, tokenized: Iterable[Sequence[str]], tokenizer: str = TOKENIZER_VERSION) -> "BM25Index":
        """Index tokenised rows; row i of the index is the i-th row of ``tokenized`` (chunk order)."""
        builder = BM25Builder(tokenizer)
        for toks in tokenized:
            builder.add(toks)
        return builder.finish()

    # ------------------------------------------------------------- properties

    @property
    def n_rows(self) -> int:
        return int(self.doc_len.shape[0])

    @property
    def vocab_size(self) -> int:
        return len(self.terms)

    @property
    def term_ids(self) -> dict[str, int]:
        if self._term_ids is None:
            self._term_ids = dict(zip(self.terms, range(len(self.terms))))
        return self._term_ids

    # ------------------------------------------------------------------ disk

    def save(self, directory: Path, prefix: str = PREFIX, impacts: tuple[float, float] | None = None) -> None:
        """Write the files listed in ``file_names(prefix)`` into ``directory`` (which must exist); with
        ``impacts`` = (k1, b), the postings' weights under those settings too (``bm25_impacts``)."""
        directory = Path(directory)
        vocab_file, indptr_file, rows_file, tf_file, doc_len_file, row_indptr_file, row_terms_file = \
            file_names(prefix)
        vocab = {"format_version": FORMAT_VERSION, "tokenizer": self.tokenizer,
                 "n_rows": self.n_rows, "terms": self.terms}
        with open(directory / vocab_file, "w", encoding="utf-8") as fh:
            json.dump(vocab, fh, ensure_ascii=False)
        for name, arr, dtype, own in ((indptr_file, self.indptr, np.int64, INDPTR_FILE),
                                      (rows_file, self.rows, np.int32, ROWS_FILE),
                                      (tf_file, self.tf, np.int32, TF_FILE),
                                      (doc_len_file, self.doc_len, np.float32, DOC_LEN_FILE),
                                      (row_indptr_file, self.row_indptr, np.int64, ROW_INDPTR_FILE),
                                      (row_terms_file, self.row_terms, np.int32, ROW_TERMS_FILE)):
            spilled = self.spilled.get(own)
            if spilled is not None:  # already a finished file: moved, not read through memory
                self.spilled[own] = place_file(spilled, directory / name)
                continue
            np.save(directory / name, np.ascontiguousarray(arr, dtype=dtype), allow_pickle=False)
        if impacts is not None:
            bm25_impacts.write(self, directory, prefix, *impacts)

    @classmethod
    def load(cls, directory: Path, mmap: bool = True, files: "IndexDir | None" = None,
             prefix: str = PREFIX) -> "BM25Index":
        """Load and validate; any inconsistency raises IndexFormatError naming the file.

        ``files`` is the index's opened directory (so BM25 comes from the same
        version as everything else); without it ``directory`` is opened here.
        """
        if files is None:
            with IndexDir(Path(directory)) as own:
                return cls.load(directory, mmap, own, prefix)
        vocab_file, indptr_file, rows_file, tf_file, doc_len_file, row_indptr_file, row_terms_file = \
            file_names(prefix)
        vocab = files.read_json(vocab_file)
        if not isinstance(vocab, dict) or not isinstance(vocab.get("terms"), list) \
                or not isinstance(vocab.get("n_rows"), int):
            raise IndexFormatError(f"{vocab_file} lacks 'terms' (list) or 'n_rows' (int)")
        if vocab.get("format_version") != FORMAT_VERSION:
            raise IndexFormatError(f"{vocab_file} has BM25 format {vocab.get('format_version')!r}, "
                                   f"this TreeRAG reads {FORMAT_VERSION}; rebuild the index")
        if vocab.get("tokenizer") != TOKENIZER_VERSION:
            raise IndexFormatError(f"{vocab_file} was built with tokenizer {vocab.get('tokenizer')!r}, "
                                   f"this TreeRAG uses {TOKENIZER_VERSION!r}; rebuild the index")
        terms = vocab["terms"]
        if not set(map(type, terms)) <= {str}:
            raise IndexFormatError(f"{vocab_file}: 'terms' must be strings")
        n_terms, n_rows = len(terms), vocab["n_rows"]

        def arr(name: str, dtype: type, length: int | None) -> np.ndarray:
            a = files.read_array(name, mmap)
            if a.dtype != np.dtype(dtype) or a.ndim != 1 or (length is not None and a.shape[0] != length):
                want = f"({length},)" if length is not None else "1-D"
                raise IndexFormatError(f"{name} has shape {a.shape} {a.dtype}, expected {want} "
                                       f"{np.dtype(dtype).name}")
            return a

        indptr = arr(indptr_file, np.int64, n_terms + 1)
        nnz = int(indptr[-1])
        if indptr[0] != 0 or nnz < 0 or (n_terms and np.any(np.diff(indptr) < 0)):
            raise IndexFormatError(f"{indptr_file} is not a valid postings pointer")
        rows = arr(rows_file, np.int32, nnz)
        tf = arr(tf_file, np.int32, nnz)
        doc_len = arr(doc_len_file, np.float32, n_rows)
        if n_rows and not (np.isfinite(np.sum(doc_len, dtype=np.float64)) and float(doc_len.min()) >= 0):
            raise IndexFormatError(f"{doc_len_file} holds NaN, infinite or negative lengths")
        row_indptr = arr(row_indptr_file, np.int64, n_rows + 1)
        row_terms = arr(row_terms_file, np.int32, nnz)
        # its order is checked in full by verify and, for the rows read, by row_span: a question reads the
        # term ids of a few rows, and the whole table is 8 bytes a row (78 MB at 100,000 documents)
        if row_indptr[0] != 0 or row_indptr[-1] != nnz or (
                files.verify and n_rows and np.any(np.diff(row_indptr) < 0)):
            raise IndexFormatError(f"{row_indptr_file} is not a valid row pointer")
        index = cls(terms, indptr, rows, tf, doc_len, row_indptr, row_terms, vocab["tokenizer"])
        index.names = (rows_file, tf_file, row_terms_file)
        index.impacts = bm25_impacts.load(files, prefix, n_terms, nnz, mmap)
        index.row_indptr_name = row_indptr_file
        if files.verify:
            index.check_postings()
            if index.impacts is not None:
                bm25_impacts.verify(index, index.impacts)
        return index

    def check_postings(self) -> None:
        """Every posting and row-term id in bounds, rows ascending within a term, every tf >= 1.

        Why not at load: the postings are three arrays of one entry per (row, distinct term) pair
        (255 MB at 10,000 documents, gigabytes beyond); reading them whole would dominate a cold
        start. A load checks the pointer tables; a query checks the postings of the terms it reads
        (``postings``); ``verify`` calls this.
        """
        rows_file, tf_file, row_terms_file = self.names
        n_rows, n_terms, nnz = self.n_rows, len(self.terms), int(self.indptr[-1])
        step = 1 << 24
        for a in range(0, nnz, step):
            z = min(nnz, a + step)
            rows, tf, tids = (np.asarray(x[a:z]) for x in (self.rows, self.tf, self.row_terms))
            if int(rows.min()) < 0 or int(rows.max()) >= n_rows:
                raise IndexFormatError(f"{rows_file} points at rows outside 0..{n_rows - 1}")
            if int(tf.min()) < 1:
                raise IndexFormatError(f"{tf_file} holds a term frequency below 1")
            if int(tids.min()) < 0 or int(tids.max()) >= n_terms:
                raise IndexFormatError(f"{row_terms_file} points at terms outside the vocabulary")
            # searchsorted needs each term's rows strictly ascending; a violation would silently mis-score.
            # diff[i] compares postings a+i and a+i+1; a term starting at s lifts the pair (s-1, s).
            rising = np.diff(np.asarray(self.rows[a:min(z + 1, nnz)])) > 0
            starts = np.asarray(self.indptr[1:-1]) - 1 - a
            rising[starts[(starts >= 0) & (starts < len(rising))]] = True
            if not bool(np.all(rising)):
                raise IndexFormatError(f"{rows_file}: postings are not sorted by row within a term")
        index_files.release_pages(self.rows, self.tf, self.row_terms)  # checked whole; a query reads a few terms' postings
        self._checked_terms.update(range(n_terms))

    def will_need(self, tids: Sequence[int]) -> None:
        """Request the postings (rows and term frequencies) of terms ``tids`` from the disk together,
        before a question reads them term by term (index_files.will_need_spans): a first question
        after the page cache is dropped waits for one round of parallel reads, not for each term's
        pages in turn. An advice only; nothing for arrays in memory."""
        t = np.asarray([int(x) for x in tids if 0 <= int(x) < len(self.terms) and int(x) not in self._requested],
                       dtype=np.int64)
        if not len(t):
            return
        self._requested.update(t.tolist())  # once a process: later reads find them cached, or fault
        starts, ends = np.asarray(self.indptr[t], dtype=np.int64), np.asarray(self.indptr[t + 1], dtype=np.int64)
        for arr in (self.rows, self.tf):
            index_files.will_need_spans(arr, starts, ends)

    def postings(self, tid: int) -> tuple[int, int, np.ndarray]:
        """(first posting, end, rows) of term ``tid``, its rows and tfs checked the first time they are
        read: a damaged postings file is a one-line IndexFormatError where a query touches it, never a
        wrong score or an IndexError."""
        p0, p1 = int(self.indptr[tid]), int(self.indptr[tid + 1])
        rows = self.rows[p0:p1]
        if tid not in self._checked_terms and p1 > p0:
            rows_file, tf_file, _ = self.names
            r = np.asarray(rows)
            if int(r[0]) < 0 or int(r[-1]) >= self.n_rows:
                raise IndexFormatError(f"{rows_file} points at rows outside 0..{self.n_rows - 1}; "
                                       "run python main.py verify, then rebuild the index")
            if p1 - p0 > 1 and not bool(np.all(np.diff(r) > 0)):
                raise IndexFormatError(f"{rows_file}: postings are not sorted by row within a term; "
                                       "run python main.py verify, then rebuild the index")
            if int(np.min(self.tf[p0:p1])) < 1:
                raise IndexFormatError(f"{tf_file} holds a term frequency below 1; "
                                       "run python main.py verify, then rebuild the index")
            with self._lock:
                self._checked_terms.add(tid)
        return p0, p1, rows

    def row_span(self, a: int, b: int) -> tuple[int, int]:
        """The term ids of rows [a, b) are ``row_terms[x:y]``: (x, y), their part of the row pointer
        checked (ascending, within the postings) where it is read, as ``load_index`` leaves it."""
        ptr = np.asarray(self.row_indptr[a:b + 1])
        nnz = len(self.row_terms)
        if len(ptr) and (int(ptr[0]) < 0 or int(ptr[-1]) > nnz or bool(np.any(np.diff(ptr) < 0))):
            raise IndexFormatError(f"{self.row_indptr_name} is not a valid row pointer; "
                                   "run python main.py verify, then rebuild the index")
        return (int(ptr[0]), int(ptr[-1])) if len(ptr) else (0, 0)

    def _row_term_ids(self, a: int, b: int) -> np.ndarray:
        """Distinct term ids of rows [a, b), checked against the vocabulary (they index arrays)."""
        x, y = self.row_span(a, b)
        index_files.will_need_spans(self.row_terms, np.array([x]), np.array([y]))  # no read-ahead here (index_store)
        tids = np.asarray(self.row_terms[x:y])
        if tids.size and (int(tids.min()) < 0 or int(tids.max()) >= len(self.terms)):
            raise IndexFormatError(f"{self.names[2]} points at terms outside the vocabulary; "
                                   "run python main.py verify, then rebuild the index")
        return tids


    # --------------------------------------------------------------- scoring

    def _scope_stats(self, a: int, b: int, epsilon: float) -> tuple[int, float, float] | None:
        """(N, avgdl, epsilon * average_idf) of rows [a, b); None if BM25 is undefined there."""
        n = b - a
        if n <= 0:
            return None
        key = (a, b)
        cached = self._scope_cache.get(key)
        if cached is None:
            avgdl = bm25_impacts.corpus_avgdl(self.doc_len[a:b])
            if a == 0 and b == self.n_rows:
                df = np.diff(self.indptr)
                df = df[df > 0]
            else:
                tids = self._row_term_ids(a, b)
                if tids.size * 8 < len(self.terms):
                    _, df = np.unique(tids, return_counts=True)
                else:
                    df = np.bincount(tids, minlength=0)
                    df = df[df > 0]
            if df.size:
                df = df.astype(np.float64)
                idf_sum = float(np.sum(np.log(n - df + 0.5) - np.log(df + 0.5)))
                avg_idf = idf_sum / df.size
            else:
                avg_idf = 0.0
            cached = (float(n), avgdl, avg_idf)
            with self._lock:
                if len(self._scope_cache) >= _SCOPE_CACHE_MAX:
                    self._scope_cache.clear()
                self._scope_cache[key] = cached
        n_f, avgdl, avg_idf = cached
        if avgdl <= 0.0:
            return None
        return int(n_f), avgdl, epsilon * avg_idf

    def _check_range(self, start: int, end: int, what: str) -> None:
        if not (0 <= start <= end <= self.n_rows):
            raise ValueError(f"{what} [{start}, {end}) is outside the index's rows [0, {self.n_rows})")

    def score_range(self, query_tokens: Sequence[str], start: int, end: int,
                    idf_start: int | None = None, idf_end: int | None = None,
                    k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> np.ndarray:
        """BM25Okapi scores (float32, length end-start) of rows [start, end).

        IDF and avgdl come from rows [idf_start, idf_end) (default: the scored
        rows themselves, i.e. ``BM25Okapi(rows[start:end]).get_scores``). The
        scope normally contains the scored rows; it does not have to.
        """
        a = start if idf_start is None else idf_start
        z = end if idf_end is None else idf_end
        self._check_range(start, end, "rows")
        self._check_range(a, z, "IDF scope")
        out = np.zeros(end - start, dtype=np.float32)
        if end <= start or not query_tokens:
            return out
        stats = self._scope_stats(a, z, epsilon)
        if stats is None:
            return out
        n, avgdl, eps_idf = stats
        ids = self.term_ids
        whole = a == 0 and z == self.n_rows
        self.will_need([ids[t] for t in set(query_tokens) if t in ids])
        for term, count in Counter(query_tokens).items():
            tid = ids.get(term)
            if tid is None:
                continue
            p0, p1, postings = self.postings(tid)
            if whole:
                df = p1 - p0
            else:
                lo, hi = rows_between(postings, a, z)
                df = hi - lo
            if df == 0:
                continue
            idf = term_idf(n, df, eps_idf)
            if idf == 0.0:
                continue
            if start == 0 and end == self.n_rows:
                lo, hi = 0, p1 - p0
            else:
                lo, hi = rows_between(postings, start, end)
                if hi <= lo:
                    continue
            r = postings[lo:hi]
            # rank_bm25 adds a duplicated query token once per occurrence.
            if whole:
                out[r - start if start else r] += (idf * count) * self._corpus_term_weights(tid, k1, b, avgdl)[lo:hi]
            else:
                f = np.asarray(self.tf[p0 + lo:p0 + hi], dtype=np.float64)
                dl = np.asarray(self.doc_len[r], dtype=np.float64)
                sat = f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * dl / avgdl))
                out[r - start if start else r] += (idf * count) * sat
        bad = ~np.isfinite(out)  # NaN and +-inf to 0, as nan_to_num, in one pass (a million rows: 0.1 ms, not 0.75)
        if bad.any():
            out[bad] = 0.0
        return out.astype(np.float32, copy=False)

    def _stored(self, tid: int, k1: float, b: float, avgdl: float) -> Impacts | None:
        """The stored weights when they were computed for these settings (word ``tid`` checked on its
        first read), else None."""
        imp = self.impacts
        if imp is None or not imp.matches(k1, b, avgdl):
            return None
        if tid not in self._impacts_checked:
            bm25_impacts.check_term(self, imp, tid)
            with self._lock:
                self._impacts_checked.add(tid)
        return imp

    def term_bound(self, tid: int, k1: float, b: float, avgdl: float) -> float:
        """The largest collection-scope weight a posting of word ``tid`` has: the stored maximum when
        the stored weights apply, else ``k1 + 1`` (the weight's limit)."""
        imp = self._stored(tid, k1, b, avgdl)
        return float(imp.maxima[tid]) if imp is not None else k1 + 1.0

    def _corpus_term_weights(self, tid: int, k1: float, b: float, avgdl: float) -> np.ndarray:
        """Saturated tf weight of each posting of term ``tid`` under corpus avgdl: stored (a slice of
        the mapped file), or computed and cached per term."""
        imp = self._stored(tid, k1, b, avgdl)
        if imp is not None:
            return imp.weights[int(self.indptr[tid]):int(self.indptr[tid + 1])]
        key = (k1, b, avgdl)
        hit = self._corpus_weights.get(tid) if self._weights_of == key else None
        if hit is not None:
            return hit
        p0, p1 = int(self.indptr[tid]), int(self.indptr[tid + 1])
        w = saturated_weights(self.tf[p0:p1], self.doc_len[np.asarray(self.rows[p0:p1])], k1, b, avgdl)
        with self._lock:
            if self._weights_of != key or sum(map(len, self._corpus_weights.values())) + len(w) > WEIGHT_CACHE_POSTINGS:
                self._corpus_weights = {}
                self._weights_of = key
            self._corpus_weights[tid] = w
        return w

    def corpus_postings(self, tid: int, k1: float, b: float, avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """(rows, float32 weights) of term ``tid``'s postings under the collection's avgdl: what the
        collection scope adds per posting (bm25_corpus.CorpusPostings)."""
        return (np.asarray(self.postings(tid)[2], dtype=np.int64),
                self._corpus_term_weights(tid, k1, b, avgdl))

    def corpus_weights_at(self, tid: int, keys: np.ndarray, k1: float, b: float,
                          avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """(which of the ascending rows ``keys`` hold term ``tid``, their float32 weights): found by
        binary search, bit-identical to ``_corpus_term_weights`` at those postings."""
        p0, p1, postings = self.postings(tid)
        pos = np.searchsorted(postings, keys.astype(postings.dtype, copy=False))
        inside = pos < (p1 - p0)
        found = np.zeros(len(keys), dtype=bool)
        found[inside] = np.asarray(postings[pos[inside]]) == keys[inside]
        at = pos[found]
        imp = self._stored(tid, k1, b, avgdl)
        if imp is not None:
            return found, np.asarray(imp.weights[p0 + at])
        return found, saturated_weights(self.tf[p0 + at], self.doc_len[keys[found]], k1, b, avgdl)

    def corpus_scores_at(self, terms: Sequence[tuple[int, float]], keys: np.ndarray, k1: float, b: float,
                         avgdl: float) -> np.ndarray:
        """The collection-scope BM25 (float32) of the ascending rows ``keys``, given (term, idf * count)
        in the order ``score_range`` adds them: bit-identical to its scores at those rows."""
        out = np.zeros(len(keys), dtype=np.float32)
        for tid, mult in terms:
            found, weights = self.corpus_weights_at(tid, keys, k1, b, avgdl)
            if found.any():
                out[found] += mult * weights
        return out


class BM25Builder:
    """Rows added one at a time (a streaming index build), then frozen into a ``BM25Index``.

    Only term ids and counts are kept, in typed arrays (4 bytes a posting, not a
    Python int each), so a million-chunk build never holds its tokens at once. Past
    ``run_postings`` postings the buffer is spilled to disk as a sorted run
    (indexing/bm25_spill.py) and ``finish`` merges the runs into ``.npy`` files, so the
    build's memory no longer grows with the postings; a small index stays in memory.
    """

    def __init__(self, tokenizer: str = TOKENIZER_VERSION, run_postings: int = RUN_POSTINGS,
                 spill_dir: Path | None = None) -> None:
        self.tokenizer = tokenizer
        self.term_ids: dict[str, int] = {}
        self.run_postings = run_postings
        self.spill_dir = spill_dir
        self.spill: PostingSpill | None = None
        self.row_ptr = array("q", [0])
        """Every row's end in the postings (all rows, spilled or not)."""
        self.run_start = 0
        """First row of the buffer (rows before it are spilled)."""
        self.terms_of_rows = array("i")
        self.tf_of_rows = array("i")
        self.lengths = array("f")

    def add(self, tokens: Sequence[str]) -> None:
        counts = Counter(tokens)
        ids = self.term_ids
        self.lengths.append(len(tokens))
        self.terms_of_rows.extend([ids.setdefault(term, len(ids)) for term in counts])
        self.tf_of_rows.extend(counts.values())
        self.row_ptr.append(self.row_ptr[-1] + len(counts))
        if len(self.terms_of_rows) >= self.run_postings:
            self._spill()

    def _spill(self) -> None:
        """Write the buffer out as one sorted run and empty it."""
        if self.spill is None:
            self.spill = PostingSpill(self.spill_dir)
        n_rows = len(self.lengths)
        row_ptr = np.frombuffer(self.row_ptr, dtype=np.int64)[self.run_start:n_rows + 1]
        self.spill.add_run(self.run_start, row_ptr - row_ptr[0], np.frombuffer(self.terms_of_rows, dtype=np.int32),
                           np.frombuffer(self.tf_of_rows, dtype=np.int32), len(self.term_ids))
        del row_ptr
        self.terms_of_rows, self.tf_of_rows = array("i"), array("i")
        self.run_start = n_rows

    def finish(self) -> BM25Index:
        if self.spill is not None and self.terms_of_rows:
            self._spill()
        n_rows, n_terms = len(self.lengths), len(self.term_ids)
        row_ptr = np.frombuffer(self.row_ptr, dtype=np.int64).copy()
        doc_len = np.frombuffer(self.lengths, dtype=np.float32).copy()
        self.row_ptr, self.lengths = array("q"), array("f")
        terms = [""] * n_terms
        for term, tid in self.term_ids.items():
            terms[tid] = term
        if self.spill is not None:
            spilled = self.spill.finish(n_terms)
            self.spill = None
            index = BM25Index(terms, spilled.indptr, np.load(spilled.rows, mmap_mode="r"),
                              np.load(spilled.tf, mmap_mode="r"), doc_len, row_ptr,
                              np.load(spilled.row_terms, mmap_mode="r"), self.tokenizer)
            index.spilled = {ROWS_FILE: spilled.rows, TF_FILE: spilled.tf, ROW_TERMS_FILE: spilled.row_terms}
            index.spill_owner = spilled.spill
            index._term_ids = self.term_ids
            return index
        row_terms = np.frombuffer(self.terms_of_rows, dtype=np.int32).copy()
        row_tf = np.frombuffer(self.tf_of_rows, dtype=np.int32).copy()
        self.terms_of_rows = self.tf_of_rows = array("i")  # release the buffers
        # CSC: postings grouped by term, rows ascending within a term (stable sort
        # of a row-ordered list keeps the row order).
        order = np.argsort(row_terms, kind="stable")
        rows = np.repeat(np.arange(n_rows, dtype=np.int32), np.diff(row_ptr))[order]
        tf = row_tf[order]
        del order, row_tf
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(row_terms, minlength=n_terms), out=indptr[1:])
        index = BM25Index(terms, indptr, rows, tf, doc_len, row_ptr, row_terms, self.tokenizer)
        index._term_ids = self.term_ids
        return index
