"""Robotic warehouse (the ``rware`` 2.0 package) with numeric and ego-view text observations.

Robots fetch requested shelves, carry them to the goal cells at the bottom and bring them back
to an empty shelf spot; each delivery of a requested shelf earns the delivering robot 1.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Box
from rware.warehouse import Action, Direction, RewardType, Warehouse

from marlang.envs.core.base import env_metadata
from marlang.envs.core.numeric import (
    StepOutcome,
    rank_sign,
)
from marlang.envs.credit.scenarios import (
    RWARE_MAX_STEPS,
    RWAREScenario,
    ScenarioEnv,
    ScenarioTeam,
    make_scenario_env,
)

logger = logging.getLogger(__name__)

RWARE_ACTIONS: tuple[str, ...] = ("wait", "move forward", "turn left", "turn right", "toggle load")
"""Action names; index i is the package's ``Action(i)`` ("toggle load" picks up the shelf
standing here, or puts the carried one down on a free shelf spot)."""


DIRECTION_WORDS: Mapping[Direction, str] = {
    Direction.UP: "up (toward row 0)",
    Direction.DOWN: "down",
    Direction.LEFT: "left (toward column 0)",
    Direction.RIGHT: "right",
}
_STEP: Mapping[Direction, tuple[int, int]] = {
    Direction.UP: (0, -1),
    Direction.DOWN: (0, 1),
    Direction.LEFT: (-1, 0),
    Direction.RIGHT: (1, 0),
}
_CLOCKWISE = (Direction.UP, Direction.RIGHT, Direction.DOWN, Direction.LEFT)

Cell = tuple[int, int]
"""(x, y): column, then row (row 0 at the top), as the package counts."""


@dataclass(frozen=True)
class RobotState:
    """One robot in a snapshot: cell, heading, carried shelf (its cell id) and deliveries."""

    cell: Cell
    direction: Direction
    carrying: bool
    carrying_requested: bool
    deliveries: float


@dataclass(frozen=True)
class RWARESnapshot:
    """Warehouse state for ranking: robots, requested shelf cells and free shelf spots."""

    robots: tuple[RobotState, ...]
    requested: tuple[Cell, ...]
    """Cells of requested shelves that stand on the floor (not carried)."""
    free_spots: tuple[Cell, ...]
    goals: tuple[Cell, ...]


class RoboticWarehouseEnv(ScenarioEnv):
    """The robotic warehouse with ``agent_i`` as the package's robot i.

    Numeric observations are the package's flattened ones (71 values with sensor range 1):
    the robot's x, y, carrying flag, heading one-hot (up, down, left, right), on-highway
    flag, then for each of the 3x3 cells around it (row by row) a robot flag, that robot's
    heading one-hot, a shelf flag and a requested flag. The ego text gives the same cell,
    heading, load and neighbouring robots, plus where the requested shelves and goals are.

    Rewards are the package's individual ones (1 to the robot that delivers a requested
    shelf to a goal cell; ``shared_reward=True`` gives every robot the team's sum). The
    package never ends an episode itself here; it truncates at ``max_steps``.
    """

    all_actions: ClassVar[tuple[str, ...]] = RWARE_ACTIONS
    metadata: ClassVar[dict[str, Any]] = env_metadata("robotic_warehouse_v0")
    world_description: ClassVar[str] = "a warehouse where robots carry requested shelves to goals"

    default_max_steps: ClassVar[int] = RWARE_MAX_STEPS
    default_env_id: ClassVar[str] = "rware"
    scenario: RWAREScenario

    def _open_package(self) -> None:
        scenario = self.scenario
        # No time limit inside the package: the base class truncates at max_steps (the
        # package would report its own limit as termination).
        self.warehouse = Warehouse(
            shelf_columns=scenario.shelf_columns,
            column_height=8,
            shelf_rows=scenario.shelf_rows,
            n_agents=scenario.agents,
            msg_bits=0,
            sensor_range=1,
            request_queue_size=scenario.agents,
            max_inactivity_steps=None,
            max_steps=None,
            reward_type=RewardType.INDIVIDUAL,
        )
        self._deliveries = np.zeros(scenario.agents)
        rows, cols = self.warehouse.grid_size
        self._observation_box = Box(
            -np.inf, np.inf, shape=self.warehouse.observation_space[0].shape, dtype=np.float32
        )
        state_size = scenario.agents * 7 + scenario.agents * 2 + rows * cols
        self._state_box = Box(-1.0, float(max(rows, cols)), shape=(state_size,), dtype=np.float32)
        self.goals: tuple[Cell, ...] = tuple((int(x), int(y)) for x, y in self.warehouse.goals)
        self._mission = (
            "Deliver as many requested shelves as possible. Drive under a requested shelf, "
            "pick it up (toggle load), carry it to a goal cell, then put it back down on an "
            "empty shelf spot (toggle load) so you can fetch the next one. While carrying a "
            "shelf you can only drive along the aisles and empty shelf spots."
        )

    # ----------------------------------------------------------------- base API

    def state(self) -> np.ndarray:
        """Per robot x, y, heading one-hot, carrying; per request the shelf's x, y (-1 while
        carried); then the shelf-occupancy grid (1 where a shelf stands or is carried)."""
        self._require_started("state")
        w = self.warehouse
        values: list[float] = []
        for robot in w.agents:
            heading = [0.0] * 4
            heading[robot.dir.value] = 1.0
            values += [robot.x, robot.y, *heading, float(robot.carrying_shelf is not None)]
        carried = {id(r.carrying_shelf) for r in w.agents if r.carrying_shelf is not None}
        for shelf in w.request_queue:
            values += [-1.0, -1.0] if id(shelf) in carried else [shelf.x, shelf.y]
        occupancy = (w.grid[1] > 0).astype(np.float32).reshape(-1)
        return np.concatenate([np.array(values, dtype=np.float32), occupancy])

    def ego_text(self, agent: str) -> str:
        data = self.observation_data(agent)
        x, y = data["position"]
        rows, cols = self.warehouse.grid_size
        lines = [
            f"The warehouse has {rows} rows and {cols} columns; cells are (x, y) = (column, row), "
            "row 0 at the top. Goal cells: "
            + ", ".join(f"({gx}, {gy})" for gx, gy in self.goals)
            + ".",
            f"You are {agent} at ({x}, {y}) facing {data['direction_words']}"
            + (", on an aisle." if data["on_highway"] else ", on a shelf spot."),
        ]
        if data["carrying"] is None:
            lines.append("You carry no shelf.")
        elif data["carrying"]["requested"]:
            lines.append("You carry a requested shelf: take it to a goal cell.")
        else:
            lines.append("You carry a shelf that is not requested: put it on an empty shelf spot.")
        for mate in data["teammates"]:
            mx, my = mate["position"]
            load = " carrying a shelf" if mate["carrying"] else ""
            lines.append(
                f"Teammate {mate['agent']} is next to you at ({mx}, {my}) facing "
                f"{mate['direction']}{load}."
            )
        requested = data["requested_shelves"]
        if requested:
            cells = ", ".join(
                f"({sx}, {sy})" + (" (carried)" if carried else "") for sx, sy, carried in requested
            )
            lines.append(f"Requested shelves at: {cells}.")
        lines.append(
            f"Step {self.step_count} of {self.max_steps}; you delivered {data['deliveries']:g}."
        )
        return "\n".join(lines)

    def observation_data(self, agent: str) -> dict[str, Any]:
        self._require_started("observation_data")
        w = self.warehouse
        robot = w.agents[self._index[agent]]
        shelf = robot.carrying_shelf
        teammates = [
            {
                "agent": self.possible_agents[j],
                "position": [int(other.x), int(other.y)],
                "direction": other.dir.name.lower(),
                "carrying": other.carrying_shelf is not None,
            }
            for j, other in enumerate(w.agents)
            if other is not robot
            and abs(int(other.x) - int(robot.x)) <= w.sensor_range
            and abs(int(other.y) - int(robot.y)) <= w.sensor_range
        ]
        carried = {id(r.carrying_shelf) for r in w.agents if r.carrying_shelf is not None}
        return {
            "agent": agent,
            "position": [int(robot.x), int(robot.y)],
            "direction": robot.dir.name.lower(),
            "direction_words": DIRECTION_WORDS[robot.dir],
            "on_highway": bool(w._is_highway(robot.x, robot.y)),
            "carrying": None
            if shelf is None
            else {"requested": any(shelf is s for s in w.request_queue)},
            "teammates": teammates,
            "requested_shelves": [[int(s.x), int(s.y), id(s) in carried] for s in w.request_queue],
            "deliveries": float(self._deliveries[self._index[agent]]),
            "step": self.step_count,
        }

    def rank_snapshot(self) -> RWARESnapshot:
        self._require_started("rank_snapshot")
        w = self.warehouse
        requested = [s for s in w.request_queue]
        carried = {id(r.carrying_shelf) for r in w.agents if r.carrying_shelf is not None}
        robots = tuple(
            RobotState(
                cell=(int(r.x), int(r.y)),
                direction=r.dir,
                carrying=r.carrying_shelf is not None,
                carrying_requested=r.carrying_shelf is not None
                and any(r.carrying_shelf is s for s in requested),
                deliveries=float(self._deliveries[i]),
            )
            for i, r in enumerate(w.agents)
        )
        return RWARESnapshot(
            robots=robots,
            requested=tuple((int(s.x), int(s.y)) for s in requested if id(s) not in carried),
            free_spots=tuple(_free_spots(w)),
            goals=self.goals,
        )

    def rank_states(self, agent: str, a: RWARESnapshot, b: RWARESnapshot) -> int:
        """Ranks by the robot's own deliveries, then its stage (carrying an unrequested shelf
        < free < carrying a requested one), then its distance to that stage's target (an
        empty shelf spot, the nearest requested shelf, a goal cell): closer is better."""
        i = self._index[agent]
        return rank_sign(_warehouse_score(i, b), _warehouse_score(i, a))

    def scripted_team(self) -> RWAREHeuristicTeam:
        return RWAREHeuristicTeam(self)

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self._observations, _ = self.warehouse.reset(seed=seed)
        self._deliveries[:] = 0

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        joint = [actions[agent] for agent in self.possible_agents]
        self._observations, rewards, _, _, _ = self.warehouse.step(joint)
        self._deliveries += rewards
        return self._outcome(rewards)


def _free_spots(w: Warehouse) -> list[Cell]:
    """Shelf spots (not aisles) with no shelf standing on them."""
    rows, cols = w.grid_size
    return [
        (x, y)
        for y in range(rows)
        for x in range(cols)
        if not w.highways[y, x] and not w.grid[1, y, x]
    ]


def _manhattan(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _warehouse_score(i: int, snapshot: RWARESnapshot) -> tuple[float, int, int]:
    robot = snapshot.robots[i]
    if robot.carrying_requested:
        stage, targets = 2, snapshot.goals
    elif robot.carrying:
        stage, targets = 0, snapshot.free_spots
    else:
        stage, targets = 1, snapshot.requested
    distance = min((_manhattan(robot.cell, t) for t in targets), default=0)
    return (robot.deliveries, stage, -distance)


class RWAREHeuristicTeam(ScenarioTeam):
    """Reference team: each robot fetches the nearest requested shelf no teammate has
    claimed, carries it to a goal cell, then returns it to the nearest empty shelf spot.

    Robots plan shortest paths over (cell, heading) with the package's moves, around
    teammates (and, when loaded, around standing shelves), and take a random action after
    six steps without getting closer (robots blocking each other wander three random steps).
    It reads the true state. Mean team return over seeds 0..4 (500 steps): 56 on
    ``rware/tiny-4ag``, 40 on ``rware/small-4ag``, 30 on ``rware/tiny-2ag`` (uniformly
    random actions: 0 on all three).
    """

    env: RoboticWarehouseEnv

    def reset(self) -> None:
        self._progress: dict[int, tuple[frozenset[Cell], int, int]] = {}
        """Per robot: its goal cells, the shortest path length to them seen so far, and the
        steps since that length last shrank."""
        self._wander: dict[int, int] = {}

    def _joint_action(self, observations: Any) -> dict[str, str]:
        """Joint action (action names, as LLM agents give them) for the live robots."""
        env = self.env
        w = env.warehouse
        robots = w.agents
        requested = list(w.request_queue)
        carried = {id(r.carrying_shelf) for r in robots if r.carrying_shelf is not None}
        waiting = [s for s in requested if id(s) not in carried]
        free = _free_spots(w)
        claimed: set[Cell] = set()
        actions: dict[str, int] = {}
        for i, robot in enumerate(robots):
            here: Cell = (int(robot.x), int(robot.y))
            shelf = robot.carrying_shelf
            if shelf is None:
                options = [(s.x, s.y) for s in waiting if (s.x, s.y) not in claimed]
                goals = {min(options, key=lambda c: _manhattan(here, c))} if options else set()
                claimed |= goals
                if here in goals:
                    actions[env.possible_agents[i]] = Action.TOGGLE_LOAD.value
                    continue
            elif any(shelf is s for s in requested):
                goals = set(env.goals)
            else:
                if not w.highways[here[1], here[0]]:
                    actions[env.possible_agents[i]] = Action.TOGGLE_LOAD.value
                    continue
                goals = set(sorted(free, key=lambda c: _manhattan(here, c))[:3])
            actions[env.possible_agents[i]] = self._navigate(i, robot, goals, shelf is not None)
        return {agent: RWARE_ACTIONS[actions[agent]] for agent in env.agents}

    def _navigate(self, i: int, robot: Any, goals: set[Cell], loaded: bool) -> int:
        w = self.env.warehouse
        start = ((int(robot.x), int(robot.y)), robot.dir)
        free_run = _plan(start, goals, w, set(), loaded)
        if free_run is None:
            return Action.NOOP.value
        # Robots that make no headway for a while (blocking each other) wander a few steps.
        key = frozenset(goals)
        known, best, idle = self._progress.get(i, (key, free_run[1], 0))
        if known != key or free_run[1] < best:
            best, idle = free_run[1], 0
        else:
            idle += 1
        self._progress[i] = (key, best, idle)
        if idle >= 6:
            self._progress.pop(i)
            self._wander[i] = 3
        if self._wander.get(i, 0) > 0:
            self._wander[i] -= 1
            return int(self._rng.integers(1, 4))  # forward, left or right
        others = {(int(r.x), int(r.y)) for r in w.agents if r is not robot}
        around = _plan(start, goals, w, others, loaded)
        return (around or free_run)[0]


def _plan(
    start: tuple[Cell, Direction],
    goals: set[Cell],
    w: Warehouse,
    blocked: set[Cell],
    loaded: bool,
) -> tuple[int, int] | None:
    """First action and length of a shortest (cell, heading) path to any goal cell (BFS);
    ``(NOOP, 0)`` when already there."""
    rows, cols = w.grid_size
    shelves = w.grid[1]
    first: dict[tuple[Cell, Direction], tuple[int, int]] = {start: (Action.NOOP.value, 0)}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        (x, y), heading = state
        if (x, y) in goals:
            return first[state]
        dx, dy = _STEP[heading]
        turn = _CLOCKWISE.index(heading)
        successors = [
            (Action.LEFT.value, ((x, y), _CLOCKWISE[(turn - 1) % 4])),
            (Action.RIGHT.value, ((x, y), _CLOCKWISE[(turn + 1) % 4])),
        ]
        nx, ny = x + dx, y + dy
        if (
            0 <= nx < cols
            and 0 <= ny < rows
            and (nx, ny) not in blocked
            and not (loaded and shelves[ny, nx])
        ):
            successors.insert(0, (Action.FORWARD.value, ((nx, ny), heading)))
        for action, nxt in successors:
            if nxt in first:
                continue
            action0, length = first[state]
            first[nxt] = (action if length == 0 else action0, length + 1)
            queue.append(nxt)
    return None


make_rware = functools.partial(make_scenario_env, RoboticWarehouseEnv)
"""The entry point of the ``rware/`` ids (``marlang.envs.builtin``)."""
