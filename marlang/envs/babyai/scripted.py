"""Scripted reference team for multi-agent BabyAI: minigrid's BabyAIBot drives, teammates make way.

It reads the true world state (not just the text), so its score is a reference point for
learning agents (an upper baseline), not a competitor.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import numpy as np
from minigrid.core.actions import Actions
from minigrid.core.world_object import Wall
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.utils.baby_ai_bot import BabyAIBot, DisappearedBoxError

from marlang.envs.babyai.agent import ACTIONS, AgentState
from marlang.types import TextObservation

logger = logging.getLogger(__name__)

Cell = tuple[int, int]

_NEEDS_FRONT_CELL = (Actions.forward, Actions.drop, Actions.toggle)
# Longest the driver backs off for a teammate before going back to its plan.
_MAX_RETREAT = 12
# What BabyAIBot raises when the world no longer matches its plan.
_BOT_ERRORS = (AssertionError, DisappearedBoxError, IndexError)


class BabyAIWorld(Protocol):
    """What the team reads of its env (``BabyAITextEnv``): the agents, their bodies, the level,
    who stands where, and the level as one agent's body sees it."""

    possible_agents: list[str]
    agents: list[str]

    @property
    def agent_states(self) -> Mapping[str, AgentState]: ...

    @property
    def level(self) -> RoomGridLevel: ...

    def agent_at(self, position: Cell) -> str | None: ...

    def embodied(self, agent: str) -> contextlib.AbstractContextManager[RoomGridLevel]: ...


class ScriptedBabyAITeam:
    """A scripted team: one driver follows minigrid's ``BabyAIBot``, the others make way.

    The driver (``agent_0`` by default) runs the bot with its own body loaded into the level.
    Teammates wait in open cells (three or more ways out) and step aside whenever they stand
    where the driver is about to walk, drop or toggle. A teammate that cannot step aside
    (in a dead end, or boxed in) is shown to the bot as a wall so that it plans around it;
    if the bot then finds no way, that teammate is sent away and the bot replans. If a
    teammate stays stuck in front of the driver, the driver backs off until it is out.

    Waiting uses a legal action with no effect (``drop`` with empty hands, ``pick up`` with
    full hands). When a teammate blocks the driver, the driver waits and the bot is told
    nothing happened, so its plan stays valid.

    Usage: ``team = env.scripted_team(); obs, _ = env.reset(seed=0); team.reset()``, then
    ``env.step(team.act(obs))`` until the episode ends.
    """

    def __init__(self, env: BabyAIWorld, driver: str = "agent_0"):
        if driver not in env.possible_agents:
            raise ValueError(f"driver must be one of {env.possible_agents}, got {driver!r}")
        self.env = env
        self.driver = driver
        self._bot: BabyAIBot | None = None
        self._report: Actions | None = None
        self._parked: dict[str, Cell] = {}
        """Teammates the bot plans around, with the cell they hold."""
        self._evicted: dict[str, Cell] = {}
        """Teammates that must leave the cell they hold: the bot found no way around them."""
        self._seen: np.ndarray | None = None
        """What a failed bot had seen, handed to its replacement."""
        self._waited = 0
        """Consecutive steps the driver has waited for a teammate to make way."""
        self._making_room_for: str | None = None
        """A teammate that cannot get past the driver: the driver backs off until it has."""
        self._retreat_steps = 0

    def reset(self) -> None:
        """Forget the current plan (call after ``env.reset``; a step-0 observation does too)."""
        self._bot = None
        self._report = None
        self._parked.clear()
        self._evicted.clear()
        self._seen = None
        self._waited = 0
        self._making_room_for = None
        self._retreat_steps = 0

    def act(self, observations: Mapping[str, TextObservation]) -> dict[str, str]:
        """Joint action (one legal action string per live agent) for the current step."""
        env = self.env
        if observations[self.driver].data["step"] == 0:
            self.reset()
        states = dict(env.agent_states)
        driver = states[self.driver]
        teammates = [agent for agent in env.agents if agent != self.driver]
        occupied = {state.position for state in states.values()}
        self._update_parking(teammates, states, occupied)

        suggestion = self._bot_suggestion()
        blocked = suggestion in _NEEDS_FRONT_CELL and driver.front in occupied
        self._waited = self._waited + 1 if blocked else 0
        if blocked and self._making_room_for is None:
            boxed_in = all(cell in occupied for cell in self._exits(driver.front))
            if self._waited > 4 or (boxed_in and self._waited > 1):
                # The teammate ahead cannot get out past the driver: back off until it has.
                self._making_room_for = env.agent_at(driver.front)
        retreat, hemmed_in = self._retreat(driver, states, occupied)

        if retreat is not None and retreat != "wait":
            driver_action: Actions | None = Actions(ACTIONS.index(retreat))
        elif retreat == "wait" or suggestion is None or suggestion == Actions.done or blocked:
            driver_action = None
        else:
            driver_action = suggestion
        if driver_action is None:
            actions = {self.driver: _idle_action(driver)}
            self._report = Actions.done  # every bot subgoal reads "done" as "nothing happened"
            driver_next = driver
        else:
            actions = {self.driver: ACTIONS[driver_action]}
            self._report = None if driver_action == suggestion else driver_action
            driver_next = self._predict(driver, driver_action)

        # Cells the driver needs now or next step, and the straight line it is heading along.
        needed = {driver.position, driver_next.position}
        if driver_action in _NEEDS_FRONT_CELL or (blocked and retreat is None):
            needed |= {driver.front, driver_next.front}
        if hemmed_in:
            needed |= set(self._exits(driver.position))
        lane = needed | set(self._ray(driver_next))

        def open_cell(cell: Cell) -> bool:
            # Three or more ways out and off the driver's heels: nobody waiting here
            # blocks an approach to anything.
            return (
                cell not in lane
                and len(self._exits(cell)) >= 3
                and _distance(cell, driver.position) > 1
                and _distance(cell, driver_next.position) > 1
            )

        for agent in teammates:
            me = states[agent]
            others = (occupied - {me.position}) | {driver_next.position}
            action = None
            if me.position in needed:
                action = (
                    self._move_to(me, others, open_cell)
                    or self._move_to(me, others, lambda c: c not in lane and not self._dead_end(c))
                    or self._move_to(me, others, lambda c: c not in lane)
                    or self._move_to(me, others, lambda c: c not in needed)
                )
            elif agent in self._evicted:
                action = self._move_to(me, others, open_cell) or self._move_to(
                    me, others, lambda c: c not in lane and not self._dead_end(c)
                )
            elif agent not in self._parked and len(self._exits(me.position)) <= 2:
                # Corridors are passed through and lead to things: wait somewhere open.
                action = self._move_to(me, others, open_cell)
            actions[agent] = action or _idle_action(me)
        return {agent: actions[agent] for agent in env.agents}

    # ----------------------------------------------------------------- planning the driver

    def _update_parking(
        self, teammates: list[str], states: Mapping[str, AgentState], occupied: set[Cell]
    ) -> None:
        """Park teammates that cannot make way (dead end, or boxed in) until they move."""
        for register in (self._parked, self._evicted):
            for agent, cell in list(register.items()):
                if agent not in teammates or states[agent].position != cell:
                    del register[agent]
        for agent in teammates:
            position = states[agent].position
            if agent in self._parked or agent in self._evicted:
                continue
            if self._dead_end(position) or all(c in occupied for c in self._exits(position)):
                self._parked[agent] = position

    def _bot_suggestion(self) -> Actions | None:
        """The bot's next action for the driver (``None``: no plan this step)."""
        with self.env.embodied(self.driver) as level:
            if self._bot is not None:
                try:
                    with _stand_ins(level, set(self._parked.values())):
                        return self._bot.replan(self._report)
                except _BOT_ERRORS as error:
                    # No plan fits any more (often: a parked teammate holds the only way).
                    # Send parked teammates away and plan afresh, keeping what was seen.
                    logger.debug("BabyAIBot failed (%r); replanning from scratch", error)
                    self._evicted.update(self._parked)
                    self._parked.clear()
                    self._seen = self._bot.vis_mask
                    self._bot = None
            if self._seen is not None and level.carrying is not None:
                # A fresh plan assumes empty hands: put the object down first.
                put_down = self._put_down(AgentState(level.agent_pos, level.agent_dir))
                if put_down is not None:
                    return put_down
            try:
                with _stand_ins(level, set(self._parked.values())):
                    self._bot = BabyAIBot(level)
                    if self._seen is not None:
                        self._bot.vis_mask = self._seen.copy()
                    return self._bot.replan()
            except _BOT_ERRORS as error:
                logger.debug("BabyAIBot failed on a fresh plan (%r); waiting a step", error)
                if self._bot is not None:
                    self._seen = self._bot.vis_mask
                self._bot = None
                return None

    def _put_down(self, state: AgentState) -> Actions | None:
        """Drop ahead if that cell is free, else turn towards a free one (``None``: none)."""

        def free(cell: Cell) -> bool:
            return self.env.level.grid.get(*cell) is None and self.env.agent_at(cell) is None

        if free(state.front):
            return Actions.drop
        if free(AgentState(state.position, (state.direction + 1) % 4).front):
            return Actions.right
        if any(free(AgentState(state.position, d).front) for d in range(4)):
            return Actions.left
        return None

    def _retreat(
        self, driver: AgentState, states: Mapping[str, AgentState], occupied: set[Cell]
    ) -> tuple[str | None, bool]:
        """While making room for a teammate that cannot get past the driver: the driver's
        move away (``"wait"`` once the teammate has a way out), and whether the driver is
        hemmed in itself (its neighbours must then make way)."""
        blocker = self._making_room_for
        if blocker is None:
            return None, False
        me = states.get(blocker)
        self._retreat_steps += 1
        if (
            me is None
            or self._retreat_steps > _MAX_RETREAT
            or (len(self._exits(me.position)) >= 3 and _distance(me.position, driver.position) > 1)
        ):
            self._making_room_for = None
            self._retreat_steps = 0
            return None, False
        self._evicted[blocker] = me.position

        def lets_blocker_out(spot: Cell) -> bool:
            # With the driver on ``spot``, the blocker can reach an open cell clear of it.
            others = (occupied - {driver.position, me.position}) | {spot}
            found, _ = self._route(
                me, others, lambda c: _distance(c, spot) > 1 and len(self._exits(c)) >= 3
            )
            return found

        if lets_blocker_out(driver.position):
            return "wait", False
        action = self._move_to(driver, occupied - {driver.position}, lets_blocker_out)
        return action, action is None

    def _predict(self, state: AgentState, action: Actions) -> AgentState:
        """The driver's pose after ``action`` (teammates act after it, so none is in its way)."""
        if action == Actions.left:
            return AgentState(state.position, (state.direction - 1) % 4, state.carrying)
        if action == Actions.right:
            return AgentState(state.position, (state.direction + 1) % 4, state.carrying)
        if action == Actions.forward and self._passable(state.front):
            return AgentState(state.front, state.direction, state.carrying)
        return state

    # ----------------------------------------------------------------- moving teammates

    def _passable(self, cell: Cell) -> bool:
        obj = self.env.level.grid.get(*cell)
        return obj is None or obj.can_overlap()

    def _exits(self, cell: Cell) -> list[Cell]:
        """Walkable neighbours of ``cell`` (agents ignored)."""
        neighbours = (AgentState(cell, direction).front for direction in range(4))
        return [n for n in neighbours if self._passable(n)]

    def _dead_end(self, cell: Cell) -> bool:
        """At most one way out: whoever waits here blocks the only approach to it."""
        return len(self._exits(cell)) <= 1

    def _ray(self, state: AgentState) -> list[Cell]:
        """Walkable cells straight ahead of ``state`` up to the first obstacle."""
        cells: list[Cell] = []
        cursor = state
        while self._passable(cursor.front) and len(cells) < self.env.level.agent_view_size:
            cursor = AgentState(cursor.front, cursor.direction)
            cells.append(cursor.position)
        return cells

    def _move_to(
        self, state: AgentState, occupied: set[Cell], goal: Callable[[Cell], bool]
    ) -> str | None:
        """First action towards the nearest cell where ``goal`` holds (``None`` if there is
        none, or ``state`` already stands on one)."""
        return self._route(state, occupied, goal)[1]

    def _route(
        self, state: AgentState, occupied: set[Cell], goal: Callable[[Cell], bool]
    ) -> tuple[bool, str | None]:
        """Shortest turn/move sequence from ``state`` to a cell where ``goal`` holds, avoiding
        ``occupied``: (whether one exists, its first action; ``None`` if already there)."""
        start = (state.position, state.direction)
        first_action: dict[tuple[Cell, int], str | None] = {start: None}
        queue = deque([start])
        while queue:
            position, direction = queue.popleft()
            if goal(position):
                return True, first_action[(position, direction)]
            ahead = AgentState(position, direction).front
            moves = [
                ("turn left", (position, (direction - 1) % 4)),
                ("turn right", (position, (direction + 1) % 4)),
            ]
            if self._passable(ahead) and ahead not in occupied:
                moves.insert(0, ("go forward", (ahead, direction)))
            for action, successor in moves:
                if successor not in first_action:
                    first_action[successor] = first_action[(position, direction)] or action
                    queue.append(successor)
        return False, None


class _TeammateStandIn(Wall):
    """What the bot sees where a parked teammate stands: a wall it can see past."""

    def see_behind(self) -> bool:
        return True


@contextlib.contextmanager
def _stand_ins(level: RoomGridLevel, cells: set[Cell]) -> Iterator[None]:
    """Temporarily put a ``_TeammateStandIn`` on each of ``cells``, restoring what was there."""
    saved = {cell: level.grid.get(*cell) for cell in cells}
    for cell in cells:
        level.grid.set(*cell, _TeammateStandIn())
    try:
        yield
    finally:
        for cell, obj in saved.items():
            level.grid.set(*cell, obj)


def _distance(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _idle_action(state: AgentState) -> str:
    """A legal action that changes nothing: dropping with empty hands, picking up with full."""
    return "pick up" if state.carrying is not None else "drop"


def make_scripted_team(env: BabyAIWorld, driver: str = "agent_0") -> ScriptedBabyAITeam:
    """The scripted reference team for ``env`` (same as ``env.scripted_team()``)."""
    return ScriptedBabyAITeam(env, driver=driver)
