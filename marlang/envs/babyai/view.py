"""What one agent sees in a (multi-agent) BabyAI level, in words and as structured data.

Builds on minigrid's own partial view (``gen_obs_grid``: 7x7, walls and closed doors
occlude) and writes it out BabyAI-Text style, one fact per line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from minigrid.core.world_object import Door, WorldObj
from minigrid.minigrid_env import MiniGridEnv

from marlang.envs.babyai.agent import AgentState

DIRECTION_NAMES: tuple[str, ...] = ("east", "south", "west", "north")
"""Compass names of minigrid's directions 0..3 (x grows east, y grows south)."""

# Object types whose colour is fixed and not worth saying, and how to name them.
_UNCOLOURED_NAMES = {"goal": "goal", "lava": "lava tile"}


def door_state(obj: WorldObj) -> str | None:
    """``"open"``, ``"closed"`` or ``"locked"`` for a door, ``None`` for anything else."""
    if not isinstance(obj, Door):
        return None
    if obj.is_open:
        return "open"
    return "locked" if obj.is_locked else "closed"


def object_name(obj: WorldObj) -> str:
    """Noun phrase without article: ``"blue key"``, ``"locked red door"``, ``"goal"``."""
    if obj.type in _UNCOLOURED_NAMES:
        return _UNCOLOURED_NAMES[obj.type]
    state = door_state(obj)
    name = f"{obj.color} {obj.type}"
    return f"{state} {name}" if state else name


def with_article(noun_phrase: str) -> str:
    """Prefix the indefinite article that fits the first word: ``"an open red door"``."""
    article = "an" if noun_phrase[:1].lower() in "aeiou" else "a"
    return f"{article} {noun_phrase}"


def _steps(count: int, direction: str) -> str:
    return f"{count} {'step' if count == 1 else 'steps'} {direction}"


def relative_phrase(right: int, forward: int) -> str:
    """Offset in the agent's frame: ``"1 step left and 2 steps forward"``."""
    parts = []
    if right:
        parts.append(_steps(abs(right), "right" if right > 0 else "left"))
    if forward:
        parts.append(_steps(abs(forward), "forward" if forward > 0 else "backward"))
    return " and ".join(parts) if parts else "here"


@overload
def object_record(obj: WorldObj) -> dict[str, Any]: ...
@overload
def object_record(obj: WorldObj | None) -> dict[str, Any] | None: ...
def object_record(obj: WorldObj | None) -> dict[str, Any] | None:
    """JSON-ready ``{"type", "color", "state"}`` for an object (``None`` stays ``None``)."""
    if obj is None:
        return None
    return {"type": obj.type, "color": obj.color, "state": door_state(obj)}


@dataclass(frozen=True)
class Seen:
    """Where something in the agent's view is."""

    position: tuple[int, int]
    """Absolute grid cell (x, y)."""
    right: int
    """Cells to the agent's right (negative: left)."""
    forward: int
    """Cells ahead of the agent."""

    def where(self) -> str:
        return relative_phrase(self.right, self.forward)

    def place_data(self) -> dict[str, Any]:
        return {"position": list(self.position), "relative": {"right": self.right, "forward": self.forward}}


@dataclass(frozen=True, kw_only=True)
class SeenObject(Seen):
    """An object (not a wall) in the agent's view."""

    obj: WorldObj

    def to_data(self) -> dict[str, Any]:
        return {**object_record(self.obj), **self.place_data()}


@dataclass(frozen=True, kw_only=True)
class SeenAgent(Seen):
    """Another agent in the agent's view."""

    name: str
    direction: int
    carrying: WorldObj | None

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, **self.place_data(), "direction": DIRECTION_NAMES[self.direction],
                "carrying": object_record(self.carrying)}


@dataclass(frozen=True)
class LocalView:
    """Everything one agent perceives at one moment (its egocentric partial view)."""

    position: tuple[int, int]
    direction: int
    carrying: WorldObj | None
    objects: tuple[SeenObject, ...]
    """Visible objects, nearest first."""
    agents: tuple[SeenAgent, ...]
    """Visible other agents, by name."""
    walls: Mapping[str, int | None]
    """Distance to the nearest visible wall straight ``forward``, ``left`` and ``right``."""
    visible_cells: frozenset[tuple[int, int]]
    """Absolute cells inside the view that are not occluded (used to highlight renders)."""

    def lines(self) -> list[str]:
        """The view as BabyAI-Text facts, one per line (own pose first, then what is carried,
        walls on the forward/left/right rays, objects nearest first, other agents by name)."""
        x, y = self.position
        lines = [f"You are at ({x}, {y}) facing {DIRECTION_NAMES[self.direction]}"]
        if self.carrying is not None:
            lines.append(f"You carry {with_article(object_name(self.carrying))}")
        for ray in ("forward", "left", "right"):
            distance = self.walls[ray]
            if distance is not None:
                lines.append(f"You see a wall {_steps(distance, ray)}")
        for seen in self.objects:
            lines.append(f"You see {with_article(object_name(seen.obj))} {seen.where()}")
        for other in self.agents:
            line = f"You see {other.name} {other.where()}"
            if other.carrying is not None:
                line += f" carrying {with_article(object_name(other.carrying))}"
            lines.append(line)
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())

    def to_data(self) -> dict[str, Any]:
        """JSON-ready structured form (plain ints and strings only)."""
        return {
            "position": list(self.position),
            "direction": DIRECTION_NAMES[self.direction],
            "carrying": object_record(self.carrying),
            "walls": dict(self.walls),
            "visible_objects": [seen.to_data() for seen in self.objects],
            "visible_agents": [seen.to_data() for seen in self.agents],
        }


def observe(level: MiniGridEnv, others: Mapping[str, AgentState]) -> LocalView:
    """The local view of the agent currently embodied in ``level``.

    ``level.agent_pos``/``agent_dir``/``carrying`` must hold the viewer's state (see
    ``BabyAITextEnv.embodied``); ``others`` are the remaining agents, which do not occlude.
    """
    size = level.agent_view_size
    view_grid, vis_mask = level.gen_obs_grid()
    position = (int(level.agent_pos[0]), int(level.agent_pos[1]))
    forward_vec = np.asarray(level.dir_vec)
    right_vec = np.asarray(level.right_vec)

    def absolute(right: int, forward: int) -> tuple[int, int]:
        cell = np.asarray(position) + forward * forward_vec + right * right_vec
        return int(cell[0]), int(cell[1])

    def view_index(right: int, forward: int) -> tuple[int, int]:
        # In minigrid's view grid the agent sits at the bottom centre, looking "up".
        return size // 2 + right, size - 1 - forward

    objects: list[SeenObject] = []
    visible_cells: set[tuple[int, int]] = set()
    for i in range(size):
        for j in range(size):
            if not vis_mask[i, j]:
                continue
            right, forward = i - size // 2, size - 1 - j
            cell = absolute(right, forward)
            if not (0 <= cell[0] < level.width and 0 <= cell[1] < level.height):
                continue
            visible_cells.add(cell)
            if (right, forward) == (0, 0):
                continue  # minigrid puts the carried object here; it is reported separately
            obj = view_grid.get(i, j)
            if obj is not None and obj.type != "wall":
                objects.append(SeenObject(cell, right, forward, obj=obj))
    objects.sort(key=lambda s: (abs(s.right) + s.forward, s.forward, s.right))

    def nearest_wall(right_step: int, forward_step: int, length: int) -> int | None:
        for distance in range(1, length + 1):
            i, j = view_index(right_step * distance, forward_step * distance)
            if not vis_mask[i, j]:
                return None
            obj = view_grid.get(i, j)
            if obj is not None and obj.type == "wall":
                return distance
        return None

    walls = {
        "forward": nearest_wall(0, 1, size - 1),
        "left": nearest_wall(-1, 0, size // 2),
        "right": nearest_wall(1, 0, size // 2),
    }

    agents: list[SeenAgent] = []
    for name, state in sorted(others.items()):
        offset = np.asarray(state.position) - np.asarray(position)
        right, forward = int(offset @ right_vec), int(offset @ forward_vec)
        if not (abs(right) <= size // 2 and 0 <= forward < size):
            continue
        if vis_mask[view_index(right, forward)]:
            agents.append(
                SeenAgent(state.position, right, forward, name=name, direction=state.direction,
                          carrying=state.carrying)
            )

    return LocalView(
        position=position,
        direction=int(level.agent_dir),
        carrying=level.carrying,
        objects=tuple(objects),
        agents=tuple(agents),
        walls=walls,
        visible_cells=frozenset(visible_cells),
    )
