"""Two-Switch: PettingZoo API in both modes, rules, rewards, observations, reference team and
ranking heuristic."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs.credit.two_switch import (
    DOOR,
    GOAL,
    SWITCHES,
    TwoSwitchEnv,
    make_two_switch,
    plan_switches,
)
from marlang.envs.registry import EnvRegistry


def _placed(positions, facings, **kwargs) -> TwoSwitchEnv:
    env = TwoSwitchEnv(**kwargs)
    env.reset(seed=0, options={"agent_positions": positions, "agent_facings": facings})
    return env


def _play(env: TwoSwitchEnv, seed: int) -> tuple[int, float, bool]:
    team = env.scripted_team()
    env.reset(seed=seed)
    team.reset()
    steps, total, success = 0, 0.0, False
    while env.agents:
        _, rewards, _, _, infos = env.step(team.act())
        steps += 1
        total += rewards["agent_0"]
        success = infos["agent_0"]["success"]
    return steps, total, success


@pytest.mark.parametrize("mode", ["text", "numeric"])
def test_pettingzoo_parallel_api(mode):
    env = TwoSwitchEnv(observation_mode=mode, max_steps=40)
    parallel_api_test(env, num_cycles=60)
    observations, _ = env.reset(seed=1)
    for agent in env.possible_agents:
        assert env.observation_space(agent).contains(observations[agent])
        assert env.action_space(agent).n == 6
    assert env.state_space.contains(env.state())


def test_reference_team_scores_the_known_optimum():
    # Shortest team solutions found by exhaustive search over joint states for these seeds.
    optimum = {0: 10, 1: 12, 2: 12, 3: 12, 4: 12, 5: 9}
    for seed, best in optimum.items():
        steps, total, success = _play(TwoSwitchEnv(), seed)
        assert success and steps == best
        assert total == pytest.approx(3 - steps / 100)  # 2 switches + goal, minus n / n_max
    numeric_steps, _, numeric_success = _play(TwoSwitchEnv(observation_mode="numeric"), 0)
    assert numeric_success and numeric_steps == optimum[0]


def test_one_agent_takes_both_switches_when_that_is_faster():
    # With the LCA layout the walk from a switch to the door is longer than the walk between
    # the switches, so one agent toggling both while the other waits by the door is fastest
    # (10 steps here, the exhaustive-search optimum, against 11 for one switch each).
    env = _placed([(1, 7), (7, 7)], ["up", "up"])
    plan = plan_switches(env)
    assert plan.switches == ((0, 1), ()) and plan.steps == 10
    team = env.scripted_team()
    steps = 0
    while env.agents:
        env.step(team.act())
        steps += 1
    assert steps == 10 and env.goal_reached_by == "agent_1" and env.triggered_by == ["agent_0"] * 2


def test_team_reward_individual_reward_and_step_penalty():
    up = ["up", "up"]
    env = _placed([(1, 7), (7, 7)], up)
    _, rewards, terms, _, infos = env.step({"agent_0": "toggle", "agent_1": "stay"})
    assert rewards == {"agent_0": pytest.approx(0.99), "agent_1": pytest.approx(0.99)}
    assert infos["agent_0"]["individual_reward"] == 1 and infos["agent_1"]["individual_reward"] == 0
    assert infos["agent_0"]["events"] == ["agent_0 triggered switch A"] and not terms["agent_0"]
    _, rewards, *_ = env.step({"agent_0": "toggle", "agent_1": "stay"})  # already triggered
    assert rewards["agent_0"] == pytest.approx(-0.01)

    shaped = _placed([(1, 7), (7, 7)], up, individual_rewards=True, step_penalty=False)
    _, rewards, *_ = shaped.step({"agent_0": "toggle", "agent_1": "toggle"})
    assert rewards == {"agent_0": 3.0, "agent_1": 3.0}  # 2 team + 1 own


def test_goal_ends_the_episode_with_success():
    env = _placed([(4, 3), (7, 7)], ["down", "up"], max_steps=50)
    env.triggered = [True, True]
    for _ in range(2):
        _, rewards, terms, _, _ = env.step({"agent_0": "move down", "agent_1": "stay"})
        assert not terms["agent_0"] and rewards["agent_0"] == pytest.approx(-0.02)
    _, rewards, terms, truncs, infos = env.step({"agent_0": "move down", "agent_1": "stay"})
    assert env.positions[0] == GOAL and infos["agent_1"]["success"]
    assert terms == {"agent_0": True, "agent_1": True} and not any(truncs.values())
    assert rewards["agent_1"] == pytest.approx(1 - 0.02) and env.agents == []


def test_door_opens_only_after_both_switches():
    env = _placed([(4, 3), (2, 8)], ["down", "left"])
    env.step({"agent_0": "move down", "agent_1": "stay"})
    assert env.positions[0] == (4, 3) and not env.door_open  # locked
    env.step({"agent_0": "move down", "agent_1": "toggle"})
    assert env.triggered == [True, False] and env.positions[0] == (4, 3)
    env.positions[1], env.facings[1] = (7, 7), "up"
    observations, *_ = env.step({"agent_0": "move down", "agent_1": "toggle"})
    # The toggle comes first in the step, so agent_0 walks through the door at once.
    assert env.door_open and env.positions[0] == DOOR
    assert "Door at (4, 2): open." in observations["agent_0"].text


def test_toggle_is_legal_only_facing_an_untriggered_switch():
    env = _placed([(1, 7), (5, 5)], ["up", "up"])
    assert "toggle" in env.text_observation("agent_0").legal_actions
    assert list(env.action_mask("agent_1")) == [1, 1, 1, 1, 1, 0]
    _, rewards, _, _, infos = env.step({"agent_0": "stay", "agent_1": "toggle"})
    assert infos["agent_1"]["no_effect"] and rewards["agent_1"] == pytest.approx(-0.01)
    env.step({"agent_0": "toggle", "agent_1": "stay"})
    assert "toggle" not in env.text_observation("agent_0").legal_actions


def test_bumping_turns_without_moving_and_agents_never_share_a_cell():
    env = _placed([(0, 8), (2, 8)], ["down", "down"])
    _, _, _, _, infos = env.step({"agent_0": "move right", "agent_1": "move left"})
    assert env.positions == [(0, 8), (2, 8)]  # switch A is in the way of both
    assert env.facings == ["right", "left"] and infos["agent_0"]["blocked"]
    env = _placed([(3, 5), (5, 5)], ["up", "up"])
    env.step({"agent_0": "move right", "agent_1": "move left"})
    assert env.positions == [(3, 5), (5, 5)]  # both wanted (4, 5)
    env.step({"agent_0": "move right", "agent_1": "move right"})
    assert env.positions == [(4, 5), (6, 5)]  # following into a vacated cell is fine


def test_truncation_at_the_step_limit():
    env = TwoSwitchEnv(max_steps=5)
    env.reset(seed=3)
    for step in range(1, 6):
        _, rewards, terms, truncs, infos = env.step({"agent_0": 0, "agent_1": 0})
        assert rewards["agent_0"] == pytest.approx(-1 / 5) and infos["agent_0"]["step"] == step
        assert not any(terms.values())
    assert all(truncs.values()) and env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": 0, "agent_1": 0})


def test_index_and_string_actions_are_the_same():
    by_index, by_name = (
        TwoSwitchEnv(observation_mode="numeric"),
        TwoSwitchEnv(observation_mode="numeric"),
    )
    first, _ = by_index.reset(seed=7)
    second, _ = by_name.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(30):
        if not by_index.agents:
            break
        picks = {a: int(rng.integers(6)) for a in by_index.agents}
        names = {a: by_name.action_names(a)[i] for a, i in picks.items()}
        first, r1, *_ = by_index.step(picks)
        second, r2, *_ = by_name.step(names)
        assert r1 == r2
        for agent in first:
            np.testing.assert_array_equal(first[agent], second[agent])


def test_invalid_actions_and_arguments_raise_clear_errors():
    env = TwoSwitchEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"unknown action 'jump'.*valid actions: \['stay'"):
        env.step({"agent_0": "jump", "agent_1": "stay"})
    with pytest.raises(ValueError, match=r"valid indices 0\.\.5"):
        env.step({"agent_0": 6, "agent_1": 0})
    with pytest.raises(ValueError, match="integer index or an action name"):
        env.step({"agent_0": 1.5, "agent_1": 0})
    assert env.step_count == 0
    with pytest.raises(ValueError, match="n_agents must be 2"):
        make_two_switch(n_agents=3)
    with pytest.raises(ValueError, match="observation_mode must be one of"):
        TwoSwitchEnv(observation_mode="pixels")
    with pytest.raises(ValueError, match="step_penalty must be True or False"):
        TwoSwitchEnv(step_penalty="yes")
    with pytest.raises(ValueError, match="agent_positions"):
        env.reset(options={"agent_positions": [(1, 8), (3, 3)]})  # (1, 8) is a switch


def test_ego_text_and_numeric_observation_describe_the_same_positions():
    text_env, numeric_env = TwoSwitchEnv(), TwoSwitchEnv(observation_mode="numeric")
    for seed in range(5):
        texts, _ = text_env.reset(seed=seed)
        numbers, _ = numeric_env.reset(seed=seed)
        for agent in text_env.possible_agents:
            text, vector = texts[agent].text, numbers[agent]
            me = tuple(
                map(int, re.search(r"^You are \S+ \(\w+\) at \((\d+), (\d+)\)", text).groups())
            )
            mate = tuple(
                map(int, re.search(r"Teammate \S+ \(\w+\) is at \((\d+), (\d+)\)", text).groups())
            )
            decoded_me = (round(vector[0] * 8), round(vector[1] * 8))
            decoded_mate = (
                decoded_me[0] + round(vector[6] * 8),
                decoded_me[1] + round(vector[7] * 8),
            )
            assert me == decoded_me and mate == decoded_mate
            facing = re.search(r"facing (\w+)", text).group(1)
            assert ["up", "down", "left", "right"][int(np.argmax(vector[2:6]))] == facing
            # Offsets to switch A and the goal agree with the coordinates in the text.
            assert (me[0] + round(vector[12] * 8), me[1] + round(vector[13] * 8)) == SWITCHES[0]
            assert (me[0] + round(vector[18] * 8), me[1] + round(vector[19] * 8)) == GOAL
    assert "Switch A at (1, 8): untriggered" in texts["agent_0"].text


def test_rank_states_follows_the_switch_split():
    # The LCA prompt's example: ego at (5, 8), teammate at (5, 7); the team is fastest with
    # the ego on switch A (4 steps) and the teammate on switch B (3 steps).
    env = _placed([(5, 8), (5, 7)], ["up", "up"])
    start = env.rank_snapshot()
    env.step({"agent_0": "move left", "agent_1": "stay"})
    toward = env.rank_snapshot()
    assert env.rank_states("agent_0", start, toward) == 1
    assert env.rank_states("agent_0", toward, start) == -1
    assert env.rank_states("agent_0", start, start) == 0
    env = _placed([(5, 8), (5, 7)], ["up", "up"])
    env.step({"agent_0": "move right", "agent_1": "stay"})
    assert env.rank_states("agent_0", start, env.rank_snapshot()) == -1  # toward the teammate's switch

    env = _placed([(1, 7), (6, 4)], ["up", "up"])
    before = env.rank_snapshot()
    env.step({"agent_0": "toggle", "agent_1": "stay"})
    assert env.rank_states("agent_0", before, env.rank_snapshot()) == 1
    with pytest.raises(TypeError, match="TwoSwitchSnapshot"):
        env.rank_states("agent_0", before, "state")


def test_registration_builds_every_id():
    from marlang.envs import list_envs
    from marlang.envs.credit.gridworld import GRIDWORLD_ENV_IDS
    from marlang.envs.registry import register_marl_envs

    registry = EnvRegistry()
    register_marl_envs(registry)
    assert set(GRIDWORLD_ENV_IDS) <= set(registry.list()) and set(GRIDWORLD_ENV_IDS) <= set(list_envs())
    for env_id in GRIDWORLD_ENV_IDS:
        env = registry.make(env_id, observation_mode="numeric", max_steps=20)
        env.reset(seed=0)
        assert env.env_id == env_id and env.max_steps == 20
    with pytest.raises(ValueError, match="no parameter 'size'"):
        registry.make("gridworld/two-switch", size=3)
