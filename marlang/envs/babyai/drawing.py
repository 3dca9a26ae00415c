"""Drawing BabyAI agents on a rendered level: each agent as a triangle in its own colour,
with a small icon of what it carries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from minigrid.utils.rendering import downsample

from marlang.envs.babyai.agent import AgentState

AGENT_COLORS: tuple[tuple[int, int, int], ...] = (
    (255, 0, 0),  # agent_0: minigrid's own red agent
    (0, 170, 255),
    (255, 140, 0),
    (255, 0, 255),
    (0, 255, 170),
    (255, 255, 255),
    (170, 110, 40),
    (160, 160, 255),
)
"""Triangle colours of agent_0, agent_1, ... in ``render()`` (cycled beyond eight agents)."""


def triangle_mask(size: int, direction: int) -> np.ndarray:
    """Boolean (size, size) mask of minigrid's agent triangle pointing in ``direction``."""
    centres = (np.arange(size) + 0.5) / size
    x, y = np.meshgrid(centres, centres)  # rows are y, columns are x
    # Rotate pixel centres back into the east-facing frame, then test the triangle.
    theta = -0.5 * math.pi * direction
    x0, y0 = x - 0.5, y - 0.5
    xr = 0.5 + x0 * math.cos(theta) - y0 * math.sin(theta)
    yr = 0.5 + y0 * math.cos(theta) + x0 * math.sin(theta)
    a, b, c = np.array((0.12, 0.19)), np.array((0.87, 0.50)), np.array((0.12, 0.81))
    v0, v1 = c - a, b - a
    px, py = xr - a[0], yr - a[1]
    dot00, dot01, dot11 = v0 @ v0, v0 @ v1, v1 @ v1
    dot02, dot12 = v0[0] * px + v0[1] * py, v1[0] * px + v1[1] * py
    inv = 1.0 / (dot00 * dot11 - dot01 * dot01)
    u = (dot11 * dot02 - dot01 * dot12) * inv
    v = (dot00 * dot12 - dot01 * dot02) * inv
    return (u >= 0) & (v >= 0) & (u + v < 1)


def draw_agents(image: np.ndarray, tile: int, states: Sequence[AgentState]) -> None:
    """Draw agent i of ``states`` (in agent order) into ``image``, a level rendered with
    ``tile`` pixels per cell: its triangle in ``AGENT_COLORS[i]`` (supersampled for smooth
    edges) and, if it carries something, that object's icon in the cell's top right."""
    supersample = 3
    for index, state in enumerate(states):
        x, y = state.position
        cell = image[y * tile : (y + 1) * tile, x * tile : (x + 1) * tile]
        big = np.repeat(np.repeat(cell, supersample, axis=0), supersample, axis=1)
        big[triangle_mask(tile * supersample, state.direction)] = AGENT_COLORS[
            index % len(AGENT_COLORS)
        ]
        if state.carrying is not None:
            icon = tile * supersample * 2 // 5
            state.carrying.render(big[:icon, -icon:])
        cell[:] = downsample(big, supersample)
