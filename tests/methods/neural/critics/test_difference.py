"""Counterfactual difference rewards: forks replay the real step, the climbing game's
difference rewards are the payoff minus the payoff averaged over the agent's actions, and
an env that cannot fork is refused in one line."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from marlang.config import build_config
from marlang.envs import make
from marlang.envs.credit.climbing import CLIMBING_PAYOFF
from marlang.methods.neural.critics.critic import build_critic
from marlang.methods.neural.critics.difference import (
    DIFFERENCE_KEY,
    CounterfactualObserver,
    fork,
    supports_difference,
)


@pytest.mark.parametrize("env_id", ["gridworld/two-switch", "gridworld/victim-rubble", "lbf/8x8-2p-2f-coop",
                                    "spaceworld", "matrix/climbing"])
def test_a_fork_replays_the_real_step(env_id):
    env = make(env_id, observation_mode="numeric")
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(15):
        if not env.agents:
            break
        actions = {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
        twin = fork(env)
        real, copied = env.step(actions), twin.step(actions)
        assert real[1] == copied[1]
        assert all(np.array_equal(real[0][a], copied[0][a]) for a in real[0])
        assert np.array_equal(env.state(), twin.state())


def test_climbing_difference_rewards_average_over_the_agents_actions():
    payoff = np.asarray(CLIMBING_PAYOFF, dtype=float)
    for a0, a1 in itertools.product(range(3), repeat=2):
        env = make("matrix/climbing", observation_mode="numeric")
        observer = CounterfactualObserver()
        env.reset(seed=0)
        observer.on_reset(env)
        actions = {"agent_0": a0, "agent_1": a1}
        observer.before_step(env, actions)
        rewards = env.step(actions)[1]
        out = observer.after_step(env, actions, rewards)
        assert out["agent_0"][DIFFERENCE_KEY] == pytest.approx(payoff[a0, a1] - payoff[:, a1].mean())
        assert out["agent_1"][DIFFERENCE_KEY] == pytest.approx(payoff[a0, a1] - payoff[a0, :].mean())


def test_two_switch_credits_the_agent_that_triggers_a_switch():
    env = make("gridworld/two-switch", observation_mode="numeric")
    # agent_0 stands below switch A facing up; agent_1 far away.
    env.reset(seed=0, options={"agent_positions": [(1, 7), (6, 4)], "agent_facings": ["up", "down"]})
    observer = CounterfactualObserver()
    observer.on_reset(env)
    names = env.action_names("agent_0")
    actions = {"agent_0": names.index("toggle"), "agent_1": names.index("move left")}
    observer.before_step(env, actions)
    rewards = env.step(actions)[1]
    assert env.triggered[0]
    out = observer.after_step(env, actions, rewards)
    assert out["agent_0"][DIFFERENCE_KEY] == pytest.approx(1.0)  # the switch's +1, penalty cancels
    assert out["agent_1"][DIFFERENCE_KEY] == pytest.approx(0.0)  # staying would have changed nothing


def test_difference_on_an_env_that_cannot_fork_is_refused_in_one_line():
    assert supports_difference("lbf/15x15-4p-5f") and not supports_difference("pistonball/n5-sparse")
    config = build_config({"env": {"id": "pistonball/n5-sparse"}, "agents": {"kind": "neural"},
                           "learning": {"method": "ippo", "critic": "difference"}})
    with pytest.raises(ValueError, match="gridworld/\\*") as err:
        build_critic(config, "/nonexistent")
    assert "\n" not in str(err.value) and "pistonball/n5-sparse" in str(err.value)


def test_a_fork_keeps_an_attribute_that_holds_a_dataclass_class():
    # A dataclass *class* is a dataclass too, but its type (`type`) has no frozen flag to read.
    @dataclass(frozen=True)
    class Layout:
        width: int

    class Env:
        def __init__(self) -> None:
            self.layout_type = Layout
            self.layout = Layout(3)
            self.positions = [1, 2]

    env = Env()
    twin = fork(env)
    assert twin.layout_type is Layout and twin.layout is env.layout
    assert twin.positions == env.positions and twin.positions is not env.positions
