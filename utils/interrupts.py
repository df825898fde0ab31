"""Ctrl-C held back while a build commits: once the new index is in place, the build is done.

Why: an interrupt that arrived a moment after the swap used to end the process with "interrupted"
(exit 130) although the new index was already the one every reader sees. From the commit on,
the main thread records SIGINT instead of raising it, and the build reports success with a note.
The handler itself is the only state (what the signal table holds), so nothing is global here.
Other threads and processes without a Python SIGINT handler are left alone.
"""
from __future__ import annotations

import signal
import threading
from typing import Any


class _Deferred:
    """A SIGINT handler that remembers the interrupt and the handler it replaced."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous if previous is not None else signal.SIG_DFL
        self.received = False

    def __call__(self, _signum: int, _frame: Any) -> None:
        self.received = True


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def defer_interrupts() -> None:
    """From now on Ctrl-C is recorded, not raised, until ``resume_interrupts`` (main thread only)."""
    if not _main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if not isinstance(current, _Deferred):
        signal.signal(signal.SIGINT, _Deferred(current))


def resume_interrupts() -> bool:
    """The handler from before ``defer_interrupts`` restored; True if Ctrl-C came meanwhile."""
    if not _main_thread():
        return False
    current = signal.getsignal(signal.SIGINT)
    if not isinstance(current, _Deferred):
        return False
    signal.signal(signal.SIGINT, current.previous)
    return current.received
