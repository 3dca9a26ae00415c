"""The sandbox worker: a small clean Python process that runs one job at a time in a fresh child.

Started by `marlang.sandbox.pool` as `python -P -s -S runner.py CONFIG` (standard library only:
no site-packages, no marlang, no torch). It reads one JSON job per line on stdin and answers one
JSON line on stdout. Per job it forks a job process C (own session, confined by `confinement`),
which forks the program process G; G runs setup + program + each test and streams one JSON line
per event over a private pipe, so outcomes survive a kill. `--probe` runs a tiny job at every
isolation level and prints which ones work on this machine.
"""

# This file runs untrusted code: it must exec it and catch anything it raises, BaseException
# included, so no exception ever escapes a forked child into the worker loop.
# ruff: noqa: BLE001, S102, S110

from __future__ import annotations

import ast
import builtins
import gc
import io
import json
import os
import select
import selectors
import shutil
import signal
import stat
import sys
import time
import traceback
import types

if __package__:
    from . import confinement
else:  # started as a script: import the sibling module, then leave sys.path as it was
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import confinement
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

PROGRAM_MODULE = "sandboxed_program"  # not "__main__": `if __name__ == "__main__":` stays off
MAX_REPR = 300
MAX_MESSAGE = 1000
EXIT_SETUP_FAILED = 71
EXIT_INTERNAL = 72


class _TestTimeout(BaseException):
    """Raised by SIGALRM inside a test; BaseException so `except Exception` cannot swallow it."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --------------------------------------------------------------------------- program process G

def _program_env(workdir: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except _TestTimeout:
        raise
    except BaseException:
        text = f"<unrepresentable {type(value).__name__}>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR] + "..."


def _safe_str(exc: BaseException) -> str:
    try:
        text = str(exc) or type(exc).__name__
    except _TestTimeout:
        raise
    except BaseException:
        text = f"<unprintable {type(exc).__name__}>"
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def _where(exc: BaseException, test_file: str | None = None) -> str:
    """' (program line N)' for the innermost program frame, else the test's line: for feedback."""
    lines: dict[str, int] = {}
    tb = exc.__traceback__
    while tb is not None:
        lines[tb.tb_frame.f_code.co_filename] = tb.tb_lineno
        tb = tb.tb_next
    if "<program>" in lines:
        return f" (program line {lines['<program>']})"
    if test_file in lines:
        return f" (test line {lines[test_file]})"
    return ""


class _ProgramRun:
    """Executes setup + program + tests inside G and streams events to the result pipe."""

    def __init__(self, job: dict, result_fd: int, nonce: str) -> None:
        self.job = job
        self.fd = result_fd
        self.nonce = nonce

    def emit(self, event: dict) -> None:
        line = self.nonce + json.dumps(event, ensure_ascii=True) + "\n"
        _write_all(self.fd, line.encode())

    def run(self) -> None:
        module = types.ModuleType(PROGRAM_MODULE)
        module.__dict__["__builtins__"] = builtins
        sys.modules[PROGRAM_MODULE] = module
        namespace = module.__dict__
        try:
            codes = [compile(self.job.get("setup", ""), "<setup>", "exec"),
                     compile(self.job["program"], "<program>", "exec")]
        except (SyntaxError, ValueError) as exc:
            where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
            message = exc.msg if isinstance(exc, SyntaxError) else _safe_str(exc)
            self.emit({"kind": "load", "status": "syntax_error", "error_type": type(exc).__name__,
                       "message": f"{message}{where}"})
            return
        try:
            for code in codes:
                exec(code, namespace)
        except BaseException as exc:
            self._print_traceback(exc)
            self.emit({"kind": "load", "status": "error", "error_type": type(exc).__name__,
                       "message": _safe_str(exc) + _where(exc)})
            return
        finally:
            self._flush()
        self.emit({"kind": "load", "status": "ok"})
        signal.signal(signal.SIGALRM, self._on_alarm)
        for index, source in enumerate(self.job["tests"]):
            outcome = self._run_test(index, source, namespace)
            self._flush()
            self.emit({"kind": "test", **outcome})
        self.emit({"kind": "done"})

    @staticmethod
    def _on_alarm(signum, frame) -> None:
        raise _TestTimeout()

    @staticmethod
    def _flush() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass

    @staticmethod
    def _print_traceback(exc: BaseException) -> None:
        try:
            traceback.print_exception(exc, limit=-8, file=sys.stderr)
        except BaseException:
            pass

    def _run_test(self, index: int, source: str, namespace: dict) -> dict:
        outcome = {"index": index, "passed": False, "error_type": None, "message": None,
                   "timed_out": False, "expected": None, "got": None}
        filename = f"<test {index}>"
        timeout = float(self.job["limits"]["test_timeout"])
        try:
            try:
                tree = ast.parse(source, filename, "exec")
            except (SyntaxError, ValueError) as exc:
                outcome.update(error_type=type(exc).__name__, message=_safe_str(exc))
                return outcome
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
                    self._run_assert(tree.body[0], filename, namespace, outcome)
                else:
                    exec(compile(tree, filename, "exec"), namespace)
                    outcome["passed"] = True
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _TestTimeout:
            outcome.update(passed=False, timed_out=True, error_type="Timeout",
                           message=f"test exceeded its time limit of {timeout:g} s")
        except BaseException as exc:
            try:
                outcome.update(passed=False, error_type=type(exc).__name__,
                               message=outcome["message"] or _safe_str(exc) + _where(exc, filename))
            except _TestTimeout:
                outcome.update(error_type=type(exc).__name__, message="<unprintable>")
        return outcome

    @staticmethod
    def _eval(node: ast.expr, filename: str, namespace: dict) -> object:
        return eval(compile(ast.Expression(body=node), filename, "eval"), namespace)

    def _run_assert(self, node: ast.Assert, filename: str, namespace: dict, outcome: dict) -> None:
        """Evaluate each side of `assert a == b` / `a != b` once, to report expected and got."""
        test = node.test
        if (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
            got = self._eval(test.left, filename, namespace)
            outcome["got"] = _safe_repr(got)
            expected = self._eval(test.comparators[0], filename, namespace)
            equal = isinstance(test.ops[0], ast.Eq)
            outcome["expected"] = _safe_repr(expected) if equal else "!= " + _safe_repr(expected)
            passed = bool(got == expected) if equal else bool(got != expected)
            default = f"expected {outcome['expected']}, got {outcome['got']}"
        else:
            value = self._eval(test, filename, namespace)
            outcome["got"] = _safe_repr(value)
            passed = bool(value)
            default = f"assertion is false: {ast.unparse(test)[:MAX_REPR]}"
        if passed:
            outcome["passed"] = True
            return
        message = default
        if node.msg is not None:
            message = _safe_repr(self._eval(node.msg, filename, namespace))
        outcome["message"] = message
        raise AssertionError(message)


def _confine_program_process(level: str, cfg: dict, limits: dict, workdir: str) -> dict:
    info: dict = {}
    namespaces = level in confinement.NAMESPACE_LEVELS
    as_root = cfg["as_root"]  # of the worker: inside a user namespace everyone looks like root
    if namespaces:
        info["proc"] = confinement.mount_private_proc()
        if as_root:
            confinement.become_unprivileged()
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(_program_env(workdir))
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
                              limits["file_size_mb"], nproc)
    confinement.set_no_new_privs()
    if level in confinement.LANDLOCK_LEVELS:
        read_dirs = list(confinement.SYSTEM_READ_DIRS) + cfg["python_paths"]
        confinement.apply_landlock(cfg["landlock_abi"], workdir, read_dirs)
    if namespaces or as_root:
        # Root without namespaces still holds real capabilities (reboot, modules, ...).
        confinement.drop_capabilities()
    if level == "rlimits":
        confinement.install_guard(workdir)
    return info


def _program_process(job: dict, level: str, cfg: dict, workdir: str, fds: dict,
                     nonce: str) -> int:
    """Body of G. Returns its exit code; never lets an exception escape into the worker loop."""
    os.setpgid(0, 0)
    confinement.set_parent_death_signal()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fds["out"], 1)
    os.dup2(fds["err"], 2)
    os.dup2(fds["result"], 3)
    os.closerange(4, 1 << 20)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    run = _ProgramRun(job, 3, nonce)
    try:
        info = _confine_program_process(level, cfg, job["limits"], workdir)
    except BaseException as exc:
        run.emit({"kind": "setup_error", "message": f"{type(exc).__name__}: {exc}"})
        return EXIT_SETUP_FAILED
    run.emit({"kind": "setup", **info})
    run.run()
    return 0


# --------------------------------------------------------------------------- job process C

def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        pass
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return kids


def _wait_exit(pid: int, deadline: float) -> bool:
    """Wait for child `pid` to exit (leaving it unreaped) until `deadline`; True if it did."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # kernels before 5.3: poll
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            time.sleep(0.002)
        return False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if select.select([pidfd], [], [], remaining)[0]:
                return True
    finally:
        os.close(pidfd)


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_descendants() -> None:
    """Without a PID namespace: kill everything reparented to us (we are a subreaper).

    Only our own unreaped children are signalled (and the groups they lead), so no pid can
    have been recycled to an unrelated process.
    """
    me = os.getpid()
    for _ in range(400):
        kids = _children(me)
        if not kids:
            return
        for kid in kids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(kid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.005)
        _reap_all()


def _job_process(job: dict, level: str, cfg: dict, workdir: str, fds: dict, nonce: str,
                 worker_pid: int) -> int:
    """Body of C: confine, fork G, enforce the wall limit, clean up, report on the control fd."""
    ctl = fds["ctl"]
    limits = job["limits"]
    start = time.monotonic()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # never touch the worker's protocol pipes
    os.dup2(devnull, 1)
    os.setsid()
    namespaces = level in confinement.NAMESPACE_LEVELS
    try:
        confinement.set_parent_death_signal()
        if os.getppid() != worker_pid:
            return EXIT_INTERNAL
        if namespaces:
            as_root = cfg["as_root"]
            confinement.enter_namespaces(as_root)
            masks = confinement.plan_masks(cfg["masks"] + list(confinement.FIXED_MASKS),
                                           cfg["python_paths"])
            work_mb = max(16, 4 * int(limits["file_size_mb"]))
            confinement.setup_filesystem(masks, cfg["python_paths"], work_mb, as_root)
        else:
            confinement.set_child_subreaper()
    except BaseException as exc:
        _write_all(ctl, (json.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}) + "\n")
                   .encode())
        return EXIT_SETUP_FAILED
    program_pid = os.fork()
    if program_pid == 0:
        code = EXIT_INTERNAL
        try:
            os.close(ctl)
            code = _program_process(job, level, cfg, workdir, fds, nonce)
        except BaseException:
            code = EXIT_INTERNAL
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(code)
    for key in ("out", "err", "result"):
        os.close(fds[key])
    timed_out = not _wait_exit(program_pid, start + float(limits["wall_seconds"]))
    # G is alive or an unreaped zombie here, so its pid (and group id) cannot have been
    # reused: signalling them can only reach this run's processes.
    if namespaces:
        if timed_out:  # G is the PID namespace's init: killing it kills the whole run
            os.kill(program_pid, signal.SIGKILL)
    else:
        try:
            os.killpg(program_pid, signal.SIGKILL)
        except OSError:
            pass  # the group is already empty
    _, status, usage = os.wait4(program_pid, 0)
    if not namespaces:
        _kill_descendants()
    report = {"status": status, "timed_out": timed_out,
              "cpu_seconds": usage.ru_utime + usage.ru_stime}
    _write_all(ctl, (json.dumps(report) + "\n").encode())
    return 0


# --------------------------------------------------------------------------- worker side

class _LineReader:
    """Reads newline-terminated lines from a raw fd (so it can share a selector)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    def feed(self) -> bool:
        data = os.read(self.fd, 1 << 16)
        if not data:
            self.eof = True
        self.buffer += data
        return bool(data)

    def readline(self) -> bytes | None:
        while b"\n" not in self.buffer:
            if self.eof or not self.feed():
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


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


def _remove_tree(path: str) -> None:
    def make_writable(func, target, _exc):
        # A program may chmod its own files away; we own them, so restore and retry.
        try:
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            os.chmod(target, stat.S_IRWXU)
            func(target)
        except OSError:
            pass
    shutil.rmtree(path, onerror=make_writable)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _classify(job: dict, events: dict, report: dict | None, killed_by_worker: bool) -> dict:
    limits = job["limits"]
    load = events.get("load")
    n_done = len(events["tests"])
    n_tests = len(job["tests"])
    progress = f"after {n_done} of {n_tests} tests" if load and load["status"] == "ok" else (
        "while loading the program")
    if events.get("setup_error") or (report and report.get("setup_error")):
        why = events.get("setup_error") or report["setup_error"]
        return {"status": "crashed", "error_type": "SandboxSetupError",
                "message": f"sandbox setup failed: {why}"}
    if report is None and not killed_by_worker:
        return {"status": "crashed", "error_type": "SandboxError",
                "message": "the sandbox job process ended without reporting"}
    if killed_by_worker or report["timed_out"]:
        return {"status": "timeout", "error_type": "Timeout",
                "message": f"wall time limit of {limits['wall_seconds']:g} s exceeded {progress}"}
    status = report["status"]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        cpu_limit = float(limits["cpu_seconds"])
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL
                                     and report["cpu_seconds"] >= cpu_limit - 0.05):
            return {"status": "timeout", "error_type": "Timeout",
                    "message": f"CPU time limit of {cpu_limit:g} s exceeded {progress}"}
        hint = " (memory limit?)" if sig in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS) else ""
        return {"status": "killed", "error_type": _signal_name(sig),
                "message": f"killed by {_signal_name(sig)}{hint} {progress}"}
    if load is None:
        code = os.WEXITSTATUS(status)
        return {"status": "error", "error_type": "SystemExit",
                "message": f"the program ended its process (exit code {code}) while loading"}
    if load["status"] != "ok":
        return {"status": load["status"], "error_type": load.get("error_type"),
                "message": load.get("message")}
    if not events.get("done"):
        code = os.WEXITSTATUS(status)
        return {"status": "error", "error_type": "SystemExit",
                "message": f"the program ended its process (exit code {code}) {progress}"}
    return {"status": "ok", "error_type": None, "message": None}


def run_job(job: dict, level: str, cfg: dict, stdin: _LineReader | None = None) -> dict:
    """Run one job in a fresh confined child; the worker-side half of the protocol."""
    nonce = os.urandom(8).hex()
    namespaces = level in confinement.NAMESPACE_LEVELS
    if namespaces:
        workdir = confinement.WORKDIR_IN_NAMESPACE
    else:
        workdir = os.path.join(cfg["tmpdir"], "marlang-sandbox-" + os.urandom(8).hex())
        os.mkdir(workdir, 0o700)
    pipes = {key: os.pipe() for key in ("result", "out", "err", "ctl")}
    start = time.monotonic()
    try:
        pid = os.fork()
        if pid == 0:
            code = EXIT_INTERNAL
            try:
                for read_end, _ in pipes.values():
                    os.close(read_end)
                write_ends = {key: w for key, (_, w) in pipes.items()}
                code = _job_process(job, level, cfg, workdir, write_ends, nonce,
                                    cfg["worker_pid"])
            except BaseException:
                code = EXIT_INTERNAL
            finally:
                os._exit(code)
        for _, write_end in pipes.values():
            os.close(write_end)
        outcome = _collect(job, pid, {k: r for k, (r, _) in pipes.items()}, nonce, start, stdin)
    finally:
        for read_end, _ in pipes.values():
            try:
                os.close(read_end)
            except OSError:
                pass
        if not namespaces:
            _remove_tree(workdir)
    return outcome


def _collect(job: dict, pid: int, reads: dict, nonce: str, start: float,
             stdin: _LineReader | None) -> dict:
    limits = job["limits"]
    captures = {"out": _Capture(int(limits["output_chars"])),
                "err": _Capture(int(limits["output_chars"]))}
    raw = {"result": bytearray(), "ctl": bytearray()}
    # Genuine events are small (reprs and messages are truncated in G): 8 KiB per test is ample.
    result_cap = (1 << 16) + 8192 * len(job["tests"])
    selector = selectors.DefaultSelector()
    for key, fd in reads.items():
        selector.register(fd, selectors.EVENT_READ, key)
    if stdin is not None:
        selector.register(stdin.fd, selectors.EVENT_READ, "stdin")
    backstop = start + float(limits["wall_seconds"]) + 3.0
    killed_by_worker = False
    exited_at = None
    open_pipes = set(reads)
    try:
        while True:
            now = time.monotonic()
            if exited_at is None and now >= backstop and not killed_by_worker:
                killed_by_worker = True
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            if exited_at is not None and (not open_pipes or now >= exited_at + 0.5):
                break
            limit = (exited_at + 0.5 if exited_at is not None else backstop) - now
            for key, _ in selector.select(max(0.0, min(limit, 1.0))):
                name = key.data
                if name == "stdin":
                    if not stdin.feed():  # the parent is gone: stop everything, now
                        for kill in (os.killpg, os.kill):
                            try:
                                kill(pid, signal.SIGKILL)
                            except OSError:
                                pass
                        os._exit(0)
                else:
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                        open_pipes.discard(name)
                        if name == "ctl":  # only C holds it: C has exited
                            os.waitpid(pid, 0)
                            exited_at = time.monotonic()
                    elif name in captures:
                        captures[name].add(chunk)
                    elif len(raw[name]) < result_cap:  # a program may flood its result fd
                        raw[name] += chunk
    finally:
        selector.close()
    wall = time.monotonic() - start
    events: dict = {"tests": [], "load": None, "done": False}
    setup: dict = {}
    for line in bytes(raw["result"]).split(b"\n"):
        if not line.startswith(nonce.encode()):
            continue
        try:
            event = json.loads(line[len(nonce):])
        except ValueError:
            continue
        kind = event.pop("kind", None)
        if kind == "test":
            events["tests"].append(event)
        elif kind == "load":
            events["load"] = event
        elif kind == "done":
            events["done"] = True
        elif kind == "setup":
            setup = event
        elif kind == "setup_error":
            events["setup_error"] = event.get("message")
    report = None
    for line in bytes(raw["ctl"]).split(b"\n"):
        if line.strip():
            try:
                report = json.loads(line)
            except ValueError:
                pass
    verdict = _classify(job, events, report, killed_by_worker)
    return {**verdict, "tests": events["tests"], "stdout": captures["out"].text(),
            "stderr": captures["err"].text(), "wall_seconds": wall, "setup": setup}


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
    return {"masks": list(raw.get("masks", [])),
            "tmpdir": raw.get("tmpdir") or os.environ.get("TMPDIR") or "/tmp",
            "python_paths": python_paths(), "landlock_abi": confinement.landlock_abi(),
            "worker_pid": os.getpid(), "as_root": os.geteuid() == 0}


PROBE_JOB_LIMITS = {"cpu_seconds": 5.0, "wall_seconds": 10.0, "memory_mb": 512,
                    "max_processes": 16, "file_size_mb": 16, "output_chars": 2000,
                    "test_timeout": 5.0}


def probe(raw: dict) -> dict:
    """Run a tiny job at every level; a level is available when it loads and passes."""
    cfg = _worker_config(raw)
    job = {"program": "import os\nx = os.getcwd()\n", "setup": "",
           "tests": ["assert isinstance(x, str)"], "limits": PROBE_JOB_LIMITS}
    report: dict = {"landlock_abi": cfg["landlock_abi"], "euid": os.geteuid(), "levels": {}}
    for level in confinement.LEVELS:
        if level in confinement.LANDLOCK_LEVELS and not cfg["landlock_abi"]:
            report["levels"][level] = {"ok": False, "reason": "Landlock is not available"}
            continue
        try:
            result = run_job(job, level, cfg)
        except OSError as exc:
            report["levels"][level] = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"}
            continue
        ok = result["status"] == "ok" and all(t["passed"] for t in result["tests"])
        report["levels"][level] = {"ok": ok, "reason": None if ok else result["message"],
                                   "setup": result["setup"]}
    return report


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
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
    cfg = _worker_config(raw)
    # Forked children would otherwise let the collector walk (and so copy) every page of
    # the worker's objects; frozen objects are never traversed.
    gc.freeze()
    _write_all(1, (json.dumps({"ready": True, "pid": os.getpid()}) + "\n").encode())
    stdin = _LineReader(0)
    while True:
        line = stdin.readline()
        if line is None:
            return 0
        job = json.loads(line)
        try:
            result = run_job(job, level, cfg, stdin)
        except Exception as exc:
            result = {"status": "crashed", "error_type": type(exc).__name__,
                      "message": f"sandbox worker error: {exc}", "tests": [], "stdout": "",
                      "stderr": "", "wall_seconds": 0.0, "setup": {}}
        result["id"] = job.get("id")
        _write_all(1, (json.dumps(result) + "\n").encode())
        del job, line


if __name__ == "__main__":
    sys.exit(main(sys.argv))
