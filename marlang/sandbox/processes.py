"""Child processes of a sandbox job process: listing them, waiting for one to exit, reaping
them and, without a PID namespace, killing every descendant.

Standard library only (the sandbox worker imports it as a sibling script).
"""


from __future__ import annotations

import os
import select
import signal
import time


def children(pid: int) -> list[int]:
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


def wait_exit(pid: int, deadline: float) -> bool:
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


def reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants() -> None:
    """Without a PID namespace: kill everything reparented to us (we are a subreaper).

    Only our own unreaped children are signalled (and the groups they lead), so no pid can
    have been recycled to an unrelated process.
    """
    me = os.getpid()
    for _ in range(400):
        kids = children(me)
        if not kids:
            return
        for kid in kids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(kid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.005)
        reap_all()


def stop_program(program_pid: int, namespaces: bool, kill_init: bool = True) -> tuple:
    """Kill what is left of the run and reap G: (its wait status, its resource usage).

    G is alive or an unreaped zombie here, so its pid (and group id) cannot have been reused:
    signalling them can only reach this run's processes."""
    if namespaces:
        if kill_init:  # G is the PID namespace's init: killing it kills the whole run
            os.kill(program_pid, signal.SIGKILL)
    else:
        try:
            os.killpg(program_pid, signal.SIGKILL)
        except OSError:
            pass  # the group is already empty
    _, status, usage = os.wait4(program_pid, 0)
    if not namespaces:
        kill_descendants()
    return status, usage


def kill_run(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
