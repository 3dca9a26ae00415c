"""An Overcooked layout as the subgoals see it: positions and facings, its stations and counters
in reading order, and the primitive actions a subgoal is carried out with.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from marlang.envs.overcooked.package import Action, Direction, MotionPlanner, OvercookedGridworld

Pos = tuple[int, int]


Orientation = tuple[int, int]


PosOr = tuple[Pos, Orientation]


PrimitiveAction = Orientation | str
"""One of the package's actions: a direction to move (or turn) in, ``Action.STAY`` (``(0, 0)``) or
``Action.INTERACT`` (``"interact"``)."""


DIRECTION_NAMES: dict[Orientation, str] = {
    Direction.NORTH: "up",
    Direction.SOUTH: "down",
    Direction.EAST: "right",
    Direction.WEST: "left",
}


PRIMITIVE_ACTIONS: dict[str, PrimitiveAction] = {
    "up": Direction.NORTH,
    "down": Direction.SOUTH,
    "left": Direction.WEST,
    "right": Direction.EAST,
    "stay": Action.STAY,
    "interact": Action.INTERACT,
}
"""The ``primitive`` action mode: action strings and the package's actions."""


INGREDIENTS = ("onion", "tomato")

_MAX_DETOURS = 20_000


@dataclass(frozen=True)
class Approach:
    """How a cook at one place and facing gets to work at the nearest of some features
    (the same every time it stands there: ``Kitchen.approach``)."""

    at: Pos | None
    """The feature the cook already stands in front of, facing it (the first such target)."""
    turn: Orientation | None
    """Where to turn, standing in front of a feature facing away (when not ``at`` one)."""
    first: PrimitiveAction | None
    """The first move of the shortest plan to the nearest feature (None: all out of reach)."""
    cells: tuple[Pos, ...]
    """The cells that plan walks through."""
    path: frozenset[Pos]
    """``cells`` as a set."""
    route: frozenset[Pos]
    """Where the cook is and ``cells``: the cells it will take."""
    goal_cells: frozenset[Pos]
    """The cells in front of any of the features."""


def _reading_order(positions: Iterable[Pos]) -> list[Pos]:
    return sorted(positions, key=lambda p: (p[1], p[0]))


class Kitchen:
    """What never changes in one layout: numbered features, who can reach what, and step
    distances; and what follows from those alone, remembered as play first asks for it (ways,
    detours, placing orders, offered subgoals, observation lines). The envs of a layout in one
    process share one (``text.kitchen_of``); ``forget`` drops what was remembered.

    Pots and counters are numbered from 1 in reading order (top row first, left to right).
    Distances are the moves (turns included, the final interact not) a cook needs to stand in
    front of a feature facing it, from the package's ``MotionPlanner``.
    """

    def __init__(self, mdp: OvercookedGridworld):
        self.mdp = mdp
        counters = _reading_order(mdp.get_counter_locations())
        self.planner = MotionPlanner(mdp, counter_goals=counters)
        self.pots: list[Pos] = _reading_order(mdp.get_pot_locations())
        self.counters: list[Pos] = counters
        self.dispensers: dict[str, list[Pos]] = {
            "onion": _reading_order(mdp.get_onion_dispenser_locations()),
            "tomato": _reading_order(mdp.get_tomato_dispenser_locations()),
            "dish": _reading_order(mdp.get_dish_dispenser_locations()),
        }
        self.serving: list[Pos] = _reading_order(mdp.get_serving_locations())
        self.walkable: frozenset[Pos] = frozenset(mdp.get_valid_player_positions())
        self.neighbours: dict[Pos, tuple[Pos, ...]] = {
            (x, y): tuple(cell for dx, dy in Direction.ALL_DIRECTIONS if (cell := (x + dx, y + dy)) in self.walkable)
            for x, y in self.walkable
        }
        """The walkable cells next to each walkable cell, in the package's order of directions."""
        self.step_to: dict[tuple[Pos, PrimitiveAction], Pos] = {
            ((x, y), (dx, dy)): (x + dx, y + dy)
            for x, y in self.walkable
            for dx, dy in Direction.ALL_DIRECTIONS
            if (x + dx, y + dy) in self.walkable
        }
        """Where a move in a direction takes a cook from each walkable cell, where it is walkable
        (elsewhere the cook stays put)."""
        features = [*self.pots, *self.counters, *self.serving]
        for positions in self.dispensers.values():
            features.extend(positions)
        self.goals: dict[Pos, tuple[PosOr, ...]] = {p: self._goals_facing(p) for p in features}
        self.region: dict[Pos, int] = self._regions()
        self._within_reach: dict[int, frozenset[Pos]] = {
            label: frozenset(
                f
                for f, goals in self.goals.items()
                if any(self.region.get(g[0]) == label for g in goals)
            )
            for label in set(self.region.values())
        }
        self.counter_numbers: dict[Pos, int] = {c: i for i, c in enumerate(self.counters, 1)}
        """Each counter's number (from 1, in reading order)."""
        self.forget()

    def forget(self) -> None:
        """Drop every table filled in play (they are made again as play asks for them)."""
        self._distance: dict[tuple[PosOr, Pos], int | None] = {}
        self._to_place_on: dict[tuple[PosOr, tuple[int, ...]], tuple[Pos, ...]] = {}
        self._approaches: dict[tuple[PosOr, tuple[Pos, ...]], Approach] = {}
        self._detours: dict[tuple[Pos, frozenset[Pos], frozenset[Pos]], tuple[Pos, ...] | None] = {}
        self._aside_orders: dict[tuple[Pos, tuple[Pos, ...]], tuple[Pos, ...]] = {}
        self._plan_cells: dict[tuple[PosOr, tuple[Pos, ...]], frozenset[Pos]] = {}
        self.offers: dict[tuple[str, Pos, str | None], Any] = {}
        """The subgoal at one pot or counter by (kind, target, item) (``subgoals``), made once each."""
        self.fetches: dict[frozenset[Pos], tuple[Any, ...]] = {}
        """The dispenser subgoals offered within each set of reachable features (``subgoals``)."""
        self.text_cache: Any = None
        """The observation lines made so far (``view``), filled as they are first seen."""

    def pot_number(self, pot: Pos) -> int:
        return self.pots.index(pot) + 1

    def counter_number(self, counter: Pos) -> int:
        return self.counter_numbers[counter]

    def holding(self, objects: Mapping[Pos, Any]) -> tuple[tuple[int, Pos, str], ...]:
        """The counters that hold an item among ``objects`` (a state's objects by position), as
        (number, position, item name), in reading order."""
        numbers = self.counter_numbers
        return tuple(sorted([(numbers[p], p, obj.name) for p, obj in objects.items() if p in numbers]))

    def placing_order(self, pos_and_or: PosOr, other_regions: tuple[int, ...]) -> tuple[Pos, ...]:
        """The counters a cook at ``pos_and_or`` can reach, best first for putting an item
        down: those every other cook (standing in ``other_regions``, labels of ``region``; -1:
        nowhere) can also reach (that is how items change hands), then the nearest, ties in
        reading order (remembered)."""
        key = (pos_and_or, other_regions)
        order = self._to_place_on.get(key)
        if order is None:
            reachable = self.within_reach(pos_and_or[0])
            theirs = [self._within_reach.get(r, frozenset()) for r in other_regions]

            def preference(counter: Pos) -> tuple[bool, int]:
                shared = all(counter in reach for reach in theirs)
                return (not shared, self.distance(pos_and_or, counter) or 0)

            order = self._to_place_on[key] = tuple(sorted((c for c in self.counters if c in reachable),
                                                          key=preference))
        return order

    def _goals_facing(self, feature: Pos) -> tuple[PosOr, ...]:
        goals = []
        for direction in Direction.ALL_DIRECTIONS:
            cell = (feature[0] + direction[0], feature[1] + direction[1])
            if cell in self.walkable:
                goals.append((cell, Direction.OPPOSITE_DIRECTIONS[direction]))
        return tuple(goals)

    def _regions(self) -> dict[Pos, int]:
        region: dict[Pos, int] = {}
        for start in _reading_order(self.walkable):
            if start in region:
                continue
            label = len(set(region.values()))
            region[start] = label
            queue = deque([start])
            while queue:
                for nxt in self.neighbours[queue.popleft()]:
                    if nxt not in region:
                        region[nxt] = label
                        queue.append(nxt)
        return region

    def reachable(self, position: Pos, feature: Pos) -> bool:
        """Whether a cook standing at ``position`` can walk up to ``feature``."""
        return feature in self.within_reach(position)

    def within_reach(self, position: Pos) -> frozenset[Pos]:
        """Every feature a cook standing at ``position`` can walk up to."""
        return self._within_reach.get(self.region.get(position, -1), frozenset())

    def distance(self, pos_and_or: PosOr, feature: Pos) -> int | None:
        """Moves to stand in front of ``feature`` facing it; ``None`` when out of reach."""
        key = (pos_and_or, feature)
        if key not in self._distance:
            costs = [
                plan[2] - 1
                for goal in self.goals.get(feature, ())
                if (plan := self.planner.all_plans.get((pos_and_or, goal))) is not None
            ]
            self._distance[key] = min(costs) if costs else None
        return self._distance[key]

    def approach(self, pos_and_or: PosOr, features: tuple[Pos, ...]) -> Approach:
        """How a cook at ``pos_and_or`` works at the nearest of ``features`` (remembered)."""
        key = (pos_and_or, features)
        known = self._approaches.get(key)
        if known is None:
            known = self._approaches[key] = self._approach(pos_and_or, features)
        return known

    def _approach(self, pos_and_or: PosOr, features: tuple[Pos, ...]) -> Approach:
        here = pos_and_or[0]
        facing = [goal for t in features for goal in self.goals[t]]
        at = turn = first = None
        cells: tuple[Pos, ...] = ()
        if pos_and_or in facing:
            at = next(t for t in features if pos_and_or in self.goals[t])
        else:
            turn = next((goal[1] for goal in facing if goal[0] == here), None)
        nearest = self.nearest(pos_and_or, features)
        if at is None and turn is None and nearest is not None:
            plans = [
                plan
                for goal in self.goals[nearest[0]]
                if (plan := self.planner.all_plans.get((pos_and_or, goal))) is not None
            ]
            action_plan, path, _ = min(plans, key=lambda plan: plan[2])
            first, cells = action_plan[0], tuple(cell for cell, _ in path)
        return Approach(at, turn, first, cells, frozenset(cells), frozenset({here, *cells}),
                        frozenset(goal[0] for goal in facing))

    def plan_cells(self, pos_and_or: PosOr, features: tuple[Pos, ...]) -> frozenset[Pos]:
        """Every cell of the shortest plans from ``pos_and_or`` to each place in front of the
        nearest of ``features`` (where a cook heading there may walk; remembered)."""
        key = (pos_and_or, features)
        known = self._plan_cells.get(key)
        if known is None:
            nearest = self.nearest(pos_and_or, features)
            cells: set[Pos] = set()
            if nearest is not None:
                for goal in self.goals[nearest[0]]:
                    plan = self.planner.all_plans.get((pos_and_or, goal))
                    if plan is not None:
                        cells.update(pos for pos, _ in plan[1])
            known = self._plan_cells[key] = frozenset(cells)
        return known

    def aside_order(self, here: Pos, occupied: tuple[Pos, ...]) -> tuple[Pos, ...]:
        """The free cells next to ``here`` (none of ``occupied``), best first to step aside to:
        the most exits, then the farthest from ``occupied``, then in the order of directions
        (remembered)."""
        key = (here, occupied)
        known = self._aside_orders.get(key)
        if known is None:
            neighbours = self.neighbours

            def rank(cell: Pos) -> tuple[int, int]:
                spread = min(abs(cell[0] - o[0]) + abs(cell[1] - o[1]) for o in occupied) if occupied else 0
                return (-len(neighbours[cell]), -spread)

            known = self._aside_orders[key] = tuple(
                sorted((cell for cell in neighbours[here] if cell not in occupied), key=rank)
            )
        return known

    def detour(self, start: Pos, goal_cells: frozenset[Pos], blocked: frozenset[Pos]) -> tuple[Pos, ...] | None:
        """The cells of a shortest walk from ``start`` to any of ``goal_cells`` around
        ``blocked`` (``None`` when there is none; remembered)."""
        key = (start, goal_cells, blocked)
        if key not in self._detours:  # (None is a remembered answer: no walk)
            if len(self._detours) >= _MAX_DETOURS:  # (blocked cells add up over a long run)
                self._detours.clear()
            self._detours[key] = self._walk(start, goal_cells, blocked)
        return self._detours[key]

    def _walk(self, start: Pos, goal_cells: frozenset[Pos], blocked: frozenset[Pos]) -> tuple[Pos, ...] | None:
        previous: dict[Pos, Pos] = {start: start}  # (the walk back stops at start, never reading its entry)
        queue = deque([start])
        neighbours = self.neighbours
        while queue:
            cell = queue.popleft()
            if cell in goal_cells and cell != start:
                route = []
                while cell != start:
                    route.append(cell)
                    cell = previous[cell]
                return tuple(route[::-1])
            for nxt in neighbours[cell]:
                if nxt not in blocked and nxt not in previous:
                    previous[nxt] = cell
                    queue.append(nxt)
        return None

    def nearest(self, pos_and_or: PosOr, features: Iterable[Pos]) -> tuple[Pos, int] | None:
        """The closest reachable feature among ``features`` and its distance."""
        best: tuple[Pos, int] | None = None
        for feature in features:
            d = self.distance(pos_and_or, feature)
            if d is not None and (best is None or d < best[1]):
                best = (feature, d)
        return best
