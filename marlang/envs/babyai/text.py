"""Multi-agent BabyAI as a PettingZoo ``ParallelEnv`` with BabyAI-Text observations.

N agents share one minigrid BabyAI level, its mission and its verifier; any agent can
complete the mission, and every agent gets the same reward.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from minigrid.core.actions import Actions
from minigrid.core.constants import OBJECT_TO_IDX, TILE_PIXELS
from minigrid.core.world_object import WorldObj
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.envs.babyai.core.verifier import Instr, PickupInstr, PutNextInstr, SeqInstr

from marlang.envs.babyai.agent import ACTION_INDEX, ACTIONS, AgentState
from marlang.envs.babyai.drawing import draw_agents
from marlang.envs.babyai.narration import BabyAINarrator
from marlang.envs.babyai.scripted import ScriptedBabyAITeam
from marlang.envs.babyai.shaping import goal_distance
from marlang.envs.babyai.view import DIRECTION_NAMES, LocalView, object_record, observe
from marlang.envs.core.base import (
    MultiAgentEnv,
    StepLimited,
    check_optional_max_steps,
    env_metadata,
)
from marlang.envs.core.spaces import (
    ActionStringSpace,
    StepResult,
    check_joint_action,
    check_render_mode,
    is_integer,
)
from marlang.types import TextObservation

logger = logging.getLogger(__name__)

MIN_AGENTS = 2


def _direction_index(direction: Any) -> int:
    if isinstance(direction, str) and direction in DIRECTION_NAMES:
        return DIRECTION_NAMES.index(direction)
    if is_integer(direction) and 0 <= direction < 4:
        return int(direction)
    raise ValueError(f"direction must be one of {list(DIRECTION_NAMES)} or 0..3, got {direction!r}")


def _remember_carrying(instr: Instr, carrying_before: WorldObj | None) -> None:
    """Give the verifier the acting agent's own memory of what it held before acting.

    minigrid's Pickup/PutNext verifiers remember ``env.carrying`` from their previous call;
    with several agents verified in turn that would be another agent's hands.
    """
    if isinstance(instr, SeqInstr):
        _remember_carrying(instr.instr_a, carrying_before)
        _remember_carrying(instr.instr_b, carrying_before)
    elif isinstance(instr, (PickupInstr, PutNextInstr)):
        instr.preCarrying = carrying_before


@contextlib.contextmanager
def _minigrid_prints_to_log() -> Iterator[None]:
    """minigrid's level generator prints each rejected sample; send that to the debug log."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        yield
    for line in captured.getvalue().splitlines():
        logger.debug("minigrid: %s", line)


class BabyAITextEnv(StepLimited, MultiAgentEnv):
    """N agents in one BabyAI level, observing and acting in words.

    Each agent (``agent_0``, ``agent_1``, ...) has its own position, direction, carried
    object and egocentric 7x7 view (minigrid's, with walls and closed doors occluding).
    Agents block each other: nobody walks into, drops onto or toggles a cell where another
    agent stands. All agents see each other and any of them can complete the mission.

    Joint actions are applied agent by agent in ``possible_agents`` order (agent_0 first);
    each agent's action sees the effects of the earlier ones, and the mission is checked
    right after each agent's action with that agent's state. Once it is complete, the
    remaining agents' actions that step are skipped (``infos[agent]["skipped"]``).

    Reward is shared: ``1 - 0.9 * t / max_steps`` to every agent on the step the mission is
    completed (``t`` counts joint steps), else 0. ``terminations`` are all True on success
    (or on a verifier failure, for strict levels); ``truncations`` are all True when ``t``
    reaches ``max_steps`` without success.

    Actions are the strings in ``ACTIONS`` (an index 0..5 into it is also accepted). Any
    other value is a no-op for that agent and sets ``infos[agent]["illegal_action"]``.
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("babyai_text_v0", ["rgb_array"])
    world_description: ClassVar[str] = "a grid world of rooms with doors, keys, balls and boxes"
    """This world as a noun phrase ("... agents acting together in {world_description}")."""

    def __init__(
        self,
        level: RoomGridLevel | Callable[[], RoomGridLevel],
        n_agents: int = 2,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
        env_id: str | None = None,
    ):
        """
        Args:
            level: a minigrid BabyAI level (a ``RoomGridLevel``) or a class/callable making one.
            n_agents: number of agents, at least 2.
            max_steps: joint-step limit per episode; ``None`` uses the level's own limit.
            render_mode: ``None`` or ``"rgb_array"``.
            env_id: registry id, for display only.
        """
        if not is_integer(n_agents) or n_agents < MIN_AGENTS:
            raise ValueError(f"n_agents must be an integer >= {MIN_AGENTS}, got {n_agents!r}")
        max_steps = check_optional_max_steps(max_steps)
        check_render_mode(render_mode, self.metadata)
        if not isinstance(level, RoomGridLevel) and callable(level):
            level = level()
        if not isinstance(level, RoomGridLevel):
            raise TypeError(f"level must be a minigrid RoomGridLevel, got {type(level).__name__}")
        super().__init__(
            n_agents, render_mode=render_mode, env_id=env_id or f"babyai/{type(level).__name__}"
        )

        self._level = level
        self._max_steps_override = max_steps
        self._set_action_spaces(lambda: ActionStringSpace(ACTIONS))
        self._states: dict[str, AgentState] = {}
        self._t = 0
        self._max_steps = self._max_steps_override or 0

    def __repr__(self) -> str:
        return (
            f"BabyAITextEnv(env_id={self.env_id!r}, level={type(self._level).__name__}, "
            f"n_agents={len(self.possible_agents)})"
        )

    # ----------------------------------------------------------------- PettingZoo API

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        """Apply one joint action (one entry per live agent)."""
        check_joint_action(self.agents, actions)
        agents = list(self.agents)
        reward, terminated, truncated, infos = self._advance(actions)
        return self._step_result(
            agents, self._observe_all(agents), reward, terminated, truncated, infos
        )

    def _start_episode(self, seed: int | None, options: Mapping[str, Any] | None) -> None:
        """Generate a new level and place the agents (no observations: numeric wrappers use
        it); ``reset(seed=s)`` always gives the same episode.

        ``options={"agent_starts": {"agent_1": {"position": (x, y), "direction": "east"}}}``
        places the named agents explicitly (any agent, agent_0 included); the others start
        as usual: agent_0 at the level's own start, the rest on random free cells of its room.
        """
        options = dict(options or {})
        starts = options.pop("agent_starts", None) or {}
        self._warn_unknown_options(options)
        with _minigrid_prints_to_log():
            self._level.reset(seed=seed)
        self._t = 0
        self._level.step_count = 0
        self._max_steps = self._max_steps_override or int(self._level.max_steps)
        self._states = self._initial_states(starts)
        self._started = True
        self.agents = list(self.possible_agents)

    def _advance(
        self, actions: Mapping[str, Any]
    ) -> tuple[float, bool, bool, dict[str, dict[str, Any]]]:
        """Apply a checked joint action: the shared reward, terminated, truncated and the
        infos, but no observations (numeric wrappers use it)."""
        self._t += 1
        self._level.step_count = self._t
        status, completed_by = "continue", None
        details: dict[str, dict[str, bool]] = {}
        for agent in self.agents:
            if status != "continue":
                details[agent] = {"illegal_action": False, "blocked": False, "skipped": True}
                continue
            index = self._action_index(actions[agent])
            blocked, status = self._act(agent, index)
            details[agent] = {"illegal_action": index is None, "blocked": blocked, "skipped": False}
            if status == "success":
                completed_by = agent

        success = status == "success"
        terminated = status in ("success", "failure")
        truncated = not terminated and self._t >= self._max_steps
        reward = 1.0 - 0.9 * self._t / self._max_steps if success else 0.0
        infos = {
            agent: self._info(success=success, completed_by=completed_by, **details[agent])
            for agent in self.agents
        }
        return reward, terminated, truncated, infos

    def _render_frame(self) -> np.ndarray:
        """RGB array (H, W, 3) of the whole level: every agent as a coloured triangle (see
        ``AGENT_COLORS``) with a small icon of what it carries; cells any agent sees are lit."""
        level, tile = self._level, TILE_PIXELS
        highlight = np.zeros((level.width, level.height), dtype=bool)
        for agent in self.possible_agents:
            for x, y in self._local_view(agent).visible_cells:
                highlight[x, y] = True
        # (no cell holds minigrid's single agent: draw_agents draws every agent over the grid)
        image = level.grid.render(tile, agent_pos=(-1, -1), highlight_mask=highlight)
        draw_agents(image, tile, [self._states[agent] for agent in self.possible_agents])
        return image

    def state(self) -> np.ndarray:
        """Global state for centralised critics: minigrid's (W, H, 3) grid encoding with each
        agent written as ``(OBJECT_TO_IDX["agent"], agent index, direction)``."""
        if not self._states:
            raise RuntimeError("state() needs a reset() first")
        encoding = self._level.grid.encode()
        for index, agent in enumerate(self.possible_agents):
            state = self._states[agent]
            encoding[state.position] = (OBJECT_TO_IDX["agent"], index, state.direction)
        return encoding

    # ----------------------------------------------------------------- marlang API

    @property
    def level(self) -> RoomGridLevel:
        """The underlying minigrid level. Its ``agent_pos``/``agent_dir``/``carrying`` are
        only meaningful inside ``embodied()``."""
        return self._level

    @property
    def mission(self) -> str:
        return self._level.mission

    @property
    def instructions(self) -> Instr:
        """The level's mission as minigrid's verifier instructions."""
        # (each level's gen_mission sets it; RoomGridLevel does not declare it)
        return self._level.instrs  # type: ignore[attr-defined]

    @property
    def agent_states(self) -> Mapping[str, AgentState]:
        """Read-only view of every agent's body state."""
        return MappingProxyType(self._states)

    def agent_at(self, position: tuple[int, int]) -> str | None:
        """Name of the agent standing on ``position``, if any."""
        for agent, state in self._states.items():
            if state.position == tuple(position):
                return agent
        return None

    @contextlib.contextmanager
    def embodied(self, agent: str) -> Iterator[RoomGridLevel]:
        """Temporarily load ``agent``'s body into the level, so that minigrid's own code
        (view, verifier, ``BabyAIBot``) sees the world as that agent.

        Changes minigrid makes to the body (position, direction, carried object) are kept
        as the agent's new state; the level's own agent fields are restored afterwards.
        """
        state = self._states[agent]
        level = self._level
        saved = (level.agent_pos, level.agent_dir, level.carrying)
        level.agent_pos, level.agent_dir = state.position, state.direction
        # (minigrid declares `carrying` as always None; it holds the carried WorldObj)
        level.carrying = state.carrying  # type: ignore[assignment]
        try:
            yield level
        finally:
            self._states[agent] = AgentState(
                position=(int(level.agent_pos[0]), int(level.agent_pos[1])),
                direction=int(level.agent_dir),
                carrying=level.carrying,
            )
            level.agent_pos, level.agent_dir, level.carrying = saved

    def observe(self, agent: str) -> TextObservation:
        """The agent's current observation (what ``reset``/``step`` return for it)."""
        view = self._local_view(agent)
        state = self._states[agent]
        front = state.front
        data: dict[str, Any] = {
            "agent": agent,
            "step": self._t,
            "max_steps": self._max_steps,
            **view.to_data(),
            "front": {
                "position": list(front),
                "object": object_record(self._level.grid.get(*front)),
                "agent": self.agent_at(front),
            },
            "team": {
                name: {
                    "position": list(other.position),
                    "direction": DIRECTION_NAMES[other.direction],
                    "carrying": object_record(other.carrying),
                }
                for name, other in self._states.items()
            },
            "grid_size": [int(self._level.width), int(self._level.height)],
            "goal_distance": goal_distance(self._level, state.position, state.direction),
        }
        return TextObservation(
            text=view.text(), mission=self.mission, legal_actions=list(ACTIONS), data=data
        )

    def narrator(self) -> BabyAINarrator:
        """Tells this env's episodes in words for learners (``marlang.envs.core.narration``)."""
    
        return BabyAINarrator(self)

    def scripted_team(self, driver: str = "agent_0") -> ScriptedBabyAITeam:
        """The scripted reference team for this env (see ``ScriptedBabyAITeam``), ``driver``
        following minigrid's bot while the others make way."""
        return ScriptedBabyAITeam(self, driver=driver)

    # ----------------------------------------------------------------- internals

    def _local_view(self, agent: str) -> LocalView:
        others = {name: s for name, s in self._states.items() if name != agent}
        with self.embodied(agent) as level:
            return observe(level, others)

    def _first_info(self, agent: str) -> dict[str, Any]:
        return self._info(success=False)

    def _info(
        self, success: bool, completed_by: str | None = None, **details: bool
    ) -> dict[str, Any]:
        return {
            "success": success,
            "completed_by": completed_by,
            "illegal_action": details.get("illegal_action", False),
            "blocked": details.get("blocked", False),
            "skipped": details.get("skipped", False),
            "step": self._t,
        }

    @staticmethod
    def _action_index(action: Any) -> int | None:
        if isinstance(action, str):
            return ACTION_INDEX.get(action)
        if is_integer(action):
            return int(action) if 0 <= action < len(ACTIONS) else None
        return None

    def _act(self, agent: str, index: int | None) -> tuple[bool, str]:
        """Apply one agent's action (``None``: no-op) and check the mission with its state.

        Returns (blocked by another agent, verifier status).
        """
        front = self._states[agent].front
        occupant = self.agent_at(front)
        blocked = moved_objects = False
        with self.embodied(agent) as level:
            carrying_before = level.carrying
            cell = level.grid.get(*front)
            if index == Actions.left:
                level.agent_dir = (level.agent_dir - 1) % 4
            elif index == Actions.right:
                level.agent_dir = (level.agent_dir + 1) % 4
            elif index == Actions.forward:
                if cell is None or cell.can_overlap():
                    if occupant:
                        blocked = True
                    else:
                        level.agent_pos = front
            elif index == Actions.pickup:
                if cell is not None and cell.can_pickup() and level.carrying is None:
                    level.carrying = cell  # type: ignore[assignment]  # (declared None in minigrid)
                    # (as minigrid's own pickup stores it, though it declares a (x, y) tuple)
                    cell.cur_pos = np.array([-1, -1])  # type: ignore[assignment]
                    level.grid.set(*front, None)
                    moved_objects = True
            elif index == Actions.drop:
                if cell is None and level.carrying is not None:
                    if occupant:
                        blocked = True
                    else:
                        level.grid.set(*front, level.carrying)
                        level.carrying.cur_pos = np.array(front)
                        level.carrying = None
                        moved_objects = True
            elif index == Actions.toggle and cell is not None:
                if occupant:
                    blocked = True  # e.g. closing a door on a teammate standing in it
                else:
                    cell.toggle(level, front)
            if moved_objects:
                level.update_objs_poss()
            _remember_carrying(self.instructions, carrying_before)
            status = self.instructions.verify(None if index is None else Actions(index))
        return blocked, status if status in ("success", "failure") else "continue"

    def _initial_states(self, starts: Mapping[str, Any]) -> dict[str, AgentState]:
        level = self._level
        unknown = sorted(set(starts) - set(self.possible_agents))
        if unknown:
            raise ValueError(
                f"agent_starts names unknown agents {unknown}; agents: {self.possible_agents}"
            )
        states: dict[str, AgentState] = {}
        for agent, start in starts.items():
            if not isinstance(start, Mapping) or "position" not in start:
                raise ValueError(
                    f"agent_starts[{agent!r}] must be a dict with a 'position' (x, y) and an "
                    f"optional 'direction', got {start!r}"
                )
            coordinates = [int(v) for v in start["position"]]
            if len(coordinates) != 2:
                raise ValueError(f"agent_starts[{agent!r}] position {start['position']!r} is not an (x, y) pair")
            position = (coordinates[0], coordinates[1])
            if not (0 <= position[0] < level.width and 0 <= position[1] < level.height):
                raise ValueError(f"agent_starts[{agent!r}] position {position} is outside the grid")
            cell = level.grid.get(*position)
            if cell is not None and not cell.can_overlap():
                raise ValueError(f"agent_starts[{agent!r}] position {position} holds a {cell.type}")
            if any(s.position == position for s in states.values()):
                raise ValueError(f"agent_starts[{agent!r}] position {position} is already taken")
            states[agent] = AgentState(position, _direction_index(start.get("direction", 0)))

        level_start = (int(level.agent_pos[0]), int(level.agent_pos[1]))
        if "agent_0" not in states:
            if any(s.position == level_start for s in states.values()):
                raise ValueError(f"agent_starts puts an agent on agent_0's start {level_start}")
            states["agent_0"] = AgentState(level_start, int(level.agent_dir))

        taken = {s.position for s in states.values()}
        reachable, elsewhere = self._spawn_cells(states["agent_0"].position)
        reachable = [cell for cell in reachable if cell not in taken]
        elsewhere = [cell for cell in elsewhere if cell not in taken]
        to_place = [a for a in self.possible_agents if a not in states]
        if len(reachable) + len(elsewhere) < len(to_place):
            raise ValueError(
                f"n_agents={len(self.possible_agents)} does not fit: the starting room of "
                f"{self.env_id} has {len(reachable) + len(elsewhere)} free cells for "
                f"{len(to_place)} more agents"
            )
        rng = level.np_random
        for agent in to_place:
            # Prefer cells agent_0 can walk to; a boxed-in start still leaves the room's rest.
            pool = reachable or elsewhere
            position = pool.pop(int(rng.integers(len(pool))))
            states[agent] = AgentState(position, self._spawn_direction(position, rng))
        return {agent: states[agent] for agent in self.possible_agents}

    def _spawn_cells(
        self, origin: tuple[int, int]
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Empty interior cells of ``origin``'s room: those walkable from ``origin``, the rest."""
        level = self._level
        room = level.room_from_pos(*origin)
        (left, top), (width, height) = room.top, room.size
        empty = {
            (x, y)
            for x in range(left + 1, left + width - 1)
            for y in range(top + 1, top + height - 1)
            if level.grid.get(x, y) is None
        }
        seen, queue = {origin}, deque([origin])
        while queue:
            x, y = queue.popleft()
            for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1)):
                cell = (x + dx, y + dy)
                if cell in empty and cell not in seen:
                    seen.add(cell)
                    queue.append(cell)
        empty.discard(origin)
        return sorted(empty & seen), sorted(empty - seen)

    def _spawn_direction(self, position: tuple[int, int], rng: np.random.Generator) -> int:
        """A random direction not facing an object (as minigrid does for its own agent)."""

        def faces_object(direction: int) -> bool:
            ahead = self._level.grid.get(*AgentState(position, direction).front)
            return ahead is not None and ahead.type != "wall"

        choices = [d for d in range(4) if not faces_object(d)] or list(range(4))
        return choices[int(rng.integers(len(choices)))]
