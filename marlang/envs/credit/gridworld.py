"""Grid mechanics shared by the credit-assignment grid worlds (Two-Switch, Victim-Rubble,
Spaceworld): layouts drawn as text maps, simultaneous moves with agent-agent conflicts, shortest
paths, the scripted teams' joint move choice, and ``FacingGridEnv`` for worlds where agents face
what they act on. ``marlang.envs.registry`` registers the three envs (imported lazily).
"""

from __future__ import annotations

import functools
import itertools
import logging
from abc import abstractmethod
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

import numpy as np
from gymnasium.spaces import Box

from marlang.envs.core.numeric import NumericTextEnv, StepOutcome, check_agent_count

logger = logging.getLogger(__name__)

Cell = tuple[int, int]
"""A grid cell ``(x, y)``: x grows to the right, y grows upward, ``(0, 0)`` is bottom left."""

DIRECTIONS: Mapping[str, Cell] = MappingProxyType(
    {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}
)
"""Unit steps; "up" is +y (the coordinate system of the LCA prompts)."""

DIRECTION_NAMES: tuple[str, ...] = tuple(DIRECTIONS)
MOVE_ACTIONS: tuple[str, ...] = ("stay", *(f"move {d}" for d in DIRECTION_NAMES))
"""The movement actions of every grid world, in index order (0 = stay)."""

UNREACHABLE = 10**6
"""Distance reported for cells no path reaches."""


def step_cell(cell: Cell, direction: str) -> Cell:
    """The cell next to ``cell`` in ``direction``."""
    dx, dy = DIRECTIONS[direction]
    return (cell[0] + dx, cell[1] + dy)


def direction_between(a: Cell, b: Cell) -> str | None:
    """The direction from ``a`` to the adjacent cell ``b`` (None if they are not adjacent)."""
    for name, (dx, dy) in DIRECTIONS.items():
        if (a[0] + dx, a[1] + dy) == b:
            return name
    return None


def manhattan(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def format_cell(cell: Cell) -> str:
    return f"({cell[0]}, {cell[1]})"


def steps_phrase(n: int) -> str:
    """'1 step', '7 steps', or 'no path' for ``UNREACHABLE``."""
    if n >= UNREACHABLE:
        return "no path"
    return "1 step" if n == 1 else f"{n} steps"


def check_snapshots(cls: type, **snapshots: Any) -> None:
    """Raise ``TypeError`` unless every given snapshot is a ``cls`` (``rank_states`` input)."""
    for name, snapshot in snapshots.items():
        if not isinstance(snapshot, cls):
            raise TypeError(
                f"rank_states: {name} must be a {cls.__name__}, got {type(snapshot).__name__}"
            )


def capitalized(text: str) -> str:
    """``text`` with its first letter upper-case (the rest untouched)."""
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class GridLayout:
    """A static grid: size, wall cells and the room each floor cell belongs to."""

    width: int
    height: int
    walls: frozenset[Cell]
    rooms: Mapping[Cell, str]
    """Room name of every non-wall cell."""

    @classmethod
    def from_rows(cls, rows: Sequence[str], room_names: Mapping[str, str]) -> GridLayout:
        """Build from a text map whose first row is the top (largest y). ``#`` is a wall; any
        other character is floor of the room ``room_names[character]``."""
        height, width = len(rows), len(rows[0])
        walls: set[Cell] = set()
        rooms: dict[Cell, str] = {}
        for row_index, row in enumerate(rows):
            if len(row) != width:
                raise ValueError(f"map row {row_index} has {len(row)} cells, expected {width}")
            y = height - 1 - row_index
            for x, char in enumerate(row):
                if char == "#":
                    walls.add((x, y))
                else:
                    rooms[(x, y)] = room_names[char]
        return cls(width, height, frozenset(walls), MappingProxyType(rooms))

    def in_bounds(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.width and 0 <= cell[1] < self.height

    def is_floor(self, cell: Cell) -> bool:
        return self.in_bounds(cell) and cell not in self.walls

    def room_of(self, cell: Cell) -> str:
        return self.rooms.get(cell, "a wall")

    def cells_in(self, room: str) -> list[Cell]:
        """The room's cells, sorted (so seeded sampling is reproducible)."""
        return sorted(cell for cell, name in self.rooms.items() if name == room)

    def neighbours(self, cell: Cell) -> list[Cell]:
        """Adjacent in-bounds cells (walls included), in ``DIRECTION_NAMES`` order."""
        return [n for d in DIRECTION_NAMES if self.in_bounds(n := step_cell(cell, d))]

    def normalized(self, cell: Cell) -> tuple[float, float]:
        """``cell`` scaled to [0, 1] per axis."""
        return cell[0] / max(self.width - 1, 1), cell[1] / max(self.height - 1, 1)

    def offset(self, origin: Cell, cell: Cell) -> tuple[float, float]:
        """``cell - origin`` scaled to [-1, 1] per axis."""
        return (
            (cell[0] - origin[0]) / max(self.width - 1, 1),
            (cell[1] - origin[1]) / max(self.height - 1, 1),
        )


State = TypeVar("State")


def breadth_first(
    sources: Iterable[State], successors: Callable[[State], Iterable[State]]
) -> dict[State, int]:
    """Steps from the nearest source to every state reachable through ``successors`` (in the
    order first reached)."""
    distances: dict[State, int] = {}
    queue: deque[State] = deque()
    for source in sources:
        if source not in distances:
            distances[source] = 0
            queue.append(source)
    while queue:
        state = queue.popleft()
        for after in successors(state):
            if after not in distances:
                distances[after] = distances[state] + 1
                queue.append(after)
    return distances


def bfs_distances(
    layout: GridLayout, sources: Iterable[Cell], passable: Callable[[Cell], bool]
) -> dict[Cell, int]:
    """Steps from the nearest source to every cell reachable through ``passable`` cells.

    Sources count as reached even when not passable themselves (an agent's own cell)."""
    return breadth_first(sources, lambda cell: (n for n in layout.neighbours(cell) if passable(n)))


def resolve_moves(current: Sequence[Cell], wanted: Sequence[Cell]) -> list[Cell]:
    """Where agents end up when they try to move at once (no two agents share a cell).

    An agent stays put when another agent ends in the cell it wants (two want the same cell,
    or the other stays there) or when the two would swap cells; one agent may follow another
    into the cell it leaves. Wanted cells must already exclude walls and objects.
    """
    final = list(wanted)
    changed = True
    while changed:
        changed = False
        counts = Counter(final)
        for i, cell in enumerate(final):
            if cell != current[i] and counts[cell] > 1:
                final[i] = current[i]
                changed = True
        for i, j in itertools.combinations(range(len(final)), 2):
            swapped = final[i] == current[j] and final[j] == current[i]
            if swapped and final[i] != current[i]:
                final[i], final[j] = current[i], current[j]
                changed = True
    return final


def collisions(current: Sequence[Cell], wanted: Sequence[Cell]) -> list[tuple[int, int]]:
    """Pairs of agents that would collide: end in the same cell or pass through each other."""
    pairs = []
    for i, j in itertools.combinations(range(len(wanted)), 2):
        same_cell = wanted[i] == wanted[j]
        swapped = wanted[i] == current[j] and wanted[j] == current[i] and wanted[i] != current[i]
        if same_cell or swapped:
            pairs.append((i, j))
    return pairs


# --------------------------------------------------------------------------- scripted moves


FacingState = tuple[Cell, str]
"""An agent's cell and the direction it faces."""


def facing_cost_to_go(
    layout: GridLayout, passable: Callable[[Cell], bool], goals: Iterable[FacingState]
) -> dict[FacingState, int]:
    """Fewest moves from each (cell, facing) to any goal (cell, facing), where a move turns the
    agent that way and steps forward if it can (a backward breadth-first search)."""

    def before(state: FacingState) -> list[FacingState]:
        cell, facing = state
        ahead, behind = step_cell(cell, facing), step_cell(cell, _OPPOSITE[facing])
        sources: list[Cell] = []
        if passable(behind):
            sources.append(behind)  # stepped in from behind
        if not passable(ahead):
            sources.append(cell)  # bumped into what is ahead, turning in place
        return [(source, facing_before) for source in sources for facing_before in DIRECTION_NAMES]

    return breadth_first(goals, before)


def facing_distances_from(
    layout: GridLayout, passable: Callable[[Cell], bool], start: FacingState
) -> dict[FacingState, int]:
    """Fewest moves from ``start`` to every reachable (cell, facing) (a forward search)."""

    def after(state: FacingState) -> list[FacingState]:
        cell, _ = state
        moves = []
        for direction in DIRECTION_NAMES:
            ahead = step_cell(cell, direction)
            moves.append((ahead if passable(ahead) else cell, direction))
        return moves

    return breadth_first([start], after)


def facing_goals(
    layout: GridLayout, passable: Callable[[Cell], bool], target: Cell
) -> list[FacingState]:
    """The states from which an agent acts on the object at ``target``: next to it, facing it."""
    goals = []
    for cell in layout.neighbours(target):
        direction = direction_between(cell, target)
        if passable(cell) and direction is not None:
            goals.append((cell, direction))
    return goals


_OPPOSITE: Mapping[str, str] = MappingProxyType(
    {"up": "down", "down": "up", "left": "right", "right": "left"}
)


@dataclass
class MoveIntent:
    """What one scripted agent wants this step: a fixed action (act on an object), or to get
    closer to its goal along ``distance`` (steps per cell) or ``facing_cost`` (moves per
    (cell, facing)); with neither it has no goal and only moves to make way."""

    fixed_action: str | None = None
    distance: Mapping[Cell, int] | None = None
    facing_cost: Mapping[FacingState, int] | None = None
    weight: float = 1.0
    """How much this agent's progress counts when moves conflict (the priority agent's more)."""

    def cost(self, cell: Cell, facing: str | None) -> int:
        if self.facing_cost is not None and facing is not None:
            return self.facing_cost.get((cell, facing), UNREACHABLE)
        if self.distance is not None:
            return self.distance.get(cell, UNREACHABLE)
        return 0


def choose_joint_moves(
    positions: Sequence[Cell],
    intents: Sequence[MoveIntent],
    passable: Callable[[Cell], bool],
    *,
    facings: Sequence[str] | None = None,
    collisions_fatal: bool = False,
) -> list[str]:
    """Pick every agent's action at once: the joint action with the most weighted progress
    (lower cost to go for each agent), where a move blocked by another agent gains nothing.

    Agents with a fixed action keep it. Ties go to the higher-weight agent's progress, then to
    agents without a goal staying put, then to keeping the agents apart. With ``facings`` a
    move turns the agent even when blocked (``facing_cost`` counts that). With
    ``collisions_fatal`` (Spaceworld) no joint action may put two agents in one cell or swap
    them; otherwise conflicts are settled by ``resolve_moves``.
    """
    options: list[list[tuple[str, Cell, str | None]]] = []
    for i, (cell, intent) in enumerate(zip(positions, intents, strict=True)):
        facing = facings[i] if facings is not None else None
        if intent.fixed_action is not None:
            options.append([(intent.fixed_action, cell, facing)])
            continue
        choices = [("stay", cell, facing)]
        for direction in DIRECTION_NAMES:
            target = step_cell(cell, direction)
            if passable(target):
                choices.append((f"move {direction}", target, direction if facings else None))
            elif facings is not None:
                choices.append((f"move {direction}", cell, direction))
        options.append(choices)
    order = sorted(range(len(intents)), key=lambda i: -intents[i].weight)
    start = [
        intent.cost(cell, facings[i] if facings is not None else None)
        for i, (cell, intent) in enumerate(zip(positions, intents, strict=True))
    ]
    idle = [
        intent.fixed_action is None and intent.distance is None and intent.facing_cost is None
        for intent in intents
    ]

    best: tuple[Any, ...] | None = None
    best_actions: list[str] = ["stay"] * len(positions)
    for combo in itertools.product(*options):
        wanted = [cell for _, cell, _ in combo]
        if collisions_fatal:
            if collisions(positions, wanted):
                continue
            final = wanted
        else:
            final = resolve_moves(positions, wanted)
        gains = [start[i] - intents[i].cost(final[i], combo[i][2]) for i in range(len(positions))]
        idle_moves = sum(idle[i] and combo[i][0] != "stay" for i in range(len(positions)))
        key = (
            sum(intents[i].weight * gains[i] for i in range(len(gains))),
            tuple(gains[i] for i in order),
            -idle_moves,
            min((manhattan(a, b) for a, b in itertools.combinations(final, 2)), default=0),
        )
        if best is None or key > best:
            best, best_actions = key, [action for action, _, _ in combo]
    return best_actions


# --------------------------------------------------------------------------- facing worlds


@dataclass(frozen=True)
class GridEvent:
    """A rewarded event: each one gives every agent +1 team reward and its actor +1 individual."""

    agent: str
    description: str


DEFAULT_MAX_STEPS = 100
"""Step limit of the LCA grid worlds."""


class FeatureSpaces:
    """``numeric_observation_space`` and ``state_space`` of an env whose numeric observation
    is ``numeric_size`` values in [-1, 1] and whose state ``state_size`` values in [0, 1]
    (the same space objects on every call)."""

    numeric_size: ClassVar[int]
    state_size: ClassVar[int]

    @functools.cached_property
    def _feature_spaces(self) -> tuple[Box, Box]:
        state = Box(low=0.0, high=1.0, shape=(self.state_size,), dtype=np.float32)
        return numeric_box(self.numeric_size), state

    def numeric_observation_space(self, agent: str) -> Box:
        return self._feature_spaces[0]

    @property
    def state_space(self) -> Box:
        return self._feature_spaces[1]


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
            positions = [tuple(int(v) for v in cell) for cell in given]
            if len(positions) != n or len(set(positions)) != n:
                raise ValueError(f"agent_positions must be {n} distinct cells, got {given!r}")
            for cell in positions:
                if cell not in free:
                    raise ValueError(f"agent_positions: {cell} is not a free floor cell")
            self.positions = positions  # type: ignore[assignment]
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


def reach_steps(layout: GridLayout, distances: Mapping[Cell, int], target: Cell) -> int:
    """Steps to stand on ``target`` if ``distances`` reaches it, else to reach a neighbour of it
    plus one (the bump that faces it); ``UNREACHABLE`` if neither."""
    if target in distances:
        return distances[target]
    around = [distances[n] for n in layout.neighbours(target) if n in distances]
    return min(around) + 1 if around else UNREACHABLE


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


@dataclass(frozen=True)
class GridWorldFactory:
    """Registry factory of a ``FacingGridEnv`` id: its agent count is fixed."""

    env_class: type[FacingGridEnv]

    def __call__(
        self,
        n_agents: int = 2,
        *,
        observation_mode: str = "text",
        max_steps: int = DEFAULT_MAX_STEPS,
        step_penalty: bool = True,
        individual_rewards: bool = False,
        render_mode: str | None = None,
    ) -> FacingGridEnv:
        env_class = self.env_class
        check_agent_count(env_class.default_env_id, n_agents, [len(env_class.interactions)])
        return env_class(
            observation_mode=observation_mode,
            max_steps=max_steps,
            step_penalty=step_penalty,
            individual_rewards=individual_rewards,
            render_mode=render_mode,
        )
