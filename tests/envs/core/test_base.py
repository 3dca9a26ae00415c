"""MultiAgentEnv, the base class of every marlang env: what it keeps for an env (agent names,
spaces and their seeding, a step's five dicts, the end of an episode, render and close)."""

import logging

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs import ActionStringSpace, MultiAgentEnv, TextObservationSpace
from marlang.envs.core.base import check_optional_max_steps, env_metadata
from marlang.envs.core.spaces import check_joint_action
from marlang.types import TextObservation


class CountingEnv(MultiAgentEnv):
    """Agents say a number; the episode ends when they all say the same one (or after 3)."""

    metadata = env_metadata("counting_v0", ["rgb_array"])

    def __init__(self, n_agents=2, render_mode=None):
        super().__init__(n_agents, render_mode=render_mode, env_id="test/counting")
        self._set_action_spaces(lambda: ActionStringSpace(["one", "two"]))
        self._t = 0

    def reset(self, seed=None, options=None):
        self._warn_unknown_options(options)
        self._seed_action_spaces(seed)
        self._t = 0
        self._started = True
        self.agents = list(self.possible_agents)
        return self._observe_all(self.agents), {a: {} for a in self.agents}

    def step(self, actions):
        check_joint_action(self.agents, actions)
        agents = list(self.agents)
        self._t += 1
        agreed = len(set(actions.values())) == 1
        infos = {agent: {"agreed": agreed} for agent in agents}
        return self._step_result(
            agents, self._observe_all(agents), float(agreed), agreed, self._t >= 3, infos
        )

    def observe(self, agent):
        return TextObservation(text=f"step {self._t}", mission="agree", legal_actions=["one", "two"])

    def _render_frame(self):
        return np.zeros((2, 2, 3), dtype=np.uint8)


def test_agents_spaces_and_metadata():
    env = CountingEnv(3)
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"] and env.agents == []
    assert isinstance(env.observation_space("agent_1"), TextObservationSpace)
    assert env.action_space("agent_0") is env.action_space("agent_0")
    assert env.action_space("agent_0") is not env.action_space("agent_1")
    assert env.metadata == {
        "name": "counting_v0", "render_modes": ["rgb_array"], "is_parallelizable": True,
    }
    assert env.env_id == "test/counting"
    assert MultiAgentEnv.world_description == "a shared environment"


def test_the_pettingzoo_api_holds():
    parallel_api_test(CountingEnv(2), num_cycles=20)


def test_reset_seeds_each_agents_action_space_by_its_offset():
    env = CountingEnv(2)
    env.reset(seed=7)
    first = [env.action_space(a).sample() for a in env.possible_agents for _ in range(5)]
    env.reset(seed=7)
    assert [env.action_space(a).sample() for a in env.possible_agents for _ in range(5)] == first


def test_a_step_shares_the_reward_and_ends_every_agent_together():
    env = CountingEnv(2)
    env.reset(seed=0)
    _, rewards, terminations, truncations, _ = env.step({"agent_0": "one", "agent_1": "two"})
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0} and env.agents == ["agent_0", "agent_1"]
    assert not any(terminations.values()) and not any(truncations.values())
    _, rewards, terminations, _, infos = env.step({"agent_0": "two", "agent_1": "two"})
    assert rewards == {"agent_0": 1.0, "agent_1": 1.0} and all(terminations.values())
    assert infos["agent_1"] == {"agreed": True} and env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": "one", "agent_1": "one"})


def test_per_agent_rewards_pass_through():
    env = CountingEnv(2)
    env.reset()
    _, rewards, *_ = env._step_result(
        ["agent_0", "agent_1"], {}, {"agent_0": 1.0, "agent_1": -1.0, "other": 5.0}, False,
        True, {},
    )
    assert rewards == {"agent_0": 1.0, "agent_1": -1.0} and env.agents == []


def test_unknown_reset_options_are_logged(caplog):
    with caplog.at_level(logging.WARNING):
        CountingEnv(2).reset(options={"colour": "red"})
    assert "CountingEnv.reset ignores unknown options ['colour']" in caplog.text


def test_render_needs_a_mode_and_a_reset():
    with pytest.raises(ValueError, match="render_mode"):
        CountingEnv(2, render_mode="human")
    with pytest.warns(UserWarning, match="without a render_mode"):
        assert CountingEnv(2).render() is None
    env = CountingEnv(2, render_mode="rgb_array")
    with pytest.raises(RuntimeError, match="reset"):
        env.render()
    env.reset()
    assert env.render().shape == (2, 2, 3)
    env.close()
    assert env.agents == []


def test_an_env_without_render_modes_renders_nothing():
    class Plain(CountingEnv):
        metadata = env_metadata("plain_v0")

    env = Plain(2)
    env.reset()
    with pytest.warns(UserWarning, match="Plain has no render modes"):
        assert env.render() is None


def test_check_optional_max_steps():
    assert check_optional_max_steps(None) is None
    assert check_optional_max_steps(np.int64(4)) == 4
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="max_steps"):
            check_optional_max_steps(bad)
    with pytest.raises(ValueError, match="the number of turns"):
        check_optional_max_steps(0, "max_steps (the number of turns)")
