"""User-facing errors.

Anything a user can cause (bad path, broken index, wrong embedder, bad LLM key)
raises TreeRAGError with a one-line message; main.py prints it as
``error: <message>`` and exits non-zero. Anything else is a bug and may show a
traceback.
"""
from __future__ import annotations

from typing import Callable, NoReturn


class TreeRAGError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code: int = 2


class InputError(TreeRAGError):
    """Unreadable, missing, empty or non-Markdown input."""


class IndexFormatError(TreeRAGError):
    """An on-disk index that is missing, corrupt, or of another version."""


class IncompatibleIndexError(TreeRAGError):
    """An index built with another embedder/model/dimension than the query uses."""


class BackendError(TreeRAGError):
    """A model backend that cannot be loaded or called (missing key, bad model path)."""


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run a tool's ``main`` and exit with its code; a ``TreeRAGError`` is the one line
    ``error: <message>`` on stderr and its exit code, as ``main.py`` prints it (a tool's bad input is
    no bug, so no traceback)."""
    import sys  # noqa: PLC0415

    try:
        code = main()
    except TreeRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = exc.exit_code
    raise SystemExit(code)
