"""GRPO and MAGRPO on a user's own LangGraph graph: G whole runs of the graph per input form a
group, each marked model role trains its LoRA adapter on its own calls' token ids with the
log-probs the engine drew them with, the adapters play back with model.adapters, and settings a
graph cannot train are one line each."""

from __future__ import annotations

import asyncio
import csv
from typing import Any

import pytest

from marlang.config import ConfigError, build_config
from marlang.run.experiment import Experiment
from marlang.rundir import RunDirectory

APP = "tests.run.graph_app"


def config(tiny_dir: Any, method: str, build: str = f"{APP}:build_graph", **learning: Any) -> Any:
    return build_config({
        "graph": {"build": build, "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:length_score"},
        "model": {"spec": f"hf:{tiny_dir}", "cache": False},
        "run": {"parallel": 2, "progress": False},
        "learning": {"method": method, "iterations": 1, "rollouts": 2, "num_generations": 3, "max_new_tokens": 8,
                     **learning},
    })


def test_magrpo_trains_an_adapter_per_marked_model_on_groups_of_whole_graph_runs(tmp_path, tiny_dir):
    result = Experiment(config(tiny_dir, "magrpo"), tmp_path / "run").run()
    rd = RunDirectory(result.run_dir)
    (row,) = rd.read_iterations()
    assert row["graph_runs"] == 6 and row["completions"] == 12 and row["failed_runs"] == 0  # 2 inputs x G=3, 2 roles
    for role in ("planner", "coder"):  # PEFT folders, one per marked model
        assert (rd.path / "adapters" / "0" / role / "adapter_config.json").exists()
    train = [e for e in rd.load_episode_dicts() if e["phase"] == "train"]
    assert len(train) == 2 and all(len(e["metrics"]["group_rewards"]) == 3 for e in train)
    assert all([s["info"]["node"] for s in e["steps"]] == ["planner", "coder"] for e in train)
    with open(rd.path / "llm_calls.csv") as fh:
        roles = [r["role"] for r in csv.DictReader(fh) if r["iteration"] == "0" and int(r["episode"]) < 2]
    assert sorted(set(roles)) == ["coder", "planner"] and len(roles) == 12  # every run of a group recorded
    assert set(result.summary["adapters"]) == {"planner", "coder"}


def test_grpo_trains_one_adapter_the_marked_models_share(tmp_path, tiny_dir):
    result = Experiment(config(tiny_dir, "grpo"), tmp_path / "run").run()
    rd = RunDirectory(result.run_dir)
    assert (rd.path / "adapters" / "0" / "shared" / "adapter_config.json").exists()
    assert not (rd.path / "adapters" / "0" / "planner").exists()
    assert {ref["path"] for ref in result.summary["adapters"].values()} == {str(rd.path / "adapters/0/shared")}
    assert not any(e["metrics"]["failed"] for e in rd.load_episode_dicts())  # the shared adapter answers every role


def test_a_sampled_calls_training_log_probs_equal_the_ones_it_was_sampled_with(tmp_path, tiny_dir):
    """Token in, token out: after an update (adapters no longer the base), a group's calls scored
    by the trainer on their recorded token ids give the log-probs the engine sampled them with."""
    experiment = Experiment(config(tiny_dir, "magrpo"), tmp_path / "run")
    experiment.run()
    learner: Any = experiment.learner
    from marlang.types import PolicyState

    state = PolicyState.from_dict(RunDirectory(tmp_path / "run").read_json("learner_state.json"))

    async def sample() -> Any:
        await learner.trainer.restore(state)
        return await learner._group(state, 0, 12345)

    runs = asyncio.run(sample())
    from marlang.methods.magrpo.tree import TrainingSample

    for role in ("planner", "coder"):
        completions = [c for run in runs for c in run.models[role].completions]
        assert completions and all(c.logprobs is not None and len(c.logprobs) == len(c.token_ids) for c in completions)
        unit = learner.trainer.unit_of(role)
        scored = learner._logprobs(unit, [TrainingSample(c, 0.0, 1, 1) for c in completions])
        for c, lp in zip(completions, scored, strict=True):
            assert lp.tolist() == pytest.approx(list(c.logprobs), abs=1e-4)


def test_trained_adapters_play_back_on_the_graph(tmp_path, tiny_dir):
    Experiment(config(tiny_dir, "magrpo"), tmp_path / "run").run()
    back = config(tiny_dir, "magrpo")
    back.model.adapters = str(tmp_path / "run")
    back.run.episodes = 2
    result = Experiment(back, tmp_path / "back").run()
    rd = RunDirectory(result.run_dir)
    manifest = rd.read_json("manifest.json")
    assert set(manifest["adapters"]) == {"planner", "coder"}
    assert result.summary["learner"] == "none" and len(rd.load_episode_dicts()) == 2
    assert not any(e["metrics"]["failed"] for e in rd.load_episode_dicts())


@pytest.mark.parametrize(("change", "expected"), [
    ({"model.spec": "openai:gpt-4o-mini"}, "trains a LoRA adapter per marked model on a local base"),
    ({"learning.num_turns": 2}, "learning.num_turns shapes MAGRPO's trees over an env's turns"),
])
def test_a_weight_space_setting_a_graph_cannot_take_is_one_line_and_creates_nothing(tmp_path, tiny_dir, change,
                                                                                       expected):
    cfg = config(tiny_dir, "grpo")
    data = cfg.model_dump(exclude={"env", "protocol", "agents", "team", "sandbox"})
    section, key = next(iter(change)).split(".")
    data[section][key] = next(iter(change.values()))
    with pytest.raises(ConfigError, match=expected):
        Experiment(build_config(data), tmp_path / "run").run()
    assert not (tmp_path / "run").exists()


def test_a_graph_that_marks_no_model_cannot_train_weights(tmp_path, tiny_dir):
    cfg = config(tiny_dir, "grpo", build="tests.run.unmarked_app:build_graph")
    with pytest.raises(ConfigError, match=r"marks none; mark each model to train with marlang.chat_model"):
        Experiment(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run").exists()


class Crash(RuntimeError):
    pass


def test_an_update_killed_after_its_groups_resumes_without_losing_or_doubling_episodes(tmp_path, tiny_dir,
                                                                                          monkeypatch):
    from marlang.methods.magrpo.graph import GraphMAGRPOLearner

    cfg = config(tiny_dir, "magrpo")
    fit = GraphMAGRPOLearner._fit

    async def dies(self: Any, samples: Any, iteration: int) -> Any:
        raise Crash("killed while training")

    monkeypatch.setattr(GraphMAGRPOLearner, "_fit", dies)
    with pytest.raises(Crash):
        Experiment(cfg, tmp_path / "run").run()
    first = {e["episode"]: e for e in RunDirectory(tmp_path / "run").load_episode_dicts() if e["phase"] == "train"}
    assert sorted(first) == [0, 1]
    monkeypatch.setattr(GraphMAGRPOLearner, "_fit", fit)
    result = Experiment(cfg, tmp_path / "run", resume=True).run()
    rd = RunDirectory(result.run_dir)
    again = [e for e in rd.load_episode_dicts() if e["phase"] == "train"]
    assert sorted(e["episode"] for e in again) == [0, 1]  # none lost, none written twice
    assert [e["steps"] for e in again] == [first[e["episode"]]["steps"] for e in again]
    assert (rd.path / "adapters" / "0" / "planner" / "adapter_config.json").exists()
    assert rd.read_iterations()[0]["graph_runs"] == 6  # the replayed groups drew the same runs
