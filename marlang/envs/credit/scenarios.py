"""Benchmark envs that wrap one fixed scenario of a package env (level-based foraging, the
robotic warehouse): their common base, their ids with their scenarios, and the entry point
that builds one (an id fixes the agent count and the layout; the caller chooses the
observation mode, the step limit and whether rewards are shared). This module does not import
the packages, so the registry reads the ids without them.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

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

    def numeric_observation(self, agent: str) -> np.ndarray:
        return self._observations[self._index[agent]]

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


def make_scenario_env(
    env_class: type[ScenarioEnv],
    n_agents: int | None = None,
    *, scenario: Any, env_id: str,  # fixed by the id
    max_steps: int | None = None,
    observation_mode: str = "text",
    shared_reward: bool = False,
) -> ScenarioEnv:
    """Builds ``env_class(scenario, ...)`` for ``env_id``, whose agent count is the scenario's
    (``marlang.envs.credit.lbf.make_lbf`` and ``rware.make_rware`` fix ``env_class``)."""
    agents = scenario.agents
    check_agent_count(env_id, agents if n_agents is None else n_agents, (agents,))
    return env_class(
        scenario,
        observation_mode=observation_mode,
        max_steps=None if max_steps is None else check_max_steps(max_steps),
        shared_reward=shared_reward,
        env_id=env_id,
    )


# ------------------------------------------------------------------ the scenarios, by id

LBF_MAX_STEPS = 50
"""The package's registered episode length (level-based foraging)."""

RWARE_MAX_STEPS = 500
"""The package's registered episode length (the robotic warehouse)."""


@dataclass(frozen=True)
class LBFScenario:
    """One foraging scenario: grid size, agents, foods, sight (``None``: the whole grid), coop.

    Levels are the package's: agents 1 or 2, foods 1 up to the sum of the three lowest agent
    levels; with ``coop`` every food needs the summed level of (up to three of) the agents.
    """

    size: int
    players: int
    foods: int
    sight: int | None = None
    coop: bool = False

    @property
    def agents(self) -> int:
        """The agent count (``players``)."""
        return self.players

    @property
    def description(self) -> str:
        view = "whole grid in view" if self.sight is None else f"sight {self.sight}"
        mode = ", every food needs the team (coop)" if self.coop else ""
        return (
            f"Level-based foraging {self.size}x{self.size}, {self.players} agents, "
            f"{self.foods} foods, {view}{mode}; {LBF_MAX_STEPS} steps"
        )


LBF_SCENARIOS: Mapping[str, LBFScenario] = {
    "lbf/8x8-2p-2f-coop": LBFScenario(8, 2, 2, coop=True),
    "lbf/8x8-2p-2f-2s-coop": LBFScenario(8, 2, 2, sight=2, coop=True),
    "lbf/10x10-3p-3f": LBFScenario(10, 3, 3),
    "lbf/10x10-3p-3f-2s": LBFScenario(10, 3, 3, sight=2),
    "lbf/15x15-3p-5f": LBFScenario(15, 3, 5),
    "lbf/15x15-4p-3f": LBFScenario(15, 4, 3),
    "lbf/15x15-4p-5f": LBFScenario(15, 4, 5),
}
"""The LLM-MCA paper's LBF scenarios (Table 1), by marlang id."""


@dataclass(frozen=True)
class RWAREScenario:
    """One warehouse: shelf block rows and columns (the package's size names) and robots."""

    size: str
    shelf_rows: int
    shelf_columns: int
    agents: int

    @property
    def description(self) -> str:
        return (
            f"Robotic warehouse {self.size} ({self.shelf_rows}x{self.shelf_columns} shelf "
            f"blocks), {self.agents} robots, {self.agents} requests; "
            f"{RWARE_MAX_STEPS} steps"
        )


RWARE_SCENARIOS: Mapping[str, RWAREScenario] = {
    "rware/tiny-4ag": RWAREScenario("tiny", 1, 3, 4),
    "rware/small-4ag": RWAREScenario("small", 2, 3, 4),
    "rware/tiny-2ag": RWAREScenario("tiny", 1, 3, 2),
}
"""The LLM-MCA paper's warehouses (the package's ``rware-<size>-<n>ag-v2``), by marlang id."""
