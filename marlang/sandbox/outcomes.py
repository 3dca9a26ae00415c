"""Reading a sandbox job's outcome on the worker side: the judge's event stream in the one
order it writes it, its header, and the run's classification (ok, error, timeout, killed,
crashed).

Standard library only (the sandbox worker imports it as a sibling script).
"""

from __future__ import annotations

import json
import os
import signal


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(limits: dict, n_tests: int, events: dict, report: dict | None,
              killed_by_worker: bool) -> dict:
    load = events.get("load")
    n_done = len(events["tests"])
    progress = f"after {n_done} of {n_tests} tests" if load and load["status"] == "ok" else (
        "while loading the program")
    if events.get("setup_error"):
        return {"status": "crashed", "error_type": "SandboxSetupError",
                "message": f"sandbox setup failed: {events['setup_error']}"}
    if report is None and not killed_by_worker:
        return {"status": "crashed", "error_type": "SandboxError",
                "message": "the sandbox job process ended without reporting"}
    if report is None or killed_by_worker or report["timed_out"]:  # no report: the worker killed C
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
        return {"status": "killed", "error_type": signal_name(sig),
                "message": f"killed by {signal_name(sig)}{hint} {progress}"}
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


def header(line: bytes) -> dict:
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    return header if isinstance(header, dict) and header.get("kind") in ("job", "eof") else {
        "kind": "job", "id": None, "tests": 0}


def read_events(data: bytes, n_tests: int) -> tuple[dict, dict, dict | None]:
    """The control pipe's events, in the one order the judge writes them: setup (or
    setup_error), load, the tests by index from 0, done, and C's exit report. An event out of
    that order (a second load, a repeated or skipped test index, anything after done) is not
    the judge's and is dropped, so nothing written into the pipe from outside can add a pass."""
    events: dict = {"tests": [], "load": None, "done": False}
    setup: dict = {}
    report: dict | None = None
    stage = "start"
    for line in data.split(b"\n"):
        try:
            event = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if not isinstance(event, dict):  # a blank line, or JSON that is no event
            continue
        kind = event.pop("kind", None)
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
            if isinstance(event.get("probe"), dict):
                events["probe"] = event["probe"]
    return events, setup, report
