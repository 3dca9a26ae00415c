"""What the sandbox reports of an exception raised in a test or in the program: its message, cut
to a length, and the line of the test's or the program's file it was raised from.

Standard library only (the sandbox worker imports it as a sibling script). The program process
imports it before any program runs, so the builtins it calls are bound before a program could
rebind them.
"""

# An exception's own __str__ may raise anything, BaseException included.
# ruff: noqa: BLE001

from __future__ import annotations

MAX_MESSAGE = 1000

_str, _type, _len = str, type, len


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if _len(text) <= limit else text[:limit] + "..."


def message(exc: BaseException, passes: type[BaseException]) -> str:
    """``str(exc)`` (its type's name when that is empty), clipped; ``<unprintable Type>`` when
    ``str`` itself raises, unless it raises ``passes`` (the caller's timeout), which goes on."""
    try:
        text = _str(exc) or _type(exc).__name__
    except passes:
        raise
    except BaseException:
        text = f"<unprintable {_type(exc).__name__}>"
    return clip(text)


def line_note(exc: BaseException, filename: str, what: str) -> str:
    """`` (<what> line N)`` for the innermost frame of ``filename`` in the traceback, or ""."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" ({what} line {line})" if line is not None else ""
