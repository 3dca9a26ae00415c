"""Comparison executors: the Ray executor against a real Ray instance on this machine gives the
local executor's table, retries a run whose worker died, reports a run that keeps failing,
sends no finished run again, stops its tasks at Ctrl-C and draws no progress bars in them; bad
input is one line."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from marlang.cli import main
from marlang.evaluation.compare import run_comparison

REPO = Path(__file__).resolve().parents[2]
ROOM = {"env": {"id": "babyai/goto-obj", "n_agents": 2}, "agents": {"kind": "scripted"},
        "run": {"name": "grid", "episodes": 2, "progress": False}}


@pytest.fixture(scope="module")
def ray_instance(ray_lock):
    """A Ray instance of two CPUs of its own (not one `ray start` runs on the machine) whose
    workers import marlang and these tests' envs (the workers inherit PYTHONPATH); shut down
    after the module's tests."""
    import ray

    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), before) if p)
    try:
        with ray_lock:  # held until shut down: parallel test workers start no second Ray meanwhile
            ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
            yield ray
            ray.shutdown()
    finally:
        ray.shutdown()
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def _config(tmp_path: Path, data: dict) -> str:
    import yaml

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_ray_runs_give_the_local_table_and_a_rerun_sends_nothing(ray_instance, tmp_path, capsys):
    from marlang.run.executors import RayExecutor

    grid = [("env.max_steps", [3, 4])]
    local = run_comparison(ROOM, grid, tmp_path / "local", reference=False)
    # Through the command, as a user runs it (Ray is already initialised in this process).
    assert main(["compare", _config(tmp_path, ROOM), "--grid", "env.max_steps=3,4", "--no-reference",
                 "--executor", "ray", "--out", str(tmp_path / "ray")]) == 0
    assert (tmp_path / "ray" / "table.md").read_text() == local.table
    names = sorted(p.name for p in (tmp_path / "ray").iterdir() if p.is_dir())
    assert names == ["scripted--env.max_steps-3", "scripted--env.max_steps-4"]
    episodes = {n: (tmp_path / "ray" / n / "episodes.jsonl").read_text() for n in names}

    again = RayExecutor()
    result = run_comparison(ROOM, grid, tmp_path / "ray", reference=False, executor=again)
    assert again.submitted == [] and sorted(again.skipped) == names
    assert result.table == local.table
    assert {n: (tmp_path / "ray" / n / "episodes.jsonl").read_text() for n in names} == episodes

    # A run whose summary is older than its files (cut short after a resume) is sent again.
    (tmp_path / "ray" / names[0] / "summary.json").unlink()
    third = RayExecutor()
    run_comparison(ROOM, grid, tmp_path / "ray", reference=False, executor=third)
    assert third.submitted == [names[0]] and third.skipped == [names[1]]
    assert (tmp_path / "ray" / names[0] / "episodes.jsonl").read_text() == episodes[names[0]]


def test_tasks_draw_no_progress_bars_where_the_callers_ray_forwards_worker_output(ray_instance, tmp_path,
                                                                                  capfd):
    from marlang.run.executors import RayExecutor

    base = {**ROOM, "run": {**ROOM["run"], "progress": True}}
    grid = [("env.max_steps", [3])]
    result = run_comparison(base, grid, tmp_path / "cmp", reference=False, executor=RayExecutor())
    assert not result.failed
    time.sleep(1.0)  # worker output reaches the driver a moment after the task ends
    out, err = capfd.readouterr()
    assert "ep/s" not in out + err and "(_ray_task" not in out + err


def test_a_dead_worker_is_retried_once_then_its_run_is_reported(ray_instance, tmp_path):
    from marlang.run.executors import RayExecutor

    room = "tests.run.ray_envs:crashing_room"
    grid = [("setting", [
        {"name": "dies once", "env.kwargs": {"marker": str(tmp_path / "once")}},
        {"name": "dies always", "env.kwargs": {"marker": str(tmp_path / "always"), "always": True}},
    ])]
    base = {**ROOM, "env": {**ROOM["env"], "id": room, "max_steps": 4}}
    executor = RayExecutor()
    result = run_comparison(base, grid, tmp_path / "cmp", reference=False, executor=executor)
    assert (tmp_path / "once").is_file()  # its first attempt died
    assert (tmp_path / "cmp" / "dies-once" / "summary.json").is_file()  # the retry finished it
    assert set(result.failed) == {"dies-always"} and "retried once" in result.failed["dies-always"]
    assert "Failed runs" in result.table and "dies-always" in (tmp_path / "cmp" / "table.md").read_text()
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert set(summary["failed_runs"]) == {"dies-always"}
    assert len(summary[room]) == 1  # the finished run's row


def test_ctrl_c_stops_the_ray_tasks_and_exits_130(ray_instance, tmp_path, capsys, monkeypatch):
    import _thread

    import ray

    from marlang.run import executors

    # The task is stuck in its env's build (which no Ctrl-C ends): it is killed after the grace.
    monkeypatch.setattr(executors, "CANCEL_GRACE_S", 3.0)

    base = {**ROOM, "env": {**ROOM["env"], "id": "tests.run.ray_envs:slow_room",
                            "kwargs": {"started": str(tmp_path / "started")}}}

    def press_ctrl_c():
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        _thread.interrupt_main()

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    began = time.monotonic()
    code = main(["compare", _config(tmp_path, base), "--grid", "env.max_steps=3", "--no-reference",
                 "--executor", "ray", "--out", str(tmp_path / "cmp")])
    assert code == 130 and time.monotonic() - began < 45  # the minute-long build did not finish
    assert "stopping 1 Ray task" in capsys.readouterr().err
    assert not (tmp_path / "cmp" / "scripted--env.max_steps-3" / "summary.json").exists()
    deadline = time.monotonic() + 20  # the cancelled task's CPU is free again
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == 2


def test_bad_input_is_one_line_and_the_local_executor_needs_no_ray(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed: importing it fails
    config = _config(tmp_path, ROOM)
    args = ["compare", config, "--grid", "env.max_steps=3", "--no-reference", "--out", str(tmp_path / "cmp")]
    assert main([*args, "--set", "run.resources.memory=lots", "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'run.resources.memory'" in err and "4GB" in err
    assert main([*args, "--address", "auto"]) == 2
    assert "with --executor ray" in capsys.readouterr().err
    assert main([*args, "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and 'pip install "marlang[ray]"' in err
    assert not (tmp_path / "cmp").exists()
    assert main(args) == 0  # the default executor runs without Ray
    assert (tmp_path / "cmp" / "table.md").is_file()
