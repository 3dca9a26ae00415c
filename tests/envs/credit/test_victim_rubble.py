"""Victim-Rubble: PettingZoo API in both modes, roles, rubble blocking, rewards, observations,
reference team and ranking heuristic."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs.credit.victim_rubble import (
    BLOCKING,
    RUBBLE,
    VICTIMS,
    VictimRubbleEnv,
    make_victim_rubble,
)


def _placed(positions, facings, **options) -> VictimRubbleEnv:
    env = VictimRubbleEnv(**options.pop("env", {}))
    env.reset(seed=0, options={"agent_positions": positions, "agent_facings": facings, **options})
    return env


def _play(env: VictimRubbleEnv, seed: int) -> tuple[int, dict[str, float], bool]:
    team = env.scripted_team()
    env.reset(seed=seed)
    team.reset()
    steps, totals, success = 0, dict.fromkeys(env.possible_agents, 0.0), False
    while env.agents:
        _, rewards, _, _, infos = env.step(team.act())
        steps += 1
        for agent, reward in rewards.items():
            totals[agent] += reward
        success = infos["agent_0"]["success"]
    return steps, totals, success


@pytest.mark.parametrize("mode", ["text", "numeric"])
def test_pettingzoo_parallel_api(mode):
    env = VictimRubbleEnv(observation_mode=mode, max_steps=40)
    parallel_api_test(env, num_cycles=60)
    observations, _ = env.reset(seed=2)
    for agent in env.possible_agents:
        assert env.observation_space(agent).contains(observations[agent])
    assert env.action_names("agent_0")[-1] == "heal" and env.action_names("agent_1")[-1] == "clear"
    assert env.state_space.contains(env.state())


def test_layout_follows_the_paper():
    # Rubble 1 and 2 sit at the LCA prompt's (8, 1) and (9, 2) and cut victim 2 off; rubble 3
    # blocks nothing; victim 1 is free.
    assert RUBBLE[:2] == ((8, 1), (9, 2)) and BLOCKING == (True, True, False)
    env = VictimRubbleEnv()
    observations, _ = env.reset(seed=0)
    text = observations["agent_0"].text
    assert "Victim 2 at (10, 5) in chamber 4: needs healing; cut off from you by rubble." in text
    assert re.search(r"Victim 1 at \(0, 5\) in chamber 1: needs healing; \d+ steps from you", text)
    assert all(env.layout.room_of(cell) == "chamber 3 (the centre)" for cell in env.positions)


def test_reference_team_scores_the_known_optimum():
    # Shortest team solutions found by exhaustive search over joint states for these seeds.
    optimum = {0: 29, 1: 24, 2: 28, 3: 25, 4: 25}
    for seed, best in optimum.items():
        steps, totals, success = _play(VictimRubbleEnv(), seed)
        assert success and steps == best
        assert totals["agent_0"] == pytest.approx(5 - steps / 100)  # 2 victims + 3 rubble
    steps, totals, success = _play(VictimRubbleEnv(individual_rewards=True), 0)
    # The healer's return with its own rewards is LCA's reported optimum form, 7 - penalty.
    assert success and totals["agent_0"] == pytest.approx(7 - steps / 100)
    assert totals["agent_1"] == pytest.approx(8 - steps / 100)
    numeric_steps, _, numeric_success = _play(VictimRubbleEnv(observation_mode="numeric"), 0)
    assert numeric_success and numeric_steps == steps


def test_rubble_blocks_until_cleared_and_only_the_clearer_clears():
    env = _placed([(6, 1), (7, 1)], ["right", "right"])
    env.step({"agent_0": "stay", "agent_1": "move right"})
    assert env.positions[1] == (7, 1)  # rubble 1 is in the way
    assert env.action_mask("agent_1")[-1] == 1
    _, rewards, _, _, infos = env.step({"agent_0": "stay", "agent_1": "clear"})
    assert env.cleared == [True, False, False] and infos["agent_0"]["events"] == [
        "agent_1 cleared rubble 1"
    ]
    assert rewards == {"agent_0": pytest.approx(0.99), "agent_1": pytest.approx(0.99)}
    env.step({"agent_0": "stay", "agent_1": "move right"})
    assert env.positions[1] == (8, 1)
    with pytest.raises(ValueError, match=r"unknown action 'clear' for agent_0"):
        env.step({"agent_0": "clear", "agent_1": "stay"})

    healer = _placed([(7, 1), (3, 3)], ["right", "up"])
    _, _, _, _, infos = healer.step({"agent_0": "heal", "agent_1": "stay"})  # faces rubble
    assert infos["agent_0"]["no_effect"] and not healer.cleared[0]


def test_healing_the_corridor_victim_needs_both_blocking_rubble_cleared():
    env = _placed([(9, 1), (3, 3)], ["up", "up"], cleared=[True, False, False])
    assert "Victim 2 at (10, 5) in chamber 4: needs healing; cut off" in env.ego_text("agent_0")
    env.step({"agent_0": "move up", "agent_1": "stay"})
    assert env.positions[0] == (9, 1)  # rubble 2 blocks the passage
    env.cleared[1] = True
    for move in ("up", "up", "up", "up", "right"):
        env.step({"agent_0": f"move {move}", "agent_1": "stay"})
    assert env.positions[0] == (9, 5) and env.facings[0] == "right"
    _, rewards, terms, _, _ = env.step({"agent_0": "heal", "agent_1": "stay"})
    assert env.healed == [False, True] and rewards["agent_0"] == pytest.approx(1 - 0.01)
    assert not terms["agent_0"]  # victim 1 and rubble 3 remain


def test_finishing_everything_terminates_with_success():
    env = _placed(
        [(1, 5), (1, 0)], ["left", "left"], healed=[False, True], cleared=[True, True, False]
    )
    _, rewards, terms, truncs, infos = env.step({"agent_0": "heal", "agent_1": "clear"})
    assert all(terms.values()) and not any(truncs.values()) and infos["agent_1"]["success"]
    assert rewards["agent_0"] == pytest.approx(2 - 0.01) and env.agents == []


def test_truncation_and_step_penalty_switch():
    env = VictimRubbleEnv(max_steps=4, step_penalty=False)
    env.reset(seed=1)
    for _ in range(4):
        _, rewards, terms, truncs, _ = env.step({"agent_0": "stay", "agent_1": "stay"})
        assert rewards == {"agent_0": 0.0, "agent_1": 0.0} and not any(terms.values())
    assert all(truncs.values())


def test_index_and_string_actions_are_the_same():
    by_index, by_name = VictimRubbleEnv(), VictimRubbleEnv()
    by_index.reset(seed=4)
    by_name.reset(seed=4)
    rng = np.random.default_rng(1)
    for _ in range(25):
        picks = {a: int(rng.integers(6)) for a in by_index.agents}
        first, r1, *_ = by_index.step(picks)
        second, r2, *_ = by_name.step({a: by_name.action_names(a)[i] for a, i in picks.items()})
        assert r1 == r2 and {a: o.text for a, o in first.items()} == {
            a: o.text for a, o in second.items()
        }


def test_invalid_arguments():
    with pytest.raises(ValueError, match="n_agents must be 2"):
        make_victim_rubble(n_agents=4)
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        VictimRubbleEnv(max_steps=0)
    env = VictimRubbleEnv()
    with pytest.raises(ValueError, match="cleared must be a list of 3 booleans"):
        env.reset(options={"cleared": [True]})
    with pytest.raises(ValueError, match="agent_positions"):
        env.reset(options={"agent_positions": [(8, 1), (3, 3)]})  # rubble 1's cell


def test_ego_text_and_numeric_observation_describe_the_same_positions():
    text_env, numeric_env = VictimRubbleEnv(), VictimRubbleEnv(observation_mode="numeric")
    for seed in range(5):
        texts, _ = text_env.reset(seed=seed)
        numbers, _ = numeric_env.reset(seed=seed)
        for agent in text_env.possible_agents:
            text, vector = texts[agent].text, numbers[agent]
            me = tuple(
                map(int, re.search(r"^You are \S+ \([^)]*\) at \((\d+), (\d+)\)", text).groups())
            )
            mate = tuple(
                map(int, re.search(r"Teammate \S+ \([^)]*\) is at \((\d+), (\d+)\)", text).groups())
            )
            decoded_me = (round(vector[0] * 10), round(vector[1] * 5))
            assert me == decoded_me
            assert mate == (me[0] + round(vector[6] * 10), me[1] + round(vector[7] * 5))
            # Per victim: offset and healed flag; the first victim's offset leads to (0, 5).
            assert (me[0] + round(vector[12] * 10), me[1] + round(vector[13] * 5)) == VICTIMS[0]
            assert (me[0] + round(vector[18] * 10), me[1] + round(vector[19] * 5)) == RUBBLE[0]


def test_rank_states_per_role():
    env = _placed([(4, 4), (5, 1)], ["up", "up"])
    start = env.rank_snapshot()
    env.step({"agent_0": "move left", "agent_1": "move right"})  # both toward their targets
    forward = env.rank_snapshot()
    assert env.rank_states("agent_0", start, forward) == 1  # nearer the free victim
    assert env.rank_states("agent_1", start, forward) == 1  # nearer the blocking rubble 1
    env = _placed([(4, 4), (5, 1)], ["up", "up"])
    env.step({"agent_0": "move right", "agent_1": "move left"})  # rubble 3 blocks nothing
    away = env.rank_snapshot()
    assert env.rank_states("agent_0", start, away) == -1
    assert env.rank_states("agent_1", start, away) == -1

    # The teammate's progress does not rank the ego's state higher.
    env = _placed([(1, 5), (5, 3)], ["left", "up"])
    before = env.rank_snapshot()
    env.step({"agent_0": "heal", "agent_1": "stay"})
    assert env.rank_states("agent_0", before, env.rank_snapshot()) == 1
    assert env.rank_states("agent_1", before, env.rank_snapshot()) == 0
    with pytest.raises(TypeError, match="VictimRubbleSnapshot"):
        env.rank_states("agent_1", before, None)
