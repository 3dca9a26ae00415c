"""Victim-Rubble, the LCA grid world of task dependence: a green healer heals the victims and an
orange clearer clears the rubble; two pieces of rubble cut one victim off, so the clearer's
order of work matters to the healer. Numeric and ego-text observations, a reference team and
the reference ranking heuristic.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from marlang.envs.core.base import ScriptedTeam, env_metadata
from marlang.envs.credit.grid import UNREACHABLE, reach_steps
from marlang.envs.credit.gridworld import (
    Cell,
    FacingGridEnv,
    FeatureSpaces,
    GridEvent,
    GridLayout,
    MoveIntent,
    RankedByKey,
    approach_intent,
    bfs_distances,
    choose_joint_moves,
    format_cell,
    make_grid_env,
    steps_phrase,
)

logger = logging.getLogger(__name__)

VICTIM_RUBBLE_MAP: tuple[str, ...] = (
    "11#3333#444",
    "11P3333#444",
    "11#3333##P#",
    "###3333#555",
    "22P3333P555",
    "22#3333#555",
)
"""An 11x6 grid of five chambers joined by one-cell passages (``P``); first row is the top.
Chamber 3 in the centre (where agents start) opens to chambers 1 and 2 on the left and to
chamber 5 on the right through (7, 1); chamber 4 is reached only from chamber 5 through (9, 3).
The coordinates of the LCA prompt's rubble, (8, 1) and (9, 2), block exactly those passages."""

VICTIM_RUBBLE_LAYOUT = GridLayout.from_rows(
    VICTIM_RUBBLE_MAP,
    {
        "1": "chamber 1",
        "2": "chamber 2",
        "3": "chamber 3 (the centre)",
        "4": "chamber 4",
        "5": "chamber 5",
        "P": "a passage",
    },
)
VICTIMS: tuple[Cell, ...] = ((0, 5), (10, 5))
"""Victim 1 (free, in chamber 1) and victim 2 (at the end of the chamber 5 -> 4 corridor)."""
RUBBLE: tuple[Cell, ...] = ((8, 1), (9, 2), (0, 0))
"""Rubble 1 and 2 block the only way to victim 2; rubble 3 (in chamber 2) blocks nothing."""
RUBBLE_NOTES: tuple[str, ...] = (
    "blocks the only passage between chamber 3 and chamber 5",
    "blocks the only passage to chamber 4",
    "blocks nothing",
)
START_ROOM = "chamber 3 (the centre)"
HEALER, CLEARER = 0, 1
"""Agent indices of the roles: agent_0 heals (green), agent_1 clears rubble (orange)."""
NUMERIC_SIZE = 28
STATE_SIZE = 18


def _blocking_rubble() -> tuple[bool, ...]:
    """Whether each piece of rubble alone cuts some victim off from the start room."""
    start = VICTIM_RUBBLE_LAYOUT.cells_in(START_ROOM)
    flags = []
    for piece in RUBBLE:

        def open_except_piece(cell: Cell, piece: Cell = piece) -> bool:
            return VICTIM_RUBBLE_LAYOUT.is_floor(cell) and cell != piece and cell not in VICTIMS

        reached = bfs_distances(VICTIM_RUBBLE_LAYOUT, start, open_except_piece)
        flags.append(
            any(reach_steps(VICTIM_RUBBLE_LAYOUT, reached, v) >= UNREACHABLE for v in VICTIMS)
        )
    return tuple(flags)


BLOCKING: tuple[bool, ...] = _blocking_rubble()


@dataclass(frozen=True)
class VictimRubbleSnapshot:
    """The whole Victim-Rubble state at one step (what ``rank_states`` compares)."""

    positions: tuple[Cell, ...]
    facings: tuple[str, ...]
    healed: tuple[bool, ...]
    cleared: tuple[bool, ...]
    step: int


class VictimRubbleEnv(RankedByKey, FeatureSpaces, FacingGridEnv):
    """LCA's Victim-Rubble grid world (two agents, 11x6; see ``VICTIM_RUBBLE_MAP``).

    ``agent_0`` (green) heals victims with ``heal``; ``agent_1`` (orange) clears rubble with
    ``clear``; each acts on the cell it faces (stand next to it, bump into it to face it).
    Victims and rubble block movement; a cleared piece of rubble leaves free floor, a healed
    victim stays where it is. Agents start at distinct random cells of chamber 3 facing random
    ways. The episode terminates with success when both victims are healed and all three
    pieces of rubble cleared.

    Team reward (every agent): +1 per victim healed and per piece of rubble cleared (5 in
    all), so an episode of ``n`` steps that finishes returns ``5 - n / max_steps`` with the
    step penalty; with ``individual_rewards`` the acting agent gets +1 more (the healer's
    optimal return is then ``7 - n / max_steps``, LCA's reported optimum). The time limit
    (``max_steps``, default 100) truncates.

    Numeric observation (28 floats in [-1, 1], a global view centred on the ego): ego x, y
    (scaled to [0, 1]), ego facing one-hot (up, down, left, right); teammate offset (dx over
    10, dy over 5) and facing; per victim its offset and healed flag; per piece of rubble its
    offset and cleared flag; step / max_steps. ``state()`` (18): each agent's x, y, facing,
    the healed and cleared flags, step / max_steps.

    ``reset(options={"agent_positions": [...], "agent_facings": [...], "healed": [bool, bool],
    "cleared": [bool, bool, bool]})`` sets up a state (other option keys are ignored).
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("victim_rubble_v0")
    world_description: ClassVar[str] = "five chambers with victims to heal and rubble to clear"
    colors: ClassVar[tuple[str, ...]] = ("green, the healer", "orange, the rubble clearer")

    layout = VICTIM_RUBBLE_LAYOUT
    interactions = ("heal", "clear")
    default_env_id = "gridworld/victim-rubble"
    numeric_size = NUMERIC_SIZE
    state_size = STATE_SIZE
    snapshot_type = VictimRubbleSnapshot

    # ----------------------------------------------------------------- world

    def _clear_world(self) -> None:
        self.healed = [False] * len(VICTIMS)
        self.cleared = [False] * len(RUBBLE)

    def passable(self, cell: Cell) -> bool:
        return _passable(cell, tuple(self.cleared))

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self._seed_rng(seed)
        options = options or {}
        self.healed = _flags(options, "healed", len(VICTIMS))
        self.cleared = _flags(options, "cleared", len(RUBBLE))
        free = [c for c in self.layout.rooms if self.passable(c)]
        self._place_agents(self.layout.cells_in(START_ROOM), options, free)

    def _faced(self, index: int) -> tuple[str, int] | None:
        cell = self.facing_cell(index)
        if cell in VICTIMS:
            return "victim", VICTIMS.index(cell)
        if cell in RUBBLE and not self.cleared[RUBBLE.index(cell)]:
            return "rubble", RUBBLE.index(cell)
        return None

    def _can_interact(self, index: int) -> bool:
        faced = self._faced(index)
        if faced is None:
            return False
        kind, k = faced
        if index == HEALER:
            return kind == "victim" and not self.healed[k]
        return kind == "rubble"

    def _interact(self, index: int) -> list[GridEvent]:
        faced = self._faced(index)
        assert faced is not None
        agent = self.possible_agents[index]
        _, k = faced
        if index == HEALER:
            self.healed[k] = True
            return [GridEvent(agent, f"{agent} healed victim {k + 1}")]
        self.cleared[k] = True
        return [GridEvent(agent, f"{agent} cleared rubble {k + 1}")]

    def _task_done(self) -> bool:
        return all(self.healed) and all(self.cleared)

    # ----------------------------------------------------------------- observations

    @property
    def mission(self) -> str:
        return (
            "agent_0 (green) must heal every victim and agent_1 (orange) must clear every piece "
            "of rubble, as fast as possible; act on a victim or rubble by standing next to it "
            "and facing it. Two pieces of rubble block the only way to one victim."
        )

    def _world_flags(self) -> list[float]:
        return [float(h) for h in self.healed] + [float(c) for c in self.cleared]

    def _world_features(self, index: int) -> list[float]:
        me = self.positions[index]
        features: list[float] = []
        for cell, done in (
            *zip(VICTIMS, self.healed, strict=True),
            *zip(RUBBLE, self.cleared, strict=True),
        ):
            features += [*self.layout.offset(me, cell), float(done)]
        return features

    def ego_text(self, agent: str) -> str:
        index = self.agent_index(agent)
        lines = [self._describe_agent(index, index)]
        lines += [self._describe_agent(j, index) for j in range(len(self.positions)) if j != index]
        distances = bfs_distances(self.layout, [self.positions[index]], self.passable)
        sites = (
            ("Victim", VICTIMS, self.healed, "healed", ["needs healing"] * len(VICTIMS)),
            ("Rubble", RUBBLE, self.cleared, "cleared", RUBBLE_NOTES),
        )
        for kind, cells, done, done_word, notes in sites:
            for k, cell in enumerate(cells):
                where = f"{kind} {k + 1} at {format_cell(cell)} in {self.layout.room_of(cell)}"
                if done[k]:
                    lines.append(f"{where}: {done_word}.")
                else:
                    lines.append(f"{where}: {notes[k]}; {_reach_phrase(distances, cell)}.")
        lines.append(self._facing_sentence(index))
        lines.append(f"Step {self.step_count} of {self.max_steps}.")
        return "\n".join(lines)

    def _facing_sentence(self, index: int) -> str:
        faced = self._faced(index)
        cell = self.facing_cell(index)
        if faced is not None:
            kind, k = faced
            if kind == "victim":
                state = "healed" if self.healed[k] else "needs healing"
                hint = ": heal heals it" if index == HEALER and not self.healed[k] else ""
                return f"You face victim {k + 1} ({state}){hint}."
            hint = ": clear removes it" if index == CLEARER else ""
            return f"You face rubble {k + 1}{hint}."
        if not self.layout.is_floor(cell):
            return "You face a wall."
        return f"You face the floor at {format_cell(cell)}."

    def observation_data(self, agent: str) -> dict[str, Any]:
        return {
            **self._agent_data(),
            "roles": {
                self.possible_agents[HEALER]: "healer",
                self.possible_agents[CLEARER]: "clearer",
            },
            "victims": [
                {"position": list(c), "healed": h}
                for c, h in zip(VICTIMS, self.healed, strict=True)
            ],
            "rubble": [
                {"position": list(c), "cleared": done, "blocking": b}
                for c, done, b in zip(RUBBLE, self.cleared, BLOCKING, strict=True)
            ],
            "step": self.step_count,
        }

    # ----------------------------------------------------------------- credit and references

    def rank_snapshot(self) -> VictimRubbleSnapshot:
        self._require_started("rank_snapshot")
        return VictimRubbleSnapshot(
            positions=tuple(self.positions),
            facings=tuple(self.facings),
            healed=tuple(self.healed),
            cleared=tuple(self.cleared),
            step=self.step_count,
        )

    def _rank_key(self, snapshot: VictimRubbleSnapshot, index: int) -> tuple[int, ...]:
        """The reference heuristic (LCA's human ranking heuristic): the healer ranks by victims
        healed, then by fewer steps to the nearest victim it can reach now (the free victim
        first; with none reachable, the nearest victim as if the rubble were gone); the
        clearer ranks by blocking rubble cleared, then rubble cleared, then fewer steps to the
        nearest reachable blocking rubble (any rubble once none blocks). Only the agent's own
        kind of progress counts, so a teammate's work does not rank the ego's state higher."""
        return victim_rubble_rank_key(snapshot, index)

    def scripted_team(self) -> ScriptedVictimRubbleTeam:
        return ScriptedVictimRubbleTeam(self)


# --------------------------------------------------------------------------- helpers


def _passable(cell: Cell, cleared: tuple[bool, ...]) -> bool:
    if not VICTIM_RUBBLE_LAYOUT.is_floor(cell) or cell in VICTIMS:
        return False
    return cell not in RUBBLE or cleared[RUBBLE.index(cell)]


def _passability(cleared: tuple[bool, ...]) -> Callable[[Cell], bool]:
    return lambda cell: _passable(cell, cleared)


def _flags(options: dict[str, Any], name: str, n: int) -> list[bool]:
    value = options.get(name)
    if value is None:
        return [False] * n
    if len(value) != n or any(not isinstance(v, bool) for v in value):
        raise ValueError(f"{name} must be a list of {n} booleans, got {value!r}")
    return list(value)


def _reach_phrase(distances: dict[Cell, int], cell: Cell) -> str:
    steps = reach_steps(VICTIM_RUBBLE_LAYOUT, distances, cell)
    if steps >= UNREACHABLE:
        return "cut off from you by rubble"
    return f"{steps_phrase(steps)} from you"


@functools.lru_cache(maxsize=1024)
def _distances_from(cell: Cell, cleared: tuple[bool, ...]) -> Mapping[Cell, int]:
    """Shortest-path steps from ``cell`` with ``cleared`` rubble (read-only, shared): the
    ranking heuristic asks for the same few fields thousands of times per batch."""
    return MappingProxyType(bfs_distances(VICTIM_RUBBLE_LAYOUT, [cell], _passability(cleared)))


def _nearest(distances: Mapping[Cell, int], targets: list[Cell]) -> int:
    return min(
        (reach_steps(VICTIM_RUBBLE_LAYOUT, distances, t) for t in targets), default=UNREACHABLE
    )


def victim_rubble_rank_key(snapshot: VictimRubbleSnapshot, index: int) -> tuple[int, ...]:
    """The ordering ``VictimRubbleEnv.rank_states`` compares (larger is better for agent
    ``index``)."""
    here = tuple(snapshot.positions[index])
    distances = _distances_from(here, tuple(snapshot.cleared))
    if index == HEALER:
        waiting = [v for v, h in zip(VICTIMS, snapshot.healed, strict=True) if not h]
        if not waiting:
            return (len(VICTIMS), 0)
        steps = _nearest(distances, waiting)
        if steps >= UNREACHABLE:
            steps = _nearest(_distances_from(here, (True,) * len(RUBBLE)), waiting)
        return (sum(snapshot.healed), -steps)
    blocking_left = [
        r for r, c, b in zip(RUBBLE, snapshot.cleared, BLOCKING, strict=True) if b and not c
    ]
    left = [r for r, c in zip(RUBBLE, snapshot.cleared, strict=True) if not c]
    steps = _nearest(distances, blocking_left)
    if steps >= UNREACHABLE:
        steps = _nearest(distances, left)
    blocking_cleared = sum(c and b for c, b in zip(snapshot.cleared, BLOCKING, strict=True))
    return (blocking_cleared, sum(snapshot.cleared), -min(steps, UNREACHABLE) if left else 0)


class ScriptedVictimRubbleTeam(ScriptedTeam):
    """The reference team: the healer heals the nearest victim it can reach and then has right
    of way (while none is reachable it waits as near the cut-off victim as it can, out of the
    clearer's way); the clearer clears the nearest reachable blocking rubble first, then the
    rest. Reads the env, so it works in both observation modes; actions are names."""

    env: VictimRubbleEnv

    def _joint_action(self, observations: Any) -> dict[str, str]:
        env = self.env
        healer = MoveIntent(weight=3.0)
        from_healer = bfs_distances(env.layout, [env.positions[HEALER]], env.passable)
        waiting = [v for v, h in zip(VICTIMS, env.healed, strict=True) if not h]
        reachable = [v for v in waiting if reach_steps(env.layout, from_healer, v) < UNREACHABLE]
        if reachable:
            target = min(reachable, key=lambda v: reach_steps(env.layout, from_healer, v))
            healer = approach_intent(env, HEALER, target, "heal")
            healer.weight = 3.0
        elif waiting:
            healer = self._wait_near(waiting)
        clearer = MoveIntent()
        from_clearer = bfs_distances(env.layout, [env.positions[CLEARER]], env.passable)
        left = [
            (not b, reach_steps(env.layout, from_clearer, r), r)
            for r, c, b in zip(RUBBLE, env.cleared, BLOCKING, strict=True)
            if not c
        ]
        left = [entry for entry in left if entry[1] < UNREACHABLE]
        if left:
            clearer = approach_intent(env, CLEARER, min(left)[2], "clear")
        names = choose_joint_moves(
            env.positions, [healer, clearer], env.passable, facings=env.facings
        )
        return {
            agent: names[i] for i, agent in enumerate(env.possible_agents) if agent in env.agents
        }

    def _wait_near(self, victims: list[Cell]) -> MoveIntent:
        """While rubble cuts the healer off, it walks to the reachable cell nearest the
        victims, keeping off the cells the clearer works from and giving way to it."""
        env = self.env
        all_clear = _passability((True,) * len(RUBBLE))
        stands = [c for v in victims for c in env.layout.neighbours(v) if all_clear(c)]
        to_victims = bfs_distances(env.layout, stands, all_clear)
        work_cells = {
            cell
            for piece, done in zip(RUBBLE, env.cleared, strict=True)
            if not done
            for cell in env.layout.neighbours(piece)
        }

        def allowed(cell: Cell) -> bool:
            return env.passable(cell) and cell not in work_cells

        around = bfs_distances(env.layout, [env.positions[HEALER]], allowed)
        staging = min(around, key=lambda c: (to_victims.get(c, UNREACHABLE), around[c]))
        return MoveIntent(distance=bfs_distances(env.layout, [staging], allowed), weight=0.5)


make_victim_rubble = functools.partial(make_grid_env, VictimRubbleEnv)
"""The entry point of ``VictimRubble``'s id (``marlang.envs.builtin``)."""
"""Registry factory for ``gridworld/victim-rubble`` (two agents: a healer and a clearer)."""
