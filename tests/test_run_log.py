"""The run log: faithful round trip of the typed record, per-stage audit rows, old rows still read,
and never failing a query."""
from __future__ import annotations

import copy
import multiprocessing
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from utils.errors import TreeRAGError
from utils.render import render_history, render_result
from utils.run_log import SCHEMA_VERSION, RunLog, default_log_path
from utils.run_record import RunRecord


def _hit(stage: str, rank: int, chunk: str, score: float) -> dict[str, Any]:
    return {
        "chunk_id": chunk, "node_id": f"n{chunk}", "rank": rank, "score": score,
        "score_details": {"stage": stage, "raw_score": score, "metric_type": "test"},
        "excerpt": f"excerpt of {chunk}", "doc_path": "paper.md",
        "start_char": 10 * rank, "end_char": 10 * rank + 9,
    }


def make_result(run_id: str | None = None, *, created_at: str = "2025-01-01T00:00:00+00:00",
                query: str = "what is tree rag?") -> dict[str, Any]:
    stages = {
        "keyword": [_hit("keyword", r, f"k{r}", 3.0 - r) for r in (1, 2, 3)],
        "vector": [_hit("vector", r, f"v{r}", 0.9 - r / 10) for r in (1, 2)],
        "fusion": [_hit("fusion", r, f"f{r}", 0.5) for r in (1, 2, 3, 4)],
        "rerank": [_hit("rerank", 1, "r1", 7.5)],
    }
    return {
        "run_id": run_id or uuid.uuid4().hex,
        "created_at": created_at,
        "query": query,
        "notice": None,
        "step1_thinking": "the method section",
        "step1_locator": "hybrid",
        "step1_nodes": [{"node_id": "0003", "sub_query": query, "heading_path": "Method", "score": 1.5}],
        "step2_retrieved": [
            {"rank": 1, "chunk_id": "r1", "node_id": "0003", "text": "TreeRAG 先定位节点。",
             "heading_path": "Method > Overview", "doc_path": "paper.md", "start_char": 5,
             "end_char": 40, "start_line": 12, "end_line": 15, "citation": "paper.md:L12-L15",
             "source": "tree", "sub_query": query,
             "scores": {"dense_score": 0.8, "bm25_score": 2.1, "fused_score": 0.7, "rerank_score": 7.5}},
            {"rank": 2, "chunk_id": "f2", "node_id": "0004", "text": "second", "heading_path": "Method",
             "doc_path": "paper.md", "start_char": 41, "end_char": 60, "start_line": 16, "end_line": 17,
             "citation": "paper.md:L16-L17", "source": "net", "sub_query": query,
             "scores": {"dense_score": 0.5, "bm25_score": 0.0, "fused_score": 0.4}},
        ],
        "stages": stages,
        "answer": "TreeRAG locates nodes first [paper.md:L12-L15].",
        "timing_ms": {"locate": 1.0, "retrieve": 2.0, "rerank": 3.0, "synthesize": 4.0, "total": 10.5},
        "providers": {"llm": {"provider": "mock", "model": "mock"},
                      "embedder": {"name": "hash", "model_id": "hash-384", "dim": 384},
                      "reranker": {"name": "none", "model": None}, "locator": "hybrid"},
        "fallbacks": [{"step": "locate", "reason": "no LLM", "used": "hybrid locator"}],
        "usage": {"input_tokens": 100, "output_tokens": 20, "cost_usd": None, "calls": 1, "cached_calls": 0},
        "index": {"path": "/tmp/idx", "created_at": "2025-01-01T00:00:00+00:00",
                  "embedder": {"name": "hash", "model_id": "hash-384", "dim": 384},
                  "documents": 1, "chunks": 12},
        "config": {"final_top_k": 5, "fusion": "weighted", "dense_weight": 0.5},
    }


def make_record(run_id: str | None = None, **kwargs: Any) -> RunRecord:
    """A current record (as the pipeline makes one) with the fields of ``make_result``."""
    return RunRecord.from_dict({**make_result(run_id, **kwargs), "record_version": 2, "logged": True})


class Warnings:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, message: str) -> None:
        self.messages.append(message)


@pytest.fixture
def warns() -> Warnings:
    return Warnings()


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "runs.sqlite3"


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# --------------------------------------------------------------- happy path
def test_default_log_path_env_override_and_platform_default(tmp_path: Path) -> None:
    assert default_log_path({"TREERAG_LOG": str(tmp_path / "x.db")}) == tmp_path / "x.db"
    default = default_log_path({})
    assert default.name == "runs.sqlite3" and "treerag" in str(default).lower()


def test_record_get_round_trip_is_the_original_record(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    result = make_record()
    original = copy.deepcopy(result)
    assert log.record(result) is True
    assert result == original  # recording never alters what the user is shown
    assert log.get(result.run_id) == original
    assert warns.messages == []
    with sqlite3.connect(log_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        row = conn.execute(
            "SELECT query, index_path, answer, json_extract(timing_ms, '$.total'),"
            " json_extract(providers, '$.embedder.dim') FROM runs"
        ).fetchone()
    assert row == (result.query, "/tmp/idx", result.answer.text, 10.5, 384)


def test_hit_rows_one_per_candidate_per_stage(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    result = make_record()
    assert log.record(result)
    with sqlite3.connect(log_path) as conn:
        counts = dict(conn.execute("SELECT stage, COUNT(*) FROM hits GROUP BY stage"))
        final = conn.execute(
            "SELECT rank, chunk_id, score, json_extract(score_details, '$.dense_score'),"
            " start_offset, end_offset, source FROM hits WHERE stage = 'final' ORDER BY rank"
        ).fetchall()
        kw = conn.execute(
            "SELECT rank, score, json_extract(score_details, '$.metric_type'), excerpt, doc_path"
            " FROM hits WHERE stage = 'keyword' ORDER BY rank"
        ).fetchall()
    assert counts == {"keyword": 3, "vector": 2, "fusion": 4, "rerank": 1, "final": 2}
    # the final score is the rerank score where there is one, else the fused score
    assert final == [(1, "r1", 7.5, 0.8, 5, 40, "tree"), (2, "f2", 0.4, 0.5, 41, 60, "net")]
    assert kw[0] == (1, 2.0, "test", "excerpt of k1", "paper.md")


def test_stage_check_constraint_rejects_unknown_stage(log_path: Path, warns: Warnings) -> None:
    assert RunLog(log_path, warns).record(make_record())
    with sqlite3.connect(log_path) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO hits (run_id, stage) VALUES ('x', 'bogus')")


def test_get_by_prefix_and_ambiguous_prefix(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    a, b, c = "abcdef01" + "0" * 24, "abcdef02" + "0" * 24, "99887766" + "1" * 24
    for run_id in (a, b, c):
        assert log.record(make_record(run_id, query=run_id))
    assert log.get("998877").query == c
    assert log.get("abcdef01").query == a
    assert log.get(a).query == a
    with pytest.raises(TreeRAGError) as excinfo:
        log.get("abcdef")
    assert "several runs" in str(excinfo.value) and "\n" not in str(excinfo.value)
    with pytest.raises(TreeRAGError, match="too short"):
        log.get("abc")
    assert log.get("ffffff") is None
    assert log.get("abcd%_") is None  # LIKE wildcards are literal


def test_recent_newest_first_with_summary(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    ids = []
    for day in (3, 1, 2):
        result = make_record(created_at=f"2025-01-0{day}T00:00:00+00:00", query=f"day {day}")
        result.answer.text = "word " * 50
        ids.append(result.run_id)
        assert log.record(result)
    recent = log.recent()
    assert [r.query for r in recent] == ["day 3", "day 2", "day 1"]
    first = recent[0]
    assert first.run_id == ids[0] and first.total_ms == 10.5
    assert first.index_path == "/tmp/idx" and first.fallbacks == 1
    assert len(first.answer_excerpt) <= 80 and first.answer_excerpt.endswith("…")
    assert [r.query for r in log.recent(limit=2)] == ["day 3", "day 2"]


def test_read_calls_on_missing_log_do_not_create_it(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    assert log.recent() == []
    assert log.get("abcdef") is None
    assert not log_path.exists() and not log_path.parent.exists()


# ------------------------------------------------------------ broken logs
def test_parent_is_a_file_record_fails_softly(tmp_path: Path, warns: Warnings) -> None:
    """Unwritable location that works as root too (chmod does not stop root)."""
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    log = RunLog(blocker / "runs.sqlite3", warns)
    assert log.record(make_record()) is False
    assert log.record(make_record()) is False
    assert len(warns.messages) == 1
    message = warns.messages[0]
    assert message.startswith("run log unavailable (") and "this query was not recorded" in message
    assert "\n" not in message


def _unprivileged(body) -> None:
    """Run ``body(base_dir)`` where file permissions bind: as root (CI), in a forked child that
    has dropped to uid/gid 65534 ("nobody"); root ignores permissions, so these tests would
    otherwise never run where it matters. ``base_dir`` is a fresh world-writable directory."""
    import tempfile

    import shutil

    base = Path(tempfile.mkdtemp(prefix="treerag-perm-"))
    base.chmod(0o777)
    try:
        _run_in(base, body)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_in(base: Path, body) -> None:
    import traceback

    if not _as_root():
        body(base)
        return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop privileges, run, report through the pipe, never return into pytest
        os.close(r)
        msg = b"ok"
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            body(base)
        except BaseException:  # noqa: BLE001 - reported to the parent as text
            msg = traceback.format_exc().encode()[-4000:]
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert out == b"ok", out.decode(errors="replace")


def test_read_only_directory_record_fails_softly() -> None:
    def body(base: Path) -> None:
        warns = Warnings()
        ro_dir = base / "ro"
        ro_dir.mkdir()
        ro_dir.chmod(0o500)
        try:
            log = RunLog(ro_dir / "runs.sqlite3", warns)
            assert log.record(make_record()) is False
            assert len(warns.messages) == 1
        finally:
            ro_dir.chmod(0o700)

    _unprivileged(body)


def test_read_only_log_file_record_fails_softly_but_reads() -> None:
    def body(base: Path) -> None:
        warns = Warnings()
        log_path = base / "nested" / "runs.sqlite3"
        log = RunLog(log_path, warns)
        first = make_record()
        assert log.record(first)
        for suffix in ("-wal", "-shm"):  # leave only the main file, read-only
            Path(str(log_path) + suffix).unlink(missing_ok=True)
        log_path.chmod(0o444)
        try:
            assert log.record(make_record()) is False
            assert len(warns.messages) == 1
            assert log.get(first.run_id) == first
        finally:
            log_path.chmod(0o644)

    _unprivileged(body)


def test_corrupt_log_warns_once_and_reads_raise(log_path: Path, warns: Warnings) -> None:
    log_path.parent.mkdir(parents=True)
    log_path.write_bytes(os.urandom(4096))
    log = RunLog(log_path, warns)
    assert log.record(make_record()) is False
    assert log.record(make_record()) is False
    assert len(warns.messages) == 1 and "not recorded" in warns.messages[0]
    for call in (log.recent, lambda: log.get("abcdef")):
        with pytest.raises(TreeRAGError) as excinfo:
            call()
        assert "\n" not in str(excinfo.value) and str(log_path) in str(excinfo.value)


def test_newer_schema_is_not_written_to(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    assert log.record(make_record())
    with sqlite3.connect(log_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    assert log.record(make_record()) is False
    assert "newer" in warns.messages[0]
    with pytest.raises(TreeRAGError, match="newer"):
        log.recent()


def test_locked_log_times_out_and_leaves_the_answer_alone(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns, busy_timeout_ms=100)
    first = make_record()
    assert log.record(first)
    holder = sqlite3.connect(log_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = make_record()
        snapshot = copy.deepcopy(result)
        started = time.monotonic()
        assert log.record(result) is False
        elapsed = time.monotonic() - started
        assert elapsed >= 0.09  # waited for the busy timeout, then gave up (it returned: no hang)
        assert result == snapshot
        assert len(warns.messages) == 1 and "locked" in warns.messages[0]
        assert log.get(first.run_id) == first  # WAL: readers are not blocked by the writer
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert log.record(result) is True  # the lock is gone: logging resumes
    assert len(warns.messages) == 1
    assert log.get(result.run_id) == snapshot


def test_failed_transaction_leaves_no_partial_run(log_path: Path, warns: Warnings) -> None:
    log = RunLog(log_path, warns)
    assert log.record(make_record())
    broken = make_record()
    broken.retrieve.stages.rerank[0].chunk_id = {"not": "bindable"}  # type: ignore[assignment]  # fails after the run row
    assert log.record(broken) is False
    assert len(warns.messages) == 1
    assert log.get(broken.run_id) is None
    with sqlite3.connect(log_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM hits").fetchone()[0] == 12


def test_numpy_scores_are_stored_as_numbers(log_path: Path, warns: Warnings) -> None:
    import numpy as np

    result = make_record()
    result.retrieve.hits[0].scores["dense_score"] = np.float32(0.25)  # type: ignore[assignment]
    result.retrieve.hits[1].scores["fused_score"] = float("nan")
    log = RunLog(log_path, warns)
    assert log.record(result) is True
    stored = log.get(result.run_id)
    assert stored is not None and stored.retrieve.hits[0].scores["dense_score"] == 0.25
    assert stored.retrieve.hits[1].scores["fused_score"] is None  # JSON has no NaN
    with sqlite3.connect(log_path) as conn:
        assert conn.execute("SELECT score FROM hits WHERE stage = 'final' AND rank = 2").fetchone() == (None,)


# ------------------------------------------------------------ old and odd rows
def _store_raw(log: RunLog, log_path: Path, run_id: str, stored: str) -> None:
    """A row whose ``result`` holds ``stored`` as written (an older TreeRAG's, or edited by hand)."""
    assert log.record(make_record(run_id))
    with sqlite3.connect(log_path) as conn:
        conn.execute("UPDATE runs SET result = ? WHERE run_id = ?", (stored, run_id))


def test_a_first_version_row_lists_shows_and_renders(log_path: Path, warns: Warnings) -> None:
    import json

    log = RunLog(log_path, warns)
    old = make_result("a1" * 16)  # no record_version, no graph, no logged, no context: a first-version row
    old["config"] = {"final_top_k": 5, "chunk_size": 200}
    _store_raw(log, log_path, old["run_id"], json.dumps(old))
    assert [r.query for r in log.recent()] == [old["query"]]
    assert "what is tree rag?" in render_history(log.recent())
    record = log.get(old["run_id"][:8])
    assert record is not None and record.record_version == 1 and record.logged
    assert record.retrieve.hits[0].citation == "paper.md:L12-L15" and record.retrieve.graph == []
    # its config was the querying process's: the build-time value is not passed off as the index's
    assert record.config == {"final_top_k": 5} and record.index.build_settings is None
    shown = render_result(record)
    assert "TreeRAG locates nodes first" in shown and "run a1a1a1a1" in shown
    assert record.to_dict()["record_version"] == 2


@pytest.mark.parametrize("stored, message", [
    ('{"run_id": "b", "query": "q", "created_at": "x", "step2_retrieved": "nope"}',
     "step2_retrieved is str, not a list"),
    ('{"run_id": "b", "query": "q", "created_at": "x", "record_version": 9}', "newer TreeRAG"),
    ('{"query": "q", "created_at": "x"}', "no 'run_id'"),
    ('[1, 2]', "JSON object"),
    ('{"run_id": "b", "query": "q", "created_at": "x", "context": {"passages": [{"ranks": ["1"]}]}}',
     "context.passages[0].ranks[0] is str"),
])
def test_an_unreadable_row_is_one_line_not_a_traceback(log_path: Path, warns: Warnings, stored: str,
                                                        message: str) -> None:
    log = RunLog(log_path, warns)
    _store_raw(log, log_path, "c" * 32, stored)
    with pytest.raises(TreeRAGError) as excinfo:
        log.get("c" * 32)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)
    assert "is unreadable" in str(excinfo.value)
    assert [r.run_id for r in log.recent()] == ["c" * 32]  # it still lists


# ------------------------------------------------------------ concurrency
def _write_runs(path: str, n: int, tag: str) -> None:
    log = RunLog(Path(path), lambda message: print(message), busy_timeout_ms=5000)
    for i in range(n):
        if not log.record(make_record(query=f"{tag}-{i}")):
            raise SystemExit(1)


def test_concurrent_threads_and_processes_all_land(log_path: Path) -> None:
    n = 10
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    procs = [ctx.Process(target=_write_runs, args=(str(log_path), n, f"p{i}")) for i in range(2)]
    failures: list[BaseException] = []

    def thread_body(tag: str) -> None:
        try:
            _write_runs(str(log_path), n, tag)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=thread_body, args=(f"t{i}",)) for i in range(2)]
    for worker in [*procs, *threads]:
        worker.start()
    for thread in threads:
        thread.join(timeout=30)
    for proc in procs:
        proc.join(timeout=30)
    assert not failures
    assert [proc.exitcode for proc in procs] == [0, 0]
    with sqlite3.connect(log_path) as conn:
        queries = {q for (q,) in conn.execute("SELECT query FROM runs")}
        hits = conn.execute("SELECT COUNT(*) FROM hits").fetchone()[0]
    expected = {f"{tag}-{i}" for tag in ("p0", "p1", "t0", "t1") for i in range(n)}
    assert queries == expected
    assert hits == 12 * len(expected)


def test_the_log_keeps_the_newest_max_runs_and_their_hit_rows_only(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "runs.sqlite3", warn=lambda _m: None, max_runs=3)
    ids = [f"run{i:04d}aaaa" for i in range(7)]
    for run_id in ids:
        assert log.record(make_record(run_id, query=run_id))
    assert [r.run_id for r in log.recent(100)] == ids[:-4:-1]  # the three newest, newest first
    assert log.get(ids[0]) is None
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        kept = {row[0] for row in conn.execute("SELECT DISTINCT run_id FROM hits")}
    assert kept == set(ids[-3:])  # the deleted runs' audit rows went with them


def test_max_runs_zero_keeps_every_run(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "runs.sqlite3", warn=lambda _m: None, max_runs=0)
    for i in range(5):
        assert log.record(make_record(f"keep{i:04d}bbbb"))
    assert len(log.recent(100)) == 5


def test_runs_can_be_read_for_one_index_only(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "runs.sqlite3", warn=lambda _m: None)
    mine, other = make_record("mine00000001"), make_record("other0000001")
    other.index.path = "/elsewhere/secret-index"
    assert log.record(mine) and log.record(other)
    assert [r.run_id for r in log.recent(10, index_path=mine.index.path)] == ["mine00000001"]
    assert log.get("other0000001", index_path=mine.index.path) is None
    assert log.get("other0", index_path=mine.index.path) is None  # nor by a prefix
    assert log.get("other0000001") is not None  # the CLI's history still sees every run


def test_a_stored_record_nested_too_deep_is_one_error_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    log = RunLog(path, warn=lambda _m: None)
    assert log.record(make_record("deep00000001"))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET result = ?, timing_ms = ? WHERE run_id = 'deep00000001'",
                     ("[" * 100_000 + "]" * 100_000, "[" * 100_000 + "]" * 100_000))
    with pytest.raises(TreeRAGError, match="unreadable"):
        log.get("deep00000001")
    assert [r.run_id for r in log.recent(5)] == ["deep00000001"]  # the listing still reads

