"""Spaceworld: PettingZoo API in both modes, carrying and delivery, collisions, the reward
formula, observations, reference team and ranking heuristic."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs.credit.spaceworld import SpaceworldEnv, make_spaceworld, plan_steps

# agent_0 next to its part with its destination two cells on; agent_1 likewise on the top row.
SIMPLE = {
    "agent_positions": [(0, 0), (9, 9)],
    "part_positions": [(1, 0), (8, 9)],
    "destinations": [(3, 0), (6, 9)],
}
DELIVERY = ["move right", "pick up", "move right", "move right", "drop"]
LEFTWARD = ["move left", "pick up", "move left", "move left", "drop"]


def _placed(options=SIMPLE, **kwargs) -> SpaceworldEnv:
    env = SpaceworldEnv(**kwargs)
    env.reset(seed=0, options=options)
    return env


def _pair(a: tuple[int, int], b: tuple[int, int]) -> dict:
    return {
        "agent_positions": [a, b],
        "part_positions": [(0, 9), (9, 0)],
        "destinations": [(5, 9), (9, 5)],
    }


@pytest.mark.parametrize("mode", ["text", "numeric"])
def test_pettingzoo_parallel_api(mode):
    env = SpaceworldEnv(observation_mode=mode)
    parallel_api_test(env, num_cycles=80)
    observations, _ = env.reset(seed=5)
    for agent in env.possible_agents:
        assert env.observation_space(agent).contains(observations[agent])
        assert env.action_space(agent).n == 7
    assert env.state_space.contains(env.state())


def test_delivering_both_parts_in_the_fewest_steps_scores_ten():
    env = _placed()
    assert env.min_steps == 5
    for t, (first, second) in enumerate(zip(DELIVERY, LEFTWARD, strict=True), start=1):
        _, rewards, terms, _, infos = env.step({"agent_0": first, "agent_1": second})
        if t < 5:
            assert rewards == {"agent_0": 0.0, "agent_1": 0.0} and not terms["agent_0"]
    assert env.delivered == [True, True] and infos["agent_0"]["success"] and all(terms.values())
    assert rewards == {"agent_0": 10.0, "agent_1": 10.0}


def test_each_extra_step_costs_one_point():
    env = _placed()
    for action in ["stay", "stay", *DELIVERY]:
        env.step({"agent_0": action, "agent_1": "stay"})
    for action in LEFTWARD[:-1]:
        env.step({"agent_0": "stay", "agent_1": action})
    _, rewards, terms, _, infos = env.step({"agent_0": "stay", "agent_1": "drop"})
    assert env.step_count == 12 and infos["agent_1"]["extra_steps"] == 7
    assert all(terms.values()) and rewards["agent_1"] == pytest.approx(3.0)


def test_carrying_moves_the_part_and_a_drop_elsewhere_does_not_deliver():
    env = _placed()
    assert env.action_mask("agent_0")[5] == 0  # nothing to pick up at (0, 0)
    _, _, _, _, infos = env.step({"agent_0": "pick up", "agent_1": "stay"})
    assert infos["agent_0"]["no_effect"]
    env.step({"agent_0": "move right", "agent_1": "stay"})
    assert env.action_mask("agent_0")[5] == 1
    env.step({"agent_0": "pick up", "agent_1": "stay"})
    env.step({"agent_0": "move up", "agent_1": "stay"})
    assert env.carried_by[0] == 0 and env.part_positions[0] == (1, 1)
    observations, *_ = env.step({"agent_0": "drop", "agent_1": "stay"})
    assert env.carried_by[0] is None and not env.delivered[0] and env.part_positions[0] == (1, 1)
    assert "You are over the blue mirror segment: pick up takes it." in observations["agent_0"].text


@pytest.mark.parametrize(
    ("start", "actions"),
    [
        (((2, 2), (4, 2)), ("move right", "move left")),  # both into (3, 2)
        (((2, 2), (3, 2)), ("move right", "move left")),  # through each other
        (((2, 2), (3, 2)), ("move right", "stay")),  # into a satellite that stays
        (((2, 2), (2, 3)), ("move up", "pick up")),  # a pick-up does not move it away
    ],
)
def test_any_collision_ends_the_episode_with_reward_zero(start, actions):
    env = _placed(_pair(*start))
    observations, rewards, terms, truncs, infos = env.step(
        dict(zip(env.possible_agents, actions, strict=True))
    )
    assert all(terms.values()) and not any(truncs.values()) and env.agents == []
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0}
    assert infos["agent_0"]["collision"] and not infos["agent_0"]["success"] and env.collided
    assert "collided" in observations["agent_1"].text


def test_following_and_moving_off_the_grid_are_safe():
    env = _placed(_pair((2, 2), (3, 2)))
    _, _, terms, _, infos = env.step({"agent_0": "move right", "agent_1": "move right"})
    assert (
        env.positions == [(3, 2), (4, 2)]
        and not terms["agent_0"]
        and not infos["agent_0"]["collision"]
    )
    env = _placed(_pair((0, 0), (1, 0)))
    env.step({"agent_0": "move left", "agent_1": "move down"})
    assert env.positions == [(0, 0), (1, 0)] and env.agents


def test_truncation_at_the_limit_gives_nothing():
    env = SpaceworldEnv(max_steps=3)
    env.reset(seed=2)
    for _ in range(3):
        _, rewards, terms, truncs, _ = env.step({"agent_0": 0, "agent_1": 0})
        assert rewards["agent_0"] == 0.0 and not any(terms.values())
    assert all(truncs.values())


def test_min_steps_takes_the_best_split_of_the_parts():
    # Each satellite starts next to the other's part: swapping the jobs is faster.
    env = _placed(
        {
            "agent_positions": [(0, 0), (9, 0)],
            "part_positions": [(8, 0), (1, 0)],
            "destinations": [(8, 3), (1, 3)],
        }
    )
    steps, per_agent, parts = plan_steps(env.rank_snapshot())
    assert steps == env.min_steps == 6 and per_agent == [6, 6] and parts == [[1], [0]]


def test_reference_team_scores_ten_without_collisions():
    env = SpaceworldEnv()
    team = env.scripted_team()
    rewards = []
    for seed in range(30):
        env.reset(seed=seed)
        team.reset()
        while env.agents:
            _, reward, _, _, infos = env.step(team.act())
        assert infos["agent_0"]["success"] and not infos["agent_0"]["collision"]
        rewards.append(reward["agent_0"])
    assert rewards[0] == 10.0 and np.mean(rewards) >= 9.9 and min(rewards) >= 8.0


def test_index_and_string_actions_are_the_same():
    by_index, by_name = SpaceworldEnv(), SpaceworldEnv()
    by_index.reset(seed=8)
    by_name.reset(seed=8)
    rng = np.random.default_rng(3)
    for _ in range(40):
        if not by_index.agents:
            break
        picks = {a: int(rng.integers(7)) for a in by_index.agents}
        first, r1, *_ = by_index.step(picks)
        second, r2, *_ = by_name.step({a: by_name.action_names(a)[i] for a, i in picks.items()})
        assert r1 == r2 and {a: o.text for a, o in first.items()} == {
            a: o.text for a, o in second.items()
        }


def test_invalid_arguments_raise_clear_errors():
    for bad in (3, 31, "10", True, 7.5):
        with pytest.raises(ValueError, match="grid_size must be an integer from 4 to 30"):
            SpaceworldEnv(grid_size=bad)
    with pytest.raises(ValueError, match="n_agents must be 2"):
        make_spaceworld(n_agents=3)
    env = SpaceworldEnv()
    with pytest.raises(ValueError, match="all of"):
        env.reset(options={"agent_positions": [(0, 0), (1, 1)]})
    with pytest.raises(ValueError, match="outside the 10x10 grid"):
        env.reset(options={**SIMPLE, "destinations": [(3, 0), (10, 9)]})
    for cell in ((0, 0, 4), (0,)):  # (a third coordinate was taken as a cell no part ever shares)
        with pytest.raises(ValueError, match=r"agent_positions: .* is not an \(x, y\) cell"):
            env.reset(options={**SIMPLE, "agent_positions": [cell, (9, 9)]})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"unknown action 'grab'.*'pick up', 'drop'\]"):
        env.step({"agent_0": "grab", "agent_1": "stay"})
    with pytest.raises(ValueError, match=r"valid indices 0\.\.6"):
        env.step({"agent_0": 0, "agent_1": 7})


def test_ego_text_and_numeric_observation_describe_the_same_positions():
    text_env, numeric_env = SpaceworldEnv(), SpaceworldEnv(observation_mode="numeric")
    for seed in range(5):
        texts, _ = text_env.reset(seed=seed)
        numbers, _ = numeric_env.reset(seed=seed)
        for index, agent in enumerate(text_env.possible_agents):
            text, vector = texts[agent].text, numbers[agent]
            me = tuple(
                map(
                    int,
                    re.search(r"^You are \S+ \(\w+ satellite\) at \((\d+), (\d+)\)", text).groups(),
                )
            )
            mate = tuple(map(int, re.search(r"Teammate .* is at \((\d+), (\d+)\)", text).groups()))
            own_part = tuple(
                map(int, re.search(r"Your part.*lies at \((\d+), (\d+)\)", text).groups())
            )
            assert me == (round(vector[0] * 9), round(vector[1] * 9))
            assert mate == (me[0] + round(vector[2] * 9), me[1] + round(vector[3] * 9))
            assert own_part == (me[0] + round(vector[4] * 9), me[1] + round(vector[5] * 9))
            assert own_part == text_env.part_positions[index]


def test_rank_states():
    env = _placed()
    start = env.rank_snapshot()
    env.step({"agent_0": "move right", "agent_1": "stay"})
    toward = env.rank_snapshot()
    assert env.rank_states("agent_0", start, toward) == 1
    assert env.rank_states("agent_0", toward, start) == -1
    assert env.rank_states("agent_1", start, toward) == 0  # the teammate's share is unchanged
    crash = _placed(_pair((2, 2), (3, 2)))
    safe = crash.rank_snapshot()
    crash.step({"agent_0": "move right", "agent_1": "stay"})
    assert crash.rank_states("agent_1", safe, crash.rank_snapshot()) == -1
    with pytest.raises(TypeError, match="SpaceworldSnapshot"):
        env.rank_states("agent_0", start, {})
