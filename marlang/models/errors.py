"""Errors raised by marlang's model layer.

Each says what went wrong and what to do about it (the command to install, the setting
to check), so a failed run can be fixed from the message alone.
"""

from __future__ import annotations


class ModelNotAvailableError(RuntimeError):
    """A model or backend package is not installed or not found on this machine."""


class ModelUnreachableError(ConnectionError):
    """A remote model server could not be reached, even after retries."""

    def __init__(self, message: str, *, url: str, attempts: int) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts


class ScoringNotSupportedError(NotImplementedError):
    """The backend cannot give log-probabilities of candidate actions."""
