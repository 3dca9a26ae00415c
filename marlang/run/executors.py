"""Where a comparison's runs execute: `LocalExecutor` plays them one after another in this
process (settings that can share one chat model share it), `RayExecutor` runs each as a task
on a Ray cluster with the resources its config declares (``run.resources``).

Both take a plain list of `RunJob` (run name, validated config, `Experiment` keyword
arguments) and write each run into ``OUT/<run name>``; the comparison directory is the
record, so rerunning a grid resumes it run by run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from marlang.config import ConfigError, ExperimentConfig, redact_secrets
from marlang.rundir import RunDirectory
from marlang.rundir.untrusted import read_regular
from marlang.tables.report import SUMMARY_INPUTS

logger = logging.getLogger(__name__)

RAY_INSTALL = 'pip install "marlang[ray]"'

RAY_PROBE_TIMEOUT_S = 5.0
"""How long the check that something listens at ``--address HOST:PORT`` waits for its TCP
connection (Ray itself retries a missing cluster for many minutes)."""

RAY_CONNECT_TIMEOUT_S = 20.0
"""How long joining a cluster at an address that accepts connections may take: a port that
is not a Ray cluster's makes Ray retry for many minutes."""

RAY_TASK_ENV = {"TQDM_DISABLE": "1"}
"""The environment of each Ray task: no progress bars (their lines would reach the worker
logs, or the terminal where the caller's own Ray forwards worker output)."""

CANCEL_GRACE_S = 30.0
"""How long a Ctrl-C waits for the cancelled runs to stop at their next step (keeping what is
finished) before their workers are killed."""


class RunJob(NamedTuple):
    """One run of a comparison: ``OUT/<name>`` is its run directory."""

    name: str
    config: ExperimentConfig
    kwargs: dict[str, Any]
    """Keyword arguments of `Experiment` (``label``; the shared ``chat_model`` and ``cache``
    where the executor shares one model)."""


class Executor(Protocol):
    """Runs (or resumes) every job into ``out_dir``; returns the runs that failed, each with a
    one-line reason (a finished run is in ``out_dir / name`` when this returns)."""

    shares_model: bool
    """Whether jobs may carry one chat model built by the caller (only in-process)."""

    def prepare(self) -> None:
        """Check what the executor needs before the grid writes anything (a cluster to join)."""

    def run(self, jobs: Sequence[RunJob], out_dir: Path,
            notify: Callable[[str], None] | None = None) -> dict[str, str]: ...


def _run_job(config: ExperimentConfig, path: Path, kwargs: dict[str, Any],
             notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run or resume one job in this process (a directory that exists is resumed)."""
    from marlang.run.experiment import Experiment

    result = Experiment(config, path, resume=RunDirectory(path).exists(), notify=notify, **kwargs).run()
    return {"episodes_run": result.episodes_run, "paused": result.paused,
            "already_finished": result.already_finished}


class LocalExecutor:
    """Every run in this process, one after another; an error stops the grid (and Ctrl-C
    stops the run in progress, keeping what it finished)."""

    shares_model = True

    def prepare(self) -> None:
        """Nothing to check: the runs play in this process."""

    def run(self, jobs: Sequence[RunJob], out_dir: Path,
            notify: Callable[[str], None] | None = None) -> dict[str, str]:
        for job in jobs:
            logger.info("setting %s -> %s", job.kwargs.get("label") or job.name, out_dir / job.name)
            _run_job(job.config, out_dir / job.name, job.kwargs, notify)
        return {}


def finished_run(path: Path, config: ExperimentConfig) -> bool:
    """Whether ``path`` holds a finished run of ``config``: its summary written after every
    file the run writes before it (the training checkpoint included), under the same config.
    A run cut short, or resumed and extended since, has files newer than its summary."""
    summary = path / "summary.json"
    try:
        saved = read_regular(path / "config.yaml")  # a FIFO there is refused in one line, never waited on
        if saved is None or saved.decode(errors="replace") != redact_secrets(config.to_yaml()):
            return False
        written = summary.stat().st_mtime_ns
    except OSError:
        return False
    names = (*SUMMARY_INPUTS, "checkpoints.sqlite", "checkpoints.sqlite-wal", "llm_calls.csv", "metrics.csv")
    return not any((path / n).is_file() and (path / n).stat().st_mtime_ns > written for n in names)


def _ray_task(config: ExperimentConfig, path: str, kwargs: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The body of one Ray task: relative paths in the config (prompt files, data) mean what
    they mean to the command that started the grid, where the worker sees that folder."""
    if os.path.isdir(cwd):
        os.chdir(cwd)
    return _run_job(config, Path(path), kwargs)


def import_ray() -> Any:
    """The ``ray`` module, or a one-line `ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL}") from None
    return ray


def cluster_endpoint(address: str) -> tuple[str, int] | None:
    """The host and port of a cluster address (``HOST:PORT``, ``ray://HOST:PORT``); None for
    ``auto``, ``local`` and addresses without a port, which Ray resolves itself."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def probe_cluster(address: str) -> None:
    """A one-line `ConfigError` when nothing accepts a TCP connection at ``address`` (Ray
    would retry for many minutes, printing only its own warnings)."""
    endpoint = cluster_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=RAY_PROBE_TIMEOUT_S):
            pass
    except OSError as err:
        reason = "timed out" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        client = address.startswith("ray://")
        raise ConfigError(
            f"no Ray cluster answers at {address} ({reason}): start one on {host} with "
            + ("`ray start --head` (Ray Client port 10001 by default)" if client else
               f"`ray start --head --port={port}` (the GCS port, 6379 by default)")
            + ", or check the host, the port and the firewall") from None


class _SigtermNotice(logging.Filter):
    """Drops Ray's notice that a connection made off the main thread sets no SIGTERM handler
    (the bounded join below connects from a thread; the default handler ends the process)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler" not in record.getMessage()


def _init_bounded(ray: Any, address: str, timeout_s: float, **kwargs: Any) -> None:
    """``ray.init(address=...)`` within ``timeout_s``, or a one-line `ConfigError`. A join
    that does not finish is left running in a daemon thread: Ray cannot cancel it."""
    outcome: dict[str, BaseException | None] = {}

    def join() -> None:
        try:
            ray.init(address=address, **kwargs)
            outcome["error"] = None
        except BaseException as err:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = err

    notice = _SigtermNotice()
    ray_logger = logging.getLogger("ray._private.worker")
    ray_logger.addFilter(notice)
    try:
        thread = threading.Thread(target=join, name="marlang-ray-init", daemon=True)
        thread.start()
        thread.join(timeout_s)
    finally:
        ray_logger.removeFilter(notice)
    if "error" not in outcome:
        raise ConfigError(f"the Ray cluster at {address} did not answer within {timeout_s:.0f} s: is that "
                          "port a Ray cluster's (`ray start --head` prints it; the GCS port is 6379 by "
                          "default), and is the cluster's Ray version this one's?")
    if outcome["error"] is not None:
        raise outcome["error"]


class RayExecutor:
    """Each run a Ray task reserving its ``run.resources`` (a scripted team: its CPUs only),
    retried once if its worker dies. Workers write run directories themselves: the
    comparison directory must be on storage every node sees at the same path.

    ``address``: a cluster (``auto``, ``HOST:PORT``, ``ray://...``); None joins the one
    ``RAY_ADDRESS`` names, or starts a Ray instance of its own on this machine when neither
    is given (not joining one that ``ray start`` runs there: ``auto`` joins that).
    A cluster that does not answer is a one-line `ConfigError` within about 30 s. Worker
    output stays in Ray's worker logs, and tasks draw no progress bars: the terminal shows
    what a local comparison shows. A Ray already initialised in this process is used as it
    is."""

    shares_model = False

    def __init__(self, address: str | None = None) -> None:
        self.ray = import_ray()
        self.address = address
        self.submitted: list[str] = []
        """The runs this executor sent to the cluster (finished runs are not sent)."""
        self.skipped: list[str] = []
        """The runs found finished and not sent."""
        self._owns = False
        """Whether this executor joined (or started) the Ray connection, so it ends it."""

    def prepare(self) -> None:
        """Join a named cluster now, before the grid writes anything: an address where no
        cluster answers is one line and leaves no folder. (With no address the local Ray
        instance starts only when there is a run to send.)"""
        if self.address is not None and not self.ray.is_initialized():
            self._owns = self._connect()

    def _connect(self) -> bool:
        """Join (or start) the cluster; True if this call did, so the run ends the connection."""
        ray = self.ray
        if ray.is_initialized():
            return False
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        if address is None:
            logger.warning("no Ray cluster named (--address, RAY_ADDRESS): starting a local Ray instance "
                           "on this machine")
        try:
            if address is None:
                # "local": with no address Ray would join the last cluster `ray start` ran on this
                # machine, someone else's or one long gone (then it retries for minutes). Its
                # notices about an instance that lives only as long as the grid are noise.
                ray.init(address="local", include_dashboard=False, logging_level=logging.ERROR,
                         log_to_driver=False)
            else:
                probe_cluster(address)
                _init_bounded(ray, address, RAY_CONNECT_TIMEOUT_S, logging_level=logging.WARNING,
                              log_to_driver=False)
        except ConnectionError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(f"cannot join the Ray cluster at {address}: {first}") from None
        return True

    def _options(self, config: ExperimentConfig) -> dict[str, Any]:
        res = config.run.resources
        scripted = config.agents.kind == "scripted"
        options: dict[str, Any] = {"num_cpus": res.cpus, "num_gpus": 0 if scripted else res.gpus,
                                   "max_retries": 1, "runtime_env": {"env_vars": dict(RAY_TASK_ENV)}}
        if res.memory is not None and not scripted:
            options["memory"] = res.memory
        return options

    def run(self, jobs: Sequence[RunJob], out_dir: Path,
            notify: Callable[[str], None] | None = None) -> dict[str, str]:
        ray = self.ray
        out = Path(out_dir).resolve()
        todo = []
        for job in jobs:
            if job.kwargs.get("chat_model") is not None:
                raise ValueError("a Ray task builds its own model: a job cannot carry one")
            if finished_run(out / job.name, job.config):
                logger.info("%s is finished: not sent again", out / job.name)
                self.skipped.append(job.name)
            else:
                todo.append(job)
        if not todo:
            self._close()
            return {}
        if not self.ray.is_initialized():
            self._owns = self._connect()
        try:
            task = ray.remote(_ray_task)
            refs: dict[Any, RunJob] = {}
            cwd = os.getcwd()
            for job in todo:
                ref = task.options(**self._options(job.config)).remote(job.config, str(out / job.name),
                                                                         job.kwargs, cwd)
                refs[ref] = job
                self.submitted.append(job.name)
                logger.info("setting %s -> %s (Ray task)", job.kwargs.get("label") or job.name, out / job.name)
            return self._collect(refs, notify)
        finally:
            self._close()

    def _close(self) -> None:
        if self._owns:
            self.ray.shutdown()
            self._owns = False

    def _collect(self, refs: dict[Any, RunJob], notify: Callable[[str], None] | None) -> dict[str, str]:
        ray = self.ray
        failed: dict[str, str] = {}
        pending = list(refs)
        try:
            while pending:
                # A timeout, so a Ctrl-C reaches this process within a second.
                done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
                for ref in done:
                    name = refs[ref].name
                    try:
                        ray.get(ref)
                    except KeyboardInterrupt:
                        raise
                    except Exception as exc:  # noqa: BLE001 - the run is reported, the grid goes on
                        failed[name] = task_failure(exc)
                        logger.warning("run %s failed: %s", name, failed[name])
        except KeyboardInterrupt:
            self._cancel(pending, notify or logger.warning)
            raise
        return failed

    def _cancel(self, pending: list[Any], notify: Callable[[str], None]) -> None:
        """Ctrl-C: each running task is interrupted as a Ctrl-C interrupts a local run (it
        keeps what is finished); tasks still running after the grace period, or after a
        second Ctrl-C, are killed with their workers. A rerun resumes every one."""
        ray = self.ray
        if not pending:
            return
        notify(f"interrupted: stopping {len(pending)} Ray task(s) (Ctrl-C again to kill them at once)")
        for ref in pending:
            ray.cancel(ref, force=False)
        try:
            deadline = time.monotonic() + CANCEL_GRACE_S
            while pending and time.monotonic() < deadline:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
        except KeyboardInterrupt:
            pass
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception as exc:  # noqa: BLE001 - a task that ended meanwhile
                logger.debug("cancel: %s", exc)


def task_failure(exc: BaseException) -> str:
    """One line saying why a Ray task failed: the run's own error, or its worker's death."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and not type(exc).__name__.startswith(("Worker", "OutOfMemory")):
        text = str(cause).strip()
        return f"{type(cause).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if name in ("WorkerCrashedError", "OutOfMemoryError", "NodeDiedError", "RaySystemError"):
        return f"{name} (retried once): {text[:300]}"
    return f"{name}: {text[:300]}"
