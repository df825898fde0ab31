"""Errors a client is told about: an HTTP status and one message, never a traceback."""
from __future__ import annotations


class ApiError(Exception):
    """A request the server refuses or cannot serve; ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ClientGone(Exception):
    """The client that asked went away: the query stops at its next step instead of running on."""
