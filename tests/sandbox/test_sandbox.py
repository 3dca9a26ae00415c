"""Behaviour of `marlang.sandbox.Sandbox`: results, limits, pool, async, errors, isolation info."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import threading
import time

import pytest

from marlang.sandbox import (
    LEVELS,
    IsolationInfo,
    IsolationUnavailableError,
    Sandbox,
    SandboxLimits,
    SandboxResult,
    TestOutcome,
    confinement,
    detect_isolation,
    shared_sandbox,
)
from marlang.sandbox import isolation as isolation_module
from marlang.sandbox import pool as pool_module

FAST = SandboxLimits(cpu_seconds=3.0, wall_seconds=4.0, test_timeout=1.0, memory_mb=256,
                     output_chars=200)

ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(FAST, workers=2) as sb:
        yield sb


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pids: list[int], seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not any(_alive(p) for p in pids)


# --------------------------------------------------------------------------- results

def test_passing_and_failing_tests_report_expected_and_got(sandbox):
    res = sandbox.run_tests(ADD, ["assert add(1, 2) == 3", "assert add(2, 2) == 5",
                                  "assert add(1, 1) != 2", "assert add(0, 0)",
                                  "assert add(1, 2) == 4, 'custom message'"])
    assert res.status == "ok" and res.total == 5 and res.passed == 1 and not res.all_passed
    first, wrong, not_equal, falsy, custom = res.tests
    assert first.passed and (first.expected, first.got) == ("3", "3")
    assert not wrong.passed and wrong.error_type == "AssertionError"
    assert (wrong.expected, wrong.got) == ("5", "4")
    assert wrong.message == "expected 5, got 4"
    assert not_equal.expected == "!= 2" and not_equal.got == "2"
    assert not falsy.passed and falsy.got == "0" and falsy.expected is None
    assert custom.message == "'custom message'"
    assert [t.source for t in res.tests][1] == "assert add(2, 2) == 5"
    assert res.isolation == sandbox.isolation.name


def test_all_passed_and_multi_statement_tests(sandbox):
    res = sandbox.run_tests(ADD, ["x = add(2, 3)\nassert x == 5",
                                  "def check(f):\n    assert f(1, 1) == 2\ncheck(add)"])
    assert res.status == "ok" and res.all_passed and res.passed == 2
    assert res.tests[0].expected is None  # only single-assert tests get expected/got


def test_side_effects_are_evaluated_once(sandbox):
    program = "calls = []\ndef f():\n    calls.append(1)\n    return len(calls)\n"
    res = sandbox.run_tests(program, ["assert f() == 1", "assert len(calls) == 1"])
    assert res.all_passed, res.to_dict()


def test_runtime_error_in_test(sandbox):
    res = sandbox.run_tests(ADD, ["assert add(1, 'x') == 3"])
    outcome = res.tests[0]
    assert res.status == "ok" and not outcome.passed and outcome.error_type == "TypeError"
    assert "program line 2" in outcome.message


def test_syntax_error(sandbox):
    res = sandbox.run_tests("def f(:\n    pass\n", ["assert f() is None"])
    assert res.status == "syntax_error" and res.tests == [] and res.total == 1
    assert res.error_type == "SyntaxError" and "line 1" in res.message
    assert not res.all_passed


def test_syntax_error_in_one_test_only_fails_that_test(sandbox):
    res = sandbox.run_tests(ADD, ["assert add(1,", "assert add(1, 1) == 2"])
    assert res.status == "ok"
    assert res.tests[0].error_type == "SyntaxError" and res.tests[1].passed


def test_program_raising_at_load(sandbox):
    res = sandbox.run_tests("x = 1\ny = undefined_name + x\n", ["assert y == 2"])
    assert res.status == "error" and res.error_type == "NameError"
    assert "undefined_name" in res.message and "program line 2" in res.message
    assert "NameError" in res.stderr  # the traceback is there for feedback


def test_program_exiting_is_an_error_not_a_crash(sandbox):
    res = sandbox.run_tests("import sys\nsys.exit(3)\n", ["assert True"])
    assert res.status == "error" and res.error_type == "SystemExit"
    program = "import os\ndef bail():\n    os._exit(0)\n"
    res = sandbox.run_tests(program, ["assert True", "bail()", "assert True"])
    assert res.status == "error" and res.error_type == "SystemExit"
    assert "after 1 of 3 tests" in res.message
    assert len(res.tests) == 1 and res.tests[0].passed


def test_only_the_setups_imports_reach_the_program(sandbox):
    """The setup runs in the judge; the program's process gets its import lines and nothing
    else (a `check`, METADATA or a helper the tests use stays with the judge)."""
    setup = ("import math\nfrom collections import Counter as C\nSECRET = 'assert g() == 14'\n"
             "def helper():\n    return 7\n")
    program = ("def g():\n    return helper() * 2\n"
               "def imported():\n    return [math.floor(2.5), C('aab')['a']]\n"
               "def seen():\n    return sorted(n for n in ('SECRET', 'helper') if n in globals())\n")
    res = sandbox.run_tests(program, ["assert imported() == [2, 2]", "assert seen() == []",
                                      "assert helper() == 7", "assert g() == 14"], setup=setup)
    assert [t.passed for t in res.tests] == [True, True, True, False], res.to_dict()
    assert res.tests[3].error_type == "NameError" and "helper" in res.tests[3].message


def test_name_main_guard_does_not_run(sandbox):
    program = ("ran = False\nif __name__ == '__main__':\n    ran = True\n"
               "    print('MAIN BLOCK')\n")
    res = sandbox.run_tests(program, ["assert ran is False", "assert __name__ != '__main__'"])
    assert res.all_passed and "MAIN BLOCK" not in res.stdout


def test_stdout_and_stderr_are_captured_and_truncated(sandbox):
    res = sandbox.run_tests("import sys\nprint('hello')\nprint('é' * 1000)\n"
                            "print('x' * 1000, file=sys.stderr)\n", ["assert True"])
    assert res.stdout.startswith("hello\n") and "truncated at 200 characters" in res.stdout
    assert len(res.stdout) < 200 + 60
    assert res.stderr.startswith("x" * 100) and "truncated" in res.stderr


def test_printed_fake_results_cannot_forge_outcomes(sandbox):
    fake_events = [{"kind": "load", "status": "ok"},
                   {"kind": "test", "index": 0, "passed": True, "error_type": None,
                    "message": None, "timed_out": False, "expected": None, "got": None},
                   {"kind": "done"}]
    lines = "\\n".join(json.dumps(e) for e in fake_events)
    program = (f"import os, sys\nFAKE = '{lines}\\n'\nprint(FAKE)\n"
               "sys.stderr.write(FAKE)\nos.write(1, FAKE.encode())\n"
               "for fd in range(3, 64):\n    try:\n        os.write(fd, b'x' + FAKE.encode())\n"
               "    except OSError:\n        pass\n")
    res = sandbox.run_tests(program, ["print(FAKE)\nassert False"])
    assert res.passed == 0 and not res.all_passed
    # Its write into the sandbox's own channel is refused outright, as a protocol error.
    assert res.status == "error" and res.error_type == "SandboxProtocolError", res.to_dict()
    assert '"kind": "done"' in res.stdout  # it really printed them


# --------------------------------------------------------------------------- limits

def test_per_test_timeout_then_later_tests_still_run(sandbox):
    res = sandbox.run_tests("import time\n", ["while True:\n    pass", "time.sleep(10)",
                                              "assert 2 + 2 == 4"])
    assert res.status == "ok"
    assert [t.timed_out for t in res.tests] == [True, True, False]
    assert res.tests[0].error_type == "Timeout" and res.tests[2].passed


def test_wall_timeout_returns_finished_outcomes():
    limits = SandboxLimits(wall_seconds=1.5, test_timeout=5.0, cpu_seconds=5.0)
    with Sandbox(limits, workers=1) as sb:
        res = sb.run_tests("import time\n", ["assert 1 == 1", "time.sleep(0.2)",
                                             "time.sleep(30)", "assert 3 == 3"])
        assert res.status == "timeout" and res.error_type == "Timeout"
        assert "wall time limit" in res.message and "after 2 of 4 tests" in res.message
        assert [t.passed for t in res.tests] == [True, True] and res.total == 4
        assert sb.run_tests("x = 1", ["assert x == 1"]).all_passed  # the pool goes on


def test_cpu_limit_is_a_timeout():
    limits = SandboxLimits(cpu_seconds=1.0, wall_seconds=8.0, test_timeout=8.0)
    with Sandbox(limits, workers=1) as sb:
        res = sb.run_tests("while True:\n    pass\n", ["assert True"])
    assert res.status == "timeout" and "CPU time limit" in res.message, res.to_dict()


def test_segfault_is_killed(sandbox):
    res = sandbox.run_tests("import ctypes\ndef crash():\n    return ctypes.string_at(0)\n",
                            ["crash()"])
    assert res.status == "killed" and res.error_type == "SIGSEGV", res.to_dict()


def test_memory_limit(sandbox):
    res = sandbox.run_tests("def grab():\n    return len(bytearray(1024 * 1024 * 1024))\n",
                            ["grab()", "big = bytearray(1024 * 1024 * 1024)"])
    assert res.status == "ok" and res.tests[0].error_type == "MemoryError"
    assert res.tests[1].error_type == "MemoryError"  # the tests' own code is limited too


def test_invalid_limits_and_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="cpu_seconds"):
        SandboxLimits(cpu_seconds=-1)
    with pytest.raises(ValueError, match="memory_mb must be an integer"):
        SandboxLimits(memory_mb=1.5)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=8)
    with pytest.raises(ValueError, match="test_timeout"):
        SandboxLimits(test_timeout=float("nan"))
    with pytest.raises(ValueError, match="max_processes"):
        SandboxLimits(max_processes=True)
    with pytest.raises(ValueError, match="isolation must be one of .*namespaces\\+landlock"):
        Sandbox(isolation="docker")
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        Sandbox(workers=0)
    with pytest.raises(ValueError, match="limits must be a SandboxLimits"):
        Sandbox(limits={"cpu_seconds": 1})


def test_invalid_run_arguments(sandbox):
    with pytest.raises(ValueError, match="tests must be a sequence of strings"):
        sandbox.run_tests(ADD, "assert add(1, 2) == 3")
    with pytest.raises(ValueError, match="program must be a string"):
        sandbox.run_tests(None, [])
    with pytest.raises(ValueError, match=r"jobs\[0\]"):
        sandbox.run_many([("x = 1",)])


# --------------------------------------------------------------------------- pool

def test_run_many_keeps_order_and_runs_concurrently(sandbox, monkeypatch):
    in_flight, peak, lock = [0], [0], threading.Lock()
    request = pool_module._Worker.request

    def counting_request(self, job, timeout):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            return request(self, job, timeout)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(pool_module._Worker, "request", counting_request)
    jobs = [(f"import time\ntime.sleep(0.2)\nvalue = {i}\n", [f"assert value == {i}"], "")
            for i in range(6)]
    results = sandbox.run_many(jobs)
    assert [r.tests[0].got for r in results] == [str(i) for i in range(6)]
    assert all(r.all_passed for r in results)
    assert peak[0] == 2  # both workers busy at once, never more than the pool


def test_thread_safety_many_threads_at_once(sandbox):
    results: dict[int, SandboxResult] = {}

    def call(i: int) -> None:
        results[i] = sandbox.run_tests(f"def f():\n    return {i}\n", [f"assert f() == {i}"])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(8))
    assert all(r.all_passed and r.tests[0].got == str(i) for i, r in results.items())


def test_arun_tests_does_not_block_the_event_loop(sandbox):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        results = await asyncio.gather(
            sandbox.arun_tests("import time\ntime.sleep(0.3)\nx = 1\n", ["assert x == 1"]),
            sandbox.arun_tests(ADD, ["assert add(2, 2) == 4"]))
        task.cancel()
        return results, ticks

    results, ticks = asyncio.run(main())
    assert all(r.all_passed for r in results)
    assert ticks >= 5  # the loop kept running while the sandbox worked


def test_dead_worker_is_replaced_and_the_job_rerun():
    with Sandbox(FAST, workers=1) as sb:
        (old,) = sb.worker_pids()
        os.kill(old, 9)
        assert _wait_dead([old])
        res = sb.run_tests(ADD, ["assert add(1, 2) == 3"])
        assert res.all_passed
        assert sb.worker_pids() and old not in sb.worker_pids()


def test_close_and_garbage_collection_leave_no_processes():
    sb = Sandbox(FAST, workers=2)
    assert sb.run_tests("x = 1", ["assert x == 1"]).all_passed
    pids = sb.worker_pids()
    assert len(pids) == 2
    sb.close()
    assert _wait_dead(pids)
    with pytest.raises(RuntimeError, match="closed"):
        sb.run_tests("x = 1", [])
    other = Sandbox(FAST, workers=1)
    pids = other.worker_pids()
    del other
    gc.collect()
    assert _wait_dead(pids)


def test_shared_sandbox_is_one_pool_per_key():
    limits = SandboxLimits(cpu_seconds=2.0)
    first = shared_sandbox(limits, workers=1)
    assert shared_sandbox(SandboxLimits(cpu_seconds=2.0), workers=1) is first
    assert shared_sandbox(limits, workers=2) is not first
    assert first.run_tests(ADD, ["assert add(1, 2) == 3"]).all_passed
    pool_module.close_shared_sandboxes()
    assert first.closed and shared_sandbox(limits, workers=1) is not first
    pool_module.close_shared_sandboxes()


# --------------------------------------------------------------------------- records

def test_result_round_trip_is_json_safe(sandbox):
    res = sandbox.run_tests(ADD + "print('hi')\n",
                            ["assert add(1, 2) == 3", "assert add(1, 2) == 0"])
    data = json.loads(json.dumps(res.to_dict()))
    assert data["passed"] == 1 and data["all_passed"] is False
    back = SandboxResult.from_dict(data)
    assert back == res and isinstance(back.tests[0], TestOutcome)
    with pytest.raises(ValueError, match="status must be one of"):
        SandboxResult(status="maybe")


def test_isolation_info_is_reported(sandbox):
    info = sandbox.isolation
    assert isinstance(info, IsolationInfo) and info.name in LEVELS
    assert info.name == detect_isolation().name  # "auto" picks the best available
    assert all(isinstance(v, bool) for v in info.details.values())
    for key in ("network_isolated", "filesystem_write_confined", "pid_namespace",
                "env_scrubbed", "process_limit"):
        assert key in info.details
    assert json.loads(json.dumps(info.to_dict()))["name"] == info.name
    assert info.weaker_than_best == (info.name != LEVELS[0])
    assert "rlimits" in info.available and info.best_available == info.available[0]


def _fake_report(*ok_levels: str) -> dict:
    return {"landlock_abi": 0, "euid": 1000, "levels": {
        level: ({"ok": True, "reason": None, "setup": {"process_limit": True}}
                if level in ok_levels else {"ok": False, "reason": "not on this test machine"})
        for level in LEVELS}}


def test_auto_never_falls_back_to_rlimits(monkeypatch):
    """A machine that confines nothing: "auto" refuses in one line that says what it lacks
    and names the key that opts in; nothing is started."""
    monkeypatch.setattr(isolation_module, "_probe_report", lambda: _fake_report("rlimits"))
    with pytest.raises(IsolationUnavailableError) as caught:
        Sandbox(FAST, workers=1)
    message = str(caught.value)
    assert "\n" not in message and "sandbox.isolation: rlimits" in message
    assert "namespaces: not on this test machine" in message


def test_a_failed_probe_confines_nothing(monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no such interpreter")

    monkeypatch.setattr(isolation_module, "_probe_cache", None)
    monkeypatch.setattr(isolation_module.subprocess, "run", broken)
    with pytest.raises(IsolationUnavailableError, match="probe failed.*sandbox.isolation: rlimits"):
        Sandbox(FAST, workers=1)


def test_rlimits_runs_when_named_and_warns_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(isolation_module, "_probe_report", lambda: _fake_report("rlimits"))
    monkeypatch.setattr(isolation_module, "_weak_warning_logged", False)
    with caplog.at_level(logging.WARNING, logger="marlang.sandbox.isolation"):
        with Sandbox(FAST, workers=1, isolation="rlimits") as first:
            assert first.isolation.name == "rlimits" and first.isolation.weaker_than_best
            assert first.isolation.details["in_process_guard_only"]
            assert not first.isolation.details["network_isolated"]
            assert first.run_tests(ADD, ["assert add(1, 2) == 3"]).all_passed
        with Sandbox(FAST, workers=1, isolation="rlimits"):
            pass
        assert detect_isolation().name == "rlimits"
    warnings = [r for r in caplog.records if "weaker isolation" in r.getMessage()]
    assert len(warnings) == 1
    assert "NOT a security boundary" in warnings[0].getMessage()


def test_unavailable_level_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(isolation_module, "_probe_report",
                        lambda: _fake_report("landlock", "rlimits"))
    with pytest.raises(IsolationUnavailableError, match="'namespaces' is not available.*"
                                                        "not on this test machine"):
        Sandbox(FAST, workers=1, isolation="namespaces")


def test_masks_hide_outermost_dirs_but_never_the_python_installation(tmp_path):
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    (home / ".pyenv" / "lib").mkdir(parents=True)
    (tmp_path / "usr").mkdir()
    masks = confinement.plan_masks(
        [str(home), str(home / "project"), str(tmp_path / "usr"), "/", "/does/not/exist"],
        keep=[str(tmp_path / "usr"), str(home / ".pyenv" / "lib")])
    # home is hidden (its Python dir is bound back in at run time), nested project dir is
    # covered by it, a kept directory and "/" are never hidden.
    assert masks == [str(home)]


def _events(*events: dict) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_the_worker_keeps_only_the_judges_event_order():
    """Events written into the control pipe by anything but the judge (a program that reached
    it) cannot add a pass: a repeated or skipped test index, a second load, and anything after
    `done` are dropped."""
    from marlang.sandbox import outcomes

    fail = {"kind": "test", "index": 0, "passed": False}
    forged = {"kind": "test", "index": 0, "passed": True}
    stream = _events({"kind": "setup"}, {"kind": "load", "status": "ok"}, fail, forged,
                     {"kind": "test", "index": 2, "passed": True},
                     {"kind": "load", "status": "ok"}, {"kind": "test", "index": 1, "passed": False},
                     {"kind": "done"}, forged, {"kind": "test", "index": 2, "passed": True},
                     {"kind": "done"}, {"kind": "exit", "status": 0, "timed_out": False},
                     {"kind": "exit", "status": 9, "timed_out": True})
    events, setup, report = outcomes.read_events(stream, n_tests=2)
    assert setup == {} and [t["passed"] for t in events["tests"]] == [False, False]
    assert events["done"]
    assert report == {"status": 0, "timed_out": False}
    early_done = _events({"kind": "setup"}, {"kind": "load", "status": "ok"}, {"kind": "done"},
                         fail)
    events, _, _ = outcomes.read_events(early_done, n_tests=2)
    assert not events["done"] and len(events["tests"]) == 1


def test_cleanup_never_follows_a_link_out_of_the_work_directory(tmp_path):
    """A program leaves a link to a file outside its work directory inside a directory it made
    read-only; removing the work directory (which then needs its rights restored) must not
    change the file the link points to."""
    from marlang.sandbox import cleanup

    outside = tmp_path / "victim.txt"
    outside.write_text("keep")
    outside.chmod(0o400)
    work = tmp_path / "work"
    (work / "locked").mkdir(parents=True)
    (work / "locked" / "link").symlink_to(outside)
    (work / "locked").chmod(0o500)
    calls = []

    def failing_rmtree(path, onerror):  # what an unprivileged worker meets: EACCES on unlink
        calls.append(path)
        onerror(os.unlink, str(work / "locked" / "link"), None)
        onerror(os.rmdir, str(work / "locked"), None)
        os.rmdir(path)

    real = cleanup.shutil.rmtree
    cleanup.shutil.rmtree = failing_rmtree
    try:
        cleanup.remove_tree(str(work))
    finally:
        cleanup.shutil.rmtree = real
    assert calls and outside.stat().st_mode & 0o777 == 0o400 and outside.read_text() == "keep"
    assert not work.exists()
