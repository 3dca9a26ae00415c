"""PettingZoo Pistonball as a ``ParallelEnv`` with text observations read from its physics state.

Each piston is one agent; the team shares PettingZoo's reward for moving the ball to the left
wall. Observations describe the piston, its neighbours and the ball in words, not pixels.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from pettingzoo.butterfly.pistonball.pistonball import raw_env

from marlang.envs.core.base import (
    MultiAgentEnv,
    ScriptedTeam,
    StepLimited,
    check_optional_max_steps,
    env_metadata,
)
from marlang.envs.core.spaces import (
    ActionStringSpace,
    StepResult,
    check_joint_action,
    is_integer,
)
from marlang.envs.pistonball.narration import PistonballNarrator
from marlang.types import TextObservation

logger = logging.getLogger(__name__)

PISTONBALL_ACTIONS: tuple[str, ...] = ("move down", "stay", "move up")
"""Legal action strings; position i is Pistonball's discrete action i (2 raises the piston)."""

PISTONBALL_ACTION_INDEX: Mapping[str, int] = MappingProxyType(
    {name: i for i, name in enumerate(PISTONBALL_ACTIONS)}
)

MIN_PISTONS = 2
MAX_PISTONS = 20
DEFAULT_MAX_CYCLES = 125
"""PettingZoo's own ``max_cycles`` default."""

REWARD_MODES: tuple[str, ...] = ("dense", "sparse")
"""``dense``: PettingZoo's shaped reward; ``sparse``: LCA's +1 at the wall, -0.1 per cycle."""
SPARSE_SUCCESS_REWARD = 1.0
SPARSE_STEP_PENALTY = -0.1

STILL_SPEED = 0.05
"""Ball speeds below this many piston widths per second are reported as "at rest"."""

_SIDE_WORDS: Mapping[str, str] = MappingProxyType(
    {"left": "to your left", "above": "above you", "right": "to your right"}
)


def _direction_words(vx: float, vy: float, speed: float) -> str:
    """'left and down', 'up', ... (screen y grows downward); a component under a quarter of the
    speed is left out so that a ball rolling left is not called 'left and down'."""
    parts = []
    if abs(vx) >= 0.25 * speed:
        parts.append("left" if vx < 0 else "right")
    if abs(vy) >= 0.25 * speed:
        parts.append("up" if vy < 0 else "down")
    return " and ".join(parts)


@dataclass(frozen=True)
class _Scene:
    """The physics facts every piston's observation is built from (read once per cycle)."""

    heights: tuple[int, ...]
    piston_tops: tuple[float, ...]
    """Screen y of each piston's top surface (pixels, y down)."""
    ball_x: float
    ball_y: float
    ball_vx: float
    ball_vy: float


class PistonballTextEnv(StepLimited, MultiAgentEnv):
    """Pistonball with N pistons observing and acting in words.

    ``agent_i`` is Pistonball's ``piston_i``: ``agent_0`` is the leftmost piston, next to the
    left wall. Indices in the text are 0-based like the agent names. Piston i's column spans
    screen x in ``[40 + 40 i, 80 + 40 i)``; the ball is "above" the piston whose column holds
    its centre, "to the left" of pistons further right and "to the right" of those further left.

    One ``step`` is one PettingZoo cycle: the raw AEC env is stepped once per piston in agent
    order (each of those steps advances the physics by 1/20 s, as in PettingZoo's parallel
    wrapper), but its pixel observations are never computed. Heights are positions 0..16
    (0 = fully down, one position is 4 pixels). Distances across are in piston widths
    (40 pixels), heights of the ball in positions, speeds in piston widths per simulated second.

    Reward is PettingZoo's shared per-cycle reward (100 for moving the ball the whole way to the
    left wall, minus ``time_penalty`` each cycle until the last). With ``reward_mode="sparse"``
    it is instead the LCA paper's sparse team reward: -0.1 every cycle, plus 1 on the cycle the
    ball reaches the left wall (``time_penalty`` is then unused). ``terminations`` are all True
    when the ball reaches the left wall (``infos[agent]["success"]``); ``truncations`` are all
    True when ``max_steps`` cycles pass without that.

    Actions are the strings in ``PISTONBALL_ACTIONS`` (an index 0..2 into it is also accepted).
    Any other value is treated as "stay" and sets ``infos[agent]["illegal_action"]``.
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("pistonball_text_v0", ["rgb_array"])
    world_description: ClassVar[str] = "a row of pistons that push a ball toward the left wall"
    """This world as a noun phrase ("... agents acting together in {world_description}")."""

    def __init__(
        self,
        n_pistons: int = 20,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
        env_id: str | None = None,
        time_penalty: float = -0.1,
        random_drop: bool = True,
        random_rotate: bool = True,
        ball_mass: float = 0.75,
        ball_friction: float = 0.3,
        ball_elasticity: float = 1.5,
        reward_mode: str = "dense",
    ):
        """
        Args:
            n_pistons: number of pistons (agents), 2..20.
            max_steps: cycle limit per episode; ``None`` uses PettingZoo's 125.
            render_mode: ``None`` or ``"rgb_array"``.
            env_id: registry id, for display only.
            time_penalty: reward added every cycle before the ball arrives (PettingZoo's).
            random_drop: drop the ball at a random x and height near the right (else fixed).
            random_rotate: give the ball a random initial spin.
            ball_mass, ball_friction, ball_elasticity: the ball's physics (PettingZoo's defaults).
            reward_mode: ``"dense"`` (PettingZoo's reward) or ``"sparse"`` (+1 at the wall,
                -0.1 per cycle).
        """
        if reward_mode not in REWARD_MODES:
            raise ValueError(
                f"reward_mode must be one of {list(REWARD_MODES)}, got {reward_mode!r}"
            )
        if not is_integer(n_pistons) or not MIN_PISTONS <= n_pistons <= MAX_PISTONS:
            raise ValueError(
                f"n_pistons must be an integer in {MIN_PISTONS}..{MAX_PISTONS}, got {n_pistons!r}"
            )
        max_steps = check_optional_max_steps(max_steps)
        super().__init__(int(n_pistons), render_mode=render_mode, env_id=env_id or "pistonball")
        self._max_steps = DEFAULT_MAX_CYCLES if max_steps is None else max_steps
        self._raw = raw_env(
            n_pistons=int(n_pistons),
            time_penalty=time_penalty,
            continuous=False,
            random_drop=random_drop,
            random_rotate=random_rotate,
            ball_mass=ball_mass,
            ball_friction=ball_friction,
            ball_elasticity=ball_elasticity,
            max_cycles=self._max_steps,
            # With a render mode the raw env redraws its screen every cycle; without one it
            # skips drawing entirely, which is what makes text-only stepping cheap.
            render_mode=render_mode,
        )
        self.time_penalty = float(time_penalty)
        self.reward_mode = reward_mode
        self._set_action_spaces(lambda: ActionStringSpace(PISTONBALL_ACTIONS))
        self._t = 0
        raw = self._raw
        # Screen y of a fully lowered piston body (the package's ``maximum_piston_y``).
        self._lowest_y = (
            raw.screen_height - raw.wall_width - (raw.piston_height - raw.piston_head_height)
        )
        self._mission = (
            "Move the ball to the left wall as fast as possible. All pistons share one reward: "
            "the ball's progress toward the left wall (100 for the whole way) minus "
            f"{abs(self.time_penalty):g} for every cycle it takes."
            if reward_mode == "dense"
            else "Move the ball to the left wall as fast as possible. All pistons share one "
            f"reward: {SPARSE_SUCCESS_REWARD:g} when the ball reaches the left wall, minus "
            f"{abs(SPARSE_STEP_PENALTY):g} for every cycle."
        )

    def __repr__(self) -> str:
        return (
            f"PistonballTextEnv(env_id={self.env_id!r}, n_pistons={self.n_pistons}, "
            f"max_steps={self._max_steps})"
        )

    # ----------------------------------------------------------------- PettingZoo API

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Drop a new ball on new piston heights; ``reset(seed=s)`` gives the same episode."""
        self._warn_unknown_options(options)
        self._restart(seed)

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        """Apply one joint action (one entry per live agent): one Pistonball cycle."""
        check_joint_action(self.agents, actions)
        indices = [self._action_index(actions[agent]) for agent in self.agents]
        agents = list(self.agents)
        reward, terminated, truncated = self._advance(indices)
        observations = self._observe_all(agents)
        infos = {
            agent: self._info(success=terminated, illegal=index is None)
            for agent, index in zip(agents, indices, strict=True)
        }
        return self._step_result(agents, observations, reward, terminated, truncated, infos)

    def _render_frame(self) -> np.ndarray:
        """The package's RGB frame (H, W, 3) uint8: 560 x (80 + 40 n_pistons)."""
        return np.ascontiguousarray(self._raw.render())

    def state(self) -> np.ndarray:
        """Global state for centralised critics, float32: every piston's height (0..16), then
        the ball's x, y (pixels, y down) and its velocity vx, vy (pixels per second)."""
        self._require_started("state")
        scene = self._scene()
        return np.array(
            [*scene.heights, scene.ball_x, scene.ball_y, scene.ball_vx, scene.ball_vy],
            dtype=np.float32,
        )

    # close() is the base class's: the raw env's close() calls pygame.quit(), which would shut
    # pygame down for every other env in the process, and there is nothing of ours to release.

    # ----------------------------------------------------------------- marlang API

    @property
    def raw(self) -> raw_env:
        """The underlying PettingZoo ``raw_env`` (its ``ball`` and ``pistonList`` bodies)."""
        return self._raw

    @property
    def n_pistons(self) -> int:
        return len(self.possible_agents)

    @property
    def mission(self) -> str:
        return self._mission

    def observe(self, agent: str) -> TextObservation:
        """The agent's observation of the current physics state (what ``reset``/``step`` return
        for it); call it again after moving bodies by hand."""
        self._require_started("observe")
        return self._observe(self.possible_agents.index(agent), self._scene())

    def narrator(self) -> PistonballNarrator:
        """Tells this env's episodes in words for learners (``marlang.envs.core.narration``)."""
    
        return PistonballNarrator(self)

    def scripted_team(self) -> PistonballRuleTeam:
        """The rule-based reference team for this env (see ``PistonballRuleTeam``)."""
        return PistonballRuleTeam(self)

    # ----------------------------------------------------------------- internals

    def _restart(self, seed: int | None) -> None:
        """Reset the physics and the cycle count (no observations: numeric wrappers use it)."""
        self._raw.reset(seed=seed)
        self._t = 0
        self._started = True
        self.agents = list(self.possible_agents)

    def _advance(self, indices: Sequence[int | None]) -> tuple[float, bool, bool]:
        """One cycle with one action index per piston (``None``: stay); returns the shared
        reward, terminated, truncated. Builds no observation (numeric wrappers use it)."""
        raw = self._raw
        stay = PISTONBALL_ACTION_INDEX["stay"]
        # The raw env expects its pistons in order, once each; all agents live together.
        for index in indices:
            raw.step(stay if index is None else index)
        self._t += 1
        terminated = bool(raw.terminate)
        truncated = not terminated and self._t >= self._max_steps
        if self.reward_mode == "dense":
            reward = float(raw.rewards[raw.possible_agents[0]])
        else:
            reward = SPARSE_STEP_PENALTY + (SPARSE_SUCCESS_REWARD if terminated else 0.0)
        return reward, terminated, truncated

    def _scene(self) -> _Scene:
        raw = self._raw
        radius = raw.piston_radius
        ppp = raw.pixels_per_position
        ys = [float(piston.position[1]) for piston in raw.pistonList]
        ball_x, ball_y = raw.ball.position
        ball_vx, ball_vy = raw.ball.velocity
        return _Scene(
            heights=tuple(round((self._lowest_y - y) / ppp) for y in ys),
            piston_tops=tuple(y - radius for y in ys),
            ball_x=float(ball_x),
            ball_y=float(ball_y),
            ball_vx=float(ball_vx),
            ball_vy=float(ball_vy),
        )

    def _observe_all(self, agents: Sequence[str]) -> dict[str, TextObservation]:
        # One physics read serves every piston's observation.
        scene = self._scene()
        return {agent: self._observe(self.possible_agents.index(agent), scene) for agent in agents}

    def _observe(self, i: int, scene: _Scene) -> TextObservation:
        raw = self._raw
        n = self.n_pistons
        width = raw.piston_width
        ppp = raw.pixels_per_position
        top = raw.n_piston_positions
        left_edge = raw.wall_width + width * i
        if scene.ball_x < left_edge:
            side = "left"
        elif scene.ball_x < left_edge + width:
            side = "above"
        else:
            side = "right"
        distance = abs(scene.ball_x - (left_edge + width / 2)) / width
        # Gap between the ball's underside and this piston's top, in height positions.
        clearance = (scene.piston_tops[i] - (scene.ball_y + raw.ball_radius)) / ppp
        # Decide above/below on the shown figure: a ball resting on a piston sinks into it by
        # a fraction of a pixel, and "0.0 below" would read as a contradiction.
        shown_clearance = round(clearance, 1)
        vertical = "above" if shown_clearance >= 0 else "below"
        to_wall = max(0.0, scene.ball_x - raw.ball_radius - raw.wall_width) / width
        speed = math.hypot(scene.ball_vx, scene.ball_vy) / width
        direction = (
            "at rest"
            if speed < STILL_SPEED
            else _direction_words(scene.ball_vx, scene.ball_vy, speed * width)
        )
        height = scene.heights[i]
        left_height = scene.heights[i - 1] if i > 0 else None
        right_height = scene.heights[i + 1] if i < n - 1 else None

        lines = [
            (
                f"You are piston {i} of pistons 0..{n - 1}, counted from the left wall "
                "(0 is leftmost)."
            ),
            f"Your height is {height} of {top} (0 = fully down; one height unit is {ppp} pixels).",
            (
                f"Your left neighbour, piston {i - 1}, is at height {left_height}."
                if left_height is not None
                else "On your left is the left wall."
            ),
            (
                f"Your right neighbour, piston {i + 1}, is at height {right_height}."
                if right_height is not None
                else "On your right is the right wall."
            ),
            (
                f"The ball is {_SIDE_WORDS[side]}, its centre {distance:.1f} piston widths "
                "from yours."
            ),
            (
                f"The bottom of the ball is {abs(shown_clearance):.1f} height units {vertical} "
                "the top of your piston."
            ),
            (
                "The ball is at rest."
                if direction == "at rest"
                else f"The ball is moving {direction} at {speed:.1f} piston widths per second."
            ),
            f"The ball is {to_wall:.1f} piston widths from the left wall.",
            f"Cycle {self._t} of {self._max_steps} has passed.",
        ]
        seconds_per_cycle = n * raw.dt
        data: dict[str, Any] = {
            "agent": self.possible_agents[i],
            "index": i,
            "n_pistons": n,
            "height": height,
            "max_height": top,
            "left_height": left_height,
            "right_height": right_height,
            "ball_x": round(scene.ball_x, 2),
            "ball_y": round(scene.ball_y, 2),
            "ball_relative": side,
            "ball_distance": round(distance, 3),
            "ball_clearance": round(clearance, 3),
            "ball_wall_distance": round(to_wall, 3),
            "ball_velocity": [round(scene.ball_vx, 2), round(scene.ball_vy, 2)],
            "ball_direction": direction,
            "ball_speed": round(speed, 3),
            "ball_speed_per_cycle": round(speed * seconds_per_cycle, 3),
            "cycle": self._t,
            "max_cycles": self._max_steps,
        }
        return TextObservation(
            text="\n".join(lines),
            mission=self._mission,
            legal_actions=list(PISTONBALL_ACTIONS),
            data=data,
        )

    def _first_info(self, agent: str) -> dict[str, Any]:
        return self._info(success=False, illegal=False)

    def _info(self, success: bool, illegal: bool) -> dict[str, Any]:
        return {"success": success, "illegal_action": illegal, "cycle": self._t}

    @staticmethod
    def _action_index(action: Any) -> int | None:
        if isinstance(action, str):
            return PISTONBALL_ACTION_INDEX.get(action)
        if is_integer(action):
            return int(action) if 0 <= action < len(PISTONBALL_ACTIONS) else None
        return None


class PistonballRuleTeam(ScriptedTeam):
    """A rule-based reference team: pistons right of the ball rise, the others sink.

    Each piston moves up when the ball's centre is left of its column (``ball_relative ==
    "left"``) and moves down when the ball is above it or to its right, so the pistons under
    and behind the ball form a slope down toward the left wall. It reads only each
    observation's ``data``. Mean returns over seeds 0..19: about 93, 98 and 95 with 5, 10
    and 20 pistons (uniformly random actions: about 49 with 5 and 3 with 20).

    Usage: ``team = env.scripted_team(); obs, _ = env.reset(seed=0); team.reset()``, then
    ``env.step(team.act(obs))`` until the episode ends.
    """

    env: PistonballTextEnv

    def choose(self, agent: str, observation: TextObservation) -> str:
        return "move up" if observation.data["ball_relative"] == "left" else "move down"


def make_pistonball(
    n_agents: int = 2, *, n_pistons: int | None, env_id: str, **options: Any
) -> PistonballTextEnv:
    """The entry point of the ``pistonball`` ids: ``n_pistons`` fixes the team size (None: any
    ``n_agents`` from 2 to 20); ``options`` are ``PistonballTextEnv``'s."""
    if n_pistons is not None and n_agents != n_pistons:
        raise ValueError(
            f"{env_id} has {n_pistons} pistons, so n_agents must be {n_pistons} (got {n_agents}); "
            "the id 'pistonball' takes any number from 2 to 20"
        )
    return PistonballTextEnv(n_agents, env_id=env_id, **options)
