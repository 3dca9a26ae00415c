"""Any marlang env id as a BenchMARL task: the env is built in numeric mode, wrapped by torchrl's
``PettingZooWrapper`` with all agents in one group ``"agents"``, the global ``state()`` as the
critic's input, action masks where the env has them, and time limits kept as truncation.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from benchmarl.environments.pettingzoo.common import PettingZooClass
from pettingzoo import ParallelEnv
from torchrl.envs import EnvBase
from torchrl.envs.libs.pettingzoo import PettingZooWrapper

from marlang.seeds import env_seed

GROUP = "agents"
"""The one agent group: every agent's tensors are stacked under this key."""


def build_numeric_env(env_id: str, n_agents: int | None = None, max_steps: int | None = None,
                      kwargs: Mapping[str, Any] | None = None) -> ParallelEnv:
    """``marlang.envs.make(env_id, ..., observation_mode="numeric")``, with one-line errors."""
    from marlang.envs import make

    extra = dict(kwargs or {})
    if max_steps is not None:
        extra["max_steps"] = max_steps
    try:
        return make(env_id, n_agents=n_agents, observation_mode="numeric", **extra)
    except TypeError as err:
        raise ValueError(f"env {env_id!r} cannot be built with numeric observations: {err}") from None


class NumericParallelEnv(ParallelEnv):
    """What the torchrl wrapper sees of a marlang env: float32 observations, ``Discrete``
    actions, the global state, infos reduced to fixed numeric keys (``success``, and
    ``action_mask`` where the env masks actions), and a step limit that truncates.

    marlang envs put free-form entries in their infos (joint actions, events); the wrapper
    needs the same numeric keys at every step, so only these are passed on.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "marlang_numeric_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, env: ParallelEnv, max_steps: int | None = None,
                 observers: Sequence[Any] = (), task_size: int = 0) -> None:
        self.env = env
        # LLM-TACA: each observation ends with ``task_size`` task inputs, zero here (at collection
        # and evaluation); the critic writes its task assignments into the training batch.
        self.task_size = task_size
        # Step observers (``marlang.methods.neural.critics.records.StepObserver``): what a critic records at
        # each step, and the numeric info entries they add.
        self.observers = list(observers)
        self._extra: dict[str, dict[str, float]] = {}
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []
        self.max_steps = max_steps if max_steps is not None else getattr(env, "max_steps", None)
        self.has_action_mask = _masks_actions(env)
        self._t = 0

    def observation_space(self, agent: str) -> Any:
        numeric = getattr(self.env, "numeric_observation_space", None)
        space = numeric(agent) if numeric is not None else self.env.observation_space(agent)
        if not self.task_size:
            return space
        from gymnasium.spaces import Box

        low = np.concatenate([np.asarray(space.low, np.float32).reshape(-1),
                              np.full(self.task_size, -np.inf, np.float32)])
        high = np.concatenate([np.asarray(space.high, np.float32).reshape(-1),
                               np.full(self.task_size, np.inf, np.float32)])
        return Box(low, high, dtype=np.float32)

    def action_space(self, agent: str) -> Any:
        return self.env.action_space(agent)

    @property
    def state_space(self) -> Any:
        return self.env.state_space

    def state(self) -> np.ndarray:
        return np.asarray(self.env.state(), dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        observations, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        self._t = 0
        self._extra = _merged([o.on_reset(self.env) for o in self.observers])
        return self._observations(observations), self._infos(infos)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        actions = {agent: int(a) for agent, a in actions.items()}
        for observer in self.observers:
            observer.before_step(self.env, actions)
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        if self.observers:
            self._extra = _merged([o.after_step(self.env, actions, rewards) for o in self.observers])
        self._t += 1
        terminated = {a: bool(terminations.get(a, False)) for a in observations}
        truncated = {a: bool(truncations.get(a, False)) for a in observations}
        if self.max_steps is not None and self._t >= self.max_steps:
            # The time limit is truncation: learners still bootstrap from the last state.
            truncated = {a: not terminated[a] for a in observations}
        self.agents = [] if any(terminated.values()) or any(truncated.values()) else list(self.env.agents)
        return (self._observations(observations), {a: float(rewards[a]) for a in observations},
                terminated, truncated, self._infos(infos))

    def close(self) -> None:
        self.env.close()

    def _observations(self, observations: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out = {a: np.asarray(o, dtype=np.float32) for a, o in observations.items()}
        if self.task_size:
            out = {a: np.concatenate([o.reshape(-1), np.zeros(self.task_size, np.float32)]) for a, o in out.items()}
        return out

    def _infos(self, infos: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for agent in self.possible_agents:
            info = infos.get(agent, {})
            entry: dict[str, Any] = {"success": float(bool(info.get("success", False)))}
            entry.update(self._extra.get(agent, {}))
            if self.has_action_mask:
                mask = self.env.action_mask(agent) if agent in self.env.agents else None
                n = self.env.action_space(agent).n
                entry["action_mask"] = np.ones(n, dtype=np.int8) if mask is None else np.asarray(mask, np.int8)
            out[agent] = entry
        return out


def _merged(parts: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for part in parts:
        for agent, entries in part.items():
            out.setdefault(agent, {}).update(entries)
    return out


def _masks_actions(env: ParallelEnv) -> bool:
    """Whether the env overrides the base class's always-``None`` ``action_mask``."""
    method = getattr(type(env), "action_mask", None)
    if method is None:
        return False
    from marlang.envs.core.numeric import NumericTextEnv

    return method is not NumericTextEnv.action_mask


class DirectPettingZooWrapper(PettingZooWrapper):
    """torchrl's ``PettingZooWrapper`` reading ``agents`` and ``state()`` of the wrapped env
    directly: its generic attribute fallback lists the module's attributes on every lookup,
    about a tenth of a step's time on small envs."""

    @property
    def agents(self) -> list[str]:
        return self._env.agents

    def state(self) -> np.ndarray:
        return self._env.state()


class MarlangTask(PettingZooClass):
    """A BenchMARL task for one marlang env id. ``config`` holds ``env_id``, ``n_agents``,
    ``max_steps`` and ``kwargs`` (the env's own keyword arguments). ``observers``, when set,
    gives each env it builds its step observers (a critic's records; see ``NumericParallelEnv``)."""

    observers: Callable[[], Sequence[Any]] | None = None

    def __init__(self, env_id: str, n_agents: int | None = None, max_steps: int | None = None,
                 kwargs: Mapping[str, Any] | None = None, task_size: int = 0) -> None:
        # BenchMARL names its output folders after the task: no slashes there.
        super().__init__(name=env_id.replace("/", "-"), config={
            "env_id": env_id, "n_agents": n_agents, "max_steps": max_steps, "kwargs": dict(kwargs or {}),
            "task_size": task_size,
        })

    def make_parallel_env(self) -> NumericParallelEnv:
        c = self.config
        env = build_numeric_env(c["env_id"], c["n_agents"], c["max_steps"], c["kwargs"])
        return NumericParallelEnv(env, c["max_steps"], self.observers() if self.observers else (),
                                  task_size=int(c.get("task_size", 0) or 0))

    def __getstate__(self) -> dict[str, Any]:
        # BenchMARL pickles its task into config.pkl; observers belong to this process only.
        return {k: v for k, v in self.__dict__.items() if k != "observers"}

    def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None,
                    device: Any) -> Callable[[], EnvBase]:
        # BenchMARL builds the n_envs collection envs from one function: each gets its own seed
        # of the run seed's training stream, so they do not replay the same episodes, nor
        # another run seed's.
        offsets = itertools.count()

        def make() -> EnvBase:
            env = self.make_parallel_env()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested")
                return DirectPettingZooWrapper(
                    env, group_map={GROUP: list(env.possible_agents)}, return_state=True,
                    categorical_actions=True, seed=None if seed is None else env_seed(seed, "train", next(offsets)),
                    device=device,
                )

        return make

    def supports_continuous_actions(self) -> bool:
        return False

    def supports_discrete_actions(self) -> bool:
        return True

    def has_state(self) -> bool:
        return True

    def has_render(self, env: EnvBase) -> bool:
        return False

    def max_steps(self, env: EnvBase) -> int:
        limit = getattr(env, "max_steps", None)  # the wrapped env's limit, through the wrapper
        return int(limit if limit is not None else self.config["max_steps"] or 1000)

    def group_map(self, env: EnvBase) -> dict[str, list[str]]:
        return env.group_map

    @staticmethod
    def env_name() -> str:
        return "marlang"
