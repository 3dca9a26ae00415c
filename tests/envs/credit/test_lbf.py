"""Level-based foraging: time limit as truncation, text vs numeric, the greedy team, ranking."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs import make
from marlang.envs.credit.lbf import LBF_ACTIONS, LevelBasedForagingEnv
from marlang.envs.credit.scenarios import LBF_SCENARIOS


def lbf(env_id: str = "lbf/8x8-2p-2f-coop", **kwargs) -> LevelBasedForagingEnv:
    return make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", ["lbf/8x8-2p-2f-2s-coop", "lbf/15x15-4p-5f"])
def test_parallel_api_in_both_modes(env_id):
    for mode in ("text", "numeric"):
        parallel_api_test(lbf(env_id, observation_mode=mode), num_cycles=60)


def test_scenarios_match_their_ids():
    env = lbf("lbf/15x15-4p-5f", observation_mode="numeric")
    obs, _ = env.reset(seed=0)
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2", "agent_3"]
    assert env.lbf.field_size == (15, 15) and env.sight == 15
    assert np.count_nonzero(env.lbf.field) == 5  # more foods than the package registers
    assert obs["agent_0"].shape == (3 * 5 + 3 * 4,)
    assert LBF_SCENARIOS["lbf/10x10-3p-3f-2s"].sight == 2
    assert lbf("lbf/10x10-3p-3f-2s").lbf.sight == 2
    coop = lbf("lbf/8x8-2p-2f-coop")
    coop.reset(seed=4)
    levels = sum(p.level for p in coop.lbf.players)
    assert set(coop.lbf.field[coop.lbf.field > 0].tolist()) == {levels}


def test_time_limit_is_truncation_not_termination():
    env = lbf(observation_mode="numeric")
    env.reset(seed=0)
    for step in range(1, 51):
        _, _, term, trunc, _ = env.step(dict.fromkeys(env.agents, "stay"))
        assert not any(term.values())
        assert all(trunc.values()) == (step == 50)
    # The package itself calls this the end of the game: reported there as termination.
    assert env.lbf.game_over and env.agents == []


def test_collecting_all_food_terminates_with_team_return_one():
    env = lbf(observation_mode="numeric")
    team = env.scripted_team()
    obs, _ = env.reset(seed=1)
    team.reset()
    total = 0.0
    while env.agents:
        obs, rewards, term, trunc, infos = env.step(team.act(obs))
        total += sum(rewards.values())
    assert all(term.values()) and not any(trunc.values())
    assert infos["agent_0"]["success"] is True
    assert total == pytest.approx(1.0)


def test_shared_reward_gives_everyone_the_team_sum():
    env = lbf(observation_mode="numeric", shared_reward=True)
    team = env.scripted_team()
    obs, _ = env.reset(seed=1)
    while env.agents:
        obs, rewards, *_ = env.step(team.act(obs))
        assert len(set(rewards.values())) == 1
    assert rewards["agent_0"] > 0


@pytest.mark.parametrize("env_id", ["lbf/8x8-2p-2f-coop", "lbf/10x10-3p-3f", "lbf/15x15-4p-3f"])
def test_reference_team_collects_all_food_on_most_seeds(env_id):
    env = lbf(env_id, observation_mode="numeric")
    team = env.scripted_team()
    solved = 0
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        team.reset()
        while env.agents:
            obs, _, term, _, _ = env.step(team.act(obs))
        solved += all(term.values())
    assert solved >= 9


def _parse_text(text: str) -> tuple[tuple[int, int, int], set, set]:
    me = re.search(r"You are agent_\d+ at \((\d+), (\d+)\), level (\d+)\.", text)
    mates = {
        tuple(map(int, m))
        for m in re.findall(r"Teammate agent_\d+ is at \((\d+), (\d+)\), level (\d+)", text)
    }
    foods = {tuple(map(int, m)) for m in re.findall(r"Food at \((\d+), (\d+)\), level (\d+)", text)}
    return tuple(map(int, me.groups())), mates, foods


def _parse_numeric(obs: np.ndarray, env: LevelBasedForagingEnv, me_abs: tuple) -> tuple:
    """The numeric view in absolute cells. Within limited sight the package counts from the
    corner of the agent's clipped view: its own entry is (min(sight, row), min(sight, col))."""
    n_food, n_players = env.scenario.foods, env.scenario.players
    triples = [tuple(int(v) for v in obs[3 * k : 3 * k + 3]) for k in range(n_food + n_players)]
    me = triples[n_food]
    assert me[:2] == (min(env.sight, me_abs[0]), min(env.sight, me_abs[1]))
    origin = (me_abs[0] - me[0], me_abs[1] - me[1])

    def absolute(t):
        return (t[0] + origin[0], t[1] + origin[1], t[2])

    foods = {absolute(t) for t in triples[:n_food] if t[2] > 0}
    mates = {absolute(t) for t in triples[n_food + 1 :] if t[2] > 0}
    return absolute(me), mates, foods


@pytest.mark.parametrize("env_id", ["lbf/10x10-3p-3f-2s", "lbf/15x15-3p-5f"])
def test_ego_text_and_numeric_observation_describe_the_same_cells(env_id):
    env = lbf(env_id)
    rng = np.random.default_rng(0)
    checked_mates = checked_food = 0
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        for _ in range(15):
            for agent in env.agents:
                text_view = _parse_text(obs[agent].text)
                numeric_view = _parse_numeric(env.numeric_observation(agent), env, text_view[0])
                assert text_view == numeric_view
                checked_mates += len(text_view[1])
                checked_food += len(text_view[2])
            obs, *_ = env.step({a: int(rng.integers(6)) for a in env.agents})
            if not env.agents:
                break
    assert checked_mates > 0 and checked_food > 0


def test_legal_actions_follow_the_package_mask():
    env = lbf()
    obs, _ = env.reset(seed=0)
    for agent in env.agents:
        mask = env.action_mask(agent)
        assert obs[agent].legal_actions == [n for n, ok in zip(LBF_ACTIONS, mask) if ok]
        assert mask[0] == 1  # staying is always valid
        assert mask[5] == int(any(f["adjacent"] for f in obs[agent].data["food"]))


def test_rank_states_prefers_approaching_food_and_collecting_it():
    env = lbf("lbf/10x10-3p-3f", observation_mode="numeric")
    env.reset(seed=2)
    me = env.lbf.players[0]
    food = min(
        zip(*np.nonzero(env.lbf.field)),
        key=lambda f: abs(f[0] - me.position[0]) + abs(f[1] - me.position[1]),
    )
    before = env.rank_snapshot()
    row, col = me.position
    # Hand-move agent_0 one cell toward the nearest food (and another agent's move is irrelevant).
    step = (int(np.sign(food[0] - row)), 0) if food[0] != row else (0, int(np.sign(food[1] - col)))
    me.position = (row + step[0], col + step[1])
    closer = env.rank_snapshot()
    assert env.rank_states("agent_0", before, closer) == 1
    assert env.rank_states("agent_0", closer, before) == -1
    assert env.rank_states("agent_0", closer, closer) == 0
    collected = type(closer)(
        positions=closer.positions,
        levels=closer.levels,
        scores=(0.5, *closer.scores[1:]),
        foods=closer.foods[1:],
    )
    assert env.rank_states("agent_0", closer, collected) == 1


def test_text_mentions_position_level_and_mission():
    env = lbf()
    obs, _ = env.reset(seed=0)
    text = obs["agent_0"].text
    assert "You are agent_0 at (" in text and "Teammate agent_1" in text
    assert "Food at (" in text and "2 of 2 foods are left" in text
    assert "load" in obs["agent_0"].mission
