"""Multi-agent BabyAI with numeric observations for neural learners, around ``BabyAITextEnv``,
and an optional pseudo reward for the level's subgoals (keys, doors, blockers, objects to move).

Numeric observations are minigrid's encoded 7x7x3 partial view plus heading and carried object.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Box
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.core.world_object import Door, WorldObj
from minigrid.envs.babyai.core.verifier import GoToInstr, PickupInstr, PutNextInstr

from marlang.envs.babyai.agent import ACTIONS
from marlang.envs.babyai.levels import BABYAI_LEVELS
from marlang.envs.babyai.text import BabyAITextEnv
from marlang.envs.core.base import env_metadata
from marlang.envs.core.numeric import StepOutcome, TextEnvView, rank_sign
from marlang.types import TextObservation

PSEUDO_REWARD = 0.1
"""Team reward for each subgoal, the first time it is reached in an episode."""

SUBGOALS: tuple[str, ...] = (
    "clear doorway", "take key", "unlock door", "take object to move", "see target")
"""Subgoals the pseudo reward pays for: picking up an object (other than the key) that stood
next to a door; picking up a key whose colour matches a locked door; unlocking a door; picking up the object
a put-next mission moves; a go-to mission's object coming into an agent's view (not paid when
an agent already sees it at the start). (The mission itself earns the level's own reward.)"""

VIEW_SIZE = 7
_VIEW_VALUES = VIEW_SIZE * VIEW_SIZE * 3
NUMERIC_SIZE = _VIEW_VALUES + 4 + 2
"""147 view values (x, y, channel order of minigrid's ``encode``), a heading one-hot (east,
south, west, north), the carried object's type and colour index (0, 0 with empty hands)."""
_AGENT_CODE = OBJECT_TO_IDX["agent"]


@dataclass(frozen=True)
class BabyAISnapshot:
    """BabyAI progress for ranking: success, subgoals reached, and per agent whether it holds
    what the team needs next and its distance to the team's next target."""

    success: bool
    subgoals: int
    holds_needed: tuple[bool, ...]
    distances: tuple[int, ...]


class BabyAINumericEnv(TextEnvView):
    """A ``BabyAITextEnv`` (``self.babyai``) served through the numeric/text base API.

    Text observations are the BabyAI-Text ones. Numeric ones (``NUMERIC_SIZE`` values) are
    minigrid's encoded egocentric view, with visible teammates written in as agent cells
    (type 10, colour 0, state = their heading), then heading and carried object. The global
    state is the flattened (width, height, 3) encoding of ``BabyAITextEnv.state``.

    Reward is the level's (shared ``1 - 0.9 t / max_steps`` on success); with
    ``pseudo_reward=True`` every agent also gets ``PSEUDO_REWARD`` on the step a subgoal of
    ``SUBGOALS`` is first reached (``infos[agent]["subgoals"]`` names them).
    """

    all_actions: ClassVar[tuple[str, ...]] = ACTIONS
    metadata: ClassVar[dict[str, Any]] = env_metadata("babyai_numeric_v0")
    world_description: ClassVar[str] = BabyAITextEnv.world_description

    def __init__(
        self,
        babyai: BabyAITextEnv,
        *,
        observation_mode: str = "text",
        pseudo_reward: bool = False,
        env_id: str | None = None,
    ):
        if type(pseudo_reward) is not bool:
            raise ValueError(f"pseudo_reward must be True or False, got {pseudo_reward!r}")
        if babyai.level.agent_view_size != VIEW_SIZE:
            raise ValueError(f"the level's agent_view_size must be {VIEW_SIZE}")
        self.babyai = self.text_env = babyai
        self.pseudo_reward = pseudo_reward
        limit = babyai._max_steps_override or int(babyai.level.max_steps or 0)
        if not limit:
            # Some levels set their step limit only when generated: generate one to learn it.
            babyai._start_episode(0, None)
            limit = babyai.max_steps
        super().__init__(
            babyai.possible_agents,
            observation_mode=observation_mode,
            max_steps=limit,
            env_id=env_id or babyai.env_id,
        )
        level = babyai.level
        self._observation_box = Box(
            0.0, float(_AGENT_CODE), shape=(NUMERIC_SIZE,), dtype=np.float32
        )
        self._state_box = Box(
            0.0,
            float(max(_AGENT_CODE, len(babyai.possible_agents))),
            shape=(level.width * level.height * 3,),
            dtype=np.float32,
        )
        self._reached: set[tuple[str, int]] = set()
        self._success = False
        self._cache: dict[str, np.ndarray] = {}

    # ----------------------------------------------------------------- base API

    def numeric_observation(self, agent: str) -> np.ndarray:
        cached = self._cache.get(agent)
        if cached is None:
            cached = self._cache[agent] = self._encode(agent)
        return cached

    def state(self) -> np.ndarray:
        self._require_started("state")
        return self.babyai.state().astype(np.float32).reshape(-1)

    def observation_data(self, agent: str) -> dict[str, Any]:
        # goal_distance is a training-time oracle for reward shaping: LLM critics (state_text)
        # judge from what the agents could know, not from it
        data = dict(self.babyai.observe(agent).data)
        data.pop("goal_distance", None)
        return data

    def narrator(self) -> Any:
        return self.babyai.narrator()

    def rank_snapshot(self) -> BabyAISnapshot:
        self._require_started("rank_snapshot")
        needed, target = self._next_target()
        states = self.babyai.agent_states
        holds, distances = [], []
        for agent in self.possible_agents:
            state = states[agent]
            holds.append(needed is not None and state.carrying is needed)
            distances.append(
                0
                if target is None
                else abs(state.position[0] - target[0]) + abs(state.position[1] - target[1])
            )
        return BabyAISnapshot(self._success, len(self._reached), tuple(holds), tuple(distances))

    def rank_states(self, agent: str, a: BabyAISnapshot, b: BabyAISnapshot) -> int:
        """Ranks by mission success, then subgoals reached, then whether the agent holds what
        the team needs next (the key, the object to move), then its distance to the team's
        next target (blocker, key, locked door, object to pick up or move, place to put it)."""
        i = self.possible_agents.index(agent)

        def score(s: BabyAISnapshot) -> tuple[bool, int, bool, int]:
            return (s.success, s.subgoals, s.holds_needed[i], -s.distances[i])

        return rank_sign(score(b), score(a))

    def scripted_team(self, driver: str = "agent_0") -> BabyAINumericTeam:
        return BabyAINumericTeam(self, driver)

    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self.babyai._start_episode(seed, options)
        self._max_steps = self.babyai.max_steps
        self._reached.clear()
        # A go-to target in view from the start is no subgoal reached by acting.
        if self.pseudo_reward:
            self._reached.update(("see target", key) for key in self._targets_in_view())
        self._success = False
        self._cache = {}

    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        before = self._subgoal_watch() if self.pseudo_reward else None
        reward, terminated, _, infos = self.babyai._advance(actions)
        self._cache = {}
        success = any(info["success"] for info in infos.values())
        self._success = success
        events = self._subgoals_reached(before) if before is not None else []
        bonus = PSEUDO_REWARD * len(events)
        extra = {"subgoals": events, "pseudo_reward": bonus} if self.pseudo_reward else {}
        # The base class owns the time limit; the text env's own flag is dropped here.
        for info in infos.values():
            info.pop("success", None)
            info.update(extra)
        return StepOutcome(
            rewards={agent: reward + bonus for agent in infos},
            terminated=terminated,
            success=success,
            infos=infos,
        )

    # ----------------------------------------------------------------- internals

    def _encode(self, agent: str) -> np.ndarray:
        babyai = self.babyai
        states = babyai.agent_states
        with babyai.embodied(agent) as level:
            grid, visible = level.gen_obs_grid()
            image = grid.encode(visible)
            position = np.asarray(level.agent_pos)
            forward, right = np.asarray(level.dir_vec), np.asarray(level.right_vec)
            carrying = level.carrying
            heading = int(level.agent_dir)
        for name, other in states.items():
            if name == agent:
                continue
            offset = np.asarray(other.position) - position
            r, f = int(offset @ right), int(offset @ forward)
            i, j = VIEW_SIZE // 2 + r, VIEW_SIZE - 1 - f
            if 0 <= i < VIEW_SIZE and 0 <= j < VIEW_SIZE and visible[i, j]:
                image[i, j] = (_AGENT_CODE, 0, other.direction)
        out = np.zeros(NUMERIC_SIZE, dtype=np.float32)
        out[:_VIEW_VALUES] = image.reshape(-1)
        out[_VIEW_VALUES + heading] = 1.0
        if carrying is not None:
            out[-2] = OBJECT_TO_IDX[carrying.type]
            out[-1] = COLOR_TO_IDX[carrying.color]
        return out

    def _objects(self) -> Iterator[tuple[WorldObj, tuple[int, int]]]:
        level = self.babyai.level
        for index, obj in enumerate(level.grid.grid):
            if obj is not None and obj.type != "wall":
                yield obj, (index % level.width, index // level.width)

    def _subgoal_watch(self) -> dict[str, Any]:
        """What the subgoal check compares against after the step."""
        doors = [(obj, pos) for obj, pos in self._objects() if isinstance(obj, Door)]
        in_doorways = {
            id(obj)
            for obj, pos in self._objects()
            if obj.type != "door"
            and any(abs(pos[0] - d[0]) + abs(pos[1] - d[1]) == 1 for _, d in doors)
        }
        return {
            "locked": [door for door, _ in doors if door.is_locked],
            "carrying": {a: s.carrying for a, s in self.babyai.agent_states.items()},
            "in_doorways": in_doorways,
        }

    def _subgoals_reached(self, before: dict[str, Any]) -> list[str]:
        """Subgoals reached this step for the first time in the episode (see ``SUBGOALS``)."""
        events: list[str] = []
        locked_colours = {door.color for door in before["locked"]}
        instrs = self.babyai.instructions
        to_move = (
            {id(o) for o in instrs.desc_move.obj_set} if isinstance(instrs, PutNextInstr) else set()
        )

        def reach(name: str, obj: WorldObj) -> None:
            if (name, id(obj)) not in self._reached:
                self._reached.add((name, id(obj)))
                events.append(name)

        for door in before["locked"]:
            if not door.is_locked:
                reach("unlock door", door)
        for agent, state in self.babyai.agent_states.items():
            held = state.carrying
            if held is None or held is before["carrying"].get(agent):
                continue
            needed_key = held.type == "key" and held.color in locked_colours
            if needed_key:
                reach("take key", held)
            elif id(held) in before["in_doorways"]:
                reach("clear doorway", held)
            if id(held) in to_move:
                reach("take object to move", held)
        for key in self._targets_in_view():
            if ("see target", key) not in self._reached:
                self._reached.add(("see target", key))
                events.append("see target")
        return events

    def _targets_in_view(self) -> set[int]:
        """Ids of a go-to mission's objects some agent sees now (empty for other missions)."""
        instrs = self.babyai.instructions
        if not isinstance(instrs, GoToInstr):
            return set()
        targets = [obj for obj in instrs.desc.obj_set if obj.cur_pos is not None]
        seen: set[int] = set()
        for agent in self.babyai.agent_states:
            with self.babyai.embodied(agent) as level:
                # one view per agent (minigrid's agent_sees rebuilds it for every object)
                view, visible = level.gen_obs_grid()
                for obj in targets:
                    cell = level.relative_coords(*obj.cur_pos)
                    if cell is not None and visible[cell]:
                        shown = view.get(*cell)
                        if shown is not None and shown.type == obj.type:
                            seen.add(id(obj))
        return seen

    def _next_target(self) -> tuple[WorldObj | None, tuple[int, int] | None]:
        """What the team needs to hold next (if anything) and the cell to head for."""
        objects = list(self._objects())
        where = {id(obj): pos for obj, pos in objects}
        held = {id(s.carrying): s.position for s in self.babyai.agent_states.values() if s.carrying}
        instrs = self.babyai.instructions
        locked = [(obj, pos) for obj, pos in objects if isinstance(obj, Door) and obj.is_locked]
        if locked and isinstance(instrs, PickupInstr):
            door, door_pos = locked[0]
            blockers = [
                (obj, pos)
                for obj, pos in objects
                if obj.type != "door"
                and abs(pos[0] - door_pos[0]) + abs(pos[1] - door_pos[1]) == 1
                and not (obj.type == "key" and obj.color == door.color)
            ]
            key = next((o for o, _ in objects if o.type == "key" and o.color == door.color), None)
            key = key or next(
                (
                    s.carrying
                    for s in self.babyai.agent_states.values()
                    if s.carrying is not None
                    and s.carrying.type == "key"
                    and s.carrying.color == door.color
                ),
                None,
            )
            if key is not None and id(key) in held:
                return key, door_pos
            if blockers:
                return None, blockers[0][1]
            if key is not None:
                return key, where.get(id(key))
            return None, door_pos
        if isinstance(instrs, PutNextInstr):
            movers = instrs.desc_move.obj_set
            fixed = [where[id(o)] for o in instrs.desc_fixed.obj_set if id(o) in where]
            carried = next((o for o in movers if id(o) in held), None)
            if carried is not None:
                return carried, fixed[0] if fixed else None
            cells = [where[id(o)] for o in movers if id(o) in where]
            return (movers[0] if movers else None), (cells[0] if cells else None)
        if isinstance(instrs, (PickupInstr, GoToInstr)):
            cells = [where[id(o)] for o in instrs.desc.obj_set if id(o) in where]
            return None, cells[0] if cells else None
        return None, None


class BabyAINumericTeam:
    """Reference team: ``ScriptedBabyAITeam`` (minigrid's bot drives, teammates make way) on
    the wrapped env, fed the step count it needs, so it works in numeric mode too."""

    def __init__(self, env: BabyAINumericEnv, driver: str = "agent_0"):
        from marlang.envs.babyai.scripted import ScriptedBabyAITeam

        self.env = env
        self.team = ScriptedBabyAITeam(env.babyai, driver=driver)

    def reset(self) -> None:
        self.team.reset()

    def act(self, observations: Any) -> dict[str, str]:
        step = {"step": self.env.step_count}
        stand_ins = {
            agent: TextObservation(text="", mission="", legal_actions=[], data=step)
            for agent in self.env.agents
        }
        return self.team.act(stand_ins)


def make_babyai_numeric(
    n_agents: int = 2,
    *, text_id: str, env_id: str,  # fixed by the id
    max_steps: int | None = None,
    observation_mode: str = "text",
    pseudo_reward: bool = False,
    **level_options: Any,
) -> BabyAINumericEnv:
    """The entry point of a ``babyai-marl/`` id: builds the text env ``text_id`` from its BabyAI
    level (which checks ``level_options``), then wraps it."""
    babyai = BABYAI_LEVELS[text_id](n_agents=n_agents, max_steps=max_steps, **level_options)
    return BabyAINumericEnv(
        babyai, observation_mode=observation_mode, pseudo_reward=pseudo_reward, env_id=env_id
    )
