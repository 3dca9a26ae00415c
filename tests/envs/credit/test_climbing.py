"""The climbing game: its payoff facts, the reference team, ranking and the PettingZoo API."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import parallel_api_test

from marlang.envs.credit.climbing import (
    CLIMBING_ACTIONS,
    CLIMBING_PAYOFF,
    ClimbingGameEnv,
    optimal_joint_action,
    pure_nash_equilibria,
)


def test_payoff_optimum_and_equilibria():
    assert CLIMBING_PAYOFF.tolist() == [[11, -30, 0], [-30, 7, 6], [0, 0, 5]]
    assert optimal_joint_action(CLIMBING_PAYOFF) == (0, 0)
    assert CLIMBING_PAYOFF[0, 0] == 11
    assert pure_nash_equilibria(CLIMBING_PAYOFF) == {(0, 0), (1, 1)}
    # The helper is general: an anti-coordination table has its equilibria off the diagonal.
    assert pure_nash_equilibria(np.array([[0, 3], [3, 0]])) == {(0, 1), (1, 0)}


def test_rows_are_agent_0_and_columns_agent_1():
    env = ClimbingGameEnv(observation_mode="numeric")
    env.reset(seed=0)
    for row in range(3):
        for column in range(3):
            _, rewards, *_ = env.step({"agent_0": row, "agent_1": column})
            assert rewards == dict.fromkeys(
                env.possible_agents, float(CLIMBING_PAYOFF[row, column])
            )


def test_reference_team_earns_11_every_step():
    for mode in ("text", "numeric"):
        env = ClimbingGameEnv(observation_mode=mode)
        team = env.scripted_team()
        obs, _ = env.reset(seed=0)
        team.reset()
        total, steps = 0.0, 0
        while env.agents:
            obs, rewards, *_ = env.step(team.act(obs))
            assert rewards["agent_0"] == rewards["agent_1"] == 11.0
            total += rewards["agent_0"]
            steps += 1
        assert steps == 25 and total == 275.0


def test_observations_are_constant_and_text_shows_the_last_round():
    env = ClimbingGameEnv(observation_mode="numeric")
    first, _ = env.reset()
    later, *_ = env.step({"agent_0": "action B", "agent_1": "action C"})
    for agent in env.possible_agents:
        np.testing.assert_array_equal(first[agent], later[agent])
    text = env.text_observation("agent_1").text
    assert "Last round you chose C, your teammate chose B, and the team earned 6." in text
    assert "you C: teammate A: 0, teammate B: 6, teammate C: 5" in text


def test_rank_states_prefers_higher_payoff_then_own_optimal_part():
    env = ClimbingGameEnv()
    env.reset()
    start = env.rank_snapshot()
    env.step({"agent_0": 0, "agent_1": 1})  # -30
    bad = env.rank_snapshot()
    env.step({"agent_0": 1, "agent_1": 1})  # 7
    good = env.rank_snapshot()
    env.step({"agent_0": 0, "agent_1": 2})  # 0, agent_0 played its optimal part
    zero_a0_optimal = env.rank_snapshot()
    env.step({"agent_0": 2, "agent_1": 0})  # 0, agent_1 played its optimal part
    zero_a1_optimal = env.rank_snapshot()
    assert env.rank_states("agent_0", bad, good) == 1
    assert env.rank_states("agent_0", good, bad) == -1
    assert env.rank_states("agent_1", good, good) == 0
    assert env.rank_states("agent_0", start, bad) == 1  # any round beats none
    assert env.rank_states("agent_0", zero_a1_optimal, zero_a0_optimal) == 1
    assert env.rank_states("agent_1", zero_a1_optimal, zero_a0_optimal) == -1


def test_parallel_api_in_both_modes():
    for mode in ("text", "numeric"):
        parallel_api_test(ClimbingGameEnv(observation_mode=mode), num_cycles=60)


def test_text_legal_actions_are_the_action_names():
    env = ClimbingGameEnv()
    obs, _ = env.reset()
    assert obs["agent_0"].legal_actions == list(CLIMBING_ACTIONS)
    assert env.action_mask("agent_0") is None
