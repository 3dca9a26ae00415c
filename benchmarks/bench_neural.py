"""Benchmark: MAPPO frames per second (BenchMARL, CPU) on the climbing game and level-based
foraging 8x8-2p-2f-coop, through marlang's env and task, side by side with BenchMARL on the bare
game: a minimal PettingZoo env over the payoff matrix, and over ``lbforaging``'s ``ForagingEnv``
(same scenario, same action masks), wrapped by torchrl's ``PettingZooWrapper`` as a BenchMARL
user would. Same algorithm, networks, batch sizes and seed on both paths.

Two figures per path: env steps per second under random actions through the torchrl wrapper
(collection's floor), and MAPPO training frames per second (collection plus updates, over the
iterations after the first: setup, warm-up and teardown left out).
Each figure is the best of ``--repeats`` runs (a shared machine only ever slows a run down).
Run: ``python benchmarks/bench_neural.py [--frames N]``; ``main()`` returns the figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from benchmarl.experiment.callback import Callback
from gymnasium.spaces import Box, Discrete
from pettingzoo import ParallelEnv

from marlang.config import build_config
from marlang.methods.neural.benchmarl_task import GROUP, MarlangTask
from marlang.methods.neural.learner import benchmarl_configs, torch_threads

PAYOFF = np.array([[11, -30, 0], [-30, 7, 6], [0, 0, 5]], dtype=np.float32)


class BareClimbing(ParallelEnv):
    """The climbing game in a dozen lines: constant one-hot observations, 25 steps."""

    metadata: ClassVar[dict[str, Any]] = {"name": "bare_climbing", "render_modes": []}
    possible_agents: ClassVar[list[str]] = ["agent_0", "agent_1"]
    state_space = Box(0.0, 1.0, shape=(4,), dtype=np.float32)
    _obs: ClassVar[dict[str, np.ndarray]] = {"agent_0": np.array([1, 0], np.float32),
                                              "agent_1": np.array([0, 1], np.float32)}

    def observation_space(self, agent: str) -> Box:
        return Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    def action_space(self, agent: str) -> Discrete:
        return Discrete(3)

    def state(self) -> np.ndarray:
        return np.array([1, 0, 0, 1], np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.t, self.agents = 0, list(self.possible_agents)
        return dict(self._obs), {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        reward = float(PAYOFF[int(actions["agent_0"]), int(actions["agent_1"])])
        over = self.t >= 25
        agents = self.possible_agents
        if over:
            self.agents = []
        return (dict(self._obs), dict.fromkeys(agents, reward), dict.fromkeys(agents, False),
                dict.fromkeys(agents, over), {a: {} for a in agents})


class BareForaging(ParallelEnv):
    """``lbforaging``'s ForagingEnv (8x8, 2 players, 2 foods, coop, 50 steps) as a PettingZoo
    env: the package's observations and rewards, its valid actions as masks."""

    metadata: ClassVar[dict[str, Any]] = {"name": "bare_foraging", "render_modes": []}
    possible_agents: ClassVar[list[str]] = ["agent_0", "agent_1"]

    def __init__(self) -> None:
        from lbforaging.foraging.environment import ForagingEnv

        self.lbf = ForagingEnv(players=2, min_player_level=1, max_player_level=2, min_food_level=1,
                               max_food_level=None, field_size=(8, 8), max_num_food=2, sight=8,
                               max_episode_steps=50, force_coop=True, grid_observation=False)
        box = self.lbf.observation_space[0]
        self._box = Box(box.low, box.high, dtype=np.float32)
        self.state_space = Box(-1.0, 8.0, shape=(2 * box.shape[0],), dtype=np.float32)
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> Box:
        return self._box

    def action_space(self, agent: str) -> Discrete:
        return Discrete(6)

    def state(self) -> np.ndarray:
        return np.concatenate(self._observations).astype(np.float32)

    def _infos(self) -> dict:
        infos = {}
        for agent, player in zip(self.possible_agents, self.lbf.players, strict=True):
            mask = np.zeros(6, dtype=np.int8)
            for action in self.lbf._valid_actions[player]:
                mask[action.value] = 1
            infos[agent] = {"action_mask": mask}
        return infos

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self._observations, _ = self.lbf.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return {a: o.astype(np.float32) for a, o in zip(self.agents, self._observations, strict=True)}, self._infos()

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        self._observations, rewards, done, truncated, _ = self.lbf.step([int(actions[a]) for a in self.possible_agents])
        agents = self.possible_agents
        if done or truncated:
            self.agents = []
        observations = {a: o.astype(np.float32) for a, o in zip(agents, self._observations, strict=True)}
        return (observations, {a: float(r) for a, r in zip(agents, rewards, strict=True)},
                dict.fromkeys(agents, bool(done)), dict.fromkeys(agents, bool(truncated)), self._infos())


class PlainWrapperTask(MarlangTask):
    """marlang's env and task through torchrl's plain ``PettingZooWrapper`` (no direct
    attribute reads): separates marlang's env cost from the wrapper's lookups."""

    def make_env(self) -> ParallelEnv:
        return self.make_parallel_env()

    def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None, device: Any):
        from torchrl.envs.libs.pettingzoo import PettingZooWrapper

        counter = iter(range(1_000_000))

        def make() -> Any:
            env = self.make_env()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested")
                return PettingZooWrapper(env, group_map={GROUP: list(env.possible_agents)}, return_state=True,
                                         categorical_actions=True, seed=(seed or 0) + next(counter), device=device)

        return make


class BareTask(PlainWrapperTask):
    """The same BenchMARL task settings, over a bare env and torchrl's plain wrapper."""

    def __init__(self, env_id: str, bare: type[ParallelEnv], max_steps: int) -> None:
        super().__init__(env_id, max_steps=max_steps)
        self.bare = bare

    def make_env(self) -> ParallelEnv:
        return self.bare()

    def max_steps(self, env: Any) -> int:
        return self.config["max_steps"]


def random_steps_per_second(task: MarlangTask, steps: int) -> float:
    env = task.get_env_fun(1, False, 0, "cpu")()
    env.rollout(50, break_when_any_done=False)
    start = time.perf_counter()
    env.rollout(steps, break_when_any_done=False)
    spent = time.perf_counter() - start
    env.close()
    return steps / spent


class IterationClock(Callback):
    """Times the training iterations after the first (warm-up) one, so setup, warm-up and
    teardown are left out of frames per second."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[tuple[float, int]] = []

    def on_train_end(self, training_td: Any, group: str) -> None:
        self.ends.append((time.perf_counter(), self.experiment.total_frames))

    def frames_per_second(self) -> float:
        (t0, f0), (t1, f1) = self.ends[0], self.ends[-1]
        return (f1 - f0) / (t1 - t0)


def mappo_frames_per_second(task: MarlangTask, env_id: str, frames: int) -> float:
    from benchmarl.experiment import Experiment

    config = build_config({
        "env": {"id": env_id}, "agents": {"kind": "neural"},
        "learning": {"method": "mappo", "frames": frames, "frames_per_batch": min(1000, frames // 2),
                     "n_envs": 10, "hidden": [64, 64], "epochs": 4, "minibatch_size": min(250, frames // 2),
                     "loggers": []},
    })
    with tempfile.TemporaryDirectory() as folder:
        algorithm, model, exp_config = benchmarl_configs(config, Path(folder))
        exp_config.checkpoint_at_end = False
        # Each run sets its thread count: closing torchrl's batched envs raises it again.
        clock = IterationClock()
        with torch_threads(1):
            experiment = Experiment(task=task, algorithm_config=algorithm, model_config=model, seed=0,
                                    config=exp_config, callbacks=[clock])
            experiment.run()
        return clock.frames_per_second()


def main(frames: int = 4000, steps: int = 2000, repeats: int = 3) -> dict[str, dict[str, float]]:
    warnings.filterwarnings("ignore")
    games = {
        "matrix/climbing": (BareClimbing, 25),
        "lbf/8x8-2p-2f-coop": (BareForaging, 50),
    }
    figures: dict[str, dict[str, float]] = {}
    for env_id, (bare, limit) in games.items():
        paths = {"marlang": MarlangTask(env_id), "marlang-plain": PlainWrapperTask(env_id),
                 "bare": BareTask(env_id, bare, limit)}
        for name, task in paths.items():
            # The best of a few runs: other processes on a shared machine only ever slow one down.
            torch.manual_seed(0)
            with torch_threads(1):
                figures.setdefault(env_id, {})[f"{name}_steps_per_s"] = max(
                    random_steps_per_second(task, steps) for _ in range(repeats))
            figures[env_id][f"{name}_mappo_fps"] = max(
                mappo_frames_per_second(task, env_id, frames) for _ in range(repeats))
    print(f"MAPPO through BenchMARL on CPU (1 torch thread), {frames} frames per run; "
          f"random-action env steps through torchrl's wrapper, {steps} steps; best of {repeats}")
    print("marlang: marlang's env and task; marlang-plain: the same through torchrl's plain wrapper; "
          "bare: the bare game through the plain wrapper")
    print(f"{'env':<22}{'path':<16}{'env steps/s':>12}{'x bare':>8}{'MAPPO frames/s':>16}{'x bare':>8}")
    for env_id, f in figures.items():
        for k, name in enumerate(("marlang", "marlang-plain", "bare")):
            steps_ratio = f[f"{name}_steps_per_s"] / f["bare_steps_per_s"]
            fps_ratio = f[f"{name}_mappo_fps"] / f["bare_mappo_fps"]
            print(f"{env_id if k == 0 else '':<22}{name:<16}{f[f'{name}_steps_per_s']:>12.0f}{steps_ratio:>8.2f}"
                  f"{f[f'{name}_mappo_fps']:>16.0f}{fps_ratio:>8.2f}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=4000, help="MAPPO training frames per run")
    parser.add_argument("--steps", type=int, default=2000, help="random-action env steps per path")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (the best counts)")
    args = parser.parse_args()
    main(args.frames, args.steps, args.repeats)
