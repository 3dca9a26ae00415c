"""The sandbox worker: a small clean Python process that runs one job at a time in fresh children.

Started by `marlang.sandbox.pool` as `python -P -s -S runner.py CONFIG` (standard library only:
no site-packages, no marlang, no torch). Jobs arrive one JSON line at a time on its stdin and
each answer is one JSON line on stdout, but **the worker never reads a job**: it forks a job
process C (own session, confined by `confinement`) before the job arrives; C forks the
program process G, which confines itself and waits, and only then does C read the job from
the worker's stdin. So the program's process is a copy of processes that never held a job:
its tests, `check` and every expected value exist only in C, and G receives nothing but the
program and the import lines of the test setup (`program_server`). C asks G for a program
name or a call over a private pipe and G answers with plain data (`plain_data`). C is the
judge (`judge`): it runs the trusted test code itself, so every comparison happens outside
the program's process, and streams one JSON line per event to the worker, so outcomes
survive a kill. `--probe` runs a tiny job at every isolation level and prints which ones
work here.
"""

# This file runs untrusted code's machinery: no exception may ever escape a forked child into
# the worker loop.
# ruff: noqa: BLE001, S110

from __future__ import annotations

import fcntl
import gc
import io
import json
import os
import resource
import selectors
import signal
import sys
import time
from typing import TYPE_CHECKING

# mypy reads the package branch (TYPE_CHECKING) and so knows the siblings' types; at run time
# `__package__` alone decides.
if TYPE_CHECKING or __package__:
    from . import cleanup, confinement, judge, outcomes, processes, program_server
else:  # started as a script: import the sibling modules, then leave sys.path as it was
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cleanup
    import confinement
    import judge
    import outcomes
    import processes
    import program_server
    del sys.path[0]

# Imported once here so every forked program gets them for free (HumanEval/MBPP favourites).
# Not random, tempfile, threading, subprocess or hashlib: their at-fork hooks and mappings make
# every fork of the worker measurably slower, and few programs need them.
import bisect  # noqa: F401
import collections  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import re  # noqa: F401
import string  # noqa: F401
import typing  # noqa: F401

EXIT_SETUP_FAILED = 71
EXIT_INTERNAL = 72
CALL_FD, REPLY_FD = program_server.CALL_FD, program_server.REPLY_FD
_write_all = program_server.write_all


# --------------------------------------------------------------------------- program process G

def _program_env(workdir: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}


def _confine_program_process(level: str, cfg: dict, limits: dict, workdir: str) -> dict:
    info: dict = {}
    namespaces = level in confinement.NAMESPACE_LEVELS
    as_root = cfg["as_root"]  # of the worker: inside a user namespace everyone looks like root
    if namespaces:
        info["proc"] = confinement.mount_private_proc()
        if as_root:
            confinement.become_unprivileged()
    os.chdir(workdir)
    if namespaces:
        # Counted per user namespace: only this run's processes (+1 for C when it shares it).
        nproc = limits["max_processes"] + (0 if as_root else 1)
        info["process_limit"] = True
    elif as_root:
        nproc, info["process_limit"] = None, False  # root is exempt from RLIMIT_NPROC
    else:
        # Without a user namespace the limit counts every process of this uid on the machine.
        nproc = confinement.count_user_tasks(os.getuid()) + limits["max_processes"]
        info["process_limit"] = True
    confinement.apply_rlimits(limits["cpu_seconds"], limits["memory_mb"],
                              min(limits["file_size_mb"], limits["disk_mb"]), nproc)
    confinement.set_no_new_privs()
    info["sockets_blocked"] = confinement.deny_sockets()
    if level in confinement.LANDLOCK_LEVELS:
        read_dirs = list(confinement.SYSTEM_READ_DIRS) + cfg["python_paths"]
        confinement.apply_landlock(cfg["landlock_abi"], workdir, read_dirs)
    if namespaces or as_root:
        # Root without namespaces still holds real capabilities (reboot, modules, ...).
        confinement.drop_capabilities()
    return info


def _program_process(level: str, cfg: dict, limits: dict, workdir: str, fds: dict) -> int:
    """Body of G: confine, then load the program the judge sends and serve its calls.

    Forked before the job process read its job, so nothing of the job is in this process's
    memory. Returns its exit code; never lets an exception escape into the worker loop."""
    os.setpgid(0, 0)
    confinement.set_parent_death_signal()
    # Move the pipes clear of 0-4 first, so placing one cannot overwrite another.
    moved = {key: fcntl.fcntl(fds[key], fcntl.F_DUPFD, 16)
             for key in ("out", "err", "call_read", "reply_write")}
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(moved["out"], 1)
    os.dup2(moved["err"], 2)
    os.dup2(moved["call_read"], CALL_FD)
    os.dup2(moved["reply_write"], REPLY_FD)
    os.closerange(REPLY_FD + 1, 1 << 20)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    server = program_server.ProgramServer()
    try:
        info = _confine_program_process(level, cfg, limits, workdir)
        os.environ.clear()
        os.environ.update(_program_env(workdir))
        if level == "rlimits":
            confinement.install_guard(workdir)
    except BaseException as exc:
        server.send({"kind": "setup_error", "message": f"{type(exc).__name__}: {exc}"})
        return EXIT_SETUP_FAILED
    server.send({"kind": "setup", **info})
    server.run()
    return 0


# --------------------------------------------------------------------------- job process C


def _read_job(fd: int) -> dict | None:
    """One job line from `fd` (the pool writes one and waits for its answer); None at its end."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def _job_process(level: str, cfg: dict, limits: dict, workdir: str, fds: dict,
                 job_fd: int) -> int:
    """Body of C: confine, fork G, then read the job, judge its tests, enforce the wall limit,
    clean up, report.

    Events go to the control fd: the job's header (its id and number of tests) first, then
    setup, load, one per test, done, and the final report; "eof" when no job came.
    """
    ctl = fds["ctl"]
    job_fd = os.dup(job_fd)  # it may be 0, the worker's stdin
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # never touch the worker's protocol pipes
    # What the tests print is captured with the program's output.
    os.dup2(fds["out"], 1)
    os.dup2(fds["err"], 2)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    os.setsid()
    namespaces = level in confinement.NAMESPACE_LEVELS
    setup_error = None
    try:
        confinement.set_parent_death_signal()
        if os.getppid() != cfg["worker_pid"]:
            return EXIT_INTERNAL
        if namespaces:
            as_root = cfg["as_root"]
            confinement.set_dumpable(True)  # to write its own uid map
            confinement.enter_namespaces(as_root)
            masks = confinement.plan_masks(cfg["masks"] + list(confinement.FIXED_MASKS),
                                           cfg["python_paths"], cfg["hide"])
            confinement.setup_filesystem(masks, cfg["python_paths"], int(limits["disk_mb"]),
                                         as_root)
            confinement.set_dumpable(False)
        else:
            confinement.set_child_subreaper()
    except BaseException as exc:
        setup_error = f"{type(exc).__name__}: {exc}"
    program_pid = None
    if setup_error is None:
        program_pid = os.fork()
        if program_pid == 0:
            code = EXIT_INTERNAL
            try:
                os.close(ctl)
                os.close(job_fd)
                code = _program_process(level, cfg, limits, workdir, fds)
            except BaseException:
                code = EXIT_INTERNAL
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except BaseException:
                        pass
                os._exit(code)
    for key in ("call_read", "reply_write"):
        os.close(fds[key])
    job = _read_job(job_fd)  # only now, with G forked and waiting, does the job exist here
    if job is None:
        if program_pid is not None:
            processes.stop_program(program_pid, namespaces)
        _write_all(ctl, b'{"kind": "eof"}\n')
        return 0
    start = time.monotonic()
    _write_all(ctl, (json.dumps({"kind": "job", "id": job.get("id"),
                                 "tests": len(job["tests"])}) + "\n").encode())
    if program_pid is None:  # the setup failed, so G was never forked
        _write_all(ctl, (json.dumps({"kind": "setup_error", "message": setup_error}) + "\n")
                   .encode())
        return EXIT_SETUP_FAILED
    deadline = start + float(limits["wall_seconds"])
    try:  # the tests are trusted, but get the program's memory budget all the same
        memory = max(int(limits["memory_mb"]), 256) << 20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (OSError, ValueError):
        pass
    disk = None if namespaces else judge.DiskWatch(workdir, int(limits["disk_mb"]))
    verdict = judge.Judge({**job, "limits": limits}, ctl, fds["call_write"], fds["reply_read"],
                          program_pid, deadline, disk)
    stop = None
    try:
        verdict.run()
        stop = verdict.stop
    except BaseException as exc:
        stop = ["crashed", "SandboxError", f"the sandbox's judge failed: {type(exc).__name__}"]
    os.close(fds["call_write"])  # end of requests: a program process waiting for one exits
    timed_out = verdict.timed_out
    if stop is None and not timed_out:
        timed_out = not processes.wait_exit(program_pid, deadline)
    status, usage = processes.stop_program(program_pid, namespaces, kill_init=bool(timed_out or stop))
    report = {"kind": "exit", "status": status, "timed_out": timed_out, "stop": stop,
              "cpu_seconds": usage.ru_utime + usage.ru_stime}
    _write_all(ctl, (json.dumps(report) + "\n").encode())
    return 0


# --------------------------------------------------------------------------- worker side

class _Capture:
    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.max_bytes = 4 * max_chars + 4
        self.data = bytearray()
        self.overflow = False

    def add(self, chunk: bytes) -> None:
        room = self.max_bytes - len(self.data)
        if len(chunk) > room:
            self.overflow = True
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if len(text) > self.max_chars or self.overflow:
            text = text[:self.max_chars] + (
                f"\n[... output truncated at {self.max_chars} characters]")
        return text


def run_job(level: str, cfg: dict, limits: dict, job_fd: int) -> dict | None:
    """Run the next job that arrives on `job_fd` in fresh confined children (forked before it
    arrives); the worker-side half of the protocol. None when `job_fd` ended instead."""
    namespaces = level in confinement.NAMESPACE_LEVELS
    if namespaces:
        workdir = confinement.WORKDIR_IN_NAMESPACE
    else:
        workdir = os.path.join(cfg["tmpdir"], "marlang-sandbox-" + os.urandom(8).hex())
        os.mkdir(workdir, 0o700)
    # out, err, ctl: to the worker; call (C -> G) and reply (G -> C): between judge and program.
    pipes = {key: os.pipe() for key in ("out", "err", "ctl", "call", "reply")}
    mine = {key: pipes[key][0] for key in ("out", "err", "ctl")}
    theirs = {"out": pipes["out"][1], "err": pipes["err"][1], "ctl": pipes["ctl"][1],
              "call_read": pipes["call"][0], "call_write": pipes["call"][1],
              "reply_read": pipes["reply"][0], "reply_write": pipes["reply"][1]}
    try:
        pid = os.fork()
        if pid == 0:
            code = EXIT_INTERNAL
            try:
                for fd in mine.values():
                    os.close(fd)
                code = _job_process(level, cfg, limits, workdir, theirs, job_fd)
            except BaseException:
                code = EXIT_INTERNAL
            finally:
                os._exit(code)
        for fd in theirs.values():
            os.close(fd)
        outcome = _collect(pid, mine, limits, cfg["parent_pid"])
    finally:
        for fd in mine.values():
            try:
                os.close(fd)
            except OSError:
                pass
        if not namespaces:
            cleanup.remove_tree(workdir)
    return outcome


def _collect(pid: int, reads: dict, limits: dict, parent_pid: int | None) -> dict | None:
    captures = {"out": _Capture(int(limits["output_chars"])),
                "err": _Capture(int(limits["output_chars"]))}
    raw = bytearray()
    header: dict | None = None
    result_cap = 1 << 16
    selector = selectors.DefaultSelector()
    for key, fd in reads.items():
        selector.register(fd, selectors.EVENT_READ, key)
    start: float | None = None  # until the job arrives: C waits for it as long as it takes
    backstop: float | None = None
    killed_by_worker = False
    exited_at = None
    open_pipes = set(reads)
    try:
        while True:
            now = time.monotonic()
            if parent_pid is not None and os.getppid() != parent_pid:
                processes.kill_run(pid)  # the parent is gone: stop everything, now
                os._exit(0)
            if exited_at is None and backstop is not None and now >= backstop \
                    and not killed_by_worker:
                killed_by_worker = True
                processes.kill_run(pid)
            if exited_at is not None and (not open_pipes or now >= exited_at + 0.5):
                break
            limit = (exited_at + 0.5 if exited_at is not None
                     else backstop if backstop is not None else now + 1.0) - now
            for key, _ in selector.select(max(0.0, min(limit, 1.0))):
                name = key.data
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    open_pipes.discard(name)
                    if name == "ctl":  # only C holds it: C has exited
                        os.waitpid(pid, 0)
                        exited_at = time.monotonic()
                elif name in captures:
                    captures[name].add(chunk)
                elif len(raw) < result_cap:
                    raw += chunk
                    if header is None and b"\n" in raw:  # C's first line: the job arrived
                        header = outcomes.header(bytes(raw[:raw.index(b"\n")]))
                        if header.get("kind") == "eof":
                            break
                        start = time.monotonic()
                        backstop = start + float(limits["wall_seconds"]) + 3.0
                        # Events are small (reprs and messages are cut by the judge).
                        result_cap = (1 << 16) + 8192 * int(header.get("tests") or 0)
    finally:
        selector.close()
    if header is not None and header.get("kind") == "eof":
        if exited_at is None:
            os.waitpid(pid, 0)
        return None
    if header is None or start is None:  # C ended before any job arrived: its input is gone too
        return None
    wall = time.monotonic() - start
    n_tests = int(header.get("tests") or 0)
    events, setup, report = outcomes.read_events(bytes(raw), n_tests)
    verdict = outcomes.classify(limits, n_tests, events, report, killed_by_worker)
    probe = events.get("probe") if verdict["status"] == "ok" else None
    return {**verdict, "id": header.get("id"), "tests": events["tests"],
            "stdout": captures["out"].text(), "stderr": captures["err"].text(),
            "wall_seconds": wall, "setup": setup, "probe": probe}


def python_paths() -> list[str]:
    """The directories a program needs to import the standard library (kept visible)."""
    paths = {os.path.realpath(sys.base_prefix),
             os.path.dirname(os.path.realpath(sys.executable))}
    for entry in sys.path:
        if entry and os.path.exists(entry):
            real = os.path.realpath(entry)
            paths.add(real if os.path.isdir(real) else os.path.dirname(real))
    minimal: list[str] = []
    for path in sorted(paths, key=len):
        if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in minimal):
            minimal.append(path)
    return minimal


def _worker_config(raw: dict) -> dict:
    return {"masks": list(raw.get("masks", [])), "hide": list(raw.get("hide", [])),
            "tmpdir": raw.get("tmpdir") or os.environ.get("TMPDIR") or "/tmp",
            "python_paths": python_paths(), "landlock_abi": confinement.landlock_abi(),
            "worker_pid": os.getpid(), "parent_pid": raw.get("parent_pid"),
            "as_root": os.geteuid() == 0}


PROBE_JOB_LIMITS = {"cpu_seconds": 5.0, "wall_seconds": 10.0, "memory_mb": 512,
                    "max_processes": 16, "file_size_mb": 16, "disk_mb": 64,
                    "output_chars": 2000, "test_timeout": 5.0}


def probe(raw: dict) -> dict:
    """Run a tiny job at every level; a level is available when it loads and passes."""
    cfg = _worker_config(raw)
    job = {"program": "import os\nx = os.getcwd()\n", "setup": "",
           "tests": ["assert isinstance(x, str)"]}
    report: dict = {"landlock_abi": cfg["landlock_abi"], "euid": os.geteuid(), "levels": {}}
    for level in confinement.LEVELS:
        if level in confinement.LANDLOCK_LEVELS and not cfg["landlock_abi"]:
            report["levels"][level] = {"ok": False, "reason": "Landlock is not available"}
            continue
        read, write = os.pipe()
        try:
            _write_all(write, (json.dumps(job) + "\n").encode())
            os.close(write)
            result = run_job(level, cfg, PROBE_JOB_LIMITS, read)
        except OSError as exc:
            report["levels"][level] = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"}
            continue
        finally:
            os.close(read)
        if result is None:
            report["levels"][level] = {"ok": False, "reason": "the job process ended early"}
            continue
        ok = result["status"] == "ok" and all(t["passed"] for t in result["tests"])
        report["levels"][level] = {"ok": ok, "reason": None if ok else result["message"],
                                   "setup": result["setup"]}
    return report


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    # Not dumpable: a process of the same user (a program at a level without namespaces) can
    # then neither read this process's memory, where jobs and their tests pass, nor open its
    # descriptors; the job processes forked from here inherit it.
    confinement.set_dumpable(False)
    if len(argv) >= 2 and argv[1] == "--probe":
        _write_all(1, (json.dumps(probe(json.loads(argv[2] if len(argv) > 2 else "{}")))
                       + "\n").encode())
        return 0
    raw = json.loads(argv[1])
    level = raw["level"]
    if level == "rlimits":  # the guard patches these in every program process: import once
        import shutil  # noqa: F401
        import socket  # noqa: F401
        import subprocess  # noqa: F401
    cfg = _worker_config({**raw, "parent_pid": os.getppid()})
    limits = raw["limits"]
    # Forked children would otherwise let the collector walk (and so copy) every page of
    # the worker's objects; frozen objects are never traversed.
    gc.freeze()
    _write_all(1, (json.dumps({"ready": True, "pid": os.getpid()}) + "\n").encode())
    while True:
        # The next job process reads the next job itself; this process never holds one.
        result = run_job(level, cfg, limits, 0)
        if result is None:
            return 0
        _write_all(1, (json.dumps(result) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
