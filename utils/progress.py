"""Progress on stderr for long runs (index builds, summaries, evaluation), stage by stage.

A build is a row of stages (reading documents, loading the model, embedding,
writing, publishing). On a terminal each counted stage is a live bar and each
finished stage leaves one line; when stderr is a file or a pipe (CI logs, `nohup`)
a bar would be noise, so each stage writes one line when it ends, with its count
and seconds, and a counted stage also writes a line at every tenth of its total;
and a stage that has said nothing for ``heartbeat`` seconds (30) while work goes on
(an advance, or a ``tick`` of work inside it: vectors embedded while one long
document is indexed) writes where it is, with its counts and rates, so a log of a
build that embeds for a quarter of an hour is never silent for more than that.
``--quiet`` passes ``enabled=False``: nothing is written.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TextIO

Advance = Callable[[int], None]
ProgressFactory = Callable[[int, str], Advance]
"""(total, description) -> advance(n): the older, bar-only interface some callers still take."""

STEPS = 10
"""A counted stage off a terminal writes a line each time it passes another 1/STEPS of its total."""
HEARTBEAT_S = 30.0
"""Off a terminal, a stage at work writes a line when it has been silent this long."""


class Stage(Protocol):
    """One running stage: ``advance(n)`` as work is done, ``count(n, unit)`` for what it produced."""

    def advance(self, n: int = 1) -> None: ...

    def count(self, n: int, unit: str) -> None: ...

    def tick(self, n: int, unit: str) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> "Stage": ...

    def __exit__(self, *exc: Any) -> None: ...


class _NullStage:
    """A stage that reports nothing (no progress asked for)."""

    def advance(self, n: int = 1) -> None:
        pass

    def count(self, n: int, unit: str) -> None:
        pass

    def tick(self, n: int, unit: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_NullStage":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


NULL_STAGE = _NullStage()


@dataclass
class _Stage:
    """A stage of a :class:`Progress`; its end (``with`` exit, or the total reached) writes its line."""

    owner: "Progress"
    name: str
    total: int | None
    unit: str
    done: int = 0
    started: float = 0.0
    produced: tuple[int, str] | None = None
    work: dict[str, int] = field(default_factory=dict)
    """unit -> work done inside the stage (``tick``), for the heartbeat line."""
    said: float = 0.0
    """When the stage last wrote a line (its start, at first)."""
    auto_close: bool = False
    """End when the total is reached (a factory stage); a ``with`` stage ends when its block does."""
    closed: bool = False
    _bar: Any = None
    _step: int = 0

    def __post_init__(self) -> None:
        self.started = self.said = self.owner.clock()
        self.owner._begin(self)

    def advance(self, n: int = 1) -> None:
        if self.closed or n <= 0:
            return
        self.done += n
        self.owner._advanced(self, n)
        if self.auto_close and self.total is not None and self.done >= self.total:
            self.close()

    def count(self, n: int, unit: str) -> None:
        self.produced = (n, unit)

    def tick(self, n: int, unit: str) -> None:
        """``n`` more of some work inside the stage (not its total's unit), e.g. vectors embedded."""
        if self.closed or n <= 0:
            return
        self.work[unit] = self.work.get(unit, 0) + n
        self.owner._heartbeat(self)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.owner._end(self)

    def __enter__(self) -> "_Stage":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:  # a failed stage says nothing more; the error line follows
            self.closed = True
            self.owner._abandon(self)

    def seconds(self) -> float:
        return self.owner.clock() - self.started


def _describe(stage: _Stage) -> str:
    parts = []
    if stage.produced is not None:
        parts.append(f"{stage.produced[0]:,} {stage.produced[1]}")
    elif stage.total is not None:
        parts.append(f"{stage.done:,} {stage.unit}" if stage.done >= stage.total
                     else f"{stage.done:,}/{stage.total:,} {stage.unit}")
    secs = stage.seconds()
    parts.append(f"{secs:.1f} s")
    if stage.total and stage.done and secs > 0 and stage.unit:
        parts.append(f"{stage.done / secs:,.1f} {stage.unit}/s")
    return ", ".join(parts)


class Progress:
    """Stages of one run, written to ``stream`` (stderr) as bars on a terminal, as lines otherwise.

    Also callable as a :data:`ProgressFactory`: ``progress(total, desc)`` starts a counted
    stage that ends by itself when its total is reached.
    """

    def __init__(self, stream: TextIO | None = None, prefix: str = "", live: bool | None = None,
                 heartbeat: float = HEARTBEAT_S, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix
        self.heartbeat = heartbeat
        self.clock = clock
        """Seconds since some fixed point (a test passes a fake one)."""
        if live is None:
            isatty = getattr(self.stream, "isatty", None)
            live = bool(isatty and isatty())
        self.live = live

    def stage(self, name: str, total: int | None = None, unit: str = "") -> _Stage:
        """Start a stage; use it as a context manager so its line is written when it ends."""
        return _Stage(self, name, None if total is None else max(0, int(total)), unit)

    def __call__(self, total: int, desc: str) -> Advance:
        return _Stage(self, desc, max(0, int(total)), "items", auto_close=True).advance

    # ---------------------------------------------------------------- output

    def note(self, text: str) -> None:
        """A line of its own between stages (a build's plan), written at once."""
        self._write(f"\r{self.prefix}{text}\x1b[K\n" if self.live else f"{self.prefix}{text}\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not fail the build
            pass

    def _begin(self, stage: _Stage) -> None:
        if not self.live:
            return
        if stage.total:
            from tqdm import tqdm  # imported only when a bar is shown

            stage._bar = tqdm(total=stage.total, desc=f"{self.prefix}{stage.name}", unit=f" {stage.unit}"
                              if stage.unit else "it", file=self.stream, leave=False, dynamic_ncols=True)
        else:
            self._write(f"\r{self.prefix}{stage.name}…\x1b[K")

    def _advanced(self, stage: _Stage, n: int) -> None:
        if stage._bar is not None:
            stage._bar.update(n)
            return
        if self.live:
            return
        step = min(STEPS, stage.done * STEPS // stage.total) if stage.total else 0
        if step > stage._step and stage.total and stage.done < stage.total:
            stage._step = step
            stage.said = self.clock()
            self._write(f"{self.prefix}{stage.name}: {stage.done:,}/{stage.total:,} {stage.unit} "
                        f"({100 * stage.done // stage.total}%), {stage.seconds():.1f} s\n")
            return
        self._heartbeat(stage)

    def _heartbeat(self, stage: _Stage) -> None:
        """Off a terminal: where a stage silent for ``heartbeat`` seconds is, with its counts and rates."""
        if self.live or stage._bar is not None:
            return
        now = self.clock()
        if now - stage.said < self.heartbeat:
            return
        stage.said = now
        secs = now - stage.started
        parts = []
        if stage.total:
            parts.append(f"{stage.done:,}/{stage.total:,} {stage.unit} ({100 * stage.done // stage.total}%)")
        elif stage.done:
            parts.append(f"{stage.done:,} {stage.unit}".rstrip())
        for unit, n in stage.work.items():
            parts.append(f"{n:,} {unit}" + (f" ({n / secs:,.1f}/s)" if secs > 0 else ""))
        parts.append(f"{secs:.1f} s")
        self._write(f"{self.prefix}{stage.name}: {', '.join(parts)}\n")

    def _end(self, stage: _Stage) -> None:
        if stage._bar is not None:
            stage._bar.close()
            stage._bar = None
        line = f"{self.prefix}{stage.name}: {_describe(stage)}"
        self._write(f"\r{line}\x1b[K\n" if self.live else f"{line}\n")

    def _abandon(self, stage: _Stage) -> None:
        if stage._bar is not None:
            stage._bar.close()
            stage._bar = None
        elif self.live:
            self._write("\r\x1b[K")


def make_progress(enabled: bool, stream: TextIO | None = None, prefix: str = "") -> Progress | None:
    """The run's progress on ``stream`` (stderr), or None with ``--quiet``."""
    return Progress(stream, prefix) if enabled else None


def stage(progress: Progress | None, name: str, total: int | None = None, unit: str = "") -> Stage:
    """``progress.stage(...)``, or a stage that reports nothing when there is no progress."""
    return progress.stage(name, total, unit) if progress is not None else NULL_STAGE


def note(progress: Progress | None, text: str) -> None:
    """``progress.note(text)``, or nothing when there is no progress (``--quiet``)."""
    if progress is not None:
        progress.note(text)
