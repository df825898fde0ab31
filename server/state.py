"""The index a server answers from, swapped for a rebuilt one between requests.

A request takes one ``Snapshot`` when it starts and uses only it: a rebuild that lands while it
runs is picked up by the next request, and no request mixes two builds. The index directory is
replaced atomically by ``index``; a snapshot's files stay readable after the swap because they
are held open (memory-mapped) until the snapshot is dropped.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from indexing.index_store import METADATA, Index, load_index, read_metadata
from pipeline import Backends, TreeRAG, make_backends

if TYPE_CHECKING:
    from utils.run_log import RunLog

RETRY_FAILED_RELOAD_S = 2.0
"""A rebuild that cannot be loaded (half-written by hand, a broken file) is tried again after this
long, not on every request; meanwhile the previous build keeps answering."""


@dataclass(frozen=True)
class Snapshot:
    """One build of the index with the models to query it: what one request reads from start to end."""

    rag: TreeRAG
    build_id: str
    loaded_at: float

    @property
    def index(self) -> "Index":
        return self.rag.index

    def with_options(self, *, top_k: int | None = None, llm: bool = True) -> TreeRAG:
        """This build asked with one request's options: its own top-k, or no LLM at all. The models
        and the run log are shared; only the settings object differs."""
        rag = self.rag
        config = rag.config if top_k is None else rag.config.replace(final_top_k=top_k)
        backends = rag.backends if llm else Backends(rag.backends.embedder, rag.backends.reranker, None)
        if config is rag.config and backends is rag.backends:
            return rag
        return TreeRAG(rag.index, config, backends, rag.run_log)


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What changes when the index is rebuilt or updated: the identity of its metadata file."""
    try:
        st = os.stat(path / METADATA)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class IndexHolder:
    """The current snapshot, reloaded when the build id on disk changes.

    Checking costs one ``stat`` per request; the metadata is read only when that changes, and the
    index is loaded only when the build id differs. Models are reused across builds made with the
    same embedder (a rebuild with another embedder loads the matching one).
    """

    def __init__(self, path: Path, first: TreeRAG, llm_client: Any, embedder_name: str | None = None,
                 warn: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._llm_client = llm_client
        self._embedder_name = embedder_name
        self._warn = warn or (lambda _m: None)
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp = _stamp(path)
        self._current = Snapshot(first, str(first.index.metadata.get("build_id")), clock())
        self._failed_at: float | None = None
        self.reloads = 0

    @property
    def run_log(self) -> "RunLog | None":
        """The run log every build shares (None: runs are not recorded); never triggers a reload."""
        return self._current.rag.run_log

    def latest(self) -> Snapshot:
        """The snapshot answering now, without looking for a rebuild: for a health check, which
        must answer at once even while a reload or every query worker is busy."""
        return self._current

    def current(self) -> Snapshot:
        """The snapshot to answer one request from (reloading first if the index was rebuilt)."""
        stamp = _stamp(self.path)
        if stamp is None or stamp == self._stamp:
            return self._current  # unchanged, or mid-swap (no metadata this instant): keep the build we have
        with self._lock:
            if stamp == self._stamp:
                return self._current
            if self._failed_at is not None and self._clock() - self._failed_at < RETRY_FAILED_RELOAD_S:
                return self._current
            try:
                snapshot = self._reload(stamp)
            except Exception as exc:  # noqa: BLE001 - a bad rebuild must not stop the build that works
                self._failed_at = self._clock()
                self._warn(f"warning: the rebuilt index at {self.path} could not be loaded ({exc}); "
                           f"still answering from build {self._current.build_id}")
                return self._current
            self._failed_at = None
            self._stamp = stamp
            self._current = snapshot
            return snapshot

    def _reload(self, stamp: tuple[int, ...]) -> Snapshot:
        build_id = str(read_metadata(self.path).get("build_id"))
        old = self._current
        if build_id == old.build_id:
            return old
        index = load_index(self.path)
        if index.embedder_identity == old.index.embedder_identity:
            backends = old.rag.backends
            index.search.warm(old.rag.config.store_prewarm, long_running=True)
        else:
            backends = make_backends(index, old.rag.config, self._llm_client, self._embedder_name, long_running=True)
        self.reloads += 1
        self._warn(f"note: index rebuilt: now answering from build {index.metadata.get('build_id')} "
                   f"(was {old.build_id})")
        return Snapshot(TreeRAG(index, old.rag.config, backends, old.rag.run_log),
                        str(index.metadata.get("build_id")), self._clock())
