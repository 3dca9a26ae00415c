"""Overcooked-AI as a multi-agent text environment: two cooks, one kitchen, shared soup reward.

Built on the ``overcooked-ai`` package's game logic and motion planner. Cooks act either with
high-level subgoals ("put onion in pot 1", executed over several ticks) or primitive moves.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from marlang.envs.core.base import MultiAgentEnv, env_metadata
from marlang.envs.core.spaces import (
    ActionStringSpace,
    StepResult,
    check_joint_action,
    check_render_mode,
)
from marlang.envs.overcooked.kitchen import INGREDIENTS, PRIMITIVE_ACTIONS, Kitchen
from marlang.envs.overcooked.narration import OvercookedNarrator
from marlang.envs.overcooked.package import (
    Action,
    Direction,
    OvercookedGridworld,
    PlayerState,
    state_visualizer,
)
from marlang.envs.overcooked.subgoals import (
    CONTINUE,
    STEP_ASIDE,
    WAIT,
    Subgoal,
    SubgoalRunner,
    legal_subgoals,
)
from marlang.envs.overcooked.view import MISSION, CookStatus, describe_cooks
from marlang.types import TextObservation

LAYOUTS: dict[str, str] = {
    "cramped-room": "cramped_room",
    "asymmetric-advantages": "asymmetric_advantages",
    "coordination-ring": "coordination_ring",
    "forced-coordination": "forced_coordination",
    # The one-order variant: plain counter_circuit has several orders and breaks the planner.
    "counter-circuit": "counter_circuit_o_1order",
}
"""marlang layout names -> the package's layout files."""

logger = logging.getLogger(__name__)

ACTION_MODES = ("subgoal", "primitive")
DEFAULT_HORIZON = 400

_kitchens: dict[str, Kitchen] = {}
_building: dict[str, threading.Lock] = {}
_kitchens_lock = threading.Lock()


def kitchen_of(layout_file: str, mdp: Any) -> Kitchen:
    """The `Kitchen` of a layout file, one per process: its motion planner (about 0.6 s to build
    for counter circuit) and the tables it fills as cooks play are the same for every env of
    that layout, so envs made side by side (parallel episodes, one per worker thread) share
    them. ``mdp`` (an ``OvercookedGridworld`` of that layout) builds it the first time; each env
    keeps its own ``mdp`` for its game steps."""
    with _kitchens_lock:
        kitchen = _kitchens.get(layout_file)
        if kitchen is not None:
            return kitchen
        building = _building.setdefault(layout_file, threading.Lock())
    with building:  # (envs of one layout made at once wait for one planner; other layouts do not)
        with _kitchens_lock:
            kitchen = _kitchens.get(layout_file)
        if kitchen is None:
            kitchen = Kitchen(mdp)
            with _kitchens_lock:
                _kitchens[layout_file] = kitchen
        return kitchen


class OvercookedTextEnv(MultiAgentEnv):
    """Two cooks (``agent_0``, ``agent_1``) in one Overcooked-AI kitchen, acting in words.

    Reward is shared: every delivered soup gives its order's value (20 for the classic onion
    soup) to both cooks; each cook's shaped reward (the package's: placing an ingredient in a
    pot, picking up a useful dish, picking up a soup) is in ``infos[agent]["shaped_reward"]``.
    There is no terminal state; episodes are truncated after ``max_steps`` ticks (400).

    ``action_mode="subgoal"`` (default): each cook names one of its legal subgoals (see
    ``legal_actions``), which the package's motion planner turns into moves over several
    ticks. ``step`` runs ticks until some cook's subgoal ends (done, no longer possible, or
    given up after ``patience`` ticks without progress because the other cook is in the way),
    so a step is a decision point; a cook whose subgoal is still running may answer
    ``"continue"`` to keep it. ``action_mode="primitive"``: one tick per step, actions
    ``up, down, left, right, stay, interact``.

    An action that is not legal is flagged in ``infos[agent]["illegal_action"]`` and the cook
    keeps its running subgoal (or waits; in primitive mode, stays).
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("overcooked_text_v0", ["rgb_array"])
    world_description: ClassVar[str] = "a kitchen, as cooks who cook and deliver onion soups"
    """This world as a noun phrase ("... agents acting together in {world_description}")."""

    def __init__(
        self,
        layout: str = "cramped-room",
        n_agents: int = 2,
        *,
        action_mode: str = "subgoal",
        max_steps: int | None = None,
        random_start: bool = False,
        patience: int = 5,
        wait_ticks: int = 3,
        counter_options: int = 3,
        render_mode: str | None = None,
        env_id: str | None = None,
    ):
        """
        Args:
            layout: a marlang layout name (``LAYOUTS``) or any layout file of the package.
            n_agents: must be 2 (the layouts have two cooks).
            action_mode: ``"subgoal"`` or ``"primitive"``.
            max_steps: horizon in ticks (default 400).
            random_start: start each cook on a random free cell of its own part of the kitchen
                (seeded by ``reset(seed)``); by default the layout's start cells.
            patience: ticks without progress before a blocked subgoal is given up.
            wait_ticks: how long the ``wait`` subgoal stands still.
            counter_options: how many free counters are offered to put a held item on.
            render_mode: ``None`` or ``"rgb_array"``.
            env_id: registry id, for display only.
        """
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {list(ACTION_MODES)}, got {action_mode!r}")
        for name, value in (("patience", patience), ("wait_ticks", wait_ticks),
                            ("counter_options", counter_options)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        horizon = DEFAULT_HORIZON if max_steps is None else max_steps
        if type(horizon) is not int or horizon < 1:
            raise ValueError(f"max_steps (the horizon in ticks) must be a positive integer, got {max_steps!r}")
        check_render_mode(render_mode, self.metadata)
        layout_file = LAYOUTS.get(layout, layout)
        try:
            mdp = OvercookedGridworld.from_layout_name(layout_file)
        except (FileNotFoundError, OSError) as error:
            raise ValueError(
                f"unknown Overcooked layout {layout!r}; valid layouts: {', '.join(LAYOUTS)} "
                "(or a layout file name of the overcooked-ai package)"
            ) from error
        if mdp.num_players != n_agents:
            raise ValueError(f"layout {layout!r} has {mdp.num_players} cooks; n_agents must be {mdp.num_players}")
        super().__init__(n_agents, render_mode=render_mode, env_id=env_id or f"overcooked/{layout}")
        self.layout = layout
        self.action_mode = action_mode
        self.horizon = horizon
        self.random_start = bool(random_start)
        self.counter_options = counter_options
        self._mdp = mdp
        self.kitchen = kitchen_of(layout_file, mdp)
        self._capacity = 3
        self._runner = SubgoalRunner(
            self.kitchen, n_agents, self.possible_agents, patience=patience,
            wait_ticks=wait_ticks, capacity=self._capacity,
        )
        vocabulary = self._vocabulary() if action_mode == "subgoal" else list(PRIMITIVE_ACTIONS)
        self._set_action_spaces(lambda: ActionStringSpace(vocabulary))
        self._rng = np.random.default_rng()
        self._state: Any = None
        self._tick = 0
        self._delivered = 0
        self._statuses = [CookStatus() for _ in self.possible_agents]
        self._legal: list[tuple[list[str], list[Subgoal]]] = [([], []) for _ in self.possible_agents]
        """Each cook's legal subgoals as last observed: their actions, and the subgoals."""
        self._index_of = {agent: i for i, agent in enumerate(self.possible_agents)}
        self._primitive_actions = tuple(PRIMITIVE_ACTIONS)

    @property
    def mdp(self) -> Any:
        """The package's ``OvercookedGridworld`` this env steps (its game rules and layout)."""
        return self._mdp

    def __repr__(self) -> str:
        return f"OvercookedTextEnv(env_id={self.env_id!r}, action_mode={self.action_mode!r}, horizon={self.horizon})"

    # ----------------------------------------------------------------- PettingZoo API

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Start a new episode in the layout's start state (or, with ``random_start``, on cells
        drawn with ``seed``). ``options={"state": OvercookedState}`` starts from a given state."""
        options = dict(options or {})
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        state = options.pop("state", None)
        self._warn_unknown_options(options)
        if state is None:
            state = self._mdp.get_standard_start_state()
            if self.random_start:
                self._place_randomly(state)
        self._state = state
        self._tick = 0
        self._delivered = 0
        self._runner.reset()
        self._statuses = [CookStatus() for _ in self.possible_agents]
        self._started = True
        self.agents = list(self.possible_agents)

    def _first_info(self, agent: str) -> dict[str, Any]:
        return self._info()

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        """One decision point: a tick in primitive mode, the ticks until some cook's subgoal
        ends in subgoal mode. Rewards are summed over those ticks."""
        check_joint_action(self.agents, actions)
        n = len(self.possible_agents)
        illegal = [False] * n
        team_reward = 0.0
        sparse = [0.0] * n
        shaped = [0.0] * n
        ticks = 0
        delivered_before = self._delivered
        runner = None if self.action_mode == "primitive" else self._runner
        if runner is None:  # one tick of the cooks' own moves
            moves = []
            for i, agent in enumerate(self.possible_agents):
                action = PRIMITIVE_ACTIONS.get(actions[agent]) if isinstance(actions[agent], str) else None
                illegal[i] = action is None
                moves.append(Action.STAY if action is None else action)
            joint = tuple(moves)
        else:  # ticks of the subgoals' moves until some cook's subgoal ends
            for i, agent in enumerate(self.possible_agents):
                illegal[i] = not self._choose(i, actions[agent])
        outcomes: dict[int, Any] = {}
        while self._tick < self.horizon:
            before = self._state
            if runner is not None:
                joint = runner.joint_action(before)
            self._state, info = self._mdp.get_state_transition(before, joint)
            self._tick += 1
            ticks += 1
            sparse_now, shaped_now = info["sparse_reward_by_agent"], info["shaped_reward_by_agent"]
            if any(sparse_now) or any(shaped_now):  # (most ticks reward nobody)
                team = 0.0
                for i, (s, r) in enumerate(zip(sparse_now, shaped_now)):
                    sparse[i] += s
                    shaped[i] += r
                    team += s
                team_reward += team
            self._delivered += sum(info["event_infos"]["soup_delivery"])
            if runner is None:
                break
            outcomes.update(runner.update(before, self._state, joint))
            if outcomes:
                break
        for i, status in enumerate(self._statuses if self.action_mode == "subgoal" else ()):
            # (in primitive mode no cook ever has a subgoal, so the statuses stay as they are)
            task = self._runner.tasks[i]
            status.subgoal = None if task is None else task.subgoal
            status.subgoal_ticks = 0 if task is None else task.ticks
            outcome = outcomes.get(i)
            if outcome is None:
                status.notes = ()
            elif outcome.status == "done":
                span = f"{outcome.ticks} tick{'s' if outcome.ticks != 1 else ''}"
                status.notes = (f"finished '{outcome.subgoal.action}' in {span}",)
            else:
                status.notes = (outcome.note,)
        truncated = self._tick >= self.horizon
        agents = list(self.agents)
        observations = self._observe_all(agents)
        success = self._delivered > delivered_before
        infos = {
            agent: self._info(
                success, illegal[i], ticks, shaped[i], sparse[i],
                None if i not in outcomes else outcomes[i].status,
            )
            for i, agent in enumerate(agents)
        }
        return self._step_result(agents, observations, team_reward, False, truncated, infos)

    def _render_frame(self) -> np.ndarray:
        """RGB array (H, W, 3) of the kitchen drawn by the package's ``StateVisualizer``."""
        # Headless rendering: pygame.init() would otherwise probe for a sound card.
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        import pygame

        surface = state_visualizer()().render_state(self._state, grid=self._mdp.terrain_mtx)
        return np.ascontiguousarray(pygame.surfarray.array3d(surface).transpose(1, 0, 2))

    # ----------------------------------------------------------------- observations

    @property
    def state_now(self) -> Any:
        """The package's ``OvercookedState`` of the current tick."""
        return self._state

    @property
    def tick(self) -> int:
        return self._tick

    @property
    def soups_delivered(self) -> int:
        return self._delivered

    def observe(self, agent: str) -> TextObservation:
        """The cook's current observation (what ``reset``/``step`` return for it)."""
        return self._observe_all([agent])[agent]

    def _observe_all(self, agents: Sequence[str]) -> dict[str, TextObservation]:
        indices = [self._index_of[agent] for agent in agents]
        subgoal_mode = self.action_mode == "subgoal"
        holding = self.kitchen.holding(self._state.objects)  # (what the text and the offers both read)
        described = describe_cooks(
            self.kitchen, self._state, indices, self.possible_agents, self._statuses,
            tick=self._tick, horizon=self.horizon, delivered=self._delivered,
            subgoal_mode=subgoal_mode, holding=holding,
        )
        observations = {}
        for agent, index, (text, data) in zip(agents, indices, described, strict=True):
            if subgoal_mode:
                options = legal_subgoals(
                    self.kitchen, self._state, index, capacity=self._capacity,
                    counter_options=self.counter_options, holding=holding,
                )
                names = [s.action for s in options]
                self._legal[index] = (names, options)
                legal = [CONTINUE, *names] if self._runner.tasks[index] is not None else names.copy()
            else:
                legal = list(self._primitive_actions)
            observations[agent] = TextObservation(text, MISSION, legal, data)
        return observations

    def narrator(self) -> OvercookedNarrator:
        """Tells this env's episodes in words for learners (``marlang.envs.core.narration``)."""
    
        return OvercookedNarrator(self)

    def scripted_team(self) -> Any:
        """The scripted reference team for this env (see ``ScriptedOvercookedTeam``)."""
        from marlang.envs.overcooked.scripted import ScriptedOvercookedTeam

        return ScriptedOvercookedTeam(self)

    # ----------------------------------------------------------------- internals

    def _choose(self, index: int, action: Any) -> bool:
        """Start, keep or replace cook ``index``'s subgoal; False if the action is not legal."""
        running = self._runner.running(index)
        if isinstance(action, str) and (action == CONTINUE or (running and action == running.action)):
            if running is not None:
                return True
        elif isinstance(action, str) and action in self._legal[index][0]:
            names, options = self._legal[index]
            self._runner.assign(index, options[names.index(action)])  # (the names are distinct)
            return True
        if running is None:
            self._runner.assign(index, Subgoal(WAIT, "wait"))
        return False

    def _info(
        self, success: bool = False, illegal_action: bool = False, ticks: int = 0,
        shaped_reward: float = 0.0, sparse_reward: float = 0.0, subgoal_outcome: str | None = None,
    ) -> dict[str, Any]:
        return {
            "success": success,
            "tick": self._tick,
            "soups_delivered": self._delivered,
            "illegal_action": illegal_action,
            "ticks": ticks,
            "shaped_reward": shaped_reward,
            "sparse_reward": sparse_reward,
            "subgoal_outcome": subgoal_outcome,
        }

    def _place_randomly(self, state: Any) -> None:
        taken: set[tuple[int, int]] = set()
        players = []
        for player in state.players:
            region = self.kitchen.region[player.position]
            cells = sorted(c for c, r in self.kitchen.region.items() if r == region and c not in taken)
            cell = cells[int(self._rng.integers(len(cells)))]
            taken.add(cell)
            facing = Direction.ALL_DIRECTIONS[int(self._rng.integers(4))]
            players.append(PlayerState(cell, facing))
        state.players = tuple(players)

    def _vocabulary(self) -> list[str]:
        """Every subgoal string this layout can ever offer (the action space)."""
        k = self.kitchen
        items = (*INGREDIENTS, "dish", "soup")
        words = [CONTINUE]
        words += [f"pick up {item}" for item in (*INGREDIENTS, "dish") if k.dispensers[item]]
        words += [f"pick up {item} from counter {k.counter_number(c)}" for c in k.counters for item in items]
        for pot in k.pots:
            n = k.pot_number(pot)
            words += [f"put {item} in pot {n}" for item in INGREDIENTS]
            words += [f"start cooking pot {n}", f"fill dish from pot {n}"]
        words.append("deliver soup")
        words += [f"place {item} on counter {k.counter_number(c)}" for c in k.counters for item in items]
        return [*words, WAIT, STEP_ASIDE]
