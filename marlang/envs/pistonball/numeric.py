"""Pistonball with numeric observations for neural learners, around ``PistonballTextEnv``.

Default: 5 pistons with the LCA paper's sparse team reward (+1 when the ball reaches the left
wall, -0.1 per cycle); numeric observations are heights and ball kinematics, not pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Box

from marlang.envs.core.base import ScriptedTeam, env_metadata
from marlang.envs.core.numeric import (
    StepOutcome,
    TextEnvView,
    check_agent_count,
    check_max_steps,
    rank_sign,
)
from marlang.envs.pistonball.text import (
    DEFAULT_MAX_CYCLES,
    PISTONBALL_ACTIONS,
    PistonballTextEnv,
)

NUMERIC_FEATURES: tuple[str, ...] = (
    "height",
    "left_height",
    "right_height",
    "has_left",
    "has_right",
    "ball_dx",
    "ball_clearance",
    "ball_wall_distance",
    "ball_vx",
    "ball_vy",
    "position",
)
"""Numeric observation entries: heights over 16 (a missing neighbour: 0, with its ``has_``
flag 0); the ball centre's x minus the piston column's centre, in piston widths; the gap
between the ball's underside and the piston top over 16 height units; the ball's distance
to the left wall in piston widths; its velocity in piston widths per second (y down); the
piston's place in the row, 0 (leftmost) to 1."""

NEAR_BALL = 1.5
"""Pistons whose column centre is within this many widths of the ball move it directly."""


@dataclass(frozen=True)
class PistonballSnapshot:
    """Pistonball state for ranking: heights (0..16) and the ball's x in piston widths from
    the first piston's left edge, and its distance to the wall."""

    heights: tuple[int, ...]
    ball_x: float
    wall_distance: float


class PistonballNumericEnv(TextEnvView):
    """Pistonball with ``agent_i`` as piston i (``agent_0`` next to the left wall).

    The text observations are ``PistonballTextEnv``'s; the numeric ones are the 11 values of
    ``NUMERIC_FEATURES``; the global state is every height over 16, then the ball's distance
    to the wall, its height above the floor (in height units over 16) and its velocity in
    piston widths per second. ``reward_mode`` is ``"sparse"`` (default here: +1 on reaching
    the left wall, -0.1 every cycle) or ``"dense"`` (PettingZoo's reward).
    """

    all_actions: ClassVar[tuple[str, ...]] = PISTONBALL_ACTIONS
    metadata: ClassVar[dict[str, Any]] = env_metadata("pistonball_numeric_v0")
    world_description: ClassVar[str] = PistonballTextEnv.world_description

    def __init__(
        self,
        n_pistons: int = 5,
        *,
        observation_mode: str = "text",
        max_steps: int = DEFAULT_MAX_CYCLES,
        reward_mode: str = "sparse",
        random_drop: bool = True,
        random_rotate: bool = True,
        env_id: str = "pistonball/n5-sparse",
    ):
        self.pistons = self.text_env = PistonballTextEnv(
            n_pistons,
            max_steps=max_steps,
            env_id=env_id,
            reward_mode=reward_mode,
            random_drop=random_drop,
            random_rotate=random_rotate,
        )
        super().__init__(
            self.pistons.possible_agents,
            observation_mode=observation_mode,
            max_steps=max_steps,
            env_id=env_id,
        )
        raw = self.pistons.raw
        self._width = float(raw.piston_width)
        self._top = int(raw.n_piston_positions)
        self._observation_box = Box(
            -np.inf, np.inf, shape=(len(NUMERIC_FEATURES),), dtype=np.float32
        )
        self._state_box = Box(-np.inf, np.inf, shape=(n_pistons + 4,), dtype=np.float32)
        self._cache: dict[str, np.ndarray] | None = None

    # ----------------------------------------------------------------- base API

    @property
    def reward_mode(self) -> str:
        return self.pistons.reward_mode

    def numeric_observation(self, agent: str) -> np.ndarray:
        if self._cache is None:
            self._cache = self._numeric_all()
        return self._cache[agent]

    def state(self) -> np.ndarray:
        self._require_started("state")
        scene = self.pistons._scene()
        raw = self.pistons.raw
        floor = raw.screen_height - raw.wall_width
        heights = np.asarray(scene.heights, dtype=np.float32) / self._top
        ball_height = (floor - scene.ball_y - raw.ball_radius) / raw.pixels_per_position / self._top
        extra = [
            self._wall_distance(scene.ball_x),
            ball_height,
            scene.ball_vx / self._width,
            scene.ball_vy / self._width,
        ]
        return np.concatenate([heights, np.asarray(extra, dtype=np.float32)])

    def observation_data(self, agent: str) -> dict[str, Any]:
        return self.pistons.observe(agent).data

    def rank_snapshot(self) -> PistonballSnapshot:
        self._require_started("rank_snapshot")
        scene = self.pistons._scene()
        return PistonballSnapshot(
            heights=scene.heights,
            ball_x=(scene.ball_x - self.pistons.raw.wall_width) / self._width,
            wall_distance=self._wall_distance(scene.ball_x),
        )

    def rank_states(self, agent: str, a: PistonballSnapshot, b: PistonballSnapshot) -> int:
        """A piston near the ball (column centre within ``NEAR_BALL`` widths in either state)
        is ranked by the ball's distance to the wall (closer is better), then its shape; any
        piston by its shape: higher when the ball is to its left (it should rise behind the
        ball), lower when the ball is above or to its right (it should sink to form a slope
        down toward the wall)."""
        i = self.possible_agents.index(agent)
        centre = i + 0.5
        near = min(abs(a.ball_x - centre), abs(b.ball_x - centre)) <= NEAR_BALL

        def score(s: PistonballSnapshot) -> tuple[float, int]:
            shape = s.heights[i] if s.ball_x < i else -s.heights[i]
            return (-round(s.wall_distance, 2) if near else 0.0, shape)

        return rank_sign(score(b), score(a))

    def scripted_team(self) -> PistonballSlopeTeam:
        return PistonballSlopeTeam(self)

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self.pistons._restart(seed)
        self._cache = None

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        indices = [actions[agent] for agent in self.possible_agents]
        reward, terminated, _ = self.pistons._advance(indices)
        self._cache = None
        return StepOutcome(
            rewards=dict.fromkeys(self.possible_agents, reward),
            terminated=terminated,
            success=terminated,
        )

    # ----------------------------------------------------------------- internals

    def _wall_distance(self, ball_x: float) -> float:
        raw = self.pistons.raw
        return max(0.0, ball_x - raw.ball_radius - raw.wall_width) / self._width

    def _numeric_all(self) -> dict[str, np.ndarray]:
        scene = self.pistons._scene()
        raw = self.pistons.raw
        n = len(self.possible_agents)
        top, width = float(self._top), self._width
        heights = np.asarray(scene.heights, dtype=np.float32) / top
        left = np.concatenate([[0.0], heights[:-1]])
        right = np.concatenate([heights[1:], [0.0]])
        has_left = (np.arange(n) > 0).astype(np.float32)
        has_right = (np.arange(n) < n - 1).astype(np.float32)
        centres = raw.wall_width + width * (np.arange(n) + 0.5)
        dx = (scene.ball_x - centres) / width
        tops = np.asarray(scene.piston_tops, dtype=np.float32)
        clearance = (tops - (scene.ball_y + raw.ball_radius)) / raw.pixels_per_position / top
        columns = np.stack(
            [
                heights,
                left,
                right,
                has_left,
                has_right,
                dx,
                clearance,
                np.full(n, self._wall_distance(scene.ball_x)),
                np.full(n, scene.ball_vx / width),
                np.full(n, scene.ball_vy / width),
                np.arange(n) / max(n - 1, 1),
            ],
            axis=1,
        ).astype(np.float32)
        return {agent: columns[i] for i, agent in enumerate(self.possible_agents)}


RISE_MARK = 0.1
"""``PistonballSlopeTeam`` raises a piston once the ball's centre is left of this fraction of
its column. With 5 pistons and seeds 0..99, 0.1 reaches the wall every time; 0 (the column's
left edge, as ``PistonballRuleTeam``) can leave the ball resting on one flat piston."""


class PistonballSlopeTeam(ScriptedTeam):
    """Reference team: pistons whose column (but for its leftmost tenth, ``RISE_MARK``) lies
    right of the ball's centre rise, the others sink, so the pistons form a slope down toward
    the wall. It reads the physics. With 5 pistons it reaches the wall on every one of seeds
    0..99, in 10.1 cycles on average (mean sparse return -0.01: +1 minus 0.1 per cycle)."""

    env: PistonballNumericEnv

    def _joint_action(self, observations: Any) -> dict[str, str]:
        pistons = self.env.pistons
        raw = pistons.raw
        ball_x = float(raw.ball.position[0])
        actions = {}
        for i, agent in enumerate(self.env.possible_agents):
            mark = raw.wall_width + raw.piston_width * (i + RISE_MARK)
            actions[agent] = "move up" if ball_x < mark else "move down"
        return {agent: actions[agent] for agent in self.env.agents}


def make_pistonball_numeric(
    n_agents: int | None = None,
    *, n_pistons: int, env_id: str,  # fixed by the id
    max_steps: int | None = None,
    observation_mode: str = "text",
    reward_mode: str = "sparse",
    random_drop: bool = True,
    random_rotate: bool = True,
) -> PistonballNumericEnv:
    """The entry point of ``pistonball/n5-sparse`` (``n_pistons`` fixes the team size)."""
    n = n_pistons if n_agents is None else n_agents
    check_agent_count(env_id, n, (n_pistons,))
    return PistonballNumericEnv(
        n,
        observation_mode=observation_mode,
        max_steps=DEFAULT_MAX_CYCLES if max_steps is None else check_max_steps(max_steps),
        reward_mode=reward_mode,
        random_drop=random_drop,
        random_rotate=random_rotate,
        env_id=env_id,
    )
