"""The run directory: every file a run writes, append-only or atomic, and read back on resume.

Every appended file (``episodes.jsonl`` and the other JSONL and CSV records) goes through
`append_lines`: fsynced at once, and a torn last line left by a killed writer is cut before
the next append, so no later record hides behind it. A run holds `RunDirectory.lock` for
its whole life, so two processes never write one run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from marlang.config import ConfigError, redact_secrets
from marlang.rundir.files import (
    append_csv,
    append_lines,
    atomic_write,
    atomic_write_text,
    csv_lines,
    dumps_json,
    save_figure,
)
from marlang.rundir.untrusted import (
    CONFIG_HASH,
    config_sha256,
    irregular,
    json_value,
    read_csv_rows,
    read_json_object,
    read_manifest,
    read_regular,
    refuse_links,
)
from marlang.rundir.untrusted import damaged as damaged_file
from marlang.statistics.scalars import TENSORBOARD_DIR, TensorBoardScalars
from marlang.types import Trajectory

logger = logging.getLogger(__name__)


def package_versions(packages: Iterable[str]) -> dict[str, str]:
    """Python's version and each package's installed one ("not installed" if absent), for
    run manifests."""
    out = {"python": platform.python_version()}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out

EVAL_EPISODE_BASE = 1_000_000
"""Episode ids of evaluation episodes (candidate checks, greedy evaluations) start here, so
their env seeds never repeat a training episode's."""


TEST_EPISODE_BASE = 2_000_000
"""Episode ids (and env seeds, after the run seed) of held-out evaluation episodes
(phase ``test``): the same seeds at every evaluation, none of them a training seed."""


@dataclass
class RunResult:
    """What a finished (or paused) invocation of a run reports."""

    run_dir: Path
    summary: dict[str, Any]
    episodes_run: int
    """Episodes played by this invocation (0 when everything was already finished)."""
    paused: bool = False
    """The run waits for ``marlang review`` (``learning.review: true``)."""
    already_finished: bool = False
    """The run had finished before this invocation: there was nothing left to do."""


METRIC_FIELDS = [
    "episode", "iteration", "phase", "seed", "success", "steps", "return", "decisions", "invalid_actions",
    "invalid_rate", "reprompts", "fallbacks", "messages", "llm_calls", "cached_calls", "tokens_in", "tokens_out",
]



class _RunFile:
    """A file of the run directory by name: ``run_dir.episodes_file`` is ``run_dir.path / name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run_dir: Any, owner: type | None = None) -> Any:
        return self if run_dir is None else run_dir.path / self.name


class RunDirectoryBusy(ConfigError):
    """Another live process holds the run directory (the message says which)."""


class CallRows(Protocol):
    """What writes ``llm_calls.csv`` rows: the run's `UsageRecorder` (it knows which of its
    rows a file already holds)."""

    def append_csv(self, path: str | Path) -> int: ...


class RunDirectory:
    """Reads and writes one run's files (see DESIGN.md, "The run directory"): the one writer
    of each of them (`marlang.run.record.RunRecord` decides what a run writes and indexes it).

    ``loggers`` are the run's ``run.loggers``: ``iterations.csv`` is always written; with
    ``tensorboard`` each write of it is mirrored into ``tensorboard/`` (:mod:`marlang.statistics.scalars`).
    """

    def __init__(self, path: str | Path, loggers: Iterable[str] = ("csv",)) -> None:
        self.path = Path(path)
        self.scalars = TensorBoardScalars(self.path) if "tensorboard" in loggers else None
        self._iterations: list[dict[str, Any]] | None = None
        """``iterations.csv`` as last read or written (None: not read yet)."""

    # paths ---------------------------------------------------------------------------------
    episodes_file = _RunFile("episodes.jsonl")
    metrics_file = _RunFile("metrics.csv")
    llm_calls_file = _RunFile("llm_calls.csv")
    summary_file = _RunFile("summary.json")
    config_file = _RunFile("config.yaml")

    def exists(self) -> bool:
        """Whether the directory holds a run (its ``config.yaml``); one that is no regular file
        (a FIFO, a directory) is a `DamagedRunFile`, not a run to start afresh over."""
        try:
            kind = irregular(os.stat(self.config_file).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if kind is not None:
            raise damaged_file(self.config_file, f"{kind}, not a regular file")
        return True

    LOCK_FILE = ".lock"

    @contextlib.contextmanager
    def lock(self, command: str | None = None) -> Iterator[None]:
        """Hold the run directory for a run's life: an OS advisory lock (``flock``) on
        ``.lock``, which names the holder (pid, host, command). A second process gets
        `RunDirectoryBusy` naming the holder; a lock file left by a dead process does not
        block (the OS releases its lock). A directory created here that ends holding nothing
        else is removed again, so a run refused before it wrote anything leaves nothing."""
        import fcntl
        import shlex
        import socket

        created = not self.path.exists()
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"{self.path} is a file, not a run directory; choose a directory (--out DIR)")
        self.path.mkdir(parents=True, exist_ok=True)
        lock_path = self.path / self.LOCK_FILE
        refuse_links(self.path, (self.LOCK_FILE, *self.RUN_FILES))
        while True:
            # A link is refused; a FIFO is opened without blocking and refused by its type.
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
            except IsADirectoryError:
                raise damaged_file(lock_path, "a directory, not a regular file") from None
            kind = irregular(os.fstat(fd).st_mode)
            if kind is not None:
                os.close(fd)
                raise damaged_file(lock_path, f"{kind}, not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                try:
                    holder = json.loads(read_regular(lock_path) or b"{}")
                except (OSError, ValueError):
                    holder = {}
                holder = holder if isinstance(holder, dict) else {}
                raise RunDirectoryBusy(
                    f"run directory {self.path} is in use by process {holder.get('pid', '?')} on "
                    f"{holder.get('host', '?')} ({holder.get('command', '?')}); wait for it to end or "
                    "choose another directory") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the file was removed while we waited for it: lock the new one
        try:
            cmd = redact_secrets(command if command is not None else shlex.join(sys.argv))
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": cmd}).encode(), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                if created and {p.name for p in self.path.iterdir()} <= {self.LOCK_FILE}:
                    lock_path.unlink(missing_ok=True)
                    self.path.rmdir()
            os.close(fd)  # releases the lock

    # writes --------------------------------------------------------------------------------
    def create(self, config_yaml: str, manifest: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config_file, config_yaml)
        self.write_json("manifest.json", {**manifest, CONFIG_HASH: config_sha256(config_yaml)})

    def resumed_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """``manifest`` for a run resumed here: the original start time and command kept, this
        start and command appended to ``resumes``; ``manifest`` itself for a new run."""
        previous = self.read_json("manifest.json") if self.exists() else None
        if not previous:
            return manifest
        resumes = [*(previous.get("resumes") or []),
                   {"at": manifest.get("started"), "command": manifest.get("command")}]
        return {**manifest, "started": previous.get("started", manifest.get("started")),
                "command": previous.get("command", manifest.get("command")), "resumes": resumes}

    def write_json(self, name: str, data: Any) -> None:
        atomic_write_text(self.path / name, dumps_json(data, indent=2, sort_keys=False, default=str) + "\n")

    def append_episode(self, traj: Trajectory, metrics: dict[str, Any]) -> tuple[int, int]:
        """Record a finished episode: its full trajectory and its metrics row. Returns the
        record's byte range in ``episodes.jsonl`` (offset, length). The row joins what the
        episode measured itself (a user's graph: its input, output and error)."""
        traj.metrics = {**traj.metrics, **metrics}
        line = json.dumps(traj.to_dict(), default=str) + "\n"
        append_lines(self.episodes_file, [line])
        length = len(line.encode())
        offset = self.episodes_file.stat().st_size - length
        append_csv(self.metrics_file, METRIC_FIELDS, [metrics])
        return offset, length

    def append_jsonl(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Append rows to the JSONL file ``name`` (strict JSON, one line each)."""
        append_lines(self.path / name, [dumps_json(row, default=str) + "\n" for row in rows])

    def append_llm_calls(self, calls: CallRows) -> None:
        """Append the calls ``llm_calls.csv`` does not hold yet."""
        calls.append_csv(self.llm_calls_file)

    def append_iteration_csv(self, row: dict[str, Any]) -> None:
        """Add (or replace) the row of ``row["iteration"]`` in ``iterations.csv``: a new last
        row with no new column is appended as one line, anything else rewrites the file."""
        if self._iterations is None:
            self._iterations = self.read_iterations()
        rows = self._iterations
        fields = _fields(rows)
        last = max((int(r["iteration"]) for r in rows), default=-1)
        if rows and int(row["iteration"]) > last and set(row) <= set(fields) and self.scalars is None:
            append_lines(self.iterations_file, csv_lines(fields, [_cells(row)], header=False))
            rows.append(dict(row))
            return
        rows = [r for r in rows if int(r["iteration"]) != int(row["iteration"])] + [dict(row)]
        rows.sort(key=lambda r: int(r["iteration"]))
        _write_csv(self.iterations_file, _fields(rows), [_cells(r) for r in rows])
        self._iterations = rows
        if self.scalars is not None:
            self.scalars.sync(rows)

    def write_learning_curve(self, setting: str, iterations: list[dict[str, Any]], **options: Any) -> None:
        """``learning_curve.png``: the run's iterations as curves (``options``: those of
        `marlang.statistics.plots.iteration_figure`)."""
        from marlang.statistics.plots import iteration_figure

        save_figure(iteration_figure({setting: iterations}, **options), self.path / "learning_curve.png")

    def discard_iterations(self) -> None:
        """Remove ``iterations.csv`` and its TensorBoard scalars (a run starting over)."""
        import shutil

        self.iterations_file.unlink(missing_ok=True)
        self._iterations = None
        shutil.rmtree(self.path / TENSORBOARD_DIR, ignore_errors=True)
        if self.scalars is not None:
            self.scalars.close()
            self.scalars = TensorBoardScalars(self.path)

    # reads ---------------------------------------------------------------------------------
    iterations_file = _RunFile("iterations.csv")

    def read_iterations(self) -> list[dict[str, Any]]:
        """``iterations.csv`` rows with numbers parsed (empty cells: None); a damaged file is a
        `DamagedRunFile`."""
        return [{k: _number(v) for k, v in r.items()} for r in read_csv_rows(self.iterations_file, "iteration")]

    def read_llm_calls(self) -> list[dict[str, Any]]:
        return read_csv_rows(self.llm_calls_file)

    def read_jsonl(self, name: str) -> list[dict[str, Any]]:
        """Every record of a JSONL file; a damaged line (torn, or corrupted on disk) is skipped
        with a warning, and the records after it are kept."""
        records, damaged = _parse_jsonl(self.path / name)
        if damaged:
            logger.warning("%s: skipping %d damaged line(s)", self.path / name, len(damaged))
        return records

    def read_json(self, name: str) -> dict[str, Any] | None:
        """The JSON object in the file ``name`` (None if absent; damaged: `DamagedRunFile`);
        ``manifest.json``'s fields are checked for their kinds too (`read_manifest`)."""
        if name == "manifest.json":
            return read_manifest(self.path / name)
        return read_json_object(self.path / name)

    def load_episode_dicts(self) -> list[dict[str, Any]]:
        """Every finished episode, in file order; a damaged record (a torn last line, a line
        corrupted on disk) is skipped and every valid one after it kept."""
        return _parse_jsonl(self.episodes_file, EPISODE_KEYS)[0]

    DAMAGED_FILE = "episodes.damaged"

    def holds_episode_records(self) -> bool:
        """Whether ``episodes.jsonl`` holds any finished episode's record, valid or damaged (a
        torn last line is no finished episode)."""
        records, damaged = _parse_jsonl(self.episodes_file, EPISODE_KEYS)
        return bool(records) or any(line.endswith(b"\n") for line in damaged)

    def repair_episodes(self) -> int:
        """Set damaged records of ``episodes.jsonl`` aside (appended to ``episodes.damaged``)
        and rewrite the file with every valid record; returns how many were set aside (their
        episodes must be played again)."""
        _, damaged = _parse_jsonl(self.episodes_file, EPISODE_KEYS)
        if not damaged:
            return 0
        logger.warning("%s: %d damaged record(s) moved to %s", self.episodes_file, len(damaged), self.DAMAGED_FILE)
        append_lines(self.path / self.DAMAGED_FILE,
                     [line.decode(errors="replace").rstrip("\n") + "\n" for line in damaged])
        bad = set(damaged)
        kept = [line if line.endswith(b"\n") else line + b"\n"
                for line in (read_regular(self.episodes_file) or b"").splitlines(keepends=True)
                if line.strip() and line not in bad]
        atomic_write(self.episodes_file, lambda fh: fh.write(b"".join(kept)))
        return len(damaged)

    RUN_FILES = (
        "config.yaml", "manifest.json", "episodes.jsonl", "metrics.csv", "llm_calls.csv", "summary.json",
        "iterations.csv", "updates.jsonl", "policies.jsonl", "learner_state.json", "review.json",
        "learning_curve.png", "episodes.damaged", "checkpoints.sqlite", "checkpoints.sqlite-wal",
        "checkpoints.sqlite-shm", "checkpoints.sqlite-journal",
    )
    """The files of a run that :meth:`discard_run_files` removes."""

    def discard_run_files(self) -> None:
        """Remove the run's own files (a run with no finished episode starts afresh); other
        files in the directory are left alone."""
        for name in self.RUN_FILES:
            (self.path / name).unlink(missing_ok=True)
        self.discard_iterations()

    UNFINISHED_WRITES = (".*.tmp", "adapters/*/.*.tmp", "adapters/*/.marlang-save-*.partial", "credit/*.tmp",
                         f"{TENSORBOARD_DIR}/.*.tmp")
    """What a writer killed mid-write leaves: temporaries of atomic writes and adapter saves."""

    def remove_unfinished_writes(self) -> list[Path]:
        """Remove what writers killed mid-write left behind (`UNFINISHED_WRITES`); call it with
        the run's lock held, so no live writer's temporaries are touched. Returns what went."""
        import shutil

        gone = []
        for pattern in self.UNFINISHED_WRITES:
            for path in self.path.glob(pattern):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                gone.append(path)
        if gone:
            logger.info("%s: removed %d unfinished write(s): %s", self.path, len(gone), ", ".join(p.name for p in gone))
        return gone

    def rebuild_llm_calls(self, finished: set[int], learner_roles: Iterable[str]) -> None:
        """Make ``llm_calls.csv`` agree with the episodes before a resume: the acting calls of
        an episode whose record is not on disk are dropped (the episode is played again and
        records them again), as is a torn last row. An episode's calls are written before its
        record, so a finished episode never lacks them. The learner's calls (``learner_roles``)
        are kept: a resume goes on after the update's last finished step."""
        if not self.llm_calls_file.exists():
            return
        roles = set(learner_roles)
        rows = [r for r in self.read_llm_calls() if None not in r.values()]  # without a torn last row
        if not rows:
            self.llm_calls_file.unlink()
            return
        fields = list(rows[0])
        kept = [r for r in rows if r.get("role") in roles or _number(r.get("episode")) in (None, *finished)]
        if len(kept) != len(rows) or not (read_regular(self.llm_calls_file) or b"").endswith(b"\n"):
            logger.info("%s: %d call(s) of unfinished episodes dropped", self.llm_calls_file, len(rows) - len(kept))
            _write_csv(self.llm_calls_file, fields, kept)

    def load_trajectories(self) -> list[Trajectory]:
        """Every finished episode as a `Trajectory`; a record that parses but does not hold one
        (a field missing or of the wrong kind) is damaged: skipped, with a warning, as a torn
        line is."""
        out = []
        for d in self.load_episode_dicts():
            try:
                out.append(Trajectory.from_dict(d))
            except (KeyError, TypeError, AttributeError, ValueError) as err:
                logger.warning("%s: episode %s is damaged (%s: %s); skipped", self.episodes_file,
                               d.get("episode"), type(err).__name__, err)
        return out

    def rewrite_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Make metrics.csv match the episodes on disk (after a resume dropped a torn line)."""
        _write_csv(self.metrics_file, METRIC_FIELDS, rows)


EPISODE_KEYS = ("episode", "metrics")
"""What every episode record holds; a line of ``episodes.jsonl`` without them is damaged."""


def _parse_jsonl(path: Path, required: tuple[str, ...] = ()) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The records of a JSONL file and its damaged lines (not a JSON object holding the
    ``required`` keys: torn or corrupted)."""
    data = read_regular(path)
    if data is None:
        return [], []
    records: list[dict[str, Any]] = []
    damaged: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if not line.strip():
            continue
        record = json_value(line)[0]
        if isinstance(record, dict) and all(key in record for key in required):
            records.append(record)
        else:
            damaged.append(line)
    return records, damaged


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    """Write a whole CSV file atomically (keys outside ``fields`` are left out)."""
    atomic_write_text(path, "".join(csv_lines(fields, rows, header=True)))


def _fields(rows: list[dict[str, Any]]) -> list[str]:
    """The columns of ``rows`` in order of first appearance."""
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    return fields


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    return {k: ("" if v is None else v) for k, v in row.items()}


def _number(text: str | None) -> Any:
    if text is None or text == "":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text
