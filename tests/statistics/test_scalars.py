"""run.loggers: [csv, tensorboard]: iterations.csv rows of LLM and neural runs as TensorBoard scalars,
read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

import math

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from marlang.config import ConfigError, build_config
from marlang.rundir import RunDirectory
from marlang.statistics.scalars import EVENT_FILES, TENSORBOARD_DIR, TensorBoardScalars, scalar_tag
from tests.fakes import FakeRuleChatModel, babyai_rule


def event_files(run_path) -> dict[str, int]:
    """The run's event files, name -> size."""
    return {p.name: p.stat().st_size for p in (run_path / TENSORBOARD_DIR).glob(EVENT_FILES)}


def read_scalars(run_path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} as TensorBoard reads the run's tensorboard/ folder."""
    acc = EventAccumulator(str(run_path / TENSORBOARD_DIR), size_guidance={"scalars": 0})
    acc.Reload()
    out: dict[str, dict[int, float]] = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), f"{tag}: a step written twice: {steps}"
        out[tag] = {e.step: e.value for e in events}
    return out


def assert_scalars_match_iterations(run_path) -> dict[str, dict[int, float]]:
    rows = RunDirectory(run_path).read_iterations()
    assert rows
    scalars = read_scalars(run_path)
    expected = 0
    for row in rows:
        for column, value in row.items():
            if column == "iteration" or not isinstance(value, int | float) or not math.isfinite(value):
                continue
            expected += 1
            tag = scalar_tag(column)
            assert scalars[tag][row["iteration"]] == pytest.approx(float(value), rel=1e-6), (tag, row)
    by_iteration = sum(len(v) for t, v in scalars.items() if not t.startswith("by_frames/"))
    assert by_iteration == expected  # nothing beyond iterations.csv's numbers
    return scalars


def llm_config(tmp_path, loggers):
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 4},
        "model": {"cache": False},
        "protocol": {"name": "bidirectional"},
        "run": {"episodes": 4, "parallel": 2, "progress": False, "loggers": loggers},
    })


def test_an_llm_run_writes_its_iterations_as_tensorboard_scalars(tmp_path):
    from marlang.run import Experiment

    out = tmp_path / "runs" / "llm"
    Experiment(llm_config(tmp_path, ["csv", "tensorboard"]), out,
               chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert len(event_files(out)) == 1  # one process, one SummaryWriter, one event file
    scalars = assert_scalars_match_iterations(out)
    for tag in ("return/mean", "success/rate", "invalid/rate", "calls/actor", "tokens/actor", "calls/speaker",
                "calls/reflector", "tokens/reflector"):
        assert sorted(scalars[tag]) == [0, 1], tag
    assert sum(scalars["calls/reflector"].values()) == 2 * 4  # a reflection per agent and episode
    # `tensorboard --logdir runs` finds the run under runs/
    acc = EventAccumulator(str(tmp_path / "runs" / "llm" / TENSORBOARD_DIR))
    assert acc.Reload().Tags()["scalars"]


def test_without_tensorboard_in_run_loggers_no_event_file_is_written(tmp_path):
    from marlang.run import Experiment

    out = tmp_path / "run"
    Experiment(llm_config(tmp_path, ["csv"]), out, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert (out / "iterations.csv").is_file() and not (out / TENSORBOARD_DIR).exists()


def test_a_neural_run_writes_its_iterations_as_tensorboard_scalars_by_iteration_and_by_frames(tmp_path):
    from marlang.cli import main
    from tests.methods.neural.test_neural_output import climbing_config

    path = climbing_config(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["run"]["loggers"] = ["csv", "tensorboard"]
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "runs" / "mappo"
    assert main(["run", str(path), "--out", str(out)]) == 0
    scalars = assert_scalars_match_iterations(out)
    rows = RunDirectory(out).read_iterations()
    assert sorted(scalars["return/mean"]) == [r["iteration"] for r in rows] == [0, 1]
    assert {"loss/objective", "loss/critic", "frames", "success/rate", "train/seconds"} <= set(scalars)
    by_frames = {r["frames"]: r["return_mean"] for r in rows}
    assert scalars["by_frames/return/mean"] == pytest.approx(by_frames)


def test_rows_written_again_neither_duplicate_nor_lose_steps(tmp_path):
    rd = RunDirectory(tmp_path, loggers=["csv", "tensorboard"])
    rd.append_iteration_csv({"iteration": 0, "return_mean": 1.0, "actor_calls": 4, "eval_return": None})
    rd.append_iteration_csv({"iteration": 0, "return_mean": 1.0, "actor_calls": 4, "eval_return": 0.5})
    rd.append_iteration_csv({"iteration": 1, "return_mean": 2.0, "actor_calls": 6, "eval_return": None})
    files = event_files(tmp_path)
    # a resumed process (a fresh RunDirectory) replays iteration 1 with the same values: nothing new
    resumed = RunDirectory(tmp_path, loggers=["csv", "tensorboard"])
    resumed.append_iteration_csv({"iteration": 1, "return_mean": 2.0, "actor_calls": 6, "eval_return": None})
    assert event_files(tmp_path) == files
    # ... or with another value (a replayed neural batch): the scalar follows iterations.csv
    resumed.append_iteration_csv({"iteration": 1, "return_mean": 3.0, "actor_calls": 6, "eval_return": None})
    resumed.append_iteration_csv({"iteration": 2, "return_mean": 4.0, "actor_calls": 8, "eval_return": None})
    scalars = assert_scalars_match_iterations(tmp_path)
    assert scalars["return/mean"] == {0: 1.0, 1: 3.0, 2: 4.0}
    assert scalars["eval/return"] == {0: 0.5}


def test_a_torn_last_record_is_cut_off_and_a_run_turning_tensorboard_on_gets_its_earlier_rows(tmp_path):
    RunDirectory(tmp_path).append_iteration_csv({"iteration": 0, "return_mean": 1.0})  # csv only
    rd = RunDirectory(tmp_path, loggers=["csv", "tensorboard"])
    rd.append_iteration_csv({"iteration": 1, "return_mean": 2.0})
    (events,) = (tmp_path / TENSORBOARD_DIR).glob(EVENT_FILES)
    whole = events.read_bytes()
    events.write_bytes(whole + whole[-30:-5])  # a killed process's half record
    RunDirectory(tmp_path, loggers=["tensorboard"]).append_iteration_csv({"iteration": 2, "return_mean": 3.0})
    assert read_scalars(tmp_path)["return/mean"] == {0: 1.0, 1: 2.0, 2: 3.0}
    assert len(event_files(tmp_path)) == 1  # the damaged file was rewritten with the rest
    assert TensorBoardScalars(tmp_path).values()[("return/mean", 2)] == 3.0


def test_tags_name_the_column_family():
    assert scalar_tag("return_mean") == "return/mean"
    assert scalar_tag("success_rate") == "success/rate"
    assert scalar_tag("actor_calls") == "calls/actor"
    assert scalar_tag("critic_tokens") == "tokens/critic"
    assert scalar_tag("policies_accepted") == "policies/accepted"
    assert scalar_tag("credit_failures") == "credit/failures"
    assert scalar_tag("episodes") == "episodes"


def test_an_unknown_logger_is_refused_in_one_line_listing_the_choices():
    with pytest.raises(ConfigError) as err:
        build_config({"run": {"loggers": ["csv", "tensorbord"]}})
    message = str(err.value)
    assert "\n" not in message and "tensorbord" in message and "valid choices: csv, tensorboard" in message
    assert "did you mean 'tensorboard'" in message
