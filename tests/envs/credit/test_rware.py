"""Robotic warehouse: truncation at the limit, text vs numeric, the heuristic team, ranking."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test
from rware.warehouse import Direction

from marlang.envs import make
from marlang.envs.credit.rware import RWARE_ACTIONS, RoboticWarehouseEnv

HEADINGS = {
    "up": Direction.UP,
    "down": Direction.DOWN,
    "left": Direction.LEFT,
    "right": Direction.RIGHT,
}


def rware(env_id: str = "rware/tiny-2ag", **kwargs) -> RoboticWarehouseEnv:
    return make(env_id, **kwargs)


def test_parallel_api_in_both_modes():
    for mode in ("text", "numeric"):
        parallel_api_test(rware(observation_mode=mode, max_steps=40), num_cycles=60)


def test_sizes_and_robot_counts():
    assert rware("rware/tiny-4ag").warehouse.grid_size == (11, 10)
    assert rware("rware/small-4ag").warehouse.grid_size == (20, 10)
    env = rware("rware/tiny-4ag", observation_mode="numeric")
    obs, _ = env.reset(seed=0)
    assert len(obs) == 4 and obs["agent_0"].shape == (71,)
    assert len(env.warehouse.request_queue) == 4
    with pytest.raises(ValueError, match="n_agents must be 4"):
        rware("rware/small-4ag", n_agents=2)


def test_time_limit_is_truncation_not_termination():
    env = rware(observation_mode="numeric")
    env.reset(seed=0)
    assert env.max_steps == 500
    short = rware(observation_mode="numeric", max_steps=7)
    short.reset(seed=0)
    for step in range(1, 8):
        _, _, term, trunc, _ = short.step(dict.fromkeys(short.agents, "wait"))
        assert not any(term.values())
        assert all(trunc.values()) == (step == 7)
    assert short.agents == []


def _parse_text(text: str) -> tuple[tuple[int, int], Direction, bool, set]:
    me = re.search(r"You are agent_\d+ at \((\d+), (\d+)\) facing (\w+)", text)
    mates = {
        (int(x), int(y))
        for x, y in re.findall(r"Teammate agent_\d+ is next to you at \((\d+), (\d+)\)", text)
    }
    carrying = "You carry no shelf." not in text
    return (int(me[1]), int(me[2])), HEADINGS[me[3]], carrying, mates


def _parse_numeric(obs: np.ndarray) -> tuple[tuple[int, int], Direction, bool, set]:
    x, y, carrying = int(obs[0]), int(obs[1]), bool(obs[2])
    heading = Direction(int(np.argmax(obs[3:7])))
    mates = set()
    for k in range(9):
        dy, dx = divmod(k, 3)
        if k != 4 and obs[8 + 7 * k] == 1.0:
            mates.add((x + dx - 1, y + dy - 1))
    return (x, y), heading, carrying, mates


def test_ego_text_and_numeric_observation_describe_the_same_robot():
    env = rware("rware/tiny-4ag")
    team = env.scripted_team()
    obs, _ = env.reset(seed=1)
    team.reset()
    seen_mates = seen_loads = 0
    for _ in range(120):
        for agent in env.agents:
            text_view = _parse_text(obs[agent].text)
            assert text_view == _parse_numeric(env.numeric_observation(agent))
            seen_mates += len(text_view[3])
            seen_loads += text_view[2]
        obs, *_ = env.step(team.act(obs))
    assert seen_mates > 0 and seen_loads > 0


def test_index_and_name_actions_give_the_same_episode():
    a, b = rware(observation_mode="numeric"), rware(observation_mode="numeric")
    a.reset(seed=5)
    b.reset(seed=5)
    rng = np.random.default_rng(1)
    for _ in range(30):
        joint = {agent: int(rng.integers(5)) for agent in a.agents}
        obs_a, rew_a, *_ = a.step(joint)
        obs_b, rew_b, *_ = b.step({k: RWARE_ACTIONS[v] for k, v in joint.items()})
        assert rew_a == rew_b
        for agent in obs_a:
            np.testing.assert_array_equal(obs_a[agent], obs_b[agent])


def test_reference_team_delivers_shelves():
    env = rware(observation_mode="numeric", max_steps=250)
    team = env.scripted_team()
    obs, _ = env.reset(seed=0)
    team.reset()
    total = 0.0
    while env.agents:
        obs, rewards, _, _, infos = env.step(team.act(obs))
        total += sum(rewards.values())
        assert infos["agent_0"]["team_reward"] == sum(rewards.values())
    assert total >= 8  # random play delivers about nothing in 250 steps


def test_rank_states_follows_fetch_deliver_return_stages():
    env = rware(observation_mode="numeric")
    env.reset(seed=0)
    robot = env.warehouse.agents[0]
    start = env.rank_snapshot()
    target = min(start.requested, key=lambda c: abs(c[0] - robot.x) + abs(c[1] - robot.y))
    # Hand-place the robot on a requested shelf's cell: closer than before.
    robot.x, robot.y = target
    env.warehouse._recalc_grid()
    on_shelf = env.rank_snapshot()
    assert env.rank_states("agent_0", start, on_shelf) == 1
    assert env.rank_states("agent_0", on_shelf, start) == -1
    assert env.rank_states("agent_0", on_shelf, on_shelf) == 0
    env.step({"agent_0": "toggle load", "agent_1": "wait"})
    loaded = env.rank_snapshot()
    assert loaded.robots[0].carrying_requested
    assert env.rank_states("agent_0", on_shelf, loaded) == 1
    # A teammate's delivery is not this robot's contribution.
    from dataclasses import replace

    mate_delivered = replace(
        loaded, robots=(loaded.robots[0], replace(loaded.robots[1], deliveries=1.0))
    )
    assert env.rank_states("agent_0", loaded, mate_delivered) == 0
    assert env.rank_states("agent_1", loaded, mate_delivered) == 1


def test_text_names_requests_goals_and_load():
    env = rware()
    obs, _ = env.reset(seed=3)
    text = obs["agent_0"].text
    assert "Goal cells: (4, 10), (5, 10)." in text
    assert text.count("(") >= 4 and "Requested shelves at:" in text
    assert "You carry no shelf." in text
    assert env.action_mask("agent_0") is None
    assert obs["agent_0"].legal_actions == list(RWARE_ACTIONS)
