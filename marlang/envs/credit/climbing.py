"""The climbing game (Claus & Boutilier, 1998) as a repeated two-agent matrix game.

Two agents pick one of three actions each step for 25 steps and share the payoff of the joint
action; the optimum (11) sits next to a -30 penalty, which pulls learners toward safer equilibria.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Box

from marlang.envs.core.base import ScriptedTeam, env_metadata
from marlang.envs.core.numeric import (
    NumericTextEnv,
    StepOutcome,
    check_agent_count,
    check_max_steps,
    rank_sign,
)

CLIMBING_PAYOFF = np.array([[11, -30, 0], [-30, 7, 6], [0, 0, 5]], dtype=np.float32)
"""Common payoff: row = agent_0's action, column = agent_1's action."""
CLIMBING_ACTIONS: tuple[str, ...] = ("action A", "action B", "action C")
CLIMBING_STEPS = 25
"""Steps per episode in the LLM-MCA paper's setup."""


def optimal_joint_action(payoff: np.ndarray) -> tuple[int, int]:
    """The (row, column) with the highest common payoff (the first one if several tie)."""
    row, column = np.unravel_index(int(np.argmax(payoff)), payoff.shape)
    return int(row), int(column)


def pure_nash_equilibria(payoff: np.ndarray) -> set[tuple[int, int]]:
    """Joint actions where neither agent gains by changing its own action alone."""
    best_row = payoff.max(axis=0)
    best_column = payoff.max(axis=1)
    return {
        (int(r), int(c))
        for r in range(payoff.shape[0])
        for c in range(payoff.shape[1])
        if payoff[r, c] >= best_row[c] and payoff[r, c] >= best_column[r]
    }


@dataclass(frozen=True)
class ClimbingSnapshot:
    """The climbing game's state: the step count and the last joint action (if any)."""

    step: int
    last: tuple[int, int] | None


class ClimbingGameEnv(NumericTextEnv):
    """The climbing game: ``agent_0`` picks the row, ``agent_1`` the column; both get the payoff.

    Numeric observations are constant (the agent's role one-hot: ``[1, 0]`` for the row player,
    ``[0, 1]`` for the column player); the global state is both observations, concatenated.
    The ego text shows the payoff table from the agent's side and the previous round.
    """

    all_actions: ClassVar[tuple[str, ...]] = CLIMBING_ACTIONS
    metadata: ClassVar[dict[str, Any]] = env_metadata("climbing_game_v0")
    world_description: ClassVar[str] = "a repeated matrix game with one common payoff"

    def __init__(
        self,
        *,
        observation_mode: str = "text",
        max_steps: int = CLIMBING_STEPS,
        payoff: np.ndarray | None = None,
        env_id: str = "matrix/climbing",
    ):
        super().__init__(
            ["agent_0", "agent_1"],
            observation_mode=observation_mode,
            max_steps=max_steps,
            env_id=env_id,
        )
        self.payoff = np.array(CLIMBING_PAYOFF if payoff is None else payoff, dtype=np.float32)
        if self.payoff.shape != (3, 3):
            raise ValueError(f"payoff must be a 3x3 matrix, got shape {self.payoff.shape}")
        self._last: tuple[int, int] | None = None
        self._observations = {
            "agent_0": np.array([1.0, 0.0], dtype=np.float32),
            "agent_1": np.array([0.0, 1.0], dtype=np.float32),
        }
        self._observation_box = Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self._state_box = Box(0.0, 1.0, shape=(4,), dtype=np.float32)

    # ----------------------------------------------------------------- base API

    def numeric_observation(self, agent: str) -> np.ndarray:
        return self._observations[agent].copy()

    def state(self) -> np.ndarray:
        return np.concatenate([self._observations["agent_0"], self._observations["agent_1"]])

    @property
    def mission(self) -> str:
        return (
            f"Each round you and your teammate each choose an action; the team earns the common "
            f"payoff of the pair. Earn as much as possible over {self.max_steps} rounds."
        )

    def ego_text(self, agent: str) -> str:
        mine = 0 if agent == "agent_0" else 1
        other = "agent_1" if mine == 0 else "agent_0"
        table = self.payoff if mine == 0 else self.payoff.T
        letters = "ABC"
        lines = [
            f"You are {agent}; your teammate is {other}. Both of you choose A, B or C at once.",
            "Common payoff (your choice, teammate's choice):",
        ]
        for i in range(3):
            cells = ", ".join(f"teammate {letters[j]}: {table[i, j]:g}" for j in range(3))
            lines.append(f"  you {letters[i]}: {cells}")
        if self._last is None:
            lines.append("No round has been played yet.")
        else:
            you, them = self._last[mine], self._last[1 - mine]
            lines.append(
                f"Last round you chose {letters[you]}, your teammate chose {letters[them]}, "
                f"and the team earned {self.payoff[self._last]:g}."
            )
        lines.append(f"{self.step_count} of {self.max_steps} rounds played.")
        return "\n".join(lines)

    def observation_data(self, agent: str) -> dict[str, Any]:
        mine = 0 if agent == "agent_0" else 1
        last = self._last
        return {
            "role": "row" if mine == 0 else "column",
            "last_own_action": None if last is None else CLIMBING_ACTIONS[last[mine]],
            "last_teammate_action": None if last is None else CLIMBING_ACTIONS[last[1 - mine]],
            "last_payoff": None if last is None else float(self.payoff[last]),
            "step": self.step_count,
        }

    def state_text(self) -> str:
        if self._last is None:
            return f"round {self.step_count} of {self.max_steps}; no round played yet"
        a, b = self._last
        return (f"round {self.step_count} of {self.max_steps}; last round agent_0 chose "
                f"{CLIMBING_ACTIONS[a]}, agent_1 chose {CLIMBING_ACTIONS[b]}, payoff {self.payoff[a, b]:g}")

    def rank_snapshot(self) -> ClimbingSnapshot:
        return ClimbingSnapshot(self.step_count, self._last)

    def rank_states(self, agent: str, a: ClimbingSnapshot, b: ClimbingSnapshot) -> int:
        """Higher last payoff ranks higher; on a tie, the agent having played its part of the
        optimal joint action ranks higher (no round played ranks below any round)."""
        return rank_sign(self._score(agent, b), self._score(agent, a))

    def scripted_team(self) -> ClimbingOptimalTeam:
        return ClimbingOptimalTeam(self)

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self._last = None

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        joint = (actions["agent_0"], actions["agent_1"])
        self._last = joint
        reward = float(self.payoff[joint])
        return StepOutcome(
            rewards={"agent_0": reward, "agent_1": reward},
            infos={agent: {"joint_action": joint} for agent in self.possible_agents},
        )

    def _score(self, agent: str, snapshot: ClimbingSnapshot) -> tuple[float, int]:
        if snapshot.last is None:
            return (-np.inf, 0)
        mine = 0 if agent == "agent_0" else 1
        optimum = optimal_joint_action(self.payoff)
        return (float(self.payoff[snapshot.last]), int(snapshot.last[mine] == optimum[mine]))


class ClimbingOptimalTeam(ScriptedTeam):
    """Reference team: both agents always play their part of the optimal joint action (11 per
    step, 275 per 25-step episode)."""

    env: ClimbingGameEnv

    def _joint_action(self, observations: Any) -> dict[str, str]:
        row, column = optimal_joint_action(self.env.payoff)
        choice = {"agent_0": CLIMBING_ACTIONS[row], "agent_1": CLIMBING_ACTIONS[column]}
        return {agent: choice[agent] for agent in self.env.agents}


def make_climbing(
    n_agents: int = 2,
    *,
    max_steps: int | None = None,
    observation_mode: str = "text",
) -> ClimbingGameEnv:
    """Registry factory for ``matrix/climbing`` (two agents; 25 steps unless ``max_steps``)."""
    check_agent_count("matrix/climbing", n_agents, (2,))
    steps = CLIMBING_STEPS if max_steps is None else check_max_steps(max_steps)
    return ClimbingGameEnv(observation_mode=observation_mode, max_steps=steps)
