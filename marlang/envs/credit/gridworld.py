"""``FacingGridEnv``, the base of the credit-assignment grid worlds (Two-Switch, Victim-Rubble,
Spaceworld) where agents face what they act on, and their registry factory; the grid mechanics
they share (layouts, moves, shortest paths) are in ``grid`` and importable from here too.
``marlang.envs.registry`` registers the three envs (imported lazily).
"""

from __future__ import annotations

import functools
import logging
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Box

from marlang.envs.core.numeric import NumericTextEnv, StepOutcome, check_agent_count, rank_sign
from marlang.envs.credit.grid import (
    DIRECTION_NAMES,
    DIRECTIONS,
    MOVE_ACTIONS,
    Cell,
    FacingState,
    GridLayout,
    MoveIntent,
    bfs_distances,
    check_snapshots,
    choose_joint_moves,
    collisions,
    direction_between,
    facing_cost_to_go,
    facing_distances_from,
    facing_goals,
    format_cell,
    parse_cell,
    resolve_moves,
    step_cell,
    steps_phrase,
)

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- facing worlds


@dataclass(frozen=True)
class GridEvent:
    """A rewarded event: each one gives every agent +1 team reward and its actor +1 individual."""

    agent: str
    description: str


DEFAULT_MAX_STEPS = 100
"""Step limit of the LCA grid worlds."""


class FeatureSpaces:
    """The spaces of an env whose numeric observation is ``numeric_size`` values in [-1, 1] and
    whose state ``state_size`` values in [0, 1] (made once; ``NumericTextEnv`` serves them)."""

    numeric_size: ClassVar[int]
    state_size: ClassVar[int]

    @functools.cached_property
    def _feature_box(self) -> Box:
        return numeric_box(self.numeric_size)

    @functools.cached_property
    def _feature_state_box(self) -> Box:
        return Box(low=0.0, high=1.0, shape=(self.state_size,), dtype=np.float32)

    def numeric_observation_space(self, agent: str) -> Box:
        return self._feature_box

    @property
    def state_space(self) -> Box:
        return self._feature_state_box


class RankedByKey:
    """``rank_states`` of an env whose snapshots are ``snapshot_type`` and whose reference
    heuristic is a per-agent rank key of a snapshot (``_rank_key``: the larger, the better)."""

    snapshot_type: ClassVar[type]
    agent_index: Callable[[str], int]

    @abstractmethod
    def _rank_key(self, snapshot: Any, index: int) -> Any:
        """Agent ``index``'s rank key of ``snapshot``."""

    def rank_states(self, agent: str, a: Any, b: Any) -> int:
        """+1 if ``b`` is better than ``a`` for ``agent``, -1 if worse, 0 if tied (by
        ``_rank_key``); a ``TypeError`` unless both are ``snapshot_type``."""
        index = self.agent_index(agent)
        check_snapshots(self.snapshot_type, a=a, b=b)
        return rank_sign(self._rank_key(b, index), self._rank_key(a, index))


class FacingGridEnv(NumericTextEnv):
    """Base of the LCA grid worlds: agents move up/down/left/right, face the way they last
    tried to move (bumping into a wall or object turns without moving) and act on the cell
    they face with their interaction action (``toggle``, ``heal``, ``clear``).

    Actions (``Discrete(6)``): 0 stay, 1 move up, 2 move down, 3 move left, 4 move right,
    5 the agent's interaction. Interactions are valid only when facing something they change
    (``action_mask``); an invalid one does nothing. Within a step, interactions happen first
    (from where the agents stood), then moves (``resolve_moves``: no shared cells, no swaps).

    Reward of each agent per step: +1 per ``GridEvent`` of the step (the sparse team reward of
    LCA), plus, with ``individual_rewards``, +1 per event it caused itself (LCA's "team plus
    individual" baseline), minus ``1 / max_steps`` when ``step_penalty`` is on (an episode of
    ``n`` steps pays ``n / max_steps`` in all, LCA's ``-n / n_max``). Infos: ``team_reward``,
    ``individual_reward``, ``step_penalty``, ``events`` (descriptions), ``blocked`` (a move
    that did not happen), ``no_effect`` (an interaction that changed nothing).
    """

    colors: ClassVar[tuple[str, ...]] = ("green", "orange")
    layout: ClassVar[GridLayout]
    """The world's cells and rooms."""
    interactions: ClassVar[tuple[str, ...]]
    """Each agent's interaction action (one per agent: their number is the agent count)."""
    default_env_id: ClassVar[str]

    def __init__(
        self,
        *,
        observation_mode: str = "text",
        max_steps: int = DEFAULT_MAX_STEPS,
        step_penalty: bool = True,
        individual_rewards: bool = False,
        render_mode: str | None = None,
        env_id: str | None = None,
    ):
        agents = [f"agent_{i}" for i in range(len(self.interactions))]
        super().__init__(
            agents,
            observation_mode=observation_mode,
            max_steps=max_steps,
            env_id=env_id or self.default_env_id,
            render_mode=render_mode,
        )
        for name, value in (
            ("step_penalty", step_penalty),
            ("individual_rewards", individual_rewards),
        ):
            if not isinstance(value, bool):
                # A config value: every bad one is a ValueError across marlang.
                raise ValueError(f"{name} must be True or False, got {value!r}")  # noqa: TRY004
        self.step_penalty = step_penalty
        self.individual_rewards = individual_rewards
        self._action_lists = {
            agent: [*MOVE_ACTIONS, interaction]
            for agent, interaction in zip(agents, self.interactions, strict=True)
        }
        self._rng = np.random.default_rng()
        self.positions: list[Cell] = []
        self.facings: list[str] = []
        self._clear_world()

    # ----------------------------------------------------------------- subclass hooks

    @abstractmethod
    def _clear_world(self) -> None:
        """Set the world's own state (switches, victims, ...) to that of a new episode."""

    @abstractmethod
    def passable(self, cell: Cell) -> bool:
        """Whether an agent may step onto ``cell`` now (ignoring other agents)."""

    @abstractmethod
    def _can_interact(self, index: int) -> bool:
        """Whether agent ``index``'s interaction would change the cell it faces now."""

    @abstractmethod
    def _interact(self, index: int) -> list[GridEvent]:
        """Carry out agent ``index``'s (valid) interaction; the rewarded events it caused."""

    def _after_moves(self) -> list[GridEvent]:
        """Events caused by where agents now stand (reaching a goal)."""
        return []

    @abstractmethod
    def _task_done(self) -> bool:
        """Whether the team finished the task (the episode then terminates with success)."""

    @abstractmethod
    def _world_flags(self) -> list[float]:
        """The world's own state (switches triggered, victims healed, ...) as floats."""

    @abstractmethod
    def _world_features(self, index: int) -> list[float]:
        """What agent ``index``'s numeric observation holds of the world's objects (after its
        own and its teammates' features, before the time)."""

    # ----------------------------------------------------------------- shared mechanics

    def action_names(self, agent: str) -> list[str]:
        return self._action_lists[agent]

    def agent_index(self, agent: str) -> int:
        if agent not in self.possible_agents:
            raise ValueError(f"unknown agent {agent!r}; agents: {self.possible_agents}")
        return self.possible_agents.index(agent)

    def facing_cell(self, index: int) -> Cell:
        return step_cell(self.positions[index], self.facings[index])

    def action_mask(self, agent: str) -> np.ndarray:
        mask = np.ones(len(MOVE_ACTIONS) + 1, dtype=np.int8)
        mask[-1] = int(self._started and self._can_interact(self.agent_index(agent)))
        return mask

    def _place_agents(
        self, cells: Sequence[Cell], options: Mapping[str, Any] | None, free: Sequence[Cell]
    ) -> None:
        """Agents at ``options["agent_positions"]``/``["agent_facings"]`` when given (checked
        against ``free`` cells), else at distinct random ``cells`` facing random ways."""
        n = len(self.possible_agents)
        options = options or {}
        given = options.get("agent_positions")
        if given is None:
            picks = self._rng.choice(len(cells), size=n, replace=False)
            self.positions = [cells[int(i)] for i in picks]
        else:
            positions = [parse_cell(cell, "agent_positions") for cell in given]
            if len(positions) != n or len(set(positions)) != n:
                raise ValueError(f"agent_positions must be {n} distinct cells, got {given!r}")
            for cell in positions:
                if cell not in free:
                    raise ValueError(f"agent_positions: {cell} is not a free floor cell")
            self.positions = positions
        facings = options.get("agent_facings")
        if facings is None:
            self.facings = [DIRECTION_NAMES[int(i)] for i in self._rng.integers(4, size=n)]
        else:
            if len(facings) != n or any(f not in DIRECTIONS for f in facings):
                raise ValueError(
                    f"agent_facings must be {n} of {list(DIRECTION_NAMES)}, got {facings!r}"
                )
            self.facings = list(facings)

    def _seed_rng(self, seed: int | None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        agents = self.possible_agents
        interact = len(MOVE_ACTIONS)
        events: list[GridEvent] = []
        no_effect = dict.fromkeys(agents, False)
        for i, agent in enumerate(agents):
            if actions[agent] == interact:
                if self._can_interact(i):
                    events += self._interact(i)
                else:
                    no_effect[agent] = True
        wanted = list(self.positions)
        for i, agent in enumerate(agents):
            if 1 <= actions[agent] < interact:
                direction = DIRECTION_NAMES[actions[agent] - 1]
                self.facings[i] = direction
                target = step_cell(self.positions[i], direction)
                if self.passable(target):
                    wanted[i] = target
        final = resolve_moves(self.positions, wanted)
        blocked = {
            agent: 1 <= actions[agent] < interact and final[i] == self.positions[i]
            for i, agent in enumerate(agents)
        }
        self.positions = final
        events += self._after_moves()
        done = self._task_done()
        penalty = 1.0 / self.max_steps if self.step_penalty else 0.0
        team = float(len(events))
        rewards, infos = {}, {}
        descriptions = [e.description for e in events]
        for agent in agents:
            individual = float(sum(e.agent == agent for e in events))
            rewards[agent] = team + (individual if self.individual_rewards else 0.0) - penalty
            infos[agent] = {
                "team_reward": team,
                "individual_reward": individual,
                "step_penalty": -penalty,
                "events": list(descriptions),
                "blocked": blocked[agent],
                "no_effect": no_effect[agent],
            }
        return StepOutcome(rewards=rewards, terminated=done, success=done, infos=infos)

    # ----------------------------------------------------------------- shared encodings

    def _agent_features(self, index: int) -> list[float]:
        """Ego position (scaled to [0, 1]) and facing (one-hot), then each teammate's offset
        from the ego (scaled to [-1, 1]) and facing."""
        me = self.positions[index]
        features = [*self.layout.normalized(me), *_one_hot(self.facings[index])]
        for j, cell in enumerate(self.positions):
            if j != index:
                features += [*self.layout.offset(me, cell), *_one_hot(self.facings[j])]
        return features

    def _agents_state(self) -> list[float]:
        """Every agent's scaled position and facing, in agent order (for ``state()``)."""
        features: list[float] = []
        for cell, facing in zip(self.positions, self.facings, strict=True):
            features += [*self.layout.normalized(cell), *_one_hot(facing)]
        return features

    def _time_feature(self) -> float:
        return self.step_count / self.max_steps

    def numeric_observation(self, agent: str) -> np.ndarray:
        """The agent's own and its teammates' features (``_agent_features``), then the
        world's (``_world_features``), then step / max_steps."""
        index = self.agent_index(agent)
        features = self._agent_features(index) + self._world_features(index)
        features.append(self._time_feature())
        return np.asarray(features, dtype=np.float32)

    def state(self) -> np.ndarray:
        """Every agent's position and facing, the world's flags, then step / max_steps."""
        features = self._agents_state() + self._world_flags()
        features.append(self._time_feature())
        return np.asarray(features, dtype=np.float32)

    def _describe_agent(self, index: int, viewer: int) -> str:
        agent = self.possible_agents[index]
        cell = self.positions[index]
        where = (
            f"at {format_cell(cell)} in {self.layout.room_of(cell)}, facing {self.facings[index]}"
        )
        if index == viewer:
            return f"You are {agent} ({self.colors[index]}) {where}."
        return f"Teammate {agent} ({self.colors[index]}) is {where}."

    def _agent_data(self) -> dict[str, Any]:
        return {
            "positions": {
                a: list(c) for a, c in zip(self.possible_agents, self.positions, strict=True)
            },
            "facings": dict(zip(self.possible_agents, self.facings, strict=True)),
        }


def approach_intent(env: FacingGridEnv, index: int, target: Cell, interaction: str) -> MoveIntent:
    """A scripted agent's intent to act on the object at ``target``: get next to it facing it
    in the fewest moves, then use ``interaction``."""
    here = env.positions[index]
    if direction_between(here, target) == env.facings[index]:
        return MoveIntent(fixed_action=interaction)
    goals = facing_goals(env.layout, env.passable, target)
    return MoveIntent(facing_cost=facing_cost_to_go(env.layout, env.passable, goals))


def _one_hot(direction: str) -> list[float]:
    return [1.0 if d == direction else 0.0 for d in DIRECTION_NAMES]


def numeric_box(size: int) -> Box:
    """The Box of a feature vector of ``size`` values in [-1, 1]."""
    return Box(low=-1.0, high=1.0, shape=(size,), dtype=np.float32)


# --------------------------------------------------------------------------- registration

GRIDWORLD_ENV_IDS: tuple[str, ...] = (
    "gridworld/two-switch",
    "gridworld/victim-rubble",
    "spaceworld",
)


__all__ = [
    "DIRECTIONS",
    "DIRECTION_NAMES",
    "GRIDWORLD_ENV_IDS",
    "MOVE_ACTIONS",
    "Cell",
    "FacingGridEnv",
    "FacingState",
    "GridEvent",
    "GridLayout",
    "MoveIntent",
    "RankedByKey",
    "approach_intent",
    "bfs_distances",
    "check_snapshots",
    "choose_joint_moves",
    "collisions",
    "facing_cost_to_go",
    "facing_distances_from",
    "facing_goals",
    "resolve_moves",
    "steps_phrase",
]


def make_grid_env(
    env_class: type[FacingGridEnv],
    n_agents: int = 2,
    *,
    observation_mode: str = "text",
    max_steps: int = DEFAULT_MAX_STEPS,
    step_penalty: bool = True,
    individual_rewards: bool = False,
    render_mode: str | None = None,
) -> FacingGridEnv:
    """Builds a ``FacingGridEnv``, whose agent count is fixed (``two_switch.make_two_switch``
    and ``victim_rubble.make_victim_rubble`` fix ``env_class``: their ids' entry points)."""
    check_agent_count(env_class.default_env_id, n_agents, [len(env_class.interactions)])
    return env_class(
        observation_mode=observation_mode,
        max_steps=max_steps,
        step_penalty=step_penalty,
        individual_rewards=individual_rewards,
        render_mode=render_mode,
    )
