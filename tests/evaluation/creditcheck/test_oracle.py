"""The credit oracle: exact counterfactual credit on the climbing game (by hand), Shapley
efficiency, the rollout policies, restoring a real Overcooked episode, and a replay that differs
from the record refused in one line."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from marlang.envs import make
from marlang.envs.credit.climbing import CLIMBING_PAYOFF
from marlang.evaluation.creditcheck.oracle import (
    Cost,
    ReplayMismatch,
    Rollout,
    alternatives_of,
    one_step_difference,
    replay,
    restorable,
    shapley_values,
    step_credit,
)
from tests.evaluation.creditcheck.helpers import record

A, B, C = "action A", "action B", "action C"
P = np.asarray(CLIMBING_PAYOFF, dtype=float)


def climbing_episode(joints):
    env = make("matrix/climbing", max_steps=len(joints))
    return env, record(env, 0, [{"agent_0": a, "agent_1": b} for a, b in joints])


def credit_at(env, traj, t, rollout=None, **kw):
    rollout, cost = rollout or Rollout(), Cost()
    for step, observations in replay(env, traj, cost):
        if step == t:
            return step_credit(env, traj, t, observations, rollout, cost, **kw), cost
    raise AssertionError(t)


def test_climbing_difference_credit_by_hand():
    # step 0: (A, B) pays -30, step 1: (C, C) pays 5; the recorded rollout keeps step 1.
    env, traj = climbing_episode([(A, B), (C, C)])
    credit, cost = credit_at(env, traj, 0)
    assert credit.values["recorded"] == pytest.approx(-25.0)
    # agent_0's alternatives B, C beside agent_1's B: 7 + 5 and 0 + 5.
    assert credit.difference["agent_0"] == pytest.approx(-25.0 - (12.0 + 5.0) / 2)
    # agent_1's alternatives A, C beside agent_0's A: 11 + 5 and 0 + 5.
    assert credit.difference["agent_1"] == pytest.approx(-25.0 - (16.0 + 5.0) / 2)
    assert credit.alternatives == {"agent_0": [B, C], "agent_1": [A, C]}
    assert cost.env_steps > 0 and cost.forks > 0


def test_climbing_shapley_by_hand_and_efficiency():
    env, traj = climbing_episode([(A, B), (C, C)])
    credit, _ = credit_at(env, traj, 0)
    later = 5.0  # step 1 as recorded
    # No no-op in the climbing game: a non-member's action is averaged over its three actions.
    v = {frozenset(): P.mean() + later, frozenset({"agent_0"}): P[0, :].mean() + later,
         frozenset({"agent_1"}): P[:, 1].mean() + later, frozenset({"agent_0", "agent_1"}): P[0, 1] + later}
    phi0 = 0.5 * ((v[frozenset({"agent_0"})] - v[frozenset()]) + (v[frozenset({"agent_0", "agent_1"})]
                                                                   - v[frozenset({"agent_1"})]))
    assert credit.shapley["agent_0"] == pytest.approx(phi0)
    assert sum(credit.shapley.values()) == pytest.approx(P[0, 1] - P.mean())  # v(all) - v(none)
    assert credit.coalitions["{}"] == pytest.approx(v[frozenset()])


def test_shapley_values_are_efficient_on_any_game():
    rng = np.random.default_rng(3)
    agents = ["a", "b", "c", "d"]
    v = {frozenset(s): float(rng.normal()) for k in range(5) for s in itertools.combinations(agents, k)}
    phi = shapley_values(agents, v)
    assert sum(phi.values()) == pytest.approx(v[frozenset(agents)] - v[frozenset()])
    # symmetric agents get equal shares; a dummy agent gets nothing
    additive = {s: 2.0 * len(s) for s in v}
    assert shapley_values(agents, additive) == pytest.approx(dict.fromkeys(agents, 2.0))


def test_the_difference_critic_is_one_step_against_the_mean_action():
    env, traj = climbing_episode([(A, B), (C, C)])
    cost = Cost()
    for t, _ in replay(env, traj, cost):
        if t == 0:
            out = one_step_difference(env, traj, 0, cost)
    assert out["agent_0"] == pytest.approx(P[0, 1] - P[:, 1].mean())
    assert out["agent_1"] == pytest.approx(P[0, 1] - P[0, :].mean())


def test_default_alternatives_and_random_rollouts_are_stated_and_seeded():
    assert alternatives_of(["stay", "move up"], "move up", "default") == ["stay"]
    assert alternatives_of(["stay", "move up"], "stay", "default") == []
    assert alternatives_of([A, B, C], A, "default") == [B, C]  # no no-op: every other action
    env, traj = climbing_episode([(A, B), (C, C), (B, B)])
    first, _ = credit_at(env, traj, 0, Rollout("random", samples=3, seed=1))
    again, _ = credit_at(env, traj, 0, Rollout("random", samples=3, seed=1))
    assert first.values == again.values
    with pytest.raises(ValueError, match="valid choices are recorded, scripted, random"):
        Rollout("greedy")


def test_a_replay_that_differs_from_the_record_is_refused():
    env, traj = climbing_episode([(A, B), (C, C)])
    traj.steps[1].observations["agent_0"].text += " (edited)"
    with pytest.raises(ReplayMismatch, match="another observation of agent_0 at step 1") as err:
        list(replay(env, traj, Cost()))
    assert "\n" not in str(err.value)


def test_overcooked_restores_and_the_recorded_rollout_gives_the_recorded_return():
    env = make("overcooked/cramped-room", n_agents=2, max_steps=12, random_start=True)
    traj = record(env, 4, scripted_steps=12)
    assert restorable(traj.env_id)
    fresh = make("overcooked/cramped-room", n_agents=2, max_steps=12, random_start=True)
    credit, _ = credit_at(fresh, traj, 2, shapley=False)
    recorded = sum(sum(s.rewards.values()) / len(s.rewards) for s in traj.steps[2:])
    assert credit.values["recorded"] == pytest.approx(recorded)
    assert set(credit.difference) == {"agent_0", "agent_1"} and credit.shapley is None


def test_envs_that_cannot_restore():
    assert not restorable("code/humaneval") and not restorable("pistonball/n5")
    assert restorable("lbf/8x8-2p-2f-coop") and restorable("babyai/goto-obj")


def test_the_scripted_rollout_plays_the_envs_team_after_the_step():
    # The climbing game's scripted team plays (A, A), worth 11 a step, whatever was recorded.
    env, traj = climbing_episode([(A, B), (C, C), (B, B)])
    credit, _ = credit_at(env, traj, 0, Rollout("scripted"))
    assert credit.values["recorded"] == pytest.approx(-30 + 11 + 11)
    assert credit.values["agent_0=action B"] == pytest.approx(7 + 11 + 11)
    short, _ = credit_at(env, traj, 0, Rollout("scripted", horizon=1))
    assert short.values["recorded"] == pytest.approx(-30 + 11)


@pytest.mark.parametrize("env_id", ["matrix/climbing", "lbf/8x8-2p-2f-coop", "rware/tiny-4ag", "gridworld/two-switch",
                                    "gridworld/victim-rubble", "spaceworld", "babyai/goto-obj",
                                    "babyai-marl/goto-obj"])
def test_every_restorable_family_replays_and_forks(env_id):
    assert restorable(env_id)
    rng = np.random.default_rng(0)
    env = make(env_id, max_steps=8)
    observations, _ = env.reset(seed=2)
    joints = []
    for _ in range(6):
        if not env.agents:
            break
        joints.append({a: str(rng.choice(observations[a].legal_actions)) for a in env.agents})
        observations = env.step(joints[-1])[0]
    traj = record(make(env_id, max_steps=8), 2, joints)
    credit, _ = credit_at(make(env_id, max_steps=8), traj, 1, shapley=False)
    recorded = sum(sum(s.rewards.values()) / len(s.rewards) for s in traj.steps[1:])
    assert credit.values["recorded"] == pytest.approx(recorded)
