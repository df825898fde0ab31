"""``PageRelease``: a question's mapped index pages released after its answer, not in its middle.

Why: past ``query_mapped_mb`` a whole-collection question releases every read-only mapping of the
index directory (``index_files.release_over``); at 100,000 documents that is ~600 MB of pages a
question and ~25 ms of CPU. Done where the scores were computed, it sat on the question's critical
path and dropped pages (records, leaf vectors) the rest of the same question then faulted in again.
Now a question only marks the release as due; ``start`` (called once the answer is built) runs it
on a background thread, and the next whole-collection question waits for it before it maps
anything, so a release never races the pages a question is reading. A caller that never calls
``start`` (retrieval alone, as in `eval`) gets the release at the start of its next
whole-collection question, in line: the process stays as small as before, the cost moves between
questions instead of inside one.

A release can keep some files' pages mapped (``due``'s ``keep``: the ANN files while they are small
enough, config ``query_ann_kept_mb``): a question scans 30% of the IVF lists, so lists released after
one question were faulted in again by the next, ~40-60 ms of CPU a question at 100,000 documents.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from indexing.index_files import release_over


class PageRelease:
    """The pending release of one index's mapped pages (see the module docstring)."""

    def __init__(self, arrays: tuple[Any, ...], directory: Path | None) -> None:
        self._arrays = arrays
        """Memory-mapped arrays released by themselves (what ``directory`` covers when it is None)."""
        self._directory = directory
        self._lock = threading.Lock()
        self._due: int | None = None
        """The smallest ``query_mapped_mb`` a question asked for since the last release; None: none due."""
        self._keep: frozenset[str] = frozenset()
        """Files (real paths) whose pages the due release leaves mapped: those every question since the
        last release asked to keep."""
        self._thread: threading.Thread | None = None

    def due(self, limit_mb: int, keep: frozenset[str] = frozenset()) -> None:
        """A question read mapped pages under a budget of ``limit_mb``: release them once it is answered,
        except the pages of the files in ``keep`` (real paths)."""
        with self._lock:
            self._keep = frozenset(keep) if self._due is None else self._keep & frozenset(keep)
            self._due = limit_mb if self._due is None else min(self._due, limit_mb)

    def _take(self) -> tuple[int, frozenset[str]] | None:
        with self._lock:
            limit, self._due = self._due, None
            return None if limit is None else (limit, self._keep)

    def _release(self, limit_mb: int, keep: frozenset[str] = frozenset()) -> None:
        release_over(limit_mb, *self._arrays, directory=self._directory, keep=keep)

    def start(self) -> bool:
        """Run the due release on a background thread (the question's answer is built); whether one started.

        The thread holds this object and so the index's arrays: no mapping it advises is unmapped under it."""
        self.wait()
        taken = self._take()
        if taken is None:
            return False
        thread = threading.Thread(target=self._release, args=taken, daemon=True, name="treerag-release")
        with self._lock:
            self._thread = thread
        thread.start()
        return True

    def wait(self) -> None:
        """Wait for a release started in the background to finish."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def settle(self) -> None:
        """Before a question maps pages: the background release finished, and one still due done now."""
        self.wait()
        taken = self._take()
        if taken is not None:
            self._release(*taken)
