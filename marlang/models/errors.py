"""Errors raised by marlang's model layer.

Each says what went wrong and what to do about it (the command to install, the setting
to check), so a failed run can be fixed from the message alone.
"""

from __future__ import annotations


class ModelNotAvailableError(RuntimeError):
    """A model or backend package is not installed or not found on this machine."""


class ModelServerError(ConnectionError):
    """A remote model server failed a call even after retries: it could not be reached, or
    its replies stayed broken (HTTP 5xx or 429, a cut or malformed body, no choices, the
    connection closed mid-reply, a missed deadline); or it refused the call outright (an HTTP
    4xx, a redirect loop), which no retry mends."""

    def __init__(self, message: str, *, url: str, attempts: int, status_code: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts
        self.status_code = status_code
        """The HTTP status of a refused call (400, 404, ...), None for other faults."""


class ModelUnreachableError(ModelServerError):
    """A remote model server could not be reached, even after retries."""


class MalformedReplyError(RuntimeError):
    """A server answered a chat call with something that is no completion (a body cut short,
    not JSON, or without choices); retried like a timeout."""


class ScoringNotSupportedError(NotImplementedError):
    """The backend cannot give log-probabilities of candidate actions."""
