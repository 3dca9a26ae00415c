"""TensorBoard scalars of a run (``run.loggers: [csv, tensorboard]``): every ``iterations.csv`` row,
as it is written, becomes scalars under ``RUN/tensorboard/``, written by torch's
``SummaryWriter``, so ``tensorboard --logdir runs`` finds every run. ``iterations.csv`` stays the
run's record.
"""

from __future__ import annotations

import math
import numbers
import os
import shutil
import time
from pathlib import Path
from typing import Any

TENSORBOARD_DIR = "tensorboard"
"""The folder of a run's event file."""

EVENT_FILES = "events.out.tfevents.*"
"""The names of a run's event files: one per process that added scalars (a resume adds one),
and a single one after a rewrite."""

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
    """Mirrors a run's ``iterations.csv`` rows into event files under ``RUN/tensorboard/``.

    Each (tag, step) is written once: rows that only add values (a new iteration, an
    evaluation written into its iteration's row) are added through this process's
    ``SummaryWriter`` (its own event file, opened at the first new value); a value that
    differs from the one written (an iteration replayed after a resume), a step earlier than
    a tag's last (tensorboard turned on when resuming) or a damaged file (a torn last record
    of a killed process) rewrites all of them as one new event file, moved in before the old
    ones are removed. So the event files hold the values of ``iterations.csv``, never a step
    twice.
    """

    def __init__(self, run_path: str | Path) -> None:
        self.dir = Path(run_path) / TENSORBOARD_DIR
        self._written: dict[tuple[str, int], float] | None = None
        self._damaged = False
        self._writer: Any = None

    def sync(self, rows: list[dict[str, Any]]) -> None:
        """Bring the event files up to ``rows`` (all of ``iterations.csv``, just written)."""
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
        if changed or behind or self._damaged:
            self._rewrite(written)
        elif new:
            self._append(new)

    def values(self) -> dict[tuple[str, int], float]:
        """Every (tag, step) -> value in the event files."""
        return dict(self._load())

    def close(self) -> None:
        """Close this process's event file (its writer's thread stops)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # event files -----------------------------------------------------------------------------
    def _load(self) -> dict[tuple[str, int], float]:
        if self._written is None:
            self._written = {}
            for path in sorted(self.dir.glob(EVENT_FILES)):
                self._damaged |= _read_scalars(path, self._written)
        return self._written

    def _append(self, scalars: dict[tuple[str, int], float]) -> None:
        if self._writer is None:
            self._writer = _summary_writer(self.dir)
        _add(self._writer, scalars)
        self._writer.flush()

    def _rewrite(self, scalars: dict[tuple[str, int], float]) -> None:
        """Write every value into one new event file, then swap it for the old ones."""
        self.close()
        old = sorted(self.dir.glob(EVENT_FILES))
        staging = self.dir.parent / f".{TENSORBOARD_DIR}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        writer = _summary_writer(staging)
        _add(writer, scalars)
        writer.close()
        self.dir.mkdir(parents=True, exist_ok=True)
        for path in staging.glob(EVENT_FILES):
            os.replace(path, self.dir / path.name)
        for path in old:
            path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        self._damaged = False


def _summary_writer(log_dir: Path) -> Any:
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(log_dir))


def _add(writer: Any, scalars: dict[tuple[str, int], float]) -> None:
    """Tags by frames after those by iteration, each tag's steps in increasing order."""
    now = time.time()
    for (tag, step), value in sorted(scalars.items(), key=lambda kv: (
            kv[0][0].startswith("by_frames/"), kv[0][1], kv[0][0])):
        writer.add_scalar(tag, value, global_step=step, walltime=now)


def _read_scalars(path: Path, into: dict[tuple[str, int], float]) -> bool:
    """Add the scalars of one event file to ``into``; True if it ends in a damaged record."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    reader = PyRecordReader_New(str(path))
    try:
        while True:
            try:
                reader.GetNext()
            except errors.OutOfRangeError:
                return False
            except errors.DataLossError:
                return True
            event = event_pb2.Event.FromString(reader.record())
            for value in event.summary.value:
                into[(value.tag, int(event.step))] = float(value.simple_value)
    finally:
        reader.file_handle.close()
