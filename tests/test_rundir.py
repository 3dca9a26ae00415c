"""The run directory's JSON files: strict JSON, undefined numbers written as null."""

import json

import numpy as np
import pytest

from marlang.rundir import RunDirectory, dumps_json, json_safe
from marlang.tables.report import summarize_episodes


def strict_loads(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def test_strict_parser_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        strict_loads(json.dumps({"x": float("nan")}))


def test_written_json_has_null_where_numbers_are_undefined(tmp_path):
    run = RunDirectory(tmp_path)
    unsolved = [{"episode": 0, "success": False, "steps": 5, "return": 0.0, "decisions": 10,
                 "invalid_actions": 0, "invalid_rate": 0.0, "llm_calls": 2, "tokens_in": 9,
                 "tokens_out": 1}]
    summary = summarize_episodes(unsolved)
    summary["extra"] = [float("inf"), -float("inf"), float("nan"), np.float32("nan"), 1.5, 2, True]
    run.write_json("summary.json", summary)
    data = strict_loads(run.summary_file.read_text())
    assert data["steps_when_solved"]["mean"] is None
    assert data["steps"]["mean"] == 5
    assert data["extra"] == [None, None, None, None, 1.5, 2, True]


def test_json_safe_walks_nested_containers():
    assert json_safe({"a": (1.0, {"b": float("nan")})}) == {"a": [1.0, {"b": None}]}
    assert strict_loads(dumps_json({"p": tmp_dir_like()}, default=str)) == {"p": "somewhere"}


class tmp_dir_like:  # an object only default=str can write
    def __str__(self):
        return "somewhere"


# Nothing lost on a crash: every appended file --------------------------------------------------

def tear(path):
    """What a writer killed mid-write (or a full disk) leaves: half a line at the end."""
    with open(path, "ab") as fh:
        fh.write(b'{"iteration": 9, "agent": "agent_0", "te')


@pytest.mark.parametrize("name", ["updates.jsonl", "policies.jsonl"])
def test_a_torn_last_line_hides_no_row_appended_after_it(tmp_path, name):
    run = RunDirectory(tmp_path)
    run.append_jsonl(name, [{"iteration": 0, "agent": "agent_0"}])
    tear(tmp_path / name)
    run.append_jsonl(name, [{"iteration": 1, "agent": "agent_0"}, {"iteration": 1, "agent": "agent_1"}])
    assert [(r["iteration"], r["agent"]) for r in run.read_jsonl(name)] == [
        (0, "agent_0"), (1, "agent_0"), (1, "agent_1")]
    assert (tmp_path / name).read_bytes().count(b"\n") == 3


def test_episodes_and_metrics_appended_after_a_torn_line_are_all_read(tmp_path):
    from marlang.types import Trajectory

    def traj(episode):
        return Trajectory(episode=episode, seed=episode, env_id="babyai/goto-obj", protocol="none",
                          agents=["agent_0", "agent_1"])

    run = RunDirectory(tmp_path)
    metrics = {"episode": 0, "iteration": 0, "phase": "train", "success": True}
    run.append_episode(traj(0), dict(metrics))
    tear(run.episodes_file)
    with open(run.metrics_file, "a") as fh:
        fh.write("1,0,tra")
    run.append_episode(traj(1), {**metrics, "episode": 1})
    assert [d["episode"] for d in run.load_episode_dicts()] == [0, 1]
    import csv

    with open(run.metrics_file, newline="") as fh:
        assert [r["episode"] for r in csv.DictReader(fh)] == ["0", "1"]


def test_llm_calls_appended_after_a_torn_row_keep_their_own_lines(tmp_path):
    from langchain_core.messages import HumanMessage

    from marlang.models import UsageRecorder
    from tests.fakes import FakeRuleChatModel

    recorder, path = UsageRecorder(), tmp_path / "llm_calls.csv"
    model = FakeRuleChatModel(rule=lambda msgs: "ok")
    model.invoke([HumanMessage("hi")], config={"callbacks": [recorder], "metadata": {"marlang_episode": 0}})
    recorder.append_csv(path)
    with open(path, "a") as fh:
        fh.write("2026-01-01T00:00:00,fake")
    model.invoke([HumanMessage("hi")], config={"callbacks": [recorder], "metadata": {"marlang_episode": 1}})
    recorder.append_csv(path)
    assert [r["episode"] for r in RunDirectory(tmp_path).read_llm_calls()] == ["0", "1"]


def test_the_credit_records_of_neural_runs_are_appended_the_same_way(tmp_path):
    from marlang.rundir import appending

    path = tmp_path / "rankings.jsonl"
    with appending(path) as fh:
        fh.write(json.dumps({"batch": 0}) + "\n")
    tear(path)
    with appending(path) as fh:
        fh.write(json.dumps({"batch": 1}) + "\n")
    assert RunDirectory(tmp_path).read_jsonl("rankings.jsonl") == [{"batch": 0}, {"batch": 1}]


def test_a_damaged_line_in_the_middle_hides_no_record_after_it(tmp_path):
    (tmp_path / "updates.jsonl").write_text('{"iteration": 0}\n{"iteration": 1, "ag\x00\x00\n{"iteration": 2}\n')
    assert RunDirectory(tmp_path).read_jsonl("updates.jsonl") == [{"iteration": 0}, {"iteration": 2}]


def test_an_object_that_is_no_episode_record_is_set_aside_like_a_torn_line(tmp_path):
    good = {"episode": 0, "metrics": {"episode": 0}}
    (tmp_path / "episodes.jsonl").write_text(json.dumps(good) + "\n{}\n" + '{"episode": 1}\n')
    rd = RunDirectory(tmp_path)
    assert rd.load_episode_dicts() == [good]
    assert rd.repair_episodes() == 2  # a resume then rebuilds metrics.csv from every kept record
    assert [d["metrics"] for d in rd.load_episode_dicts()] == [{"episode": 0}]


# The run directory is held by one process --------------------------------------------------------

def hold_lock(path, pid=4242, command="marlang run other.yaml"):
    """Another process's lock on the run directory: an open file description with flock."""
    import fcntl
    import os

    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"pid": pid, "host": "elsewhere", "command": command}).encode())
    return fd


def test_a_held_run_directory_is_refused_naming_its_holder(tmp_path):
    import os

    from marlang.config import ConfigError

    fd = hold_lock(tmp_path / "run")
    try:
        with (pytest.raises(ConfigError, match="in use by process 4242 on elsewhere .marlang run other.yaml."),
              RunDirectory(tmp_path / "run").lock()):
            pass
    finally:
        os.close(fd)
    with RunDirectory(tmp_path / "run").lock():  # released: free again
        holder = json.loads((tmp_path / "run" / ".lock").read_text())
        assert holder["pid"] == os.getpid()


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").write_text(json.dumps({"pid": 999999, "host": "gone", "command": "x"}))
    with RunDirectory(tmp_path / "run").lock():
        pass


def test_a_lock_on_a_new_directory_that_ends_empty_leaves_nothing(tmp_path):
    with RunDirectory(tmp_path / "run").lock():
        assert (tmp_path / "run").is_dir()
    assert not (tmp_path / "run").exists()


def test_unfinished_writes_of_killed_writers_are_removed(tmp_path):
    run = RunDirectory(tmp_path)
    partial = tmp_path / "adapters" / "0" / ".marlang-save-abc123.partial" / "agent_0"
    partial.mkdir(parents=True)
    (partial / "adapter_model.safetensors").write_bytes(b"half")
    (tmp_path / ".summary.json.0123.tmp").write_text("{")
    (tmp_path / "adapters" / "0" / "agent_0").mkdir()
    gone = run.remove_unfinished_writes()
    assert len(gone) == 2 and not partial.parent.exists() and not (tmp_path / ".summary.json.0123.tmp").exists()
    assert (tmp_path / "adapters" / "0" / "agent_0").is_dir()


def test_the_lock_file_keeps_no_secret_of_the_command_line(tmp_path):
    command = "marlang run c.yaml --set model.base_url=https://bob:pw-0123456789@host/v1"
    with RunDirectory(tmp_path / "run").lock(command=command):
        holder = json.loads((tmp_path / "run" / ".lock").read_text())
    assert "pw-0123456789" not in holder["command"] and "https://bob:***@host/v1" in holder["command"]
