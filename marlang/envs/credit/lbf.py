"""Level-based foraging (the ``lbforaging`` 2.0 package) with numeric and ego-view text observations.

Agents with levels walk a grid and load food together: a food is collected when the agents
loading it next to it have levels summing to at least its level. Scenario ids follow LLM-MCA.
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
from lbforaging.foraging.environment import Action, ForagingEnv

from marlang.envs.core.base import env_metadata
from marlang.envs.core.numeric import (
    StepOutcome,
    rank_sign,
)
from marlang.envs.credit.scenarios import (
    LBF_MAX_STEPS,
    LBFScenario,
    ScenarioEnv,
    ScenarioTeam,
    make_scenario_env,
)

logger = logging.getLogger(__name__)

LBF_ACTIONS: tuple[str, ...] = (
    "stay",
    "move north",
    "move south",
    "move west",
    "move east",
    "load food",
)
"""Action names; index i is the package's ``Action(i)`` (north is row - 1, west is column - 1)."""


Cell = tuple[int, int]
_MOVES: Mapping[int, Cell] = {1: (-1, 0), 2: (1, 0), 3: (0, -1), 4: (0, 1)}


@dataclass(frozen=True)
class LBFSnapshot:
    """Foraging state for ranking: agents' positions, levels and collected scores; foods left."""

    positions: tuple[Cell, ...]
    levels: tuple[int, ...]
    scores: tuple[float, ...]
    foods: tuple[tuple[int, int, int], ...]
    """(row, column, level) of every food still on the grid."""


class LevelBasedForagingEnv(ScenarioEnv):
    """Level-based foraging with ``agent_i`` as the package's player i.

    Numeric observations are the package's vector observation: (row, column, level) of each
    visible food (``-1, -1, 0`` padding up to the food count), then of the agent itself and of
    the visible teammates. Within limited sight these coordinates are relative to the corner
    of the agent's (clipped) view window, as in the package; the ego text gives absolute
    ``(row, column)`` cells (row 0 is the north edge).

    Rewards are the package's individual ones: a loading agent gets ``its level * food level /
    (levels loading * total food level)``, so the team's summed return is 1 when all food is
    collected (``shared_reward=True`` gives every agent that team sum instead). The episode
    terminates when all food is collected and truncates at ``max_steps`` (the package itself
    reports its time limit as termination). A masked (invalid) action does nothing.
    """

    all_actions: ClassVar[tuple[str, ...]] = LBF_ACTIONS
    metadata: ClassVar[dict[str, Any]] = env_metadata("level_based_foraging_v0")
    world_description: ClassVar[str] = "a grid field where agents with levels load food together"

    default_max_steps: ClassVar[int] = LBF_MAX_STEPS
    default_env_id: ClassVar[str] = "lbf"
    scenario: LBFScenario

    def _open_package(self) -> None:
        scenario = self.scenario
        self.sight = scenario.size if scenario.sight is None else scenario.sight
        self.lbf = ForagingEnv(
            players=scenario.players,
            min_player_level=1,
            max_player_level=2,
            min_food_level=1,
            max_food_level=None,
            field_size=(scenario.size, scenario.size),
            max_num_food=scenario.foods,
            sight=self.sight,
            max_episode_steps=self.max_steps,
            force_coop=scenario.coop,
            grid_observation=False,
        )
        box = self.lbf.observation_space[0]
        self._observation_box = Box(box.low, box.high, dtype=np.float32)
        top_level = float(box.high[2])
        n, f = scenario.players, scenario.foods
        low = np.array([-1, -1, 0] * f + [0, 0, 1] * n, dtype=np.float32)
        high = np.array(
            [scenario.size - 1, scenario.size - 1, top_level] * f
            + [scenario.size - 1, scenario.size - 1, 2] * n,
            dtype=np.float32,
        )
        self._state_box = Box(low, high, dtype=np.float32)
        food_rule = (
            "every food needs the levels of the whole team (up to three agents)"
            if scenario.coop
            else "a food needs agents whose levels add up to at least its level"
        )
        self._mission = (
            "Collect all the food on the field as fast as possible. Move next to a food (north, "
            "south, west or east of it) and load it; it is collected when the agents loading it "
            f"together have levels adding up to at least the food's level ({food_rule})."
        )

    # ----------------------------------------------------------------- base API

    def action_mask(self, agent: str) -> np.ndarray:
        player = self.lbf.players[self._index[agent]]
        mask = np.zeros(len(LBF_ACTIONS), dtype=np.int8)
        for action in self.lbf._valid_actions[player]:
            mask[action.value] = 1
        return mask

    def state(self) -> np.ndarray:
        """Every food (row, column, level; ``-1, -1, 0`` once collected) in row-major order,
        then every agent's (row, column, level) in agent order."""
        self._require_started("state")
        values = [-1.0, -1.0, 0.0] * self.scenario.foods
        for k, (row, col) in enumerate(zip(*np.nonzero(self.lbf.field), strict=True)):
            values[3 * k : 3 * k + 3] = [row, col, self.lbf.field[row, col]]
        for player in self.lbf.players:
            values += [player.position[0], player.position[1], player.level]
        return np.array(values, dtype=np.float32)

    def ego_text(self, agent: str) -> str:
        data = self.observation_data(agent)
        row, col = data["position"]
        size = self.scenario.size
        view = (
            "You see the whole field."
            if self.scenario.sight is None
            else f"You see {self.sight} cells around you in every direction."
        )
        lines = [
            (
                f"The field has {size} rows and {size} columns; (row, column) cells, row 0 is "
                f"the north edge and column 0 the west edge. {view}"
            ),
            f"You are {agent} at ({row}, {col}), level {data['level']}.",
        ]
        if data["teammates"]:
            for mate in data["teammates"]:
                r, c = mate["position"]
                lines.append(f"Teammate {mate['agent']} is at ({r}, {c}), level {mate['level']}.")
        else:
            lines.append("You see no teammate.")
        if data["food"]:
            for food in data["food"]:
                r, c = food["position"]
                where = " (next to you)" if food["adjacent"] else ""
                lines.append(f"Food at ({r}, {c}), level {food['level']}{where}.")
        else:
            lines.append("You see no food.")
        left = int(np.count_nonzero(self.lbf.field))
        lines.append(
            f"Step {self.step_count} of {self.max_steps}; {left} of {self.scenario.foods} foods "
            "are left on the field."
        )
        return "\n".join(lines)

    def observation_data(self, agent: str) -> dict[str, Any]:
        self._require_started("observation_data")
        i = self._index[agent]
        me = self.lbf.players[i]
        row, col = int(me.position[0]), int(me.position[1])
        teammates = [
            {
                "agent": self.possible_agents[j],
                "position": [int(p.position[0]), int(p.position[1])],
                "level": int(p.level),
            }
            for j, p in enumerate(self.lbf.players)
            if j != i and self._sees_player(me.position, p.position)
        ]
        food = [
            {
                "position": [r, c],
                "level": int(self.lbf.field[r, c]),
                "adjacent": abs(r - row) + abs(c - col) == 1,
            }
            for r, c in self._visible_food(row, col)
        ]
        return {
            "agent": agent,
            "position": [row, col],
            "level": int(me.level),
            "score": float(me.score),
            "teammates": teammates,
            "food": food,
            "step": self.step_count,
        }

    def state_text(self) -> str:
        players = "; ".join(
            f"{agent} at ({int(p.position[0])}, {int(p.position[1])}) level {int(p.level)}"
            for agent, p in zip(self.possible_agents, self.lbf.players, strict=True))
        foods = ", ".join(f"({int(r)}, {int(c)}) level {int(self.lbf.field[r, c])}"
                          for r, c in zip(*np.nonzero(self.lbf.field), strict=True))
        return f"{players}; food left: {foods or 'none'}"

    def rank_snapshot(self) -> LBFSnapshot:
        self._require_started("rank_snapshot")
        players = self.lbf.players
        return LBFSnapshot(
            positions=tuple((int(p.position[0]), int(p.position[1])) for p in players),
            levels=tuple(int(p.level) for p in players),
            scores=tuple(float(p.score) for p in players),
            foods=tuple(
                (int(r), int(c), int(self.lbf.field[r, c]))
                for r, c in zip(*np.nonzero(self.lbf.field), strict=True)
            ),
        )

    def rank_states(self, agent: str, a: LBFSnapshot, b: LBFSnapshot) -> int:
        """Ranks by the agent's own collected score, then the team's food left (fewer is
        better), then the agent's distance to the nearest food left (closer is better)."""
        i = self._index[agent]
        return rank_sign(_forage_score(i, b), _forage_score(i, a))

    def scripted_team(self) -> LBFGreedyTeam:
        return LBFGreedyTeam(self)

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self._observations, _ = self.lbf.reset(seed=seed)

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        joint = [actions[agent] for agent in self.possible_agents]
        self._observations, rewards, _, _, _ = self.lbf.step(joint)
        collected = not self.lbf.field.any()
        return self._outcome(rewards, terminated=collected, success=collected)

    # ----------------------------------------------------------------- internals

    def _visible_food(self, row: int, col: int) -> list[Cell]:
        """Food cells in the agent's (clipped) square view, row-major (the package's order)."""
        s = self.sight
        r0, c0 = max(row - s, 0), max(col - s, 0)
        window = self.lbf.field[r0 : row + s + 1, c0 : col + s + 1]
        return [(int(r0 + r), int(c0 + c)) for r, c in zip(*np.nonzero(window), strict=True)]

    def _sees_player(self, viewer: Cell, other: Cell) -> bool:
        """The package's visibility rule: the other player's cell, measured from the viewer's
        clipped view corner, lies in ``0..2 * sight`` on both axes."""
        s = self.sight
        r = other[0] - viewer[0] + min(s, viewer[0])
        c = other[1] - viewer[1] + min(s, viewer[1])
        return 0 <= r <= 2 * s and 0 <= c <= 2 * s


def _forage_score(i: int, snapshot: LBFSnapshot) -> tuple[float, int, int]:
    row, col = snapshot.positions[i]
    distance = min((abs(r - row) + abs(c - col) for r, c, _ in snapshot.foods), default=0)
    return (round(snapshot.scores[i], 9), -len(snapshot.foods), -distance)


class LBFGreedyTeam(ScenarioTeam):
    """Reference team: groups go to the nearest food they can load together and load it.

    Every step it plans from the true state: foods are taken in turn by the cheapest group
    of unassigned agents (nearest first) whose levels reach the food's level, where a
    group's cost is its farthest member's distance; leftover agents join the nearest
    group. Agents walk a shortest path (around foods and teammates) to a free cell next to
    their food, load when next to it, and take a random free move after three steps stuck.
    It reads the true state (whatever the sight). All food collected within 50 steps on
    seeds 0..99: every seed on every scenario but ``lbf/15x15-3p-5f`` (93; mean team return
    0.98).
    """

    env: LevelBasedForagingEnv

    def reset(self) -> None:
        self._stuck: dict[int, int] = {}
        self._last: dict[int, Cell] = {}

    def _joint_action(self, observations: Any) -> dict[str, str]:
        """Joint action (action names, as LLM agents give them) for the live agents."""
        env = self.env
        lbf = env.lbf
        positions = [(int(p.position[0]), int(p.position[1])) for p in lbf.players]
        levels = [int(p.level) for p in lbf.players]
        foods = {
            (int(r), int(c)): int(lbf.field[r, c])
            for r, c in zip(*np.nonzero(lbf.field), strict=True)
        }
        for i, cell in enumerate(positions):
            self._stuck[i] = self._stuck.get(i, 0) + 1 if self._last.get(i) == cell else 0
            self._last[i] = cell
        targets = _assign_targets(positions, levels, foods)
        reserved: set[Cell] = set()
        actions: dict[str, str] = {}
        for i, agent in enumerate(env.possible_agents):
            if agent not in env.agents:
                continue
            index = self._choose(i, positions, foods, targets.get(i), reserved)
            actions[agent] = LBF_ACTIONS[index]
        return actions

    def _choose(
        self,
        i: int,
        positions: list[Cell],
        foods: Mapping[Cell, int],
        target: Cell | None,
        reserved: set[Cell],
    ) -> int:
        here = positions[i]
        if target is None:
            return Action.NONE.value
        if abs(here[0] - target[0]) + abs(here[1] - target[1]) == 1:
            return Action.LOAD.value
        size = self.env.scenario.size
        others = {p for j, p in enumerate(positions) if j != i}
        blocked = set(foods) | others | reserved
        goals = {
            (target[0] + dr, target[1] + dc)
            for dr, dc in _MOVES.values()
            if 0 <= target[0] + dr < size and 0 <= target[1] + dc < size
        }
        move = None
        if self._stuck.get(i, 0) < 3:
            move = _first_move(here, goals - blocked, blocked, size)
        if move is None:
            free = [
                a
                for a, (dr, dc) in _MOVES.items()
                if 0 <= here[0] + dr < size
                and 0 <= here[1] + dc < size
                and (here[0] + dr, here[1] + dc) not in blocked
            ]
            if not free:
                return Action.NONE.value
            move = int(self._rng.choice(free))
            self._stuck[i] = 0
        dr, dc = _MOVES[move]
        reserved.add((here[0] + dr, here[1] + dc))
        return move


def _assign_targets(
    positions: list[Cell], levels: list[int], foods: Mapping[Cell, int]
) -> dict[int, Cell]:
    """Agent index -> the food its group goes for (see ``LBFGreedyTeam``)."""

    def distance(i: int, food: Cell) -> int:
        return abs(positions[i][0] - food[0]) + abs(positions[i][1] - food[1]) - 1

    free = set(range(len(positions)))
    left = dict(foods)
    targets: dict[int, Cell] = {}
    while free and left:
        best: tuple[int, Cell, list[int]] | None = None
        for food, level in left.items():
            group, total = [], 0
            for i in sorted(free, key=lambda j: (distance(j, food), j)):
                group.append(i)
                total += levels[i]
                if total >= level:
                    break
            if total < level:
                continue
            cost = max(distance(i, food) for i in group)
            if best is None or (cost, food) < (best[0], best[1]):
                best = (cost, food, group)
        if best is None:
            break
        _, food, group = best
        for i in group:
            targets[i] = food
        free -= set(group)
        del left[food]
    for i in free:
        candidates = set(targets.values()) or set(foods)
        if candidates:
            targets[i] = min(candidates, key=lambda f: (distance(i, f), f))
    return targets


def _first_move(start: Cell, goals: set[Cell], blocked: set[Cell], size: int) -> int | None:
    """The first action of a shortest path from ``start`` to any of ``goals`` (BFS)."""
    if not goals:
        return None
    first: dict[Cell, int | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell in goals:
            return first[cell]
        for action, (dr, dc) in _MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt in first or nxt in blocked or not (0 <= nxt[0] < size and 0 <= nxt[1] < size):
                continue
            first[nxt] = action if first[cell] is None else first[cell]
            queue.append(nxt)
    return None


make_lbf = functools.partial(make_scenario_env, LevelBasedForagingEnv)
"""The entry point of the ``lbf/`` ids (``marlang.envs.builtin``)."""
