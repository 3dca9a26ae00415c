"""Multi-agent BabyAI with numeric observations: view encoding vs text, pseudo reward, ranking."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX
from pettingzoo.test import parallel_api_test

from marlang.envs import make
from marlang.envs.babyai.numeric import NUMERIC_SIZE, PSEUDO_REWARD, BabyAINumericEnv
from marlang.envs.babyai.text import ACTIONS


def babyai(env_id: str = "babyai-marl/pickup", **kwargs) -> BabyAINumericEnv:
    return make(env_id, **kwargs)


def run_team(env: BabyAINumericEnv, seed: int) -> tuple[float, list[str], bool]:
    team = env.scripted_team()
    obs, _ = env.reset(seed=seed)
    team.reset()
    total, events = 0.0, []
    while env.agents:
        obs, rewards, term, _, infos = env.step(team.act(obs))
        total += rewards["agent_0"]
        events += infos["agent_0"].get("subgoals", [])
    return total, events, all(term.values())


@pytest.mark.parametrize("env_id", ["babyai-marl/pickup", "babyai-marl/put-next"])
def test_parallel_api_in_both_modes(env_id):
    for mode in ("text", "numeric"):
        parallel_api_test(babyai(env_id, observation_mode=mode, pseudo_reward=True), num_cycles=40)


def test_pseudo_reward_pays_each_subgoal_once_on_top_of_the_level_reward():
    plain = babyai(observation_mode="numeric")
    shaped = babyai(observation_mode="numeric", pseudo_reward=True)
    base_total, base_events, solved = run_team(plain, seed=0)
    total, events, solved_too = run_team(shaped, seed=0)
    assert solved and solved_too and base_events == []
    assert sorted(events) == ["clear doorway", "take key", "unlock door"]
    assert total == pytest.approx(base_total + 3 * PSEUDO_REWARD)
    assert plain.step_count == shaped.step_count  # the reward does not change the episode


def test_put_next_pays_for_taking_the_object_to_move():
    _, events, solved = run_team(babyai("babyai-marl/put-next", pseudo_reward=True), seed=1)
    assert solved and events == ["take object to move"]


def test_goto_pays_once_for_bringing_the_target_into_view():
    plain = babyai("babyai-marl/goto-obj")
    shaped = babyai("babyai-marl/goto-obj", pseudo_reward=True)
    seen_at_start = paid = 0
    for seed in range(12):
        base_total, _, _ = run_team(plain, seed)
        total, events, solved = run_team(shaped, seed)
        assert solved and 0 < base_total <= 1
        shaped.reset(seed=seed)
        target = shaped.babyai.mission.removeprefix("go to the ").removeprefix("go to a ")
        in_view = any(f"You see a {target}" in shaped.babyai.observe(a).text for a in shaped.agents)
        # the target already in view at the start pays nothing; otherwise seeing it pays once
        assert events == ([] if in_view else ["see target"]), (seed, events)
        assert total == pytest.approx(base_total + (0 if in_view else PSEUDO_REWARD))
        seen_at_start += in_view
        paid += not in_view
    assert seen_at_start and paid  # both cases occur on these seeds


def test_reference_team_solves_pickup_in_numeric_mode():
    env = babyai(observation_mode="numeric")
    for seed in range(3):
        total, _, solved = run_team(env, seed)
        assert solved and total > 0.5


_OBJECT = re.compile(r"You see an? (?:(?:open|closed|locked) )?(\w+) (\w+) (.+)")


def _relative(phrase: str) -> tuple[int, int]:
    right = forward = 0
    for count, word in re.findall(r"(\d+) steps? (left|right|forward)", phrase):
        if word == "forward":
            forward = int(count)
        else:
            right = int(count) * (1 if word == "right" else -1)
    return right, forward


def test_ego_text_and_numeric_view_show_the_same_objects():
    env = babyai()
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=4)
    checked = 0
    headings = ("east", "south", "west", "north")
    for _ in range(25):
        for agent in env.agents:
            text = obs[agent].text
            numbers = env.numeric_observation(agent)
            assert numbers.shape == (NUMERIC_SIZE,)
            heading = re.search(r"facing (\w+)", text)[1]
            assert numbers[147 + headings.index(heading)] == 1 and numbers[147:151].sum() == 1
            view = numbers[:147].reshape(7, 7, 3)
            for line in text.splitlines():
                match = _OBJECT.match(line)
                if not match or match[1] in ("wall",):
                    continue
                colour, kind, where = match.groups()
                right, forward = _relative(where)
                cell = view[3 + right, 6 - forward]
                assert cell[0] == OBJECT_TO_IDX[kind] and cell[1] == COLOR_TO_IDX[colour], line
                checked += 1
            carried = re.search(r"You carry an? (?:\w+ )?(\w+) (\w+)", text)
            if carried:
                assert numbers[-2:].tolist() == [
                    OBJECT_TO_IDX[carried[2]],
                    COLOR_TO_IDX[carried[1]],
                ]
            else:
                assert numbers[-2:].tolist() == [0, 0]
            for mate in re.findall(r"You see (agent_\d+) (.+)", text):
                right, forward = _relative(mate[1])
                assert view[3 + right, 6 - forward, 0] == OBJECT_TO_IDX["agent"]
        if not env.agents:
            break
        obs, *_ = env.step({a: ACTIONS[int(rng.integers(3))] for a in env.agents})
    assert checked > 0


def test_numeric_steps_build_no_text(monkeypatch):
    env = babyai(observation_mode="numeric", pseudo_reward=True)

    def no_text(*args, **kwargs):
        raise AssertionError("text was built in numeric mode")

    monkeypatch.setattr(env.babyai, "observe", no_text)
    env.reset(seed=0)
    for _ in range(5):
        env.step(dict.fromkeys(env.agents, 0))


def test_rank_states_prefers_subgoals_and_approach():
    env = babyai(observation_mode="numeric", pseudo_reward=True)
    team = env.scripted_team()
    obs, _ = env.reset(seed=0)
    team.reset()
    snapshots = [env.rank_snapshot()]
    while env.agents:
        obs, *_ = env.step(team.act(obs))
        snapshots.append(env.rank_snapshot())
    first, last = snapshots[0], snapshots[-1]
    assert last.success and last.subgoals == 3
    assert env.rank_states("agent_0", first, last) == 1
    assert env.rank_states("agent_1", last, first) == -1
    assert env.rank_states("agent_0", first, first) == 0
    # Along the driver's path, reaching a subgoal always ranks up.
    for before, after in itertools.pairwise(snapshots):
        if after.subgoals > before.subgoals:
            assert env.rank_states("agent_0", before, after) == 1


def test_existing_text_env_is_unchanged_underneath():
    env = babyai()
    obs, _ = env.reset(seed=0)
    direct = make("babyai/pickup")
    direct_obs, _ = direct.reset(seed=0)
    assert obs["agent_0"].text == direct_obs["agent_0"].text
    assert env.max_steps == direct.max_steps == 576


def test_critics_never_read_the_go_to_distance_oracle():
    """The text env's go-to observations carry goal_distance (for reward shaping); the state
    an LLM critic reads (state_text) does not."""
    env = babyai("babyai-marl/goto-obj")
    env.reset(seed=0)
    assert env.babyai.observe("agent_0").data["goal_distance"] is not None
    assert "goal_distance" not in env.observation_data("agent_0")
    assert "goal_distance" not in env.state_text()
