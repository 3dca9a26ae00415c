"""The scripted reference team solves every registered level, with two and three agents."""

from __future__ import annotations

import logging
import statistics

import pytest

from marlang.envs import ACTIONS, list_envs, make, make_scripted_team

logger = logging.getLogger(__name__)

SEEDS = range(12)


def play(env, team, seed: int) -> tuple[bool, int]:
    observations, _ = env.reset(seed=seed)
    team.reset()
    infos: dict = {}
    while env.agents:
        actions = team.act(observations)
        assert set(actions) == set(env.agents)
        assert all(action in ACTIONS for action in actions.values())
        observations, _, _, _, infos = env.step(actions)
        assert not any(info["illegal_action"] for info in infos.values())
    return infos["agent_0"]["success"], env.step_count


@pytest.mark.parametrize("n_agents", [2, 3])
@pytest.mark.parametrize("env_id", sorted(e for e in list_envs() if e.startswith("babyai/")))
def test_scripted_team_solves_every_level(env_id, n_agents, record_property):
    env = make(env_id, n_agents=n_agents)
    team = env.scripted_team()
    results = [play(env, team, seed) for seed in SEEDS]
    steps = [n for _, n in results]
    mean_steps = statistics.mean(steps)
    record_property("mean_steps", mean_steps)
    logger.info("%s n_agents=%d: mean steps %.1f", env_id, n_agents, mean_steps)
    failed = [seed for seed, (success, _) in zip(SEEDS, results, strict=True) if not success]
    assert not failed, f"{env_id} failed on seeds {failed}"
    # Far from the time limit: the team is a reference score, not a lucky one.
    assert mean_steps < env.max_steps / 4


def test_team_picks_up_new_episodes_without_an_explicit_reset():
    env = make("babyai/unlock-pickup", n_agents=2)
    team = make_scripted_team(env)
    for seed in (3, 4):
        observations, _ = env.reset(seed=seed)  # no team.reset(): a step-0 observation does it
        while env.agents:
            observations, _, _, _, infos = env.step(team.act(observations))
        assert infos["agent_0"]["success"]


def test_driver_must_be_an_agent_of_the_env():
    env = make("babyai/pickup", n_agents=2)
    with pytest.raises(ValueError, match="driver"):
        make_scripted_team(env, driver="agent_7")
