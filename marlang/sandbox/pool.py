"""`Sandbox`: a pool of warm worker processes that run untrusted programs and their tests.

Each worker is a clean `python -P -s -S runner.py` process; per job it forks a fresh confined
child, so a job costs a fork instead of an interpreter start. Thread-safe and asyncio-friendly.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import logging
import os
import queue
import select
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Self, cast

from marlang.sandbox.helper_probe import HelperProbe
from marlang.sandbox.isolation import (
    IsolationInfo,
    hidden_packages,
    mask_candidates,
    resolve_isolation,
    worker_command,
    worker_env,
)
from marlang.sandbox.limits import SandboxLimits
from marlang.sandbox.results import SandboxResult, TestOutcome

log = logging.getLogger(__name__)

WORKER_START_TIMEOUT = 30.0
REPLY_MARGIN = 15.0  # past the wall limit: the worker itself enforces wall_seconds + 3 s

_live_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_shared: dict[tuple[SandboxLimits, int, str], Sandbox] = {}
_shared_lock = threading.Lock()


class _Worker:
    """One worker process and its line protocol. Used by one thread at a time."""

    def __init__(self, level: str, masks: list[str], hide: list[str],
                 limits: SandboxLimits) -> None:
        config = json.dumps({"level": level, "masks": masks, "hide": hide,
                             "limits": limits.to_dict(), "tmpdir": worker_env()["TMPDIR"]})
        self.proc = subprocess.Popen(worker_command(config), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=worker_env(), cwd="/", bufsize=0, close_fds=True,
                                     start_new_session=True)
        # Both are pipes (PIPE above), never None.
        self._stdin, self._stdout = cast(IO[bytes], self.proc.stdin), cast(IO[bytes], self.proc.stdout)
        self._buffer = b""
        self._ready = False
        self._ids = itertools.count()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self._stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None  # the worker died
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def request(self, job: dict, timeout: float) -> dict | None:
        """Send one job, wait for its reply; None when the worker died or hung."""
        try:
            if not self._ready:
                if self._read_line(time.monotonic() + WORKER_START_TIMEOUT) is None:
                    return None
                self._ready = True
            job = {**job, "id": next(self._ids)}
            data = memoryview((json.dumps(job) + "\n").encode())
            while data:
                data = data[self._stdin.write(data):]
            line = self._read_line(time.monotonic() + timeout)
            if line is None:
                return None
            reply = json.loads(line)
            return reply if reply.get("id") == job["id"] else None
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        try:
            self._stdin.close()  # the worker exits at end of input
        except OSError:
            pass

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.wait(1.0)

    def wait(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self._stdin, self._stdout):
            try:
                stream.close()
            except OSError:
                pass


class Sandbox:
    """Runs untrusted programs against tests in confined, resource-limited processes.

    limits: `SandboxLimits` for every run (defaults if None). workers: processes in the pool
    (runs in parallel). isolation: "auto" (strongest available) or a level name from
    `marlang.sandbox.LEVELS`; asking for one the machine lacks raises IsolationUnavailableError.
    """

    def __init__(self, limits: SandboxLimits | None = None, workers: int = 2,
                 isolation: str = "auto") -> None:
        self._closed = True  # until fully built, so __del__ on a failed init does nothing
        if limits is None:
            limits = SandboxLimits()
        if not isinstance(limits, SandboxLimits):
            raise ValueError(  # noqa: TRY004 - bad arguments are ValueErrors across marlang
                f"limits must be a SandboxLimits or None, got {type(limits).__name__}")
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        if not isinstance(isolation, str):
            raise ValueError(f"isolation must be a string, got {isolation!r}")  # noqa: TRY004
        self.limits = limits
        self.workers = workers
        self.isolation: IsolationInfo = resolve_isolation(isolation)
        self._masks = mask_candidates()
        self._hide = hidden_packages()
        self._lock = threading.Lock()
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: list[_Worker] = []
        self._closed = False
        for _ in range(workers):
            self._idle.put(self._spawn())
        _live_sandboxes.add(self)

    # ------------------------------------------------------------------ pool plumbing
    def _spawn(self) -> _Worker:
        worker = _Worker(self.isolation.name, self._masks, self._hide, self.limits)
        with self._lock:
            self._all.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)

    def _acquire(self) -> _Worker:
        while True:
            if self._closed:
                raise RuntimeError("this Sandbox is closed")
            try:
                return self._idle.get(timeout=0.2)
            except queue.Empty:
                continue

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring and tests)."""
        with self._lock:
            return [w.pid for w in self._all if w.proc.poll() is None]

    # ------------------------------------------------------------------ running
    def run_tests(self, program: str, tests: Sequence[str], setup: str = "", *,
                  probe: HelperProbe | None = None) -> SandboxResult:
        """Run `setup` + `program`, then each test snippet; thread-safe. With `probe`, the
        judge also watches the entry point's results and, where it names helpers, wraps them
        (`SandboxResult.probe`)."""
        if not isinstance(program, str):
            raise ValueError(  # noqa: TRY004 - bad arguments are ValueErrors across marlang
                f"program must be a string, got {type(program).__name__}")
        if not isinstance(setup, str):
            raise ValueError(  # noqa: TRY004
                f"setup must be a string, got {type(setup).__name__}")
        if isinstance(tests, str) or not all(isinstance(t, str) for t in tests):
            raise ValueError("tests must be a sequence of strings (one test snippet each)")
        tests = list(tests)
        if probe is not None and not isinstance(probe, HelperProbe):
            raise ValueError(
                f"probe must be a HelperProbe or None, got {type(probe).__name__}")
        job = {"program": program, "tests": tests, "setup": setup,
               **(probe.job_fields() if probe is not None else {})}
        reply = None
        worker = self._acquire()
        try:
            # A worker that died mid-job (only weak levels allow that) is replaced and the job
            # tried once more; a second death is reported as "crashed".
            for _attempt in range(2):
                reply = worker.request(job, self.limits.wall_seconds + REPLY_MARGIN)
                if reply is not None:
                    break
                self._retire(worker)
                if self._closed:  # for good: the finally below keeps the retired worker out
                    break
                log.warning("sandbox worker died or hung; starting a new one")
                worker = self._spawn()
        finally:
            if not self._closed:
                self._idle.put(worker)
        if reply is None:
            return SandboxResult(status="crashed", total=len(tests),
                                 error_type="SandboxWorkerLost",
                                 message="the sandbox worker died twice while running this "
                                         "program" if not self._closed else
                                         "the sandbox was closed while running this program",
                                 isolation=self.isolation.name)
        outcomes = [TestOutcome(source=tests[t["index"]], **{k: v for k, v in t.items()
                                                            if k != "source"})
                    for t in reply.get("tests", []) if 0 <= t.get("index", -1) < len(tests)]
        return SandboxResult(status=reply["status"], tests=outcomes, total=len(tests),
                             error_type=reply.get("error_type"), message=reply.get("message"),
                             stdout=reply.get("stdout", ""), stderr=reply.get("stderr", ""),
                             wall_seconds=float(reply.get("wall_seconds", 0.0)),
                             isolation=self.isolation.name,
                             probe=reply.get("probe") if probe is not None else None)

    def run_many(self, jobs: Sequence[tuple]) -> list[SandboxResult]:
        """Run (program, tests[, setup[, probe]]) jobs concurrently across the pool; results
        in order."""
        jobs = [tuple(job) for job in jobs]
        for i, job in enumerate(jobs):
            if len(job) not in (2, 3, 4):
                raise ValueError(f"jobs[{i}] must be (program, tests), (program, tests, setup) "
                                 "or (program, tests, setup, probe)")
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.workers, len(jobs))) as pool:
            return list(pool.map(
                lambda job: self.run_tests(*job[:3], probe=job[3] if len(job) > 3 else None),
                jobs))

    async def arun_tests(self, program: str, tests: Sequence[str],
                         setup: str = "") -> SandboxResult:
        """`run_tests` without blocking the event loop."""
        return await asyncio.to_thread(self.run_tests, program, tests, setup)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Stop every worker (and with them any running job). Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            workers, self._all = list(self._all), []
        for worker in workers:
            worker.close()
        for worker in workers:
            worker.wait(2.0)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit modules may be half gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.workers} workers"
        return f"Sandbox(isolation={self.isolation.name!r}, {state})"


def shared_sandbox(limits: SandboxLimits | None = None, workers: int | None = None,
                   isolation: str = "auto") -> Sandbox:
    """One process-wide pool per (limits, workers, isolation), created on first use, closed
    at exit."""
    limits = limits if limits is not None else SandboxLimits()
    workers = workers if workers is not None else 2
    key = (limits, workers, isolation)
    with _shared_lock:
        sandbox = _shared.get(key)
        if sandbox is None or sandbox.closed:
            sandbox = Sandbox(limits=limits, workers=workers, isolation=isolation)
            _shared[key] = sandbox
        return sandbox


def close_shared_sandboxes() -> None:
    """Close the pools `shared_sandbox` made (the next call starts fresh ones)."""
    with _shared_lock:
        sandboxes = list(_shared.values())
        _shared.clear()
    for sandbox in sandboxes:
        sandbox.close()


@atexit.register
def _close_all() -> None:
    close_shared_sandboxes()
    for sandbox in list(_live_sandboxes):
        sandbox.close()
