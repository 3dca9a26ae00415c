"""Benchmark envs that wrap one fixed scenario of a package env (level-based foraging, the
robotic warehouse): their common base, and the registry factory of their ids (an id fixes the
agent count and the layout; the caller chooses the observation mode, the step limit and
whether rewards are shared).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Box

from marlang.envs.core.base import ScriptedTeam
from marlang.envs.core.numeric import (
    NumericTextEnv,
    StepOutcome,
    check_agent_count,
    check_max_steps,
)


class ScenarioEnv(NumericTextEnv):
    """A package env in one ``scenario`` (which names its agent count, ``scenario.agents``),
    each agent rewarded on its own or, with ``shared_reward``, with the team's sum (the
    package's rewards either way).

    Subclasses set ``default_max_steps`` (the package's episode length, used when
    ``max_steps`` is None) and ``default_env_id``, and build the package env in
    ``_open_package``."""

    default_max_steps: ClassVar[int]
    default_env_id: ClassVar[str]

    def __init__(
        self,
        scenario: Any,
        *,
        observation_mode: str = "text",
        max_steps: int | None = None,
        shared_reward: bool = False,
        env_id: str | None = None,
    ):
        if type(shared_reward) is not bool:
            raise ValueError(f"shared_reward must be True or False, got {shared_reward!r}")
        super().__init__(
            [f"agent_{i}" for i in range(scenario.agents)],
            observation_mode=observation_mode,
            max_steps=self.default_max_steps if max_steps is None else max_steps,
            env_id=self.default_env_id if env_id is None else env_id,
        )
        self.scenario = scenario
        self.shared_reward = shared_reward
        self._index = {agent: i for i, agent in enumerate(self.possible_agents)}
        # the package's last per-agent observations (in agent order); subclasses set them on
        # reset and step
        self._observations: tuple[np.ndarray, ...] = ()
        self._open_package()

    @abstractmethod
    def _open_package(self) -> None:
        """Create the package env for ``self.scenario`` and set ``_observation_box``,
        ``_state_box`` and ``_mission``."""

    def numeric_observation_space(self, agent: str) -> Box:
        return self._observation_box

    def numeric_observation(self, agent: str) -> np.ndarray:
        return self._observations[self._index[agent]]

    @property
    def state_space(self) -> Box:
        return self._state_box

    @property
    def mission(self) -> str:
        return self._mission

    def _outcome(self, package_rewards: Any, **outcome: Any) -> StepOutcome:
        """The step's ``StepOutcome`` from the package's per-agent rewards (in agent order);
        every info gets ``team_reward``."""
        team = float(sum(package_rewards))
        own = dict(zip(self.possible_agents, (float(r) for r in package_rewards), strict=True))
        return StepOutcome(
            rewards=dict.fromkeys(own, team) if self.shared_reward else own,
            infos={agent: {"team_reward": team} for agent in own},
            **outcome,
        )


class ScenarioTeam(ScriptedTeam):
    """Base of a ``ScenarioEnv``'s reference team: it reads the env's true state and draws
    its random moves from its own generator (``seed``)."""

    def __init__(self, env: Any, seed: int = 0):
        self._rng = np.random.default_rng(seed)
        super().__init__(env)


@dataclass(frozen=True)
class ScenarioFactory:
    """Builds ``env_class(scenario, ...)`` for ``env_id``, with the scenario's agent count."""

    env_id: str
    scenario: Any
    env_class: type[ScenarioEnv]

    def __call__(
        self,
        n_agents: int | None = None,
        *,
        max_steps: int | None = None,
        observation_mode: str = "text",
        shared_reward: bool = False,
    ) -> ScenarioEnv:
        agents = self.scenario.agents
        check_agent_count(self.env_id, agents if n_agents is None else n_agents, (agents,))
        return self.env_class(
            self.scenario,
            observation_mode=observation_mode,
            max_steps=None if max_steps is None else check_max_steps(max_steps),
            shared_reward=shared_reward,
            env_id=self.env_id,
        )


def find_scenario(env_id: str, scenarios: Mapping[str, Any], family: str) -> Any:
    """The scenario of ``env_id``; a ``ValueError`` naming ``family``'s valid ids if unknown."""
    if env_id not in scenarios:
        raise ValueError(f"unknown {family} id {env_id!r}; valid ids: {sorted(scenarios)}")
    return scenarios[env_id]
