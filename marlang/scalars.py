"""TensorBoard scalars of a run (``run.loggers: [csv, tensorboard]``): every ``iterations.csv`` row,
as it is written, becomes scalars in one event file under ``RUN/tensorboard/``, so
``tensorboard --logdir runs`` finds every run. ``iterations.csv`` stays the run's record.
"""

from __future__ import annotations

import math
import numbers
import os
import struct
import time
from pathlib import Path
from typing import Any

TENSORBOARD_DIR = "tensorboard"
"""The folder of a run's event file."""

EVENT_FILE = "events.out.tfevents.0.marlang"
"""One event file per run, appended to by every invocation (a resume goes on in the same file)."""

BY_FRAMES = ("return_mean", "success_rate", "eval_return")
"""Columns also written against frames (tag ``by_frames/<tag>``, step = frames) in rows that
have a ``frames`` column (neural runs)."""


def scalar_tag(column: str) -> str:
    """The TensorBoard tag of an ``iterations.csv`` column: ``<role>_calls`` and ``<role>_tokens``
    become ``calls/<role>`` and ``tokens/<role>``; any other ``group_name`` column
    ``group/name`` (``return_mean`` -> ``return/mean``, ``success_rate`` -> ``success/rate``,
    ``loss_objective`` -> ``loss/objective``); a column without ``_`` keeps its name."""
    for suffix in ("calls", "tokens"):
        if column.endswith("_" + suffix):
            return f"{suffix}/{column[: -len(suffix) - 1]}"
    group, sep, name = column.partition("_")
    return f"{group}/{name}" if sep else column


def row_scalars(row: dict[str, Any]) -> dict[tuple[str, int], float]:
    """``{(tag, step): value}`` of one row: every finite numeric column (booleans as 0/1) at
    step = ``iteration``, and the :data:`BY_FRAMES` columns again at step = ``frames``."""
    step = int(row["iteration"])
    out: dict[tuple[str, int], float] = {}
    for column, value in row.items():
        if column == "iteration" or not isinstance(value, numbers.Real):
            continue
        value = float(value)
        if not math.isfinite(value):
            continue
        out[(scalar_tag(column), step)] = value
        if column in BY_FRAMES and isinstance(row.get("frames"), numbers.Real):
            out[("by_frames/" + scalar_tag(column), int(row["frames"]))] = value
    return out


class TensorBoardScalars:
    """Mirrors a run's ``iterations.csv`` rows into ``RUN/tensorboard/events.out.tfevents.0.marlang``.

    Each (tag, step) is written once: rows that only add values (a new iteration, an
    evaluation written into its iteration's row) are appended; a value that differs from the
    one written (an iteration replayed after a resume) or a step earlier than a tag's last
    (tensorboard turned on when resuming) rewrites the file atomically. So the event file holds
    the values of ``iterations.csv``, never a step twice; a torn last record (a killed
    process) is cut off before the file is read or appended to.
    """

    def __init__(self, run_path: str | Path) -> None:
        self.path = Path(run_path) / TENSORBOARD_DIR / EVENT_FILE
        self._written: dict[tuple[str, int], float] | None = None

    def sync(self, rows: list[dict[str, Any]]) -> None:
        """Bring the event file up to ``rows`` (all of ``iterations.csv``, just written)."""
        written = self._load()
        wanted: dict[tuple[str, int], float] = {}
        for row in rows:
            wanted.update(row_scalars(row))
        new = {k: v for k, v in wanted.items() if k not in written}
        changed = any(written[k] != v for k, v in wanted.items() if k in written)
        last: dict[str, int] = {}
        for tag, step in written:
            last[tag] = max(step, last.get(tag, step))
        # A step before a tag's last one would make TensorBoard purge the tag's later steps.
        behind = any(step <= last.get(tag, -1) for tag, step in new)
        written.update(wanted)
        if changed or behind:
            self._rewrite(written)
        elif new:
            self._append(new)

    def values(self) -> dict[tuple[str, int], float]:
        """Every (tag, step) -> value in the event file."""
        return dict(self._load())

    # event file ------------------------------------------------------------------------------
    def _load(self) -> dict[tuple[str, int], float]:
        if self._written is None:
            self._written = {}
            if self.path.exists():
                from tensorboard.compat.proto import event_pb2

                good = 0
                for end, data in _records(self.path.read_bytes()):
                    good = end
                    event = event_pb2.Event.FromString(data)
                    for value in event.summary.value:
                        self._written[(value.tag, int(event.step))] = float(value.simple_value)
                if good != self.path.stat().st_size:
                    with open(self.path, "r+b") as fh:
                        fh.truncate(good)
        return self._written

    def _events(self, scalars: dict[tuple[str, int], float]) -> list[bytes]:
        """One serialized event per step, tags by frames after those by iteration, each tag's
        steps in increasing order."""
        from tensorboard.compat.proto import event_pb2, summary_pb2

        steps: dict[tuple[bool, int], list[tuple[str, float]]] = {}
        for (tag, step), value in scalars.items():
            steps.setdefault((tag.startswith("by_frames/"), step), []).append((tag, value))
        now = time.time()
        out = []
        for (_, step), values in sorted(steps.items()):
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v)
                                                 for t, v in sorted(values)])
            out.append(event_pb2.Event(wall_time=now, step=step, summary=summary).SerializeToString())
        return out

    def _append(self, scalars: dict[tuple[str, int], float]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        records = [] if self.path.exists() else [_version_event()]
        records += self._events(scalars)
        with open(self.path, "ab") as fh:
            fh.write(b"".join(_record(r) for r in records))
            fh.flush()
            os.fsync(fh.fileno())

    def _rewrite(self, scalars: dict[tuple[str, int], float]) -> None:
        """Write then rename: readers see the old file or the new one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        records = [_version_event(), *self._events(scalars)]
        with open(tmp, "wb") as fh:
            fh.write(b"".join(_record(r) for r in records))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


def _version_event() -> bytes:
    from tensorboard.compat.proto import event_pb2

    return event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString()


def _record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def _records(raw: bytes) -> list[tuple[int, bytes]]:
    """(end offset, data) of each whole record of an event file, up to the first torn or
    corrupt one."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    out, pos = [], 0
    while pos + 12 <= len(raw):
        header = raw[pos: pos + 8]
        if struct.unpack("<I", raw[pos + 8: pos + 12])[0] != masked_crc32c(header):
            break
        (length,) = struct.unpack("<Q", header)
        end = pos + 12 + length + 4
        if end > len(raw):
            break
        data = raw[pos + 12: pos + 12 + length]
        if struct.unpack("<I", raw[end - 4: end])[0] != masked_crc32c(data):
            break
        out.append((end, data))
        pos = end
    return out
