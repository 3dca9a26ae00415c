"""`play_task`: a graph played over a task's inputs K at a time, each episode scored by the
reward; a failure on one input fails that episode only, and no output of the graph can pass
itself off as a reward."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from marlang.config.sections import ConfigError
from marlang.models import load_chat_model
from marlang.usergraph import Binding, GraphSpec, TaskSpec, aplay_task, play_task, reward_value
from tests.usergraph import task_app

APP = "tests.usergraph.task_app"


def specs(build: str = "build_graph", data: str = "problems", reward: str = "score") -> tuple[GraphSpec, TaskSpec]:
    return (GraphSpec(build=f"{APP}:{build}", input="question", output="answer"),
            TaskSpec(data=f"{APP}:{data}", reward=f"{APP}:{reward}"))


def test_the_users_app_is_played_over_the_task_and_scored():
    binding = Binding(prompts={"coder": "Coder: write it."}, versions={"coder": 2})
    bare, keyed = play_task(*specs(), binding=binding, concurrency=2)
    assert (bare.input, bare.reward, bare.error) == ("add two numbers", 0.0, None)  # the bound prompt answers
    assert bare.output["answer"] == "Coder: Plan: add two numbers"
    assert keyed.input == task_app.problems()[1] and keyed.output["question"] == "sort a list"
    assert "expected" not in keyed.output  # the graph is given the input only
    assert [call.prompt_versions for call in keyed.calls] == [{"coder": 2}] * 2
    (unbound,) = play_task(*specs(), limit=1)
    assert unbound.reward == 1.0 and play_task(*specs(), limit=1)[0].output == unbound.output


async def test_an_async_reward_is_awaited():
    episodes = await aplay_task(*specs(reward="async_score"))
    assert [episode.reward for episode in episodes] == [0.5, 0.5]


async def test_k_inputs_play_at_a_time_each_in_its_own_binding_and_come_back_in_order(monkeypatch):
    monkeypatch.setattr(task_app, "IN_FLIGHT", {"now": 0, "most": 0})
    episodes = await aplay_task(*specs("counting_graph", "counting_data", "suffix_reward"),
                                binding=Binding(prompts={"tag": "bound"}), concurrency=3, limit=6)
    assert task_app.IN_FLIGHT == {"now": 0, "most": 3}
    assert [episode.output["answer"] for episode in episodes] == [f"bound q{i}" for i in range(6)]
    assert [episode.reward for episode in episodes] == [1.0] * 6


def test_the_specs_prompts_play_where_the_binding_names_none():
    graph = GraphSpec(build=f"{APP}:counting_graph", input="question", output="answer", prompts={"tag": "given"})
    task = TaskSpec(data=f"{APP}:counting_data", reward=f"{APP}:suffix_reward")
    assert [e.output["answer"] for e in play_task(graph, task, limit=2)] == ["given q0", "given q1"]
    (bound,) = play_task(graph, task, binding=Binding(prompts={"tag": "bound"}), limit=1)
    assert bound.output["answer"] == "bound q0"


def test_a_failure_on_one_input_fails_that_episode_and_the_others_are_scored(monkeypatch):
    monkeypatch.setattr(task_app, "problems", task_app.kinds_data)
    episodes = {episode.input: episode for episode in play_task(*specs("by_question_graph", reward="kinds_reward"))}
    assert {k: e.reward for k, e in episodes.items() if not e.failed} == {"0.5": 0.5, "numpy": 0.25}
    assert type(episodes["numpy"].reward) is float
    assert {k: e.error for k, e in episodes.items() if e.failed} == {
        "nan": "the reward function returned nan, not a finite number",
        "inf": "the reward function returned inf, not a finite number",
        "text": "the reward function returned a builtins.str, not an int or a float",
        "divide": "the reward raised ZeroDivisionError: division by zero",
        "raise": "ValueError: the graph broke",
        "silent": "the graph ended without its output key 'answer' (graph.output) in its state",
    }
    assert all(e.reward is None for e in episodes.values() if e.failed)


def test_the_inputs_are_checked_before_anything_is_played(monkeypatch):
    monkeypatch.setattr(task_app, "SCORED", [])
    with pytest.raises(ConfigError, match="item 1 is int"):
        play_task(*specs(data="numbers_data", reward="recording_reward"))
    with pytest.raises(ConfigError, match=r"call \.compile\(\)"):
        play_task(*specs("uncompiled", reward="recording_reward"))
    assert task_app.SCORED == []  # its first item, a good one, was not played either
    assert len(play_task(*specs(reward="recording_reward"))) == 2 and len(task_app.SCORED) == 2


@pytest.mark.parametrize(("reward", "error"), [
    ("output_as_reward", "the reward function returned a tests.usergraph.task_app.LyingAnswer, not an int or a float"),
    ("equality_reward", "the reward function returned a builtins.bool, not an int or a float; return 1.0 or 0.0"),
])
def test_an_output_that_claims_every_answer_and_the_number_1_scores_nothing(reward, error):
    (episode,) = play_task(*specs("lying_graph", reward=reward), limit=1)
    assert isinstance(episode.output["answer"], task_app.LyingAnswer)  # the reward got the output as it is
    assert (episode.reward, episode.error) == (None, error)
    assert episode.to_record()["output"]["answer"] == "<LyingAnswer that cannot be shown>"


def test_a_float_whose_conversion_lies_is_no_reward():
    (episode,) = play_task(*specs("number_graph", reward="output_as_reward"), limit=1)
    assert episode.reward is None and "LyingFloat, not an int or a float" in episode.error


def test_a_huge_output_reaches_the_reward_whole_and_the_record_cut():
    (episode,) = play_task(*specs("huge_graph", reward="length_reward"), limit=1)
    assert episode.reward == 1_000_000.0
    line = json.dumps(episode.to_record(), allow_nan=False)
    assert len(line) < 10_000 and "(998000 characters left out)" in line


@pytest.mark.parametrize("value", [1, 0.5, -2, np.int64(3), np.float16(0.5), np.float64(1e300)])
def test_a_finite_int_or_float_is_a_reward(value):
    assert reward_value(value) == float(value) and type(reward_value(value)) is float


@pytest.mark.parametrize("value", [True, np.bool_(True), "1", None, 1j, [1.0], task_app.LyingFloat(0.5),
                                   task_app.LyingAnswer(), float("-inf"), math.nan, np.float32("nan")])
def test_anything_else_is_not_a_reward(value):
    with pytest.raises(ValueError, match="the reward function returned"):
        reward_value(value)


@pytest.mark.real_model
def test_the_embedded_model_plays_the_users_app_over_two_inputs(smollm2_engine):
    model = load_chat_model("local:smollm2", engine=smollm2_engine, max_tokens=12, temperature=0.0)
    episodes = play_task(*specs(reward="length_reward"), binding=Binding(models={"planner": model, "coder": model}))
    assert [episode.error for episode in episodes] == [None, None]
    for episode in episodes:
        planner, coder = episode.calls
        assert (planner.node, coder.node) == ("planner", "coder") and 0 < coder.output_tokens <= 12
        assert episode.reward == float(len(coder.reply)) > 0
        record = episode.to_record()
        assert record["output"]["answer"] == coder.reply and record["calls"][1]["reply"] == coder.reply
    assert episodes[1].to_record()["input"]["question"] == "sort a list"


def test_an_option_play_task_does_not_have_is_refused_by_name():
    graph = GraphSpec.from_mapping({"build": f"{APP}:build_graph", "input": "task", "output": "code"})
    task = TaskSpec.from_mapping({"data": f"{APP}:problems", "reward": f"{APP}:score"})
    with pytest.raises(TypeError, match="'concurency'; its options are binding, concurrency, limit"):
        play_task(graph, task, concurency=2)  # type: ignore[call-arg]
