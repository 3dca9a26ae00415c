"""The credit oracle: counterfactual credit of each agent's recorded action, measured by playing
the episode on from a restored state.

An episode is restored by replaying its recorded joint actions from its recorded env seed, every
observation and reward checked against the record (a mismatch is refused: the env is not
deterministic from its seed); at a graded step t the env is forked (the deep copy of
``marlang.methods.neural.critics.difference.fork``, the difference critic's own mechanism) once
per counterfactual. A counterfactual replaces the step-t actions of some agents, the others'
recorded actions fixed, and the episode is played on for at most the recorded episode's
remaining steps (or ``horizon``) by a stated rollout policy:

- ``recorded``: each agent plays its recorded action of that step where it is legal, else its
  default action;
- ``scripted``: the env's scripted team (started afresh at the fork);
- ``random``: uniform over the legal actions, ``samples`` rollouts (seeded; the same seeds for
  every counterfactual of a step, so their differences are paired).

V(joint) is the team return (sum over the steps played of the mean reward across agents) from
step t on. The difference credit of agent i is D_i(t) = V(recorded) - mean over i's alternatives
a of V(recorded with a_i = a); the Shapley value averages i's marginal contribution
v(S + i) - v(S) over coalitions S, where members play their recorded action and the others
their default action (v(S) is a mean over the others' legal actions where they have no no-op).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marlang.methods.neural.critics.difference import env_id_matches, fork, noop_name, team_reward
from marlang.types import Trajectory

ROLLOUTS: tuple[str, ...] = ("recorded", "scripted", "random")
ALTERNATIVES: tuple[str, ...] = ("legal", "default")
RESTORABLE_ENVS: tuple[str, ...] = ("matrix/*", "lbf/*", "rware/*", "gridworld/*", "spaceworld", "babyai/*",
                                    "babyai-marl/*", "overcooked/*")
"""Env ids whose episodes replay exactly from their seed and whose state forks (deep copies)."""
MAX_SHAPLEY_AGENTS = 4
"""Shapley values need 2^n coalitions per step: computed for teams of at most this many agents."""
MAX_BASELINE_JOINTS = 64
"""v(S) of a coalition whose non-members have no no-op averages over at most this many of their
joint actions (drawn, seeded, where there are more)."""
REWARD_TOLERANCE = 1e-6


class ReplayMismatch(ValueError):
    """Replaying an episode's recorded actions from its seed did not reproduce its record."""


def restorable(env_id: str) -> bool:
    """Whether the oracle can restore episodes of ``env_id``."""
    return env_id_matches(env_id, RESTORABLE_ENVS)


@dataclass
class Cost:
    """What the oracle played: env steps (counterfactual and replay) and forks."""

    env_steps: int = 0
    forks: int = 0


@dataclass(frozen=True)
class Rollout:
    """How a counterfactual is played on after the graded step."""

    policy: str = "recorded"
    samples: int = 1
    seed: int = 0
    horizon: int | None = None
    """Steps played after the graded one at most (None: to the recorded episode's end)."""

    def __post_init__(self) -> None:
        if self.policy not in ROLLOUTS:
            raise ValueError(f"--rollout {self.policy!r}: valid choices are {', '.join(ROLLOUTS)}")
        if self.samples < 1:
            raise ValueError(f"--samples must be at least 1, not {self.samples}")

    @property
    def draws(self) -> int:
        """Rollouts per counterfactual: ``samples`` for the random policy, one otherwise."""
        return self.samples if self.policy == "random" else 1


@dataclass
class StepCredit:
    """The oracle at one step: each agent's difference credit and Shapley value, and the values
    they came from."""

    t: int
    actions: dict[str, str]
    difference: dict[str, float]
    alternatives: dict[str, list[str]]
    values: dict[str, float] = field(default_factory=dict)
    """V of each counterfactual joint action played (``a=x|b=y``) and of the recorded one."""
    shapley: dict[str, float] | None = None
    coalitions: dict[str, float] | None = None
    """v(S) per coalition (its members joined by ``+``, ``{}`` for none)."""


def _same_observation(replayed: Any, recorded: Any) -> bool:
    return replayed.text == recorded.text and list(replayed.legal_actions) == list(recorded.legal_actions)


def replay(env: Any, traj: Trajectory, cost: Cost) -> Iterator[tuple[int, dict[str, Any]]]:
    """Replay ``traj`` in ``env`` from its seed; before each recorded step t, yield (t, the
    observations then) with ``env`` in that step's state. ``ReplayMismatch`` (one line) as soon
    as an observation or a reward differs from the record."""
    observations, _ = env.reset(seed=traj.seed)
    for t, step in enumerate(traj.steps):
        for agent, seen in step.observations.items():
            if agent not in observations or not _same_observation(observations[agent], seen):
                raise ReplayMismatch(f"{traj.env_id} episode {traj.episode}: replaying its recorded actions from "
                                     f"seed {traj.seed} gives another observation of {agent} at step {t} than "
                                     "the record; the env does not restore this episode, so no counterfactual "
                                     "of it can be trusted")
        yield t, observations
        observations, rewards, *_ = env.step({a: d.action for a, d in step.decisions.items()})
        cost.env_steps += 1
        for agent, reward in step.rewards.items():
            if abs(float(rewards.get(agent, math.nan)) - float(reward)) > REWARD_TOLERANCE:
                raise ReplayMismatch(f"{traj.env_id} episode {traj.episode}: replaying step {t} gives {agent} "
                                     f"reward {rewards.get(agent)} where the record has {reward}; the env does "
                                     "not restore this episode, so no counterfactual of it can be trusted")


def _fallback(legal: Sequence[str]) -> str:
    return noop_name(legal) or legal[0]


class Branches:
    """The counterfactuals of one step: ``value(joint)`` plays ``joint`` at the step from a fork
    of ``env`` and then the rollout policy, memoised per joint action."""

    def __init__(self, env: Any, traj: Trajectory, t: int, rollout: Rollout, cost: Cost) -> None:
        self.env, self.traj, self.t, self.rollout, self.cost = env, traj, t, rollout, cost
        remaining = len(traj.steps) - t - 1
        self.later = traj.steps[t + 1: t + 1 + (remaining if rollout.horizon is None
                                                 else min(remaining, rollout.horizon))]
        self.values: dict[tuple[tuple[str, str], ...], float] = {}

    def value(self, joint: Mapping[str, str], *, steps: int | None = None) -> float:
        """V(joint): the mean team return over the rollout's draws (``steps``: at most that many
        steps after this one, e.g. 0 for the one-step team reward)."""
        key = tuple(sorted(joint.items()))
        if steps is None and key in self.values:
            return self.values[key]
        later = self.later if steps is None else self.later[:steps]
        draws = self.rollout.draws if later else 1
        total = sum(self._play(dict(joint), later, k) for k in range(draws)) / draws
        if steps is None:
            self.values[key] = total
        return total

    def _play(self, joint: dict[str, str], later: Sequence[Any], draw: int) -> float:
        env = fork(self.env)
        self.cost.forks += 1
        rng = np.random.default_rng([self.rollout.seed, self.traj.episode, self.t, draw])
        team = None
        observations, rewards, terminations, truncations, _ = env.step(joint)
        self.cost.env_steps += 1
        total = team_reward(rewards)
        for step in later:
            if not env.agents or any(terminations.values()) or any(truncations.values()):
                break
            if self.rollout.policy == "scripted":
                if team is None:
                    team = env.scripted_team()
                    team.reset()
                actions = team.act(observations)
            elif self.rollout.policy == "random":
                actions = {a: str(rng.choice(observations[a].legal_actions)) for a in env.agents}
            else:
                actions = {}
                for a in env.agents:
                    legal = observations[a].legal_actions
                    recorded = step.decisions[a].action if a in step.decisions else None
                    actions[a] = recorded if recorded in legal else _fallback(legal)
            observations, rewards, terminations, truncations, _ = env.step(actions)
            self.cost.env_steps += 1
            total += team_reward(rewards)
        return total


def alternatives_of(legal: Sequence[str], taken: str, mode: str) -> list[str]:
    """The actions an agent's credit compares its recorded one with: every other legal action
    (``legal``), or its no-op where it has one and did not take it (``default``; without a
    no-op, every other legal action)."""
    if mode == "default" and (noop := noop_name(legal)) is not None:
        return [] if noop == taken else [noop]
    return [a for a in legal if a != taken]


def _key(joint: Mapping[str, str], changed: Sequence[str]) -> str:
    return "|".join(f"{a}={joint[a]}" for a in changed) or "recorded"


def step_credit(env: Any, traj: Trajectory, t: int, observations: Mapping[str, Any], rollout: Rollout,
                cost: Cost, *, alternatives: str = "legal", shapley: bool = True,
                seed: int = 0) -> StepCredit:
    """The oracle at step ``t`` of ``traj``, ``env`` in that step's state (see the module
    docstring); Shapley values where ``shapley`` and the team has at most ``MAX_SHAPLEY_AGENTS``."""
    step = traj.steps[t]
    recorded = {a: d.action for a, d in step.decisions.items()}
    agents = list(recorded)
    branches = Branches(env, traj, t, rollout, cost)
    base = branches.value(recorded)
    out = StepCredit(t, recorded, {}, {}, values={"recorded": base})
    for agent in agents:
        alts = alternatives_of(observations[agent].legal_actions, recorded[agent], alternatives)
        out.alternatives[agent] = alts
        values = []
        for alt in alts:
            joint = {**recorded, agent: alt}
            values.append(branches.value(joint))
            out.values[_key(joint, [agent])] = values[-1]
        out.difference[agent] = base - sum(values) / len(values) if values else 0.0
    if shapley and len(agents) <= MAX_SHAPLEY_AGENTS:
        v = coalition_values(branches, recorded, {a: observations[a].legal_actions for a in agents}, seed)
        out.coalitions = {"+".join(sorted(s)) or "{}": value for s, value in v.items()}
        out.shapley = shapley_values(agents, v)
    return out


def coalition_values(branches: Branches, recorded: Mapping[str, str], legal: Mapping[str, Sequence[str]],
                     seed: int) -> dict[frozenset[str], float]:
    """v(S) for every coalition S: members play their recorded action, the others their no-op,
    or (an agent without one) each of its legal actions, v(S) being the mean over those joints."""
    agents = list(recorded)
    out: dict[frozenset[str], float] = {}
    for size in range(len(agents) + 1):
        for members in itertools.combinations(agents, size):
            others = [a for a in agents if a not in members]
            choices = [[noop] if (noop := noop_name(legal[a])) else list(legal[a]) for a in others]
            joints = list(itertools.product(*choices))
            if len(joints) > MAX_BASELINE_JOINTS:
                rng = np.random.default_rng([seed, branches.traj.episode, branches.t, size])
                joints = [joints[int(k)] for k in rng.choice(len(joints), MAX_BASELINE_JOINTS, replace=False)]
            values = [branches.value({**recorded, **dict(zip(others, j, strict=True))}) for j in joints]
            out[frozenset(members)] = sum(values) / len(values)
    return out


def shapley_values(agents: Sequence[str], v: Mapping[frozenset[str], float]) -> dict[str, float]:
    """Each agent's Shapley value of the game ``v`` (every coalition's value): the mean of its
    marginal contribution over orders of arrival; they sum to v(all) - v(none)."""
    n = len(agents)
    out = {}
    for agent in agents:
        rest = [a for a in agents if a != agent]
        total = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for members in itertools.combinations(rest, size):
                s = frozenset(members)
                total += weight * (v[s | {agent}] - v[s])
        out[agent] = total
    return out


def one_step_difference(env: Any, traj: Trajectory, t: int, cost: Cost) -> dict[str, float]:
    """The difference critic's credit at step ``t`` (``learning.critic: difference``): the team
    reward of the recorded step minus the mean team reward had the agent taken its no-op (where
    its actions have one), else each of its actions, the others' actions fixed; one step only."""
    step = traj.steps[t]
    recorded = {a: d.action for a, d in step.decisions.items()}
    branches = Branches(env, traj, t, Rollout(), cost)
    real = branches.value(recorded, steps=0)
    out = {}
    for agent, taken in recorded.items():
        names = env.action_names(agent) if callable(getattr(env, "action_names", None)) \
            else step.observations[agent].legal_actions
        noop = noop_name(names)
        alts = [noop] if noop is not None else list(names)
        values = [real if alt == taken else branches.value({**recorded, agent: alt}, steps=0) for alt in alts]
        out[agent] = real - sum(values) / len(values)
    return out
