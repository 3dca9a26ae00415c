"""The run directory: every file a run writes, append-only or atomic, and read back on resume.

``episodes.jsonl`` gets one line per finished episode, flushed and fsynced at once, so a
killed process keeps every finished episode; a torn last line is dropped on load.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import numbers
import os
import platform
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from marlang.scalars import TENSORBOARD_DIR, TensorBoardScalars
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
    "episode", "iteration", "phase", "seed", "success", "steps", "return", "decisions", "invalid_actions", "invalid_rate",
    "reprompts", "fallbacks", "messages", "llm_calls", "cached_calls", "tokens_in", "tokens_out",
]


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


class RunDirectory:
    """Reads and writes one run's files (see DESIGN.md, "The run directory").

    ``loggers`` are the run's ``run.loggers``: ``iterations.csv`` is always written; with
    ``tensorboard`` each write of it is mirrored into ``tensorboard/`` (:mod:`marlang.scalars`).
    """

    def __init__(self, path: str | Path, loggers: Iterable[str] = ("csv",)) -> None:
        self.path = Path(path)
        self.scalars = TensorBoardScalars(self.path) if "tensorboard" in loggers else None

    # paths ---------------------------------------------------------------------------------
    @property
    def episodes_file(self) -> Path:
        return self.path / "episodes.jsonl"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.csv"

    @property
    def llm_calls_file(self) -> Path:
        return self.path / "llm_calls.csv"

    @property
    def summary_file(self) -> Path:
        return self.path / "summary.json"

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    def exists(self) -> bool:
        return self.config_file.is_file()

    # writes --------------------------------------------------------------------------------
    def create(self, config_yaml: str, manifest: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config_file, config_yaml)
        self.write_json("manifest.json", manifest)

    def resumed_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """``manifest`` for a run resumed here: the original start time and command kept, this
        start and command appended to ``resumes``; ``manifest`` itself for a new run."""
        previous = self.read_json("manifest.json") if self.exists() else None
        if not previous:
            return manifest
        resumes = [*previous.get("resumes", []), {"at": manifest.get("started"), "command": manifest.get("command")}]
        return {**manifest, "started": previous.get("started", manifest.get("started")),
                "command": previous.get("command", manifest.get("command")), "resumes": resumes}

    def write_json(self, name: str, data: Any) -> None:
        atomic_write_text(self.path / name, dumps_json(data, indent=2, sort_keys=False, default=str) + "\n")

    def append_episode(self, traj: Trajectory, metrics: dict[str, Any]) -> None:
        """Record a finished episode: its full trajectory and its metrics row."""
        traj.metrics = metrics
        line = json.dumps(traj.to_dict(), default=str)
        with open(self.episodes_file, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        new = not self.metrics_file.exists()
        with open(self.metrics_file, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=METRIC_FIELDS, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(metrics)

    def append_iteration_rows(self, name: str, iteration: int, rows: list[dict[str, Any]]) -> None:
        """Append one iteration's rows to a JSONL file, once: a commit replayed after a crash
        finds its rows already there and writes nothing."""
        if any(r.get("iteration") == iteration for r in self.read_jsonl(name)):
            return
        path = self.path / name
        with open(path, "a") as fh:
            fh.writelines(dumps_json(row, default=str) + "\n" for row in rows)
            fh.flush()
            os.fsync(fh.fileno())

    def append_iteration_csv(self, row: dict[str, Any]) -> None:
        """Add (or replace) the row of ``row["iteration"]`` in ``iterations.csv``."""
        rows = [r for r in self.read_iterations() if int(r["iteration"]) != int(row["iteration"])]
        rows.append(row)
        rows.sort(key=lambda r: int(r["iteration"]))
        fields: list[str] = []
        for r in rows:
            fields.extend(k for k in r if k not in fields)
        _write_csv(self.iterations_file, fields, [{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
        if self.scalars is not None:
            self.scalars.sync(rows)

    def discard_iterations(self) -> None:
        """Remove ``iterations.csv`` and its TensorBoard scalars (a run starting over)."""
        import shutil

        self.iterations_file.unlink(missing_ok=True)
        shutil.rmtree(self.path / TENSORBOARD_DIR, ignore_errors=True)
        if self.scalars is not None:
            self.scalars = TensorBoardScalars(self.path)

    # reads ---------------------------------------------------------------------------------
    @property
    def iterations_file(self) -> Path:
        return self.path / "iterations.csv"

    def read_iterations(self) -> list[dict[str, Any]]:
        """``iterations.csv`` rows with numbers parsed (empty cells: None)."""
        if not self.iterations_file.exists():
            return []
        with open(self.iterations_file, newline="") as fh:
            return [{k: _number(v) for k, v in r.items()} for r in csv.DictReader(fh)]

    def read_llm_calls(self) -> list[dict[str, Any]]:
        if not self.llm_calls_file.exists():
            return []
        with open(self.llm_calls_file, newline="") as fh:
            return list(csv.DictReader(fh))

    def read_jsonl(self, name: str) -> list[dict[str, Any]]:
        path = self.path / name
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line
        return out

    def read_json(self, name: str) -> Any:
        path = self.path / name
        return json.loads(path.read_text()) if path.exists() else None

    def load_episode_dicts(self, repair: bool = False) -> list[dict[str, Any]]:
        """Every finished episode, in file order. A torn last line (killed mid-write) is
        skipped, and removed from the file when ``repair``."""
        if not self.episodes_file.exists():
            return []
        good: list[dict[str, Any]] = []
        good_bytes = 0
        raw = self.episodes_file.read_bytes()
        for line in raw.splitlines(keepends=True):
            try:
                good.append(json.loads(line))
                good_bytes += len(line)
            except json.JSONDecodeError:
                logger.warning("%s: dropping an unfinished episode record", self.episodes_file)
                break
        if repair and good_bytes != len(raw):
            with open(self.episodes_file, "r+b") as fh:
                fh.truncate(good_bytes)
        return good

    def repair_episodes(self) -> bool:
        """Drop a torn last line of ``episodes.jsonl``; True if there was one (its episode is
        lost and must be played again)."""
        if not self.episodes_file.exists():
            return False
        size = self.episodes_file.stat().st_size
        self.load_episode_dicts(repair=True)
        return self.episodes_file.stat().st_size != size

    RUN_FILES = (
        "config.yaml", "manifest.json", "episodes.jsonl", "metrics.csv", "llm_calls.csv", "summary.json",
        "iterations.csv", "updates.jsonl", "policies.jsonl", "learner_state.json", "review.json",
        "learning_curve.png", "checkpoints.sqlite", "checkpoints.sqlite-wal", "checkpoints.sqlite-shm",
        "checkpoints.sqlite-journal",
    )
    """The files of a run that :meth:`discard_run_files` removes."""

    def discard_run_files(self) -> None:
        """Remove the run's own files (a run with no finished episode starts afresh); other
        files in the directory are left alone."""
        for name in self.RUN_FILES:
            (self.path / name).unlink(missing_ok=True)
        self.discard_iterations()

    def load_trajectories(self) -> list[Trajectory]:
        return [Trajectory.from_dict(d) for d in self.load_episode_dicts()]

    def rewrite_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Make metrics.csv match the episodes on disk (after a resume dropped a torn line)."""
        _write_csv(self.metrics_file, METRIC_FIELDS, rows)


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    """Write a whole CSV file atomically (keys outside ``fields`` are left out)."""
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", restval="")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


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

