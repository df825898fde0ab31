"""``utils.beside.Beside`` and the page helpers a whole-collection question uses beside it."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from indexing.index_files import release_over, resident_mb, touch_rows
from utils.beside import Beside


@pytest.mark.parametrize("threaded", [True, False])
def test_result_is_the_value_of_the_call(threaded: bool) -> None:
    where: list[str] = []
    side = Beside(lambda: where.append(threading.current_thread().name) or 42, threaded=threaded)
    assert side.result() == 42
    assert side.result() == 42  # asked twice: the same value, the call made once
    assert len(where) == 1
    assert (where[0] == "treerag-beside") == threaded


@pytest.mark.parametrize("threaded", [True, False])
def test_an_exception_is_raised_in_the_caller(threaded: bool) -> None:
    def fail() -> None:
        raise ValueError("broken scan")

    side = Beside(fail, threaded=threaded)
    with pytest.raises(ValueError, match="broken scan"):
        side.result()


def test_unthreaded_call_waits_for_result() -> None:
    calls: list[int] = []
    side = Beside(lambda: calls.append(1), threaded=False)
    assert calls == []
    side.result()
    assert calls == [1]


class _ReadSpy(np.memmap):
    """A mapped array that records the rows each read asks for."""

    reads: list[list[int]]

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, tuple) and isinstance(key[0], np.ndarray):
            self.reads.append(np.asarray(key[0]).tolist())
        return super().__getitem__(key)


def test_touch_rows_reads_only_rows_inside_a_mapped_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexing import index_files

    arr = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.save(tmp_path / "v.npy", arr)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r").view(_ReadSpy)
    mapped.reads = []
    asked: list[list[int]] = []
    monkeypatch.setattr(index_files, "will_need_rows", lambda a, rows: asked.append(np.asarray(rows).tolist()))
    touch_rows(mapped, np.array([0, 3, 9, 10, -1, 12]))  # out-of-range rows are skipped, not an error
    assert asked == [[0, 3, 9]] and mapped.reads == [[0, 3, 9], [0, 3, 9]]  # first and last value of each row
    touch_rows(mapped, np.zeros(0, dtype=np.int64))
    touch_rows(np.asarray(arr), np.array([1]))  # not mapped: nothing to read in
    assert asked == [[0, 3, 9]] and mapped.reads == [[0, 3, 9], [0, 3, 9]]
    np.testing.assert_array_equal(mapped, arr)


def test_release_over_follows_the_resident_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from indexing import index_files

    size = resident_mb()
    assert size is None or size > 0
    released: list[int] = []
    monkeypatch.setattr(index_files, "release_pages", lambda *a: released.append(len(a)))
    monkeypatch.setattr(index_files, "resident_mb", lambda: 500.0)
    assert release_over(0, "a") and released == [1]
    assert not release_over(768, "a", "b") and released == [1]
    assert release_over(400, "a", "b") and released == [1, 2]
    monkeypatch.setattr(index_files, "resident_mb", lambda: None)
    assert release_over(768, "a") and released == [1, 2, 1]


@pytest.mark.parametrize("threaded", [True, False])
def test_shared_calls_run_each_call_once_and_return_every_value(threaded: bool) -> None:
    from utils.beside import SharedCalls

    ran: list[str] = []
    names = [f"c{i}" for i in range(6)]
    shared = SharedCalls([(n, lambda n=n: ran.append(n) or n.upper()) for n in names], threaded=threaded)
    values = shared.finish()
    assert sorted(ran) == names and values == {n: n.upper() for n in names}


def test_shared_calls_the_caller_takes_what_the_second_thread_has_not_started() -> None:
    """The second thread holds the first call; the caller runs the others instead of waiting."""
    from utils.beside import SharedCalls

    release = threading.Event()
    where: dict[str, str] = {}

    def long() -> int:
        where["long"] = threading.current_thread().name
        assert release.wait(10)
        return 1

    def short(name: str) -> int:
        where[name] = threading.current_thread().name
        return 2

    shared = SharedCalls([("long", long), ("a", lambda: short("a")), ("b", lambda: short("b"))], threaded=True)
    while "long" not in where:  # the second thread has taken the first call
        threading.Event().wait(0.001)
    mine = threading.current_thread().name
    done = threading.Thread(target=lambda: (threading.Event().wait(0.05), release.set()))
    done.start()
    assert shared.finish() == {"long": 1, "a": 2, "b": 2}
    done.join()
    assert where["long"] == "treerag-beside" and where["a"] == mine and where["b"] == mine


@pytest.mark.parametrize("threaded", [True, False])
def test_shared_calls_raise_in_the_caller_and_stop_starting_calls(threaded: bool) -> None:
    from utils.beside import SharedCalls

    ran: list[str] = []

    def fail() -> None:
        raise ValueError("broken scan")

    shared = SharedCalls([("x", fail), ("y", lambda: ran.append("y"))], threaded=threaded)
    with pytest.raises(ValueError, match="broken scan"):
        shared.finish()
    stopped = SharedCalls([("z", lambda: ran.append("z"))], threaded=False)
    stopped.stop()
    assert "z" not in ran
