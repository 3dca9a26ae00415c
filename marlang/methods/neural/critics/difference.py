"""Counterfactual difference rewards from the env (``learning.critic: difference``), the
non-LLM reference credit: agent i's reward is the team reward minus the team reward had i
taken its default action, the others' actions unchanged, from the same state.

The counterfactual steps run at collection time on forks of the env (deep copies that share
its immutable layout and copy its random state, so a fork given the real joint action
replays the real step). The default action is the env's no-op where it has one ("stay",
"wait"); otherwise the counterfactual team reward is the mean over all of i's actions.
``marlang credit-check`` computes this credit on recorded episodes with the same forks, beside
its oracle (``marlang.evaluation.creditcheck.oracle``), which plays each counterfactual on to the end.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase

DIFFERENCE_KEY = "difference_reward"
NOOP_NAMES: tuple[str, ...] = ("stay", "wait", "noop", "no-op", "none")
DIFFERENCE_ENVS: tuple[str, ...] = ("matrix/climbing", "gridworld/*", "lbf/*", "spaceworld")
"""Env ids whose state forks cleanly and cheaply (one deep copy per agent per step)."""


def env_id_matches(env_id: str, patterns: Sequence[str]) -> bool:
    """Whether ``env_id`` is one of ``patterns`` (an id, or a family ``"name/*"``)."""
    return any(env_id == p or (p.endswith("/*") and env_id.startswith(p[:-1])) for p in patterns)


def supports_difference(env_id: str) -> bool:
    """Whether ``learning.critic: difference`` can fork this env."""
    return env_id_matches(env_id, DIFFERENCE_ENVS)


def fork(env: Any) -> Any:
    """A deep copy of ``env`` that shares its immutable attributes (frozen dataclasses such as
    grid layouts, read-only mappings), which need no copy and some of which cannot be copied."""
    memo: dict[int, Any] = {}
    for value in vars(env).values():
        # An instance only: a dataclass class is a dataclass too, and deepcopy keeps classes as they are.
        # `__dataclass_params__` is dataclasses' own record of frozen=, which typeshed leaves out.
        frozen = (dataclasses.is_dataclass(value) and not isinstance(value, type)
                  and value.__dataclass_params__.frozen)  # type: ignore[attr-defined]
        if frozen or isinstance(value, MappingProxyType):
            memo[id(value)] = value
    return copy.deepcopy(env, memo)


def noop_name(names: Sequence[str]) -> str | None:
    """The no-op among ``names`` (``stay``, ``wait``, ...; the first there is), or None."""
    return next((name for name in names if name.lower() in NOOP_NAMES), None)


def default_action(env: Any, agent: str) -> int | None:
    """Index of the agent's no-op action, or None when it has none."""
    names = list(env.action_names(agent))
    noop = noop_name(names)
    return None if noop is None else names.index(noop)


def team_reward(rewards: Mapping[str, float]) -> float:
    """The team reward of one step: the mean of the agents' rewards (shared-reward envs give
    each agent the team reward, so this is that reward)."""
    return sum(float(r) for r in rewards.values()) / max(len(rewards), 1)


class CounterfactualObserver:
    """Computes each agent's difference reward at every step (a ``StepObserver``): before the
    real step, forks of the env take the counterfactual joint actions; after it, the real team
    reward minus the counterfactual one goes into the info as ``difference_reward``."""

    def __init__(self) -> None:
        self._counterfactual: dict[str, list[float | None]] = {}

    def on_reset(self, env: Any) -> dict[str, dict[str, float]]:
        self._counterfactual = {}
        return {agent: {DIFFERENCE_KEY: 0.0} for agent in env.possible_agents}

    def before_step(self, env: Any, actions: Mapping[str, int]) -> None:
        self._counterfactual = {}
        for agent in actions:
            noop = default_action(env, agent)
            alternatives = [noop] if noop is not None else range(env.action_space(agent).n)
            values: list[float | None] = []
            for action in alternatives:
                if action == actions[agent]:
                    values.append(None)  # the real step: filled in after it
                    continue
                twin = fork(env)
                rewards = twin.step({**actions, agent: action})[1]
                values.append(team_reward(rewards))
            self._counterfactual[agent] = values

    def after_step(self, env: Any, actions: Mapping[str, int],
                   rewards: Mapping[str, float]) -> dict[str, dict[str, float]]:
        real = team_reward(rewards)
        out = {}
        for agent in env.possible_agents:
            values = [real if v is None else v for v in self._counterfactual.get(agent, [real])]
            out[agent] = {DIFFERENCE_KEY: real - sum(values) / len(values)}
        return out


class DifferenceCritic:
    """``learning.critic: difference``: each agent trains on its difference reward alone."""

    name = "difference"

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self.last: dict[str, Any] = {}

    def observers(self) -> list[Any]:
        return [CounterfactualObserver()]

    def __call__(self, batch: TensorDictBase) -> torch.Tensor:
        credit = batch.get(("next", "agents", "info", DIFFERENCE_KEY))
        self.last = {"credit_mean": float(credit.mean())}
        return credit

    def metrics(self) -> dict[str, Any]:
        return dict(self.last)

    def manifest(self) -> dict[str, Any]:
        return {"critic": "difference", "default_action": "the env's no-op, else the mean over actions"}
