"""Spaceworld, the LLM-MCA benchmark of safe in-space assembly: satellite robots carry their
mirror segments to their destinations on a grid; any collision destroys both satellites and
ends the episode with reward 0. Numeric and ego-text observations, a collision-free reference
team and a ranking heuristic.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from marlang.envs.core.base import env_metadata
from marlang.envs.core.numeric import NumericTextEnv, StepOutcome, check_agent_count
from marlang.envs.credit.grid import manhattan, parse_cell
from marlang.envs.credit.gridworld import (
    DIRECTION_NAMES,
    MOVE_ACTIONS,
    Cell,
    FeatureSpaces,
    GridLayout,
    RankedByKey,
    collisions,
    format_cell,
    step_cell,
    steps_phrase,
)
from marlang.envs.credit.spaceworld_team import (
    ScriptedSpaceworldTeam,
    SpaceworldSnapshot,
    plan_steps,
    spaceworld_rank_key,
)

logger = logging.getLogger(__name__)

SPACEWORLD_ACTIONS: tuple[str, ...] = (*MOVE_ACTIONS, "pick up", "drop")
"""Action names in index order: 0 stay, 1-4 moves, 5 pick up, 6 drop."""
PICK_UP, DROP = 5, 6
COLORS: tuple[str, ...] = ("blue", "red")
MAX_REWARD = 10.0
"""Reward of a team that delivers every part in the fewest steps possible."""
DEFAULT_GRID_SIZE = 10
DEFAULT_MAX_STEPS = 50
MIN_GRID_SIZE, MAX_GRID_SIZE = 4, 30
NUMERIC_SIZE = 19
STATE_SIZE = 20


class SpaceworldEnv(RankedByKey, FeatureSpaces, NumericTextEnv):
    """Spaceworld (two satellites on a ``grid_size`` x ``grid_size`` grid, default 10x10).

    Satellite ``agent_i`` (blue, red) should bring mirror segment ``i`` (its own colour) to
    destination ``i``, but any satellite may carry any segment, one at a time. Agents, parts
    and destinations start at distinct random cells. Actions: ``stay``, ``move up/down/left/
    right`` (a move off the grid does nothing), ``pick up`` (a lying, undelivered part on the
    agent's cell), ``drop`` (onto a cell without another lying part). A part dropped on its
    own destination is delivered and stays there. Pick-ups and drops happen before moves.

    Collisions: if two satellites would end a step in the same cell (including moving into a
    satellite that stays) or pass through each other, both are destroyed: the episode
    terminates, unsuccessful, with reward 0. Following a satellite into the cell it leaves is
    safe.

    Reward: 0 on every step except the one delivering the last part, which gives every agent
    ``max(0, 10 - extra)``, ``extra`` being the steps taken beyond ``min_steps``, the fewest the
    team could need (the best split of the parts between satellites, Manhattan paths, one
    step per pick-up and drop; collisions and hand-overs ignored, so it is a lower bound).
    The time limit (``max_steps``, default 50) truncates with reward 0.

    Numeric observation (19 floats in [-1, 1]): ego x, y (scaled to [0, 1]); teammate offset
    (scaled by ``grid_size - 1``); for the ego's part, then the teammate's: offset of the part
    (its carrier's cell while carried), offset of its destination, carried by the ego, carried
    by the teammate, delivered; step / max_steps. ``state()`` (20, in [0, 1]): both positions,
    per part its cell, destination and three flags, collided, step / max_steps.

    ``reset(options={"agent_positions": [...], "part_positions": [...], "destinations":
    [...]})`` places them (all three together; other option keys are ignored).
    """

    all_actions: ClassVar[tuple[str, ...]] = SPACEWORLD_ACTIONS
    metadata: ClassVar[dict[str, Any]] = env_metadata("spaceworld_v0")
    world_description: ClassVar[str] = (
        "an in-space assembly grid where satellites must never collide"
    )
    numeric_size = NUMERIC_SIZE
    state_size = STATE_SIZE
    snapshot_type = SpaceworldSnapshot

    def __init__(
        self,
        *,
        grid_size: int = DEFAULT_GRID_SIZE,
        observation_mode: str = "text",
        max_steps: int = DEFAULT_MAX_STEPS,
        render_mode: str | None = None,
        env_id: str = "spaceworld",
    ):
        if (
            isinstance(grid_size, bool)
            or not isinstance(grid_size, (int, np.integer))
            or not (MIN_GRID_SIZE <= grid_size <= MAX_GRID_SIZE)
        ):
            raise ValueError(
                f"grid_size must be an integer from {MIN_GRID_SIZE} to {MAX_GRID_SIZE}, "
                f"got {grid_size!r}"
            )
        super().__init__(
            ["agent_0", "agent_1"],
            observation_mode=observation_mode,
            max_steps=max_steps,
            env_id=env_id,
            render_mode=render_mode,
        )
        self.grid_size = int(grid_size)
        self.layout = GridLayout.from_rows(["." * self.grid_size] * self.grid_size, {".": "space"})
        self._rng = np.random.default_rng()
        self.positions: list[Cell] = []
        self.part_positions: list[Cell] = []
        self.carried_by: list[int | None] = []
        self.delivered: list[bool] = []
        self.destinations: list[Cell] = []
        self.collided = False
        self.min_steps = 0

    # ----------------------------------------------------------------- world

    def agent_index(self, agent: str) -> int:
        if agent not in self.possible_agents:
            raise ValueError(f"unknown agent {agent!r}; agents: {self.possible_agents}")
        return self.possible_agents.index(agent)

    def carrying(self, index: int) -> int | None:
        """The part agent ``index`` carries, if any."""
        for part, carrier in enumerate(self.carried_by):
            if carrier == index:
                return part
        return None

    def _lying_part_at(self, cell: Cell) -> int | None:
        for part, where in enumerate(self.part_positions):
            if where == cell and self.carried_by[part] is None and not self.delivered[part]:
                return part
        return None

    def _can_pick_up(self, index: int) -> bool:
        return (
            self.carrying(index) is None and self._lying_part_at(self.positions[index]) is not None
        )

    def _can_drop(self, index: int) -> bool:
        if self.carrying(index) is None:
            return False
        cell = self.positions[index]
        return not any(
            where == cell and self.carried_by[p] is None
            for p, where in enumerate(self.part_positions)
        )

    def action_mask(self, agent: str) -> np.ndarray:
        index = self.agent_index(agent)
        mask = np.ones(len(SPACEWORLD_ACTIONS), dtype=np.int8)
        if self._started:
            mask[PICK_UP] = int(self._can_pick_up(index))
            mask[DROP] = int(self._can_drop(index))
        return mask

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = options or {}
        keys = ("agent_positions", "part_positions", "destinations")
        given = [options[k] for k in keys if options.get(k) is not None]
        if given:
            if len(given) != len(keys):
                raise ValueError(f"reset options must give all of {list(keys)} or none of them")
            cells = [[parse_cell(c, key) for c in group] for key, group in zip(keys, given, strict=True)]
            flat = [c for group in cells for c in group]
            if any(len(group) != 2 for group in cells) or len(set(flat)) != 6:
                raise ValueError(f"{', '.join(keys)} must be 2 cells each, 6 distinct cells in all")
            for cell in flat:
                if not self.layout.in_bounds(cell):
                    raise ValueError(
                        f"cell {cell} is outside the {self.grid_size}x{self.grid_size} grid"
                    )
        else:
            n_cells = self.grid_size**2
            picks = self._rng.choice(n_cells, size=6, replace=False)
            flat = [(int(p) % self.grid_size, int(p) // self.grid_size) for p in picks]
            cells = [flat[0:2], flat[2:4], flat[4:6]]
        self.positions = list(cells[0])
        self.part_positions = list(cells[1])
        self.destinations = list(cells[2])
        self.carried_by = [None, None]
        self.delivered = [False, False]
        self.collided = False
        self.min_steps = plan_steps(self.snapshot_now())[0]

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        events: list[str] = []
        no_effect = dict.fromkeys(self.possible_agents, False)
        for i, agent in enumerate(self.possible_agents):
            if actions[agent] == PICK_UP:
                if self._can_pick_up(i):
                    part = self._lying_part_at(self.positions[i])
                    assert part is not None
                    self.carried_by[part] = i
                    events.append(f"{agent} picked up the {COLORS[part]} mirror segment")
                else:
                    no_effect[agent] = True
            elif actions[agent] == DROP:
                if self._can_drop(i):
                    part = self.carrying(i)
                    assert part is not None
                    self.carried_by[part] = None
                    if self.positions[i] == self.destinations[part]:
                        self.delivered[part] = True
                        events.append(f"{agent} delivered the {COLORS[part]} mirror segment")
                    else:
                        events.append(f"{agent} dropped the {COLORS[part]} mirror segment")
                else:
                    no_effect[agent] = True
        wanted = list(self.positions)
        for i, agent in enumerate(self.possible_agents):
            if 1 <= actions[agent] <= len(DIRECTION_NAMES):
                target = step_cell(self.positions[i], DIRECTION_NAMES[actions[agent] - 1])
                if self.layout.in_bounds(target):
                    wanted[i] = target
        crashed = collisions(self.positions, wanted)
        self.positions = wanted
        for part, carrier in enumerate(self.carried_by):
            if carrier is not None:
                self.part_positions[part] = self.positions[carrier]
        steps_taken = self.step_count + 1
        extra = max(0, steps_taken - self.min_steps)
        reward, success = 0.0, False
        if crashed:
            self.collided = True
            events.append(
                "collision: "
                + ", ".join(
                    f"{self.possible_agents[i]} and {self.possible_agents[j]}" for i, j in crashed
                )
                + " were destroyed"
            )
        elif all(self.delivered):
            success = True
            reward = max(0.0, MAX_REWARD - extra)
        infos = {
            agent: {
                "events": list(events),
                "collision": bool(crashed),
                "delivered": sum(self.delivered),
                "min_steps": self.min_steps,
                "extra_steps": extra,
                "no_effect": no_effect[agent],
            }
            for agent in self.possible_agents
        }
        return StepOutcome(
            rewards=dict.fromkeys(self.possible_agents, reward),
            terminated=bool(crashed) or success,
            success=success,
            infos=infos,
        )

    # ----------------------------------------------------------------- observations

    @property
    def mission(self) -> str:
        return (
            "Each satellite should carry its own mirror segment to that segment's destination "
            "(any satellite may carry any segment, one at a time), in as few steps as "
            "possible; two satellites must never try to enter the same cell or pass through "
            "each other, or both are destroyed and the episode ends with reward 0."
        )

    def numeric_observation(self, agent: str) -> np.ndarray:
        index = self.agent_index(agent)
        me = self.positions[index]
        other = 1 - index
        features = [*self.layout.normalized(me), *self.layout.offset(me, self.positions[other])]
        for part in (index, other):
            features += [
                *self.layout.offset(me, self.part_positions[part]),
                *self.layout.offset(me, self.destinations[part]),
                float(self.carried_by[part] == index),
                float(self.carried_by[part] == other),
                float(self.delivered[part]),
            ]
        features.append(self.step_count / self.max_steps)
        return np.asarray(features, dtype=np.float32)

    def state(self) -> np.ndarray:
        features: list[float] = []
        for cell in self.positions:
            features += self.layout.normalized(cell)
        for part in range(len(self.part_positions)):
            features += [
                *self.layout.normalized(self.part_positions[part]),
                *self.layout.normalized(self.destinations[part]),
                float(self.carried_by[part] == 0),
                float(self.carried_by[part] == 1),
                float(self.delivered[part]),
            ]
        features += [float(self.collided), self.step_count / self.max_steps]
        return np.asarray(features, dtype=np.float32)

    def _carrying_words(self, index: int, viewer: int) -> str:
        part = self.carrying(index)
        if part is None:
            return "carrying nothing"
        owner = "yours" if part == viewer else f"{self.possible_agents[part]}'s"
        return f"carrying the {COLORS[part]} mirror segment ({owner})"

    def ego_text(self, agent: str) -> str:
        index = self.agent_index(agent)
        other = 1 - index
        me, mate = self.positions[index], self.positions[other]
        you = (
            f"You are {agent} ({COLORS[index]} satellite) at {format_cell(me)}, "
            f"{self._carrying_words(index, index)}."
        )
        teammate = (
            f"Teammate {self.possible_agents[other]} ({COLORS[other]} satellite) is at "
            f"{format_cell(mate)}, {steps_phrase(manhattan(me, mate))} from you, "
            f"{self._carrying_words(other, index)}."
        )
        lines = [you, teammate]
        for part in (index, other):
            owner = "Your part" if part == index else f"{self.possible_agents[part]}'s part"
            name = f"{owner}, the {COLORS[part]} mirror segment"
            destination = self.destinations[part]
            if self.delivered[part]:
                lines.append(f"{name}: delivered to its destination {format_cell(destination)}.")
                continue
            carrier = self.carried_by[part]
            if carrier is None:
                where = (
                    f"lies at {format_cell(self.part_positions[part])}, "
                    f"{steps_phrase(manhattan(me, self.part_positions[part]))} from you"
                )
            else:
                where = (
                    "carried by you"
                    if carrier == index
                    else f"carried by {self.possible_agents[carrier]}"
                )
            lines.append(
                f"{name}: {where}; its destination is {format_cell(destination)}, "
                f"{steps_phrase(manhattan(me, destination))} from you."
            )
        lines.append(
            f"Delivered: {sum(self.delivered)} of {len(self.delivered)} parts. The fewest steps "
            f"the team could need is {self.min_steps}; every step beyond it costs 1 of the "
            "reward of 10."
        )
        lines.append(self._standing_sentence(index))
        if self.collided:
            lines.append("The satellites collided and were destroyed.")
        lines.append(f"Step {self.step_count} of {self.max_steps}.")
        return "\n".join(lines)

    def _standing_sentence(self, index: int) -> str:
        cell = self.positions[index]
        lying = self._lying_part_at(cell)
        if lying is not None:
            verb = ": pick up takes it" if self.carrying(index) is None else ""
            return f"You are over the {COLORS[lying]} mirror segment{verb}."
        carried = self.carrying(index)
        if carried is not None and cell == self.destinations[carried]:
            return f"You are at the {COLORS[carried]} segment's destination: drop delivers it."
        return f"You are over empty space at {format_cell(cell)}."

    def observation_data(self, agent: str) -> dict[str, Any]:
        return {
            "positions": {
                a: list(c) for a, c in zip(self.possible_agents, self.positions, strict=True)
            },
            "parts": [
                {
                    "color": COLORS[p],
                    "position": list(self.part_positions[p]),
                    "destination": list(self.destinations[p]),
                    "carried_by": None
                    if (carrier := self.carried_by[p]) is None
                    else self.possible_agents[carrier],
                    "delivered": self.delivered[p],
                }
                for p in range(len(self.part_positions))
            ],
            "collided": self.collided,
            "min_steps": self.min_steps,
            "step": self.step_count,
        }

    # ----------------------------------------------------------------- credit and references

    def snapshot_now(self) -> SpaceworldSnapshot:
        """The current state as a snapshot (also before the first ``reset`` finished)."""
        return SpaceworldSnapshot(
            positions=tuple(self.positions),
            part_positions=tuple(self.part_positions),
            carried_by=tuple(self.carried_by),
            delivered=tuple(self.delivered),
            destinations=tuple(self.destinations),
            collided=self.collided,
            step=self.step_count,
        )

    def rank_snapshot(self) -> SpaceworldSnapshot:
        self._require_started("rank_snapshot")
        return self.snapshot_now()

    def _rank_key(self, snapshot: SpaceworldSnapshot, index: int) -> tuple[int, int, int, int]:
        """The reference heuristic: a collision is worst; then more parts delivered; then fewer
        steps for the team to finish (the best split of the remaining parts, as in
        ``min_steps``); then fewer steps for the ego's own share in that split. The team
        estimate counts only the slower satellite, so the ego's moves count when it is the
        slower one, its own share otherwise."""
        return spaceworld_rank_key(snapshot, index)

    def scripted_team(self) -> ScriptedSpaceworldTeam:
        return ScriptedSpaceworldTeam(self)


# --------------------------------------------------------------------------- planning


def make_spaceworld(
    n_agents: int = 2,
    *,
    grid_size: int = DEFAULT_GRID_SIZE,
    observation_mode: str = "text",
    max_steps: int = DEFAULT_MAX_STEPS,
    render_mode: str | None = None,
) -> SpaceworldEnv:
    """Registry factory for ``spaceworld`` (two satellites only)."""
    check_agent_count("spaceworld", n_agents, [2])
    return SpaceworldEnv(
        grid_size=grid_size,
        observation_mode=observation_mode,
        max_steps=max_steps,
        render_mode=render_mode,
    )
