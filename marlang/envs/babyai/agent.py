"""One agent's body in a multi-agent BabyAI level and the actions it may take: shared by the
env (``text``), its text view (``view``) and the scripted team (``scripted``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from minigrid.core.constants import DIR_TO_VEC
from minigrid.core.world_object import WorldObj

ACTIONS: tuple[str, ...] = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
"""Legal action strings; position i is minigrid action i (``done`` is not offered)."""

ACTION_INDEX: Mapping[str, int] = MappingProxyType({name: i for i, name in enumerate(ACTIONS)})


@dataclass(frozen=True)
class AgentState:
    """One agent's body: where it stands, where it faces, what it holds."""

    position: tuple[int, int]
    direction: int
    """minigrid direction: 0 east, 1 south, 2 west, 3 north."""
    carrying: WorldObj | None = None

    @property
    def front(self) -> tuple[int, int]:
        dx, dy = DIR_TO_VEC[self.direction]
        return self.position[0] + int(dx), self.position[1] + int(dy)
