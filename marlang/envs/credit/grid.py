"""Grid geometry and movement of the credit-assignment grid worlds: cells and directions, layouts
drawn as text maps, shortest paths, simultaneous moves with agent-agent conflicts, and the
scripted teams' joint move choice.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

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


def parse_cell(value: Any, what: str) -> Cell:
    """``value`` (two integers, as reset options give a cell) as a ``Cell``; a ValueError
    naming ``what`` for any other number of coordinates."""
    coordinates = [int(v) for v in value]
    if len(coordinates) != 2:
        raise ValueError(f"{what}: {value!r} is not an (x, y) cell")
    return coordinates[0], coordinates[1]


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


def reach_steps(layout: GridLayout, distances: Mapping[Cell, int], target: Cell) -> int:
    """Steps to stand on ``target`` if ``distances`` reaches it, else to reach a neighbour of it
    plus one (the bump that faces it); ``UNREACHABLE`` if neither."""
    if target in distances:
        return distances[target]
    around = [distances[n] for n in layout.neighbours(target) if n in distances]
    return min(around) + 1 if around else UNREACHABLE
