"""Each file of a run directory has one writer: every append or atomic write a run makes into
its directory goes through `RunDirectory`, and `RunRecord` only decides and indexes."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

from marlang.config import build_config
from marlang.run import Experiment
from marlang.run.record import RunRecord
from marlang.rundir import RunDirectory
from tests.fakes import FakeRuleChatModel, langmarl_rule


def _config():
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
        "model": {"cache": False}, "protocol": {"name": "none"},
        "learning": {"method": "langmarl", "rollouts": 2, "iterations": 2},
        "run": {"parallel": 2, "progress": False},
    })


_WATCHED: list[tuple[Path, dict[str, set[str]]]] = []
"""(run directory, file name -> the `RunDirectory` methods that wrote it) while a test watches."""


def _audit(event: str, args: tuple) -> None:
    if not _WATCHED or event not in ("open", "os.rename"):
        return
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
    else:
        path, writes = args[1], True
    if not writes or not isinstance(path, (str, bytes, os.PathLike)):
        return
    path = Path(os.fsdecode(path))
    run, writers = _WATCHED[-1]
    if path.parent != run or path.name.endswith(".tmp"):
        return  # an atomic write's temporary: its rename names the file
    frame, methods = sys._getframe(1), set()
    while frame is not None:
        if frame.f_code.co_filename == _RUNDIR_SOURCE:
            methods.add(frame.f_code.co_name)
        frame = frame.f_back
    writers.setdefault(path.name, set()).update(methods or {"(outside RunDirectory)"})


_RUNDIR_SOURCE = inspect.getsourcefile(RunDirectory)
sys.addaudithook(_audit)


def test_every_write_into_a_run_directory_goes_through_run_directory(tmp_path):
    run = tmp_path / "run"
    writers: dict[str, set[str]] = {}
    _WATCHED.append((run, writers))
    try:
        Experiment(_config(), run, chat_model=FakeRuleChatModel(rule=langmarl_rule)).run()
    finally:
        _WATCHED.clear()

    expected = {"episodes.jsonl", "metrics.csv", "llm_calls.csv", "iterations.csv", "updates.jsonl",
                "policies.jsonl", "learner_state.json", "summary.json", "manifest.json", "config.yaml",
                "learning_curve.png"}
    assert expected <= set(writers), writers
    assert {n: m for n, m in writers.items() if "(outside RunDirectory)" in m} == {}
    assert {"append_episode"} <= writers["episodes.jsonl"]
    assert {"append_iteration_csv"} <= writers["iterations.csv"]


def test_a_commit_replayed_after_a_crash_appends_its_rows_once(tmp_path):
    record = RunRecord(RunDirectory(tmp_path))
    record.append_iteration_rows("updates.jsonl", 0, [{"iteration": 0, "agent": "agent_0"}])
    again = RunRecord(RunDirectory(tmp_path))  # a resumed process, reading what is on disk
    again.append_iteration_rows("updates.jsonl", 0, [{"iteration": 0, "agent": "agent_0"}])
    again.append_iteration_rows("updates.jsonl", 1, [{"iteration": 1, "agent": "agent_0"}])
    assert [r["iteration"] for r in RunDirectory(tmp_path).read_jsonl("updates.jsonl")] == [0, 1]
