"""The sandbox worker: a small clean Python process that runs one job at a time in fresh children.

Started by `marlang.sandbox.pool` as `python -P -s -S runner.py CONFIG` (standard library only:
no site-packages, no marlang, no torch). It reads one JSON job per line on stdin and answers one
JSON line on stdout. Per job it forks a job process C (own session, confined by `confinement`),
which forks the program process G. G confines itself further and `execve`s a fresh interpreter
(`program_server`), so the program's process holds the program and nothing else: the job, its
tests, `check` and every expected value stay in C. C asks G for a program name or a call over a
private pipe and G answers with plain data (`plain_data`). C is the judge (`judge`): it runs the
trusted test code itself, so every comparison happens outside the program's process, and
streams one JSON line per event to the worker, so outcomes survive a kill. `--probe` runs a
tiny job at every isolation level and prints which ones work here.
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
import select
import selectors
import shutil
import signal
import stat
import sys
import time

if __package__:
    from . import confinement, judge, program_server
else:  # started as a script: import the sibling modules, then leave sys.path as it was
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import confinement
    import judge
    import program_server
    del sys.path[0]

EXIT_SETUP_FAILED = 71
EXIT_INTERNAL = 72
SERVER_PATH = os.path.realpath(program_server.__file__)
# Imported as a module, not run as a script, so its cached bytecode (written when marlang
# imports it) spares every program process a compile.
_SERVER_DIR = os.path.dirname(SERVER_PATH)
SERVER_BOOT = (f"import sys; sys.path.insert(0, {_SERVER_DIR!r}); import program_server; "
               "del sys.path[0]; sys.exit(program_server.main(sys.argv))")
CALL_FD, REPLY_FD = program_server.CALL_FD, program_server.REPLY_FD
_write_all = program_server.write_all
_LineReader = program_server.LineReader


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
    """Body of G: confine, then become a fresh interpreter that holds only the program.

    Returns an exit code only when that fails; never lets an exception escape into the worker
    loop. After the exec nothing of this process's memory (the job, its tests) is left."""
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
    try:
        info = _confine_program_process(level, cfg, limits, workdir)
        config = json.dumps({"setup": info, "guard": workdir if level == "rlimits" else None})
        os.execve(cfg["python"], [cfg["python"], "-P", "-s", "-S", "-c", SERVER_BOOT, config],
                  _program_env(workdir))
    except BaseException as exc:
        _write_all(REPLY_FD, (json.dumps({"kind": "setup_error",
                                          "message": f"{type(exc).__name__}: {exc}"})
                              + "\n").encode())
    return EXIT_SETUP_FAILED


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


def _job_process(job: dict, level: str, cfg: dict, workdir: str, fds: dict,
                 worker_pid: int) -> int:
    """Body of C: confine, fork G, judge the tests, enforce the wall limit, clean up, report.

    Events (setup, load, one per test, done) and the final report go to the control fd.
    """
    ctl = fds["ctl"]
    limits = job["limits"]
    start = time.monotonic()
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
    try:
        confinement.set_parent_death_signal()
        if os.getppid() != worker_pid:
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
        _write_all(ctl, (json.dumps({"kind": "setup_error",
                                     "message": f"{type(exc).__name__}: {exc}"}) + "\n")
                   .encode())
        return EXIT_SETUP_FAILED
    program_pid = os.fork()
    if program_pid == 0:
        code = EXIT_INTERNAL
        try:
            os.close(ctl)
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
    deadline = start + float(limits["wall_seconds"])
    try:  # the tests are trusted, but get the program's memory budget all the same
        memory = max(int(limits["memory_mb"]), 256) << 20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (OSError, ValueError):
        pass
    disk = None if namespaces else judge.DiskWatch(workdir, int(limits["disk_mb"]))
    verdict = judge.Judge(job, ctl, fds["call_write"], fds["reply_read"], program_pid, deadline,
                          disk)
    stop = None
    try:
        verdict.run()
        stop = verdict.stop
    except BaseException as exc:
        stop = ["crashed", "SandboxError", f"the sandbox's judge failed: {type(exc).__name__}"]
    os.close(fds["call_write"])  # end of requests: a program process waiting for one exits
    timed_out = verdict.timed_out
    if stop is None and not timed_out:
        timed_out = not _wait_exit(program_pid, deadline)
    # G is alive or an unreaped zombie here, so its pid (and group id) cannot have been
    # reused: signalling them can only reach this run's processes.
    if namespaces:
        if timed_out or stop:  # G is the PID namespace's init: killing it kills the whole run
            os.kill(program_pid, signal.SIGKILL)
    else:
        try:
            os.killpg(program_pid, signal.SIGKILL)
        except OSError:
            pass  # the group is already empty
    _, status, usage = os.wait4(program_pid, 0)
    if not namespaces:
        _kill_descendants()
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


def _remove_tree(path: str) -> None:
    """Remove a run's work directory. A program may chmod its own files away, so a failed
    removal restores the owner's rights and tries again, on real directories and files inside
    the work directory only: a link is removed, never followed (it may point anywhere)."""
    root = os.path.realpath(path)

    def make_removable(func, target, _exc):
        try:
            parent = os.path.dirname(target)
            if not _is_inside(root, parent) or stat.S_ISLNK(os.lstat(parent).st_mode):
                return
            os.chmod(parent, stat.S_IRWXU)
            if not stat.S_ISLNK(os.lstat(target).st_mode) and _is_inside(root, target):
                os.chmod(target, stat.S_IRWXU)
            func(target)
        except OSError:
            pass
    shutil.rmtree(path, onerror=make_removable)


def _is_inside(root: str, path: str) -> bool:
    """Whether `path`, its links resolved, is `root` or below it."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip("/") + "/")


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
    if events.get("setup_error"):
        return {"status": "crashed", "error_type": "SandboxSetupError",
                "message": f"sandbox setup failed: {events['setup_error']}"}
    if report is None and not killed_by_worker:
        return {"status": "crashed", "error_type": "SandboxError",
                "message": "the sandbox job process ended without reporting"}
    if killed_by_worker or report["timed_out"]:
        return {"status": "timeout", "error_type": "Timeout",
                "message": f"wall time limit of {limits['wall_seconds']:g} s exceeded {progress}"}
    stop = report.get("stop")
    if stop:  # the judge stopped the program: it broke the protocol or stopped answering
        return {"status": stop[0], "error_type": stop[1], "message": f"{stop[2]} ({progress})"}
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
    start = time.monotonic()
    try:
        pid = os.fork()
        if pid == 0:
            code = EXIT_INTERNAL
            try:
                for fd in mine.values():
                    os.close(fd)
                code = _job_process(job, level, cfg, workdir, theirs, cfg["worker_pid"])
            except BaseException:
                code = EXIT_INTERNAL
            finally:
                os._exit(code)
        for fd in theirs.values():
            os.close(fd)
        outcome = _collect(job, pid, mine, start, stdin)
    finally:
        for fd in mine.values():
            try:
                os.close(fd)
            except OSError:
                pass
        if not namespaces:
            _remove_tree(workdir)
    return outcome


def _collect(job: dict, pid: int, reads: dict, start: float, stdin: _LineReader | None) -> dict:
    limits = job["limits"]
    captures = {"out": _Capture(int(limits["output_chars"])),
                "err": _Capture(int(limits["output_chars"]))}
    raw = {"ctl": bytearray()}
    # Events are small (reprs and messages are truncated by the judge): 8 KiB per test is ample.
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
                    elif len(raw[name]) < result_cap:
                        raw[name] += chunk
    finally:
        selector.close()
    wall = time.monotonic() - start
    events, setup, report = _read_events(bytes(raw["ctl"]), len(job["tests"]))
    verdict = _classify(job, events, report, killed_by_worker)
    return {**verdict, "tests": events["tests"], "stdout": captures["out"].text(),
            "stderr": captures["err"].text(), "wall_seconds": wall, "setup": setup}


def _read_events(data: bytes, n_tests: int) -> tuple[dict, dict, dict | None]:
    """The control pipe's events, in the one order the judge writes them: setup (or
    setup_error), load, the tests by index from 0, done, and C's exit report. An event out of
    that order (a second load, a repeated or skipped test index, anything after done) is not
    the judge's and is dropped, so nothing written into the pipe from outside can add a pass."""
    events: dict = {"tests": [], "load": None, "done": False}
    setup: dict = {}
    report = None
    stage = "start"
    for line in data.split(b"\n"):
        try:
            event = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        kind = event.pop("kind", None) if isinstance(event, dict) else None
        if kind == "exit":
            if report is None:
                report = event
        elif report is not None:
            continue
        elif stage == "start" and kind == "setup":
            setup, stage = event, "setup"
        elif stage == "start" and kind == "setup_error":
            events["setup_error"], stage = event.get("message"), "over"
        elif stage == "setup" and kind == "load":
            events["load"], stage = event, "tests"
        elif (stage == "tests" and kind == "test" and event.get("index") == len(events["tests"])
              and len(events["tests"]) < n_tests):
            events["tests"].append(event)
        elif stage == "tests" and kind == "done" and len(events["tests"]) == n_tests:
            events["done"], stage = True, "over"
    return events, setup, report


def python_paths() -> list[str]:
    """The directories a program process needs (kept visible): the interpreter, the standard
    library, and this directory (the program server's own source)."""
    paths = {os.path.realpath(sys.base_prefix),
             os.path.dirname(os.path.realpath(sys.executable)),
             os.path.dirname(SERVER_PATH)}
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
            "python": os.path.realpath(sys.executable),
            "worker_pid": os.getpid(), "as_root": os.geteuid() == 0}


PROBE_JOB_LIMITS = {"cpu_seconds": 5.0, "wall_seconds": 10.0, "memory_mb": 512,
                    "max_processes": 16, "file_size_mb": 16, "disk_mb": 64,
                    "output_chars": 2000, "test_timeout": 5.0}


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
