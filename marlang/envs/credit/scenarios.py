"""Registry factories for benchmark ids that each name one fixed scenario of a package env
(level-based foraging, the robotic warehouse): the id fixes the agent count and the layout,
the caller chooses the observation mode, the step limit and whether rewards are shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marlang.envs.core.numeric import NumericTextEnv, check_agent_count, check_max_steps


@dataclass(frozen=True)
class ScenarioFactory:
    """Builds ``env_class(scenario, ...)`` for ``env_id``, with ``agents`` agents."""

    env_id: str
    scenario: Any
    env_class: type[NumericTextEnv]
    agents: int
    default_max_steps: int

    def __call__(
        self,
        n_agents: int | None = None,
        *,
        max_steps: int | None = None,
        observation_mode: str = "text",
        shared_reward: bool = False,
    ) -> NumericTextEnv:
        check_agent_count(self.env_id, self.agents if n_agents is None else n_agents, (self.agents,))
        return self.env_class(
            self.scenario,
            observation_mode=observation_mode,
            max_steps=self.default_max_steps if max_steps is None else check_max_steps(max_steps),
            shared_reward=shared_reward,
            env_id=self.env_id,
        )


def find_scenario(env_id: str, scenarios: Mapping[str, Any], family: str) -> Any:
    """The scenario of ``env_id``; a ``ValueError`` naming ``family``'s valid ids if unknown."""
    if env_id not in scenarios:
        raise ValueError(f"unknown {family} id {env_id!r}; valid ids: {sorted(scenarios)}")
    return scenarios[env_id]
