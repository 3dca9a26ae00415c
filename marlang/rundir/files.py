"""How every file of a run directory is written: strict JSON, atomic replacement (write then
rename) and fsynced appends that cut a torn last line first. `RunDirectory` is the one caller
for a run's files; other folders (a comparison's, a critic's) use these directly.
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import numbers
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from marlang.rundir.untrusted import damaged, irregular, writing

logger = logging.getLogger(__name__)

def json_safe(data: Any) -> Any:
    """``data`` with every NaN or infinite number replaced by None (JSON null), recursively
    through dicts, lists and tuples; strict JSON has no NaN, and readers other than Python's
    reject the ``NaN`` token that `json.dumps` writes by default."""
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [json_safe(v) for v in data]
    if isinstance(data, numbers.Real) and not isinstance(data, numbers.Integral):
        value = float(data)  # numpy floats too
        return value if math.isfinite(value) else None
    return data


def dumps_json(data: Any, **kwargs: Any) -> str:
    """`json.dumps` of `json_safe(data)`: strict JSON, never ``NaN``/``Infinity``."""
    return json.dumps(json_safe(data), allow_nan=False, **kwargs)


def atomic_write_text(path: Path, text: str) -> None:
    """Write then rename, so readers never see half a file."""
    atomic_write(path, lambda fh: fh.write(text.encode()))


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """``write(file)`` into a temporary sibling, fsync, then rename over ``path``: readers see
    the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created like any other file (mode 0666 less the umask), not mkstemp's 0600: every file
    # of a run directory has the same permissions.
    tmp = str(path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp")
    with writing(path):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def save_figure(fig: Any, path: str | Path) -> None:
    """Write a matplotlib figure to ``path`` atomically (its format from the suffix) and close
    it: a link planted where the figure goes is replaced, never written through."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        atomic_write(path, lambda fh: fig.savefig(fh, format=path.suffix.lstrip(".") or "png"))
    finally:
        plt.close(fig)


def append_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Append whole lines (each ending in a newline) to ``path``, flushed and fsynced.

    A last line without its newline was torn by a writer killed mid-write (or a full disk):
    it is cut first, so the new lines start on a line of their own and every reader sees them.
    """
    path = Path(path)
    data = "".join(lines).encode()
    if not data:
        return
    with writing(path):
        # A FIFO is opened without blocking and refused by its type, as a link is by O_NOFOLLOW.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
        try:
            kind = irregular(os.fstat(fd).st_mode)
            if kind is not None:
                raise damaged(path, f"{kind}, not a regular file")
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                keep = _last_newline_end(fd, size)
                logger.warning("%s: cutting a torn last line (%d bytes) before appending", path, size - keep)
                os.ftruncate(fd, keep)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)


class _Lines:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)


@contextlib.contextmanager
def appending(path: str | Path) -> Iterator[_Lines]:
    """``with appending(path) as fh: fh.write(line)``: the lines written are appended with
    `append_lines` when the block ends (nothing when it raises)."""
    lines = _Lines()
    yield lines
    append_lines(path, lines.parts)


def _last_newline_end(fd: int, size: int) -> int:
    """The offset just after the last newline in the first ``size`` bytes of ``fd`` (0: none)."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def csv_lines(fields: Iterable[str], rows: Iterable[dict[str, Any]], header: bool) -> list[str]:
    """``rows`` as CSV text lines (with the header line first when ``header``); keys outside
    ``fields`` are left out, missing ones empty."""
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore", restval="", lineterminator="\n")
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue().splitlines(keepends=True)


def append_csv(path: str | Path, fields: Iterable[str], rows: Iterable[dict[str, Any]]) -> None:
    """Append CSV rows with `append_lines` (the header too, where the file is new or empty)."""
    path = Path(path)
    header = not path.exists() or path.stat().st_size == 0
    append_lines(path, csv_lines(fields, rows, header))
