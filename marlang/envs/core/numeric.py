"""The base class of marlang's envs with numeric views (the credit-assignment benchmarks,
BabyAI and Pistonball numeric): a ``MultiAgentEnv`` that serves neural learners (numeric
observations, ``Discrete`` actions, a global state) and LLM agents (ego-view text, action
strings), with a reference team and a state-ranking heuristic.

API (stable; subclasses implement the ``_``-prefixed hooks and the abstract public methods)
------------------------------------------------------------------------------------------
Construction: ``SubEnv(..., observation_mode="text" | "numeric", max_steps=..., env_id=...)``;
``NumericTextEnv.__init__(agents, *, observation_mode, max_steps, env_id, render_mode)``.

Attributes
    ``possible_agents: list[str]`` ("agent_0", ...); ``agents`` (live ones, empty when done)
    ``observation_mode: str``   "text": observations are ``TextObservation`` (the LLM runner's
                                 records; every id works there) | "numeric": float32 arrays
    ``max_steps: int``          time limit; reaching it is truncation, never termination
    ``step_count: int``         steps taken in this episode
    ``env_id: str``, ``mission: str``, ``world_description: str`` (a noun phrase, class-level)
    ``state_space: Box``        the global state's space

Spaces and actions
    ``observation_space(agent)`` Box in numeric mode, ``TextObservationSpace`` in text mode
    ``numeric_observation_space(agent) -> Box`` (whatever the mode; default: the subclass's
    ``_observation_box``, and ``state_space`` its ``_state_box``)
    ``action_space(agent) -> Discrete``; ``action_names(agent) -> list[str]`` (fixed for the
    env's lifetime; index i <-> name i; default: the class's ``all_actions``, which every
    agent has); ``action_mask(agent) -> np.ndarray | None``
    (int8, 1 = valid now; ``None``: every action is valid). Text observations list the valid
    names now as ``legal_actions``; ``step`` accepts any name or index of ``action_names``
    (a masked one does what the env documents, usually nothing) and raises ``ValueError`` on
    anything else. ``action_index(agent, action) -> int`` does that conversion;
    ``legal_actions(agent) -> list[str]`` lists the names valid now.

Observations
    ``numeric_observation(agent) -> np.ndarray`` (abstract; float32, in its Box)
    ``ego_text(agent) -> str`` (abstract): the agent as "you", the others as teammates
    ``observation_data(agent) -> dict`` structured facts for ``TextObservation.data`` (default
    ``{}``); ``text_observation(agent) -> TextObservation`` builds one in either mode (for
    critics reading a numeric run); ``observe(agent)`` gives the current mode's observation.
    In numeric mode ``reset``/``step`` never build text.
    ``state() -> np.ndarray`` (abstract): the global state, float32, in ``state_space``.

PettingZoo
    ``reset(seed=None, options=None) -> (observations, infos)``; ``step(actions)`` with one
    entry per live agent (``int``/``np.integer`` index or action name) -> observations,
    rewards, terminations, truncations, infos. All agents end together. Every info has
    ``success`` (bool) and ``step`` (int); subclasses add their own keys.

Credit assignment and references
    ``rank_snapshot() -> Any``: an immutable picture of the current state (for ranking later;
    not a way to restore the env: the task envs' ``save_episode``/``restore_episode`` are that)
    ``rank_states(agent, a, b) -> int``: +1 if snapshot ``b`` is better than ``a`` for
    ``agent`` (its own contribution to the team goal), -1 if worse, 0 if tied: the reference
    ranking heuristic. ``scripted_team()``: an object with ``reset()`` and
    ``act(observations) -> {agent: action}`` (reads the env itself, so it works in both
    modes); ``narrator()``: the generic ``marlang.envs.core.narrator.Narrator``.

Subclass hooks
    ``_reset_world(seed: int | None, options: dict | None) -> None``: start a new episode.
    ``_apply(actions: dict[str, int]) -> StepOutcome``: advance one step with the joint
    action as indices; report rewards, whether the episode reached a terminal state (not the
    time limit: the base class truncates at ``max_steps``), success and extra infos.

Registration
    ``marlang.envs.registry`` registers these ids when ``marlang.registry.ENVS`` is first read
    (the registry sits above the families; no env imports it). Add an env to the one table,
    ``marlang.envs.builtin``: an ``EnvSpec`` whose entry point is an import path
    ``"package.module:attr"`` (the module, and its packages, load when an env is built).
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from gymnasium.spaces import Box, Discrete, Space

from marlang.envs.core.base import MultiAgentEnv, StepLimited, env_metadata
from marlang.envs.core.narrator import Narrator
from marlang.envs.core.spaces import check_joint_action, is_integer
from marlang.types import TextObservation

logger = logging.getLogger(__name__)

OBSERVATION_MODES: tuple[str, ...] = ("text", "numeric")
"""Valid ``observation_mode`` values."""


@dataclass
class StepOutcome:
    """What a subclass's ``_apply`` reports for one joint step."""

    rewards: dict[str, float]
    """Reward of every live agent (shared-reward envs give each the team reward)."""
    terminated: bool = False
    """The episode reached a terminal state (goal reached, failure); never the time limit."""
    success: bool = False
    """The team achieved the task (copied into every agent's info)."""
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra per-agent info entries (events, shaped rewards, illegal-move flags)."""


def check_observation_mode(observation_mode: str) -> str:
    """Return ``observation_mode`` if valid, else a ``ValueError`` naming the valid ones."""
    if observation_mode not in OBSERVATION_MODES:
        raise ValueError(
            f"observation_mode must be one of {list(OBSERVATION_MODES)}, got {observation_mode!r}"
        )
    return observation_mode


def check_max_steps(max_steps: Any) -> int:
    """Return ``max_steps`` as an int if it is a positive integer, else a ``ValueError``."""
    if not is_integer(max_steps) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    return int(max_steps)


def rank_sign(better: Any, worse: Any) -> int:
    """``rank_states``'s answer from two comparable rank keys: +1 if the key of ``b`` (given
    first) is the larger, -1 if the smaller, 0 if they tie."""
    return (better > worse) - (better < worse)


def check_agent_count(env_id: str, n_agents: Any, valid: Sequence[int]) -> int:
    """Return ``n_agents`` if it is one of ``valid``, else a ``ValueError`` for ``env_id``."""
    if not is_integer(n_agents) or int(n_agents) not in valid:
        choices = valid[0] if len(valid) == 1 else f"one of {list(valid)}"
        raise ValueError(f"{env_id}: n_agents must be {choices}, got {n_agents!r}")
    return int(n_agents)


@runtime_checkable
class NumericObservations(Protocol):
    """An env a neural policy can act in: each agent's observation as numbers (every
    `NumericTextEnv`; an env of one's own may declare it too)."""

    def numeric_observation(self, agent: str) -> np.ndarray:
        ...


class NumericTextEnv(StepLimited, MultiAgentEnv, ABC):
    """A cooperative multi-agent env with numeric and ego-view text observations.

    See the module docstring for the API. Subclasses call ``super().__init__`` with their
    agent names, then implement the abstract methods and the two hooks.
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("numeric_text_env_v0")
    all_actions: ClassVar[tuple[str, ...]]
    """Every agent's action names, for envs whose agents all act alike (``action_names``)."""
    _observation_box: Box
    """``numeric_observation_space`` of every agent (set by the subclass)."""
    _state_box: Box
    """``state_space`` (set by the subclass)."""

    def __init__(
        self,
        agents: Sequence[str],
        *,
        observation_mode: str = "text",
        max_steps: int,
        env_id: str,
        render_mode: str | None = None,
    ):
        self.observation_mode = check_observation_mode(observation_mode)
        self._max_steps = check_max_steps(max_steps)
        super().__init__(agents, render_mode=render_mode, env_id=env_id)
        self._t = 0
        self._action_indices: dict[str, dict[str, int]] = {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env_id={self.env_id!r}, n_agents={len(self.possible_agents)}, "
            f"observation_mode={self.observation_mode!r}, max_steps={self._max_steps})"
        )

    # ----------------------------------------------------------------- abstract API

    def action_names(self, agent: str) -> list[str]:
        """The agent's action names; index i of ``action_space(agent)`` is name i."""
        return list(self.all_actions)

    def numeric_observation_space(self, agent: str) -> Box:
        """The Box that ``numeric_observation(agent)`` lies in."""
        return self._observation_box

    @abstractmethod
    def numeric_observation(self, agent: str) -> np.ndarray:
        """The agent's observation as a float32 vector (or array) for networks."""

    @abstractmethod
    def ego_text(self, agent: str) -> str:
        """The agent's observation in words, the agent as "you", the others as teammates."""

    @property
    @abstractmethod
    def mission(self) -> str:
        """The team's goal in words (``TextObservation.mission``)."""

    @property
    def state_space(self) -> Box:
        """The Box that ``state()`` lies in."""
        return self._state_box

    @abstractmethod
    def state(self) -> np.ndarray:
        """The global state (float32) for centralized critics."""

    @abstractmethod
    def rank_snapshot(self) -> Any:
        """An immutable picture of the current state, for ``rank_states``."""

    @abstractmethod
    def rank_states(self, agent: str, a: Any, b: Any) -> int:
        """+1 if snapshot ``b`` is better than ``a`` for ``agent``, -1 if worse, 0 if tied."""

    @abstractmethod
    def scripted_team(self) -> Any:
        """The reference team: ``reset()`` and ``act(observations) -> {agent: action}``."""

    @abstractmethod
    def _reset_world(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Start a new episode (seeded when ``seed`` is given)."""

    @abstractmethod
    def _apply(self, actions: dict[str, int]) -> StepOutcome:
        """Advance one step; ``actions`` holds one valid index per live agent."""

    # ----------------------------------------------------------------- overridable

    def action_mask(self, agent: str) -> np.ndarray | None:
        """int8 mask over ``action_names(agent)`` (1 = valid now), or ``None`` (all valid)."""
        return None

    def observation_data(self, agent: str) -> dict[str, Any]:
        """Structured facts for ``TextObservation.data`` (positions, carried items, ...)."""
        return {}

    def state_text(self) -> str:
        """The whole team's state in a few words, for centralised LLM critics reading many steps
        at once (LLM-MCA). Default: the agents' ``observation_data`` as compact JSON, once when
        every agent sees the same facts; envs whose joint state is shorter to tell override it."""
        data = {a: json.dumps(self.observation_data(a), separators=(",", ":")) for a in self.possible_agents}
        if len(set(data.values())) == 1:
            return next(iter(data.values()))
        return "\n".join(f"{agent}: {text}" for agent, text in data.items())

    def narrator(self) -> Narrator:
        """Tells this env's episodes in words (the generic narrator)."""
        return Narrator(self)

    # ----------------------------------------------------------------- PettingZoo API

    def observation_space(self, agent: str) -> Space:
        if self.observation_mode == "numeric":
            return self.numeric_observation_space(agent)
        return self._observation_space

    def action_space(self, agent: str) -> Discrete:
        space = self._action_spaces.get(agent)
        if not isinstance(space, Discrete):  # (only this method fills it: a Discrete or nothing yet)
            if agent not in self.possible_agents:
                raise ValueError(f"unknown agent {agent!r}; agents: {self.possible_agents}")
            space = self._action_spaces[agent] = Discrete(len(self.action_names(agent)))
        return space

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self._reset_world(seed, options)
        self._t = 0
        self._started = True
        self.agents = list(self.possible_agents)

    def _first_info(self, agent: str) -> dict[str, Any]:
        return {"success": False, "step": 0}

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[
        dict[str, Any],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """One joint step; each action is an index into, or a name of, ``action_names``."""
        check_joint_action(self.agents, actions)
        indices = {agent: self.action_index(agent, actions[agent]) for agent in self.agents}
        outcome = self._apply(indices)
        self._t += 1
        agents = list(self.agents)
        terminated = bool(outcome.terminated)
        truncated = not terminated and self._t >= self._max_steps
        observations = self._observe_all(agents)
        rewards = {agent: float(outcome.rewards[agent]) for agent in agents}
        infos = {
            agent: {
                "success": bool(outcome.success),
                "step": self._t,
                **outcome.infos.get(agent, {}),
            }
            for agent in agents
        }
        return self._step_result(agents, observations, rewards, terminated, truncated, infos)

    # ----------------------------------------------------------------- marlang API

    def action_index(self, agent: str, action: Any) -> int:
        """The index of ``action`` (an index or a name) for ``agent``; ``ValueError`` if neither."""
        names = self.action_names(agent)
        if is_integer(action):
            if 0 <= action < len(names):
                return int(action)
            raise ValueError(
                f"action {action!r} of {agent} is out of range; valid indices 0..{len(names) - 1}"
            )
        if isinstance(action, str):
            table = self._action_indices.get(agent)
            if table is None:
                table = self._action_indices[agent] = {name: i for i, name in enumerate(names)}
            index = table.get(action)
            if index is not None:
                return index
            raise ValueError(f"unknown action {action!r} for {agent}; valid actions: {names}")
        raise ValueError(
            f"action of {agent} must be an integer index or an action name, got {action!r} "
            f"({type(action).__name__}); valid actions: {names}"
        )

    def legal_actions(self, agent: str) -> list[str]:
        """The action names valid now (all of them where there is no mask)."""
        names = self.action_names(agent)
        mask = self.action_mask(agent)
        if mask is None:
            return list(names)
        return [name for name, valid in zip(names, mask, strict=True) if valid]

    def text_observation(self, agent: str) -> TextObservation:
        """The agent's ``TextObservation`` now, whatever the observation mode."""
        self._require_started("text_observation")
        return TextObservation(
            text=self.ego_text(agent),
            mission=self.mission,
            legal_actions=self.legal_actions(agent),
            data=self.observation_data(agent),
        )

    def observe(self, agent: str) -> Any:
        """The agent's observation in the current mode (what ``reset``/``step`` return)."""
        if self.observation_mode == "numeric":
            return self.numeric_observation(agent)
        return self.text_observation(agent)


class TextEnvView(NumericTextEnv):
    """A ``NumericTextEnv`` that serves a text env (``text_env``, set by the subclass before
    ``super().__init__``) through the numeric/text API: the mission and the text observations
    are the text env's own; subclasses add the numeric side."""

    text_env: Any

    @property
    def mission(self) -> str:
        return self.text_env.mission

    def ego_text(self, agent: str) -> str:
        return self.text_env.observe(agent).text

    def text_observation(self, agent: str) -> TextObservation:
        self._require_started("text_observation")
        return self.text_env.observe(agent)
