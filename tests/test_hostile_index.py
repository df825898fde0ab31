"""Hostile index paths and index files: names without a name, crafted .npy headers, a planted backup."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from indexing.index_store import load_index, verify_index
from tests.conftest import ROOT, TEST_PAPER, run_cli
from tests.test_index_store import _restamp
from utils.errors import IndexFormatError, InputError, TreeRAGError


def _one_line_error(proc) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("args", [
    ("query", "--index", "", "--mock", "--no-log", "-q", "encoder"),
    ("query", "--index", "/", "--mock", "--no-log", "-q", "encoder"),
    ("verify", "--index", ""),
    ("verify", "--index", "/"),
    ("index", "--input", str(TEST_PAPER), "--output", "", "--mock", "--quiet"),
    ("index", "--input", str(TEST_PAPER), "--output", "/", "--mock", "--quiet"),
    ("index", "--input", "", "--output", "somewhere", "--mock", "--quiet"),
    ("tree", "--input", ""),
])
def test_index_paths_without_a_name_are_one_line_errors(args: tuple[str, ...]) -> None:
    _one_line_error(run_cli(*args))


def _cli_in(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                          cwd=str(cwd), timeout=120)


def test_dot_as_index_works_from_inside_the_index(paper_index_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "idx"
    shutil.copytree(paper_index_dir, d)
    q = _cli_in(d, "query", "--index", ".", "--mock", "--no-log", "-q", "encoder")
    v = _cli_in(d, "verify", "--index", ".")
    assert q.returncode == 0 and "Traceback" not in q.stderr, q.stderr
    assert v.returncode == 0 and "intact" in v.stdout, v.stderr


def test_dot_outside_an_index_is_a_one_line_error(tmp_path: Path) -> None:
    _one_line_error(_cli_in(tmp_path, "verify", "--index", "."))


@pytest.mark.parametrize("raw", ["", "/"])
def test_api_open_with_a_nameless_path_is_one_line(raw: str) -> None:
    from pipeline import TreeRAG

    with pytest.raises(InputError):
        TreeRAG.open(raw, llm="mock")


def _npy_with_header(shape_text: str, payload: bytes = b"\0" * 64) -> bytes:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape_text
    total = 10 + len(header) + 1
    pad = (64 - total % 64) % 64
    body = (header + " " * pad + "\n").encode("ascii")
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + payload


@pytest.mark.parametrize("shape, payload", [
    ("(4294967296, 4294967296)", 0),  # the product overflows int64 to 0: an empty file "fits"
    ("(4611686018427387904, 4)", 0),
    ("(-1, -1)", 4),  # the product is 1: one float32 "fits"
    ("(-4, -4)", 64),
])
def test_crafted_npy_header_is_refused_in_one_line(paper_index_dir: Path, tmp_path: Path, shape: str,
                                                   payload: int) -> None:
    d = tmp_path / "idx"
    shutil.copytree(paper_index_dir, d)
    (d / "embeddings.npy").write_bytes(_npy_with_header(shape, b"\0" * payload))
    _restamp(d)
    with pytest.raises(IndexFormatError) as info:
        load_index(d)
    assert "embeddings.npy" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(IndexFormatError):
        verify_index(d)
    _one_line_error(run_cli("verify", "--index", str(d)))
    _one_line_error(run_cli("query", "--index", str(d), "--mock", "--no-log", "-q", "encoder"))


def test_query_does_not_rename_a_planted_previous_directory(tmp_path: Path) -> None:
    planted = tmp_path / ".myidx.previous"
    planted.mkdir()
    (planted / "notes.txt").write_text("someone's files", encoding="utf-8")
    proc = run_cli("query", "--index", str(tmp_path / "myidx"), "--mock", "--no-log", "-q", "x")
    _one_line_error(proc)
    assert planted.is_dir() and not (tmp_path / "myidx").exists()


def test_a_real_interrupted_swap_is_still_recovered(paper_index_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(paper_index_dir, tmp_path / ".myidx.previous")
    index = load_index(tmp_path / "myidx")
    assert index.metadata["counts"]["chunks"] > 0
    assert (tmp_path / "myidx").is_dir() and not (tmp_path / ".myidx.previous").exists()


def test_tree_rag_error_is_what_the_api_raises_for_a_missing_index(tmp_path: Path) -> None:
    from pipeline import TreeRAG

    with pytest.raises(TreeRAGError):
        TreeRAG.open(tmp_path / "nope", llm="mock")


# --------------------------------------------------------------------------- Python API arguments

@pytest.mark.parametrize("timeout", [float("nan"), 0, -1, float("inf"), "soon", True])
def test_api_refuses_a_bad_llm_timeout(paper_index_dir: Path, timeout: object) -> None:
    from pipeline import TreeRAG

    with pytest.raises(InputError, match="llm_timeout"):
        TreeRAG.open(paper_index_dir, llm="mock", llm_timeout=timeout)


@pytest.mark.parametrize("kwargs, needle", [({"llm": 123}, "llm must be"), ({"embedder": 5}, "embedder must be"),
                                            ({"use_cache": "yes"}, "use_cache must be"),
                                            ({"config": {"final_top_k": 3}}, "config must be")])
def test_api_refuses_arguments_of_the_wrong_type(paper_index_dir: Path, kwargs: dict, needle: str) -> None:
    from pipeline import TreeRAG

    with pytest.raises(InputError, match=needle):
        TreeRAG.open(paper_index_dir, **{"llm": "mock", **kwargs})


def test_api_question_and_documents_are_checked(paper_index_dir: Path) -> None:
    from pipeline import TreeRAG

    rag = TreeRAG.open(paper_index_dir, llm="mock")
    with pytest.raises(InputError, match="must be a string, got int"):
        rag.ask(123)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="documents must be a list"):
        rag.ask("encoder", documents="test_paper.md")  # type: ignore[arg-type]
    assert rag.ask("encoder", documents=(d for d in ["test_paper.md"])).chunks


def test_damaged_postings_in_an_index_are_caught_by_load_verify_and_the_query_reading_them(
        paper_index_dir: Path, tmp_path: Path) -> None:
    """A cold start must not read every posting, so loading an index checks the postings' structure and
    manifest digest only; ``verify`` checks every posting; a question that reads damaged postings stops
    with one line instead of scoring wrong rows."""
    import numpy as np

    d = tmp_path / "idx"
    shutil.copytree(paper_index_dir, d)
    index = load_index(d)
    term = "encoder"
    tid = index.search.bm25.term_ids[term]
    p0 = int(index.search.bm25.indptr[tid])
    rows = np.load(d / "bm25_rows.npy")
    rows[p0] = len(index.chunks) + 7
    np.save(d / "bm25_rows.npy", rows)
    with pytest.raises(IndexFormatError) as info:  # edited after the build: the manifest's digest says so
        load_index(d)
    assert "bm25_rows.npy" in str(info.value)
    _restamp(d)  # a consistent but damaged index (a hostile author, or a bug in another writer)
    loaded = load_index(d)
    assert loaded.search.bm25.n_rows == len(loaded.chunks)
    with pytest.raises(IndexFormatError) as info:
        verify_index(d)
    assert "bm25_rows.npy" in str(info.value) and "\n" not in str(info.value)
    _one_line_error(run_cli("verify", "--index", str(d)))
    for scope in ([], ["--doc", TEST_PAPER.name]):
        proc = run_cli("query", "--index", str(d), "--mock", "--no-log", *scope, "-q", f"what does the {term} do")
        _one_line_error(proc)
        assert "bm25_rows.npy" in proc.stderr


def test_a_row_pointer_that_goes_back_is_caught_by_verify_and_where_its_rows_are_read(
        paper_index_dir: Path, tmp_path: Path) -> None:
    """Loading checks the BM25 row pointer's ends; its order is checked in full by ``verify`` and, for
    the rows read, where a scope's term ids are read (a whole table is 8 bytes a row, mostly unread)."""
    import numpy as np

    d = tmp_path / "idx"
    shutil.copytree(paper_index_dir, d)
    ptr = np.load(d / "bm25_row_indptr.npy")
    row = len(ptr) // 2
    ptr[row] = ptr[row + 1] + 3  # row's term ids would end before they start
    np.save(d / "bm25_row_indptr.npy", ptr)
    _restamp(d)
    index = load_index(d)
    bm25 = index.search.bm25
    assert bm25.row_span(0, row - 1) == (0, int(ptr[row - 1]))  # rows before it read as before
    with pytest.raises(IndexFormatError) as info:
        bm25.row_span(row - 1, row + 1)
    assert "bm25_row_indptr.npy" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(IndexFormatError) as info:
        verify_index(d)
    assert "bm25_row_indptr.npy" in str(info.value)
    _one_line_error(run_cli("verify", "--index", str(d)))
    # BM25 under the statistics of the leaf that holds the row (a scoped question's path) reads them
    leaf = int(np.searchsorted(index.leaf_ptr, row, side="right")) - 1
    a, b = int(index.leaf_ptr[leaf]), int(index.leaf_ptr[leaf + 1])
    with pytest.raises(IndexFormatError, match="bm25_row_indptr.npy"):
        bm25.score_range(["encoder"], a, b)


def test_an_offset_table_that_goes_back_is_caught_by_verify_and_by_the_record_read(
        paper_index_dir: Path, tmp_path: Path) -> None:
    """Loading checks an offset table's shape, first and last entries; its order is checked in full by
    ``verify`` and, for the two entries of each record, where the record is read."""
    import numpy as np

    d = tmp_path / "idx"
    shutil.copytree(paper_index_dir, d)
    offsets = np.load(d / "chunk_offsets.npy")
    row = len(offsets) // 2
    offsets[row] = offsets[row + 1] + 5  # record row ends before it starts; record row-1 runs past it
    np.save(d / "chunk_offsets.npy", offsets)
    _restamp(d)
    index = load_index(d)
    index.prefetch_chunks(range(len(index.chunks)))  # the lines requested ahead: an advice, never an error
    index.chunks[0]  # untouched records read as before
    for bad in (row - 1, row):
        with pytest.raises(IndexFormatError) as info:
            index.chunks[bad]
        assert "chunks.jsonl" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(IndexFormatError) as info:
        verify_index(d)
    assert "chunk_offsets.npy" in str(info.value)
    _one_line_error(run_cli("verify", "--index", str(d)))
