"""The base class every marlang env shares: PettingZoo ``ParallelEnv`` bookkeeping (agents,
spaces, the five dicts of a joint step, the end of an episode, render/close), so that each env
keeps only its own world.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium
from gymnasium.spaces import Space
from pettingzoo import ParallelEnv

from marlang.envs.core.spaces import StepResult, TextObservationSpace, check_render_mode, is_integer

if TYPE_CHECKING:
    from marlang.sandbox.pool import Sandbox

logger = logging.getLogger(__name__)


def env_metadata(name: str, render_modes: Sequence[str] = ()) -> dict[str, Any]:
    """An env class's PettingZoo ``metadata``: its name and render modes (every marlang env
    steps all agents at once, so it is parallelizable)."""
    return {"name": name, "render_modes": list(render_modes), "is_parallelizable": True}


def check_optional_max_steps(max_steps: Any, what: str = "max_steps") -> int | None:
    """``max_steps`` as an int, or None; a ``ValueError`` unless it is a positive integer or
    None. ``what`` names it in the message (``"max_steps (the number of turns)"``)."""
    if max_steps is not None and (not is_integer(max_steps) or max_steps < 1):
        raise ValueError(f"{what} must be a positive integer or None, got {max_steps!r}")
    return None if max_steps is None else int(max_steps)


class StepLimited:
    """For an env that counts the joint steps of an episode in ``_t`` and ends it after
    ``_max_steps`` of them: both, read-only."""

    _max_steps: int
    _t: int

    @property
    def max_steps(self) -> int:
        """Step limit of an episode (reaching it truncates)."""
        return self._max_steps

    @property
    def step_count(self) -> int:
        """Joint steps taken in the current episode."""
        return self._t


class MultiAgentEnv(ParallelEnv):
    """A cooperative PettingZoo ``ParallelEnv`` with agents ``agent_0``, ``agent_1``, ...

    Subclasses call ``super().__init__(n_agents, render_mode=..., env_id=...)`` after checking
    their own arguments, give each agent an action space with :meth:`_set_action_spaces` (or
    override ``action_space``), start episodes in :meth:`_start_episode` (``reset`` calls it,
    with :meth:`_first_info` for the infos) and implement ``step``/``observe``, building a
    step's five dicts with :meth:`_step_result`; ``render`` draws through :meth:`_render_frame`.
    Observations are ``TextObservation`` records (``TextObservationSpace``) unless
    ``observation_space`` says otherwise. All agents end an episode together.
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("marlang_env_v0")
    world_description: ClassVar[str] = "a shared environment"
    """This world as a noun phrase ("... agents acting together in {world_description}")."""

    def __init__(
        self,
        agents: int | Sequence[str],
        *,
        render_mode: str | None = None,
        env_id: str,
    ) -> None:
        """``agents``: how many (named ``agent_0``, ...) or their names."""
        check_render_mode(render_mode, self.metadata)
        self.render_mode = render_mode
        self.env_id = env_id
        if isinstance(agents, Sequence):
            self.possible_agents: list[str] = list(agents)
        elif is_integer(agents):
            self.possible_agents = [f"agent_{i}" for i in range(int(agents))]
        else:
            raise TypeError(f"agents must be a count or a list of names, got {agents!r}")
        self.agents: list[str] = []
        self._action_spaces: dict[str, Space] = {}
        self._observation_space: Space = TextObservationSpace()
        self._started = False

    @property
    def n_agents(self) -> int:
        """The team size (``len(possible_agents)``)."""
        return len(self.possible_agents)

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox that runs the team's generated code, started on first use (None: the
        env runs no code)."""
        return None

    # ----------------------------------------------------------------- spaces

    def _set_action_spaces(self, make_space: Callable[[], Space]) -> None:
        """Give every agent its own action space, ``make_space()`` (seeded on ``reset``)."""
        self._action_spaces = {agent: make_space() for agent in self.possible_agents}

    def observation_space(self, agent: str) -> Space:
        return self._observation_space

    def action_space(self, agent: str) -> Space:
        return self._action_spaces[agent]

    def _seed_action_spaces(self, seed: int | None) -> None:
        """Seed agent i's action space with ``seed + i`` (so ``sample()`` replays per seed)."""
        if seed is not None:
            for offset, agent in enumerate(self.possible_agents):
                self.action_space(agent).seed(int(seed) + offset)

    # ----------------------------------------------------------------- episodes

    def _warn_unknown_options(self, options: Mapping[str, Any] | None) -> None:
        """Log the ``reset`` options this env does not know (they are ignored)."""
        if options:
            logger.warning(
                "%s.reset ignores unknown options %s", type(self).__name__, sorted(options)
            )

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start a new episode (``_start_episode``; ``reset(seed=s)`` always gives the same
        one) and return every agent's first observation and its ``_first_info``. Agent i's
        action space is seeded with ``seed + i``."""
        self._start_episode(seed, options)
        self._seed_action_spaces(seed)
        return self._observe_all(self.agents), {a: self._first_info(a) for a in self.agents}

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Set up a new episode (seeded when ``seed`` is given, as ``options`` say) and make
        every agent live (``_started``, ``agents``); no observations."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _start_episode")

    def _first_info(self, agent: str) -> dict[str, Any]:
        """``agent``'s info as ``reset`` returns it."""
        return {"success": False}

    def _observe_all(self, agents: Sequence[str]) -> dict[str, Any]:
        """Every named agent's observation now (what ``reset``/``step`` return)."""
        return {agent: self.observe(agent) for agent in agents}

    def _step_result(
        self,
        agents: Sequence[str],
        observations: dict[str, Any],
        rewards: float | Mapping[str, float],
        terminated: bool,
        truncated: bool,
        infos: dict[str, dict[str, Any]],
    ) -> StepResult:
        """A step's five dicts for ``agents`` (the agents live when it began): a shared
        ``rewards`` float goes to each of them. Ends the episode if it terminated or was
        truncated."""
        if isinstance(rewards, Mapping):
            reward_of = {agent: rewards[agent] for agent in agents}
        else:
            reward_of = dict.fromkeys(agents, rewards)
        if terminated or truncated:
            self.agents = []
        return (
            observations,
            reward_of,
            dict.fromkeys(agents, terminated),
            dict.fromkeys(agents, truncated),
            infos,
        )

    def _require_started(self, what: str) -> None:
        if not self._started:
            raise RuntimeError(f"{what}() needs a reset() first")

    # ----------------------------------------------------------------- render, close

    def render(self) -> Any:
        """This env's frame (``_render_frame``) in its ``render_mode``; None without one."""
        if not self.metadata["render_modes"]:
            gymnasium.logger.warn(
                f"{type(self).__name__} has no render modes; render() returns None"
            )
            return None
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() called without a render_mode; create the env with render_mode='rgb_array'"
            )
            return None
        self._require_started("render")
        return self._render_frame()

    def _render_frame(self) -> Any:
        """The current frame in ``render_mode`` (envs with render modes implement it)."""
        raise NotImplementedError(f"{type(self).__name__} does not render")

    def close(self) -> None:
        self.agents = []


class ScriptedTeam:
    """Base of a scripted team (``env.scripted_team()``) over ``env``. ``reset`` starts the
    notes it keeps over an episode (none by default; construction calls it too); ``act``
    gives nothing once the episode is over, else ``_joint_action``: by default each live
    agent's ``choose(agent, observation)``, while teams that plan from the env's state
    override ``_joint_action``."""

    def __init__(self, env: Any):
        self.env = env
        self.reset()

    def reset(self) -> None:
        """Start a new episode (a team that keeps no notes has nothing to forget)."""

    def act(self, observations: Mapping[str, Any] | None = None) -> dict[str, str]:
        """Joint action: one action name per live agent."""
        if not self.env.agents:
            return {}
        return self._joint_action(observations)

    def _joint_action(self, observations: Any) -> dict[str, str]:
        live = set(self.env.agents)
        return {
            agent: self.choose(agent, obs) for agent, obs in observations.items() if agent in live
        }

    def choose(self, agent: str, observation: Any) -> str:
        """``agent``'s action given its observation."""
        raise NotImplementedError(f"{type(self).__name__} does not implement choose")
