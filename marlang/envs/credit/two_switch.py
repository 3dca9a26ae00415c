"""Two-Switch, the LCA grid world of behaviour dependence: two agents in the upper room must
trigger both switches to unlock the door to the lower room, where one of them reaches the goal.
Numeric and ego-text observations, a reference team and the reference ranking heuristic.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from marlang.envs.core.base import ScriptedTeam, env_metadata
from marlang.envs.credit.grid import UNREACHABLE, capitalized, reach_steps
from marlang.envs.credit.gridworld import (
    Cell,
    FacingGridEnv,
    FacingState,
    FeatureSpaces,
    GridEvent,
    GridLayout,
    MoveIntent,
    RankedByKey,
    bfs_distances,
    choose_joint_moves,
    direction_between,
    facing_cost_to_go,
    facing_distances_from,
    facing_goals,
    format_cell,
    make_grid_env,
    steps_phrase,
)

logger = logging.getLogger(__name__)

TWO_SWITCH_MAP: tuple[str, ...] = (
    "UUUUUUUUU",
    "UUUUUUUUU",
    "UUUUUUUUU",
    "UUUUUUUUU",
    "UUUUUUUUU",
    "UUUUUUUUU",
    "####D####",
    "LLLLLLLLL",
    "LLLLLLLLL",
)
"""The 9x9 grid of the LCA Two-Switch prompt: the upper room (y 3..8), a wall at y = 2 with
the door at (4, 2), the lower room (y 0..1). First row is the top."""

TWO_SWITCH_LAYOUT = GridLayout.from_rows(
    TWO_SWITCH_MAP, {"U": "the upper room", "D": "the doorway", "L": "the lower room"}
)
SWITCHES: tuple[Cell, ...] = ((1, 8), (7, 8))
"""Switch A and switch B, on the top row of the upper room."""
SWITCH_NAMES: tuple[str, ...] = ("switch A", "switch B")
DOOR: Cell = (4, 2)
DOOR_APPROACH: Cell = (4, 3)
"""Where an agent waits for the door to open."""
GOAL: Cell = (4, 0)
NUMERIC_SIZE = 24
STATE_SIZE = 16


@dataclass(frozen=True)
class TwoSwitchSnapshot:
    """The whole Two-Switch state at one step (what ``rank_states`` compares)."""

    positions: tuple[Cell, ...]
    facings: tuple[str, ...]
    triggered: tuple[bool, ...]
    triggered_by: tuple[str | None, ...]
    goal_reached_by: str | None
    step: int

    @property
    def door_open(self) -> bool:
        return all(self.triggered)


class TwoSwitchEnv(RankedByKey, FeatureSpaces, FacingGridEnv):
    """LCA's Two-Switch grid world (two agents, 9x9; see ``TWO_SWITCH_MAP``).

    Agents start at distinct random cells of the upper room facing random ways. An agent
    triggers a switch by standing next to it, facing it and using ``toggle`` (a triggered
    switch stays triggered). The door opens once both switches are triggered (in the same
    step, before moves); the episode terminates with success when an agent steps on the goal.

    Team reward (every agent): +1 per switch triggered, +1 when the goal is reached, so an
    optimal episode of ``n`` steps returns ``3 - n / max_steps`` with the step penalty. With
    ``individual_rewards`` the triggering/arriving agent gets +1 more (LCA's individual
    baseline reward). The time limit (``max_steps``, default 100) truncates.

    Numeric observation (24 floats in [-1, 1], a global view centred on the ego): ego x, y
    (scaled to [0, 1]), ego facing one-hot (up, down, left, right); teammate offset (dx, dy
    over 8) and facing; offsets from the ego to switch A, switch B, the door and the goal;
    switch A triggered, switch B triggered, door open; step / max_steps. ``state()`` (16):
    each agent's x, y, facing, then the three flags and step / max_steps.

    ``reset(options={"agent_positions": [(x, y), ...], "agent_facings": ["up", ...]})``
    places the agents (other option keys are ignored).

    ``scripted_team()`` plays optimally (it matched an exhaustive search over joint states on
    every seed checked). With the LCA coordinates the walk from a switch to the door is longer
    than the walk between the switches, so one agent toggling both while the other waits by
    the door is never slower than one switch each; ``rank_states`` still ranks by the split
    the LCA prompt asks for.
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("two_switch_v0")
    world_description: ClassVar[str] = (
        "a two-room grid whose door opens only after both switches are triggered"
    )

    layout = TWO_SWITCH_LAYOUT
    interactions = ("toggle", "toggle")
    default_env_id = "gridworld/two-switch"
    numeric_size = NUMERIC_SIZE
    state_size = STATE_SIZE
    snapshot_type = TwoSwitchSnapshot

    # ----------------------------------------------------------------- world

    def _clear_world(self) -> None:
        self.triggered = [False, False]
        self.triggered_by: list[str | None] = [None, None]
        self.goal_reached_by: str | None = None

    @property
    def door_open(self) -> bool:
        return all(self.triggered)

    def passable(self, cell: Cell) -> bool:
        return _passable(cell, self.door_open)

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self._seed_rng(seed)
        self._clear_world()
        starts = [c for c in self.layout.cells_in("the upper room") if c not in SWITCHES]
        self._place_agents(starts, options, starts)

    def _switch_faced(self, index: int) -> int | None:
        cell = self.facing_cell(index)
        return SWITCHES.index(cell) if cell in SWITCHES else None

    def _can_interact(self, index: int) -> bool:
        switch = self._switch_faced(index)
        return switch is not None and not self.triggered[switch]

    def _interact(self, index: int) -> list[GridEvent]:
        switch = self._switch_faced(index)
        assert switch is not None
        agent = self.possible_agents[index]
        self.triggered[switch] = True
        self.triggered_by[switch] = agent
        return [GridEvent(agent, f"{agent} triggered {SWITCH_NAMES[switch]}")]

    def _after_moves(self) -> list[GridEvent]:
        for agent, cell in zip(self.possible_agents, self.positions, strict=True):
            if cell == GOAL and self.goal_reached_by is None:
                self.goal_reached_by = agent
                return [GridEvent(agent, f"{agent} reached the goal")]
        return []

    def _task_done(self) -> bool:
        return self.goal_reached_by is not None

    # ----------------------------------------------------------------- observations

    @property
    def mission(self) -> str:
        return (
            "Unlock the door to the lower room by triggering both switches in the upper room "
            "(stand next to a switch, face it and toggle it), then get one agent to the goal "
            "in the lower room, in as few steps as possible."
        )

    def _world_flags(self) -> list[float]:
        return [float(self.triggered[0]), float(self.triggered[1]), float(self.door_open)]

    def _world_features(self, index: int) -> list[float]:
        me = self.positions[index]
        features: list[float] = []
        for cell in (*SWITCHES, DOOR, GOAL):
            features += self.layout.offset(me, cell)
        return features + self._world_flags()

    def ego_text(self, agent: str) -> str:
        index = self.agent_index(agent)
        others = [j for j in range(len(self.positions)) if j != index]
        lines = [self._describe_agent(index, index)]
        lines += [self._describe_agent(j, index) for j in others]
        snapshot = self.rank_snapshot()
        for k, (name, cell) in enumerate(zip(SWITCH_NAMES, SWITCHES, strict=True)):
            if self.triggered[k]:
                by = self.triggered_by[k]
                lines.append(f"{capitalized(name)} at {format_cell(cell)}: triggered by {by}.")
                continue
            mine = _switch_steps(snapshot, index, k)
            theirs = ", ".join(
                f"{steps_phrase(_switch_steps(snapshot, j, k))} from {self.possible_agents[j]}"
                for j in others
            )
            lines.append(
                f"{capitalized(name)} at {format_cell(cell)}: untriggered; "
                f"{steps_phrase(mine)} from you, {theirs}."
            )
        if self.door_open:
            lines.append(f"Door at {format_cell(DOOR)}: open.")
            goal = f"{steps_phrase(_goal_steps(snapshot, index))} from you"
        else:
            lines.append(
                f"Door at {format_cell(DOOR)}: locked; it opens when both switches are triggered."
            )
            steps = _goal_steps(snapshot, index, door_open=True)
            goal = f"{steps_phrase(steps)} from you once the door is open"
        lines.append(f"Goal at {format_cell(GOAL)} in the lower room: {goal}.")
        lines.append(self._facing_sentence(index))
        lines.append(f"Step {self.step_count} of {self.max_steps}.")
        return "\n".join(lines)

    def _facing_sentence(self, index: int) -> str:
        cell = self.facing_cell(index)
        switch = self._switch_faced(index)
        if switch is not None:
            state = "triggered" if self.triggered[switch] else "untriggered: toggle triggers it"
            return f"You face {SWITCH_NAMES[switch]} ({state})."
        if cell == DOOR and not self.door_open:
            return "You face the locked door."
        if not self.layout.is_floor(cell):
            return "You face a wall."
        return f"You face the floor at {format_cell(cell)}."

    def observation_data(self, agent: str) -> dict[str, Any]:
        return {
            **self._agent_data(),
            "switches": {
                name: {"position": list(cell), "triggered": t, "triggered_by": by}
                for name, cell, t, by in zip(
                    SWITCH_NAMES, SWITCHES, self.triggered, self.triggered_by, strict=True
                )
            },
            "door": {"position": list(DOOR), "open": self.door_open},
            "goal": list(GOAL),
            "step": self.step_count,
        }

    # ----------------------------------------------------------------- credit and references

    def rank_snapshot(self) -> TwoSwitchSnapshot:
        self._require_started("rank_snapshot")
        return TwoSwitchSnapshot(
            positions=tuple(self.positions),
            facings=tuple(self.facings),
            triggered=tuple(self.triggered),
            triggered_by=tuple(self.triggered_by),
            goal_reached_by=self.goal_reached_by,
            step=self.step_count,
        )

    def _rank_key(self, snapshot: TwoSwitchSnapshot, index: int) -> tuple[int, int, int, int]:
        """The reference heuristic (after the LCA prompt): the goal reached beats everything,
        then more switches triggered; then fewer estimated team steps to the next milestone,
        then fewer steps for the ego to its own target. Before any switch is triggered the
        team's plan is the switch assignment with the smaller slower-agent time (the ego's
        target is its switch in the best such plan); with one switch left the agent nearer to
        it takes it and the other heads for the door; once the door is open the target is
        the goal. Distances are shortest-path steps (to be next to a switch)."""
        return two_switch_rank_key(snapshot, index)

    def scripted_team(self) -> ScriptedTwoSwitchTeam:
        return ScriptedTwoSwitchTeam(self)


# --------------------------------------------------------------------------- helpers


def _passable(cell: Cell, door_open: bool) -> bool:
    if not TWO_SWITCH_LAYOUT.is_floor(cell) or cell in SWITCHES:
        return False
    return cell != DOOR or door_open


def _passability(door_open: bool) -> Callable[[Cell], bool]:
    return lambda cell: _passable(cell, door_open)


def _distances_from(
    snapshot: TwoSwitchSnapshot, index: int, door_open: bool | None = None
) -> Mapping[Cell, int]:
    is_open = snapshot.door_open if door_open is None else door_open
    return _distances_from_cell(tuple(snapshot.positions[index]), is_open)


@functools.lru_cache(maxsize=1024)
def _distances_from_cell(cell: Cell, door_open: bool) -> Mapping[Cell, int]:
    """Shortest-path steps from ``cell`` on the fixed layout (read-only, shared): the ranking
    heuristic asks for the same few fields thousands of times per batch."""
    return MappingProxyType(bfs_distances(TWO_SWITCH_LAYOUT, [cell], _passability(door_open)))


def _switch_steps(snapshot: TwoSwitchSnapshot, index: int, switch: int) -> int:
    return reach_steps(TWO_SWITCH_LAYOUT, _distances_from(snapshot, index), SWITCHES[switch])


def _goal_steps(snapshot: TwoSwitchSnapshot, index: int, door_open: bool | None = None) -> int:
    return reach_steps(TWO_SWITCH_LAYOUT, _distances_from(snapshot, index, door_open), GOAL)


def two_switch_rank_key(snapshot: TwoSwitchSnapshot, index: int) -> tuple[int, int, int, int]:
    """The ordering ``TwoSwitchEnv.rank_states`` compares (larger is better for agent
    ``index``): goal reached, switches triggered, minus team steps, minus ego steps."""
    if snapshot.goal_reached_by is not None:
        return (1, 2, 0, 0)
    n_agents = len(snapshot.positions)
    others = [j for j in range(n_agents) if j != index]
    remaining = [k for k, t in enumerate(snapshot.triggered) if not t]
    if len(remaining) == 2:
        steps = [[_switch_steps(snapshot, j, k) for k in range(2)] for j in range(n_agents)]
        plans = ((0, 1), (1, 0))
        cost = {p: max(steps[j][p[j]] for j in range(n_agents)) for p in plans}
        team = min(cost.values())
        ego = min(steps[index][p[index]] for p in plans if cost[p] == team)
    elif len(remaining) == 1:
        distances = [_switch_steps(snapshot, j, remaining[0]) for j in range(n_agents)]
        team = min(distances)
        if distances[index] <= min(distances[j] for j in others):
            ego = distances[index]
        else:
            ego = reach_steps(TWO_SWITCH_LAYOUT, _distances_from(snapshot, index), DOOR_APPROACH)
    else:
        goals = [_goal_steps(snapshot, j) for j in range(n_agents)]
        team, ego = min(goals), goals[index]
    return (0, len(snapshot.triggered) - len(remaining), -team, -ego)


@dataclass(frozen=True)
class SwitchPlan:
    """Who triggers which switches, in order, from where, and the estimated steps to the goal."""

    switches: tuple[tuple[int, ...], ...]
    """Per agent, the switches it triggers in order (empty: it heads for the door)."""
    stands: tuple[tuple[FacingState, ...], ...]
    """Per agent, the (cell, facing) it toggles each of its switches from."""
    steps: int


def plan_switches(env: TwoSwitchEnv) -> SwitchPlan:
    """The fastest way to trigger the untriggered switches and reach the goal, from the
    env's state: every split of the switches between the agents and every order, timed by
    each agent's fewest moves (turns included) and the first agent through the door.
    Agents are assumed not to get in each other's way; ties prefer splitting the work."""
    layout, closed = env.layout, _passability(False)
    remaining = [k for k, t in enumerate(env.triggered) if not t]
    goals = {k: facing_goals(layout, closed, SWITCHES[k]) for k in remaining}
    to_door = bfs_distances(layout, [DOOR], _passability(True))
    n = len(env.possible_agents)
    starts = list(zip(env.positions, env.facings, strict=True))
    reach = [facing_distances_from(layout, closed, start) for start in starts]

    def finish(agent: int, order: tuple[int, ...]) -> tuple[int, int, tuple[FacingState, ...]]:
        """Step of the agent's last toggle, step it could stand in the doorway, and the
        states it toggles from (the first chosen for the best total, later ones greedily)."""
        if not order:
            return 0, to_door.get(starts[agent][0], UNREACHABLE), ()
        best: tuple[int, int, tuple[FacingState, ...]] | None = None
        for first in goals[order[0]]:
            t = reach[agent].get(first, UNREACHABLE) + 1
            stands = [first]
            for k in order[1:]:
                follow = facing_distances_from(layout, closed, stands[-1])
                stands.append(min(goals[k], key=lambda g: follow.get(g, UNREACHABLE)))
                t += follow.get(stands[-1], UNREACHABLE) + 1
            candidate = (t, t + to_door.get(stands[-1][0], UNREACHABLE), tuple(stands))
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        assert best is not None
        return best

    plans: list[tuple[tuple[int, int, int], SwitchPlan]] = []
    for order in itertools.permutations(remaining):
        for cut in range(len(order) + 1):
            split = (tuple(order[:cut]), tuple(order[cut:]))[:n]
            timing = [finish(j, split[j]) for j in range(n)]
            opened = max(t for t, _, _ in timing)
            steps = min(max(ready, opened) for _, ready, _ in timing) + to_door.get(
                GOAL, UNREACHABLE
            )
            rank = (steps, max(len(s) for s in split), len(plans))
            plans.append((rank, SwitchPlan(split, tuple(t[2] for t in timing), steps)))
    return min(plans, key=lambda entry: entry[0])[1]


class ScriptedTwoSwitchTeam(ScriptedTeam):
    """The reference team: it follows ``plan_switches`` (kept once chosen; one switch each
    when that is as fast, else one agent takes both): agents walk to their switches, face
    them and toggle; an agent with no switch left waits by the door; once the door opens the
    agent nearer the goal walks there. Reads the env, so it works in both observation modes;
    actions are names."""

    env: TwoSwitchEnv

    def reset(self) -> None:
        self.plan: SwitchPlan | None = None

    def _joint_action(self, observations: Any) -> dict[str, str]:
        env = self.env
        n = len(env.possible_agents)
        queues = self._queues()
        if not env.door_open and not any(queues):
            self.plan = plan_switches(env)
            queues = self._queues()
        # Toggles come before moves within a step, so when this step's toggles open the door
        # the waiting agent can already walk through it.
        switch_intents = [self._switch_intent(j, queues[j]) for j in range(n)]
        at_switch = [bool(intent and intent.fixed_action) for intent in switch_intents]
        toggling = {queues[j][0] for j in range(n) if at_switch[j]}
        opening = env.door_open or all(t or k in toggling for k, t in enumerate(env.triggered))
        passable = _passability(opening)
        intents: list[MoveIntent] = []
        if opening:
            goal_field = bfs_distances(env.layout, [GOAL], passable)
            free = [j for j in range(n) if not at_switch[j]]
            runner = min(
                free or range(n), key=lambda j: (goal_field.get(env.positions[j], UNREACHABLE), j)
            )
            for j in range(n):
                toggler = switch_intents[j] if j not in free else None
                intents.append(toggler or MoveIntent(distance=goal_field if j == runner else None))
        else:
            wait_field = bfs_distances(env.layout, [DOOR_APPROACH], passable)
            for j in range(n):
                intents.append(switch_intents[j] or MoveIntent(distance=wait_field))
        names = choose_joint_moves(env.positions, intents, passable, facings=env.facings)
        return {
            agent: names[i] for i, agent in enumerate(env.possible_agents) if agent in env.agents
        }

    def _switch_intent(self, index: int, queue: list[int]) -> MoveIntent | None:
        """Walk to the planned (cell, facing) for the next switch, then toggle."""
        if not queue or self.plan is None:
            return None
        env = self.env
        switch = queue[0]
        if direction_between(env.positions[index], SWITCHES[switch]) == env.facings[index]:
            return MoveIntent(fixed_action="toggle")
        stand = self.plan.stands[index][self.plan.switches[index].index(switch)]
        return MoveIntent(facing_cost=facing_cost_to_go(env.layout, env.passable, [stand]))

    def _queues(self) -> list[list[int]]:
        if self.plan is None:
            return [[] for _ in self.env.possible_agents]
        return [[k for k in order if not self.env.triggered[k]] for order in self.plan.switches]


make_two_switch = functools.partial(make_grid_env, TwoSwitchEnv)
"""The entry point of ``TwoSwitch``'s id (``marlang.envs.builtin``)."""
"""Registry factory for ``gridworld/two-switch`` (two agents only)."""
