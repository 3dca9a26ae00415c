"""Benchmark: steps per second of the numeric/text MARL envs against their packages' own step.

For each env, random joint actions (the same rows for every variant): (pkg) the underlying
package's own ``step`` where there is one (``lbforaging.ForagingEnv``, ``rware.Warehouse``,
PettingZoo's ``pistonball_v6.parallel_env`` with its pixel observations, and its raw AEC env
with no observations at all as a floor), (num) marlang's env with ``observation_mode="numeric"``
and (text) the same env building every agent's ego-view text. Resets are not timed. Target:
numeric within 1.5x of the package's time per step.
Run: ``python benchmarks/bench_envs_marl.py``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import numpy as np

from marlang.envs import make

Runner = Callable[[np.ndarray], float]
"""Takes rows of per-agent action indices; returns the seconds spent in ``step``."""


def _time_steps(
    reset: Callable[[int], None], step: Callable[[np.ndarray], bool], actions: np.ndarray
) -> float:
    episode = 0
    reset(episode)
    spent = 0.0
    for row in actions:
        start = time.perf_counter()
        done = step(row)
        spent += time.perf_counter() - start
        if done:
            episode += 1
            reset(episode)
    return spent


def _marlang(env_id: str, mode: str) -> Runner:
    env = make(env_id, observation_mode=mode)

    def run(actions: np.ndarray) -> float:
        def step(row: np.ndarray) -> bool:
            env.step(dict(zip(env.possible_agents, row.tolist(), strict=True)))
            return not env.agents

        return _time_steps(lambda seed: env.reset(seed=seed), step, actions)

    return run


def _lbf_package(env_id: str) -> Runner:
    env = make(env_id, observation_mode="numeric")
    package = env.lbf  # the same constructor arguments; stepped directly

    def run(actions: np.ndarray) -> float:
        def step(row: np.ndarray) -> bool:
            _, _, done, _, _ = package.step(row.tolist())
            return done

        return _time_steps(lambda seed: package.reset(seed=seed), step, actions)

    return run


def _rware_package(env_id: str) -> Runner:
    from rware.warehouse import RewardType, Warehouse

    scenario = make(env_id).scenario
    package = Warehouse(
        shelf_columns=scenario.shelf_columns,
        column_height=8,
        shelf_rows=scenario.shelf_rows,
        n_agents=scenario.agents,
        msg_bits=0,
        sensor_range=1,
        request_queue_size=scenario.agents,
        max_inactivity_steps=None,
        max_steps=500,
        reward_type=RewardType.INDIVIDUAL,
    )

    def run(actions: np.ndarray) -> float:
        def step(row: np.ndarray) -> bool:
            _, _, done, _, _ = package.step(row.tolist())
            return done

        return _time_steps(lambda seed: package.reset(seed=seed), step, actions)

    return run


def _pistonball_package(raw: bool) -> Runner:
    from pettingzoo.butterfly.pistonball.pistonball import parallel_env, raw_env

    if raw:
        env = raw_env(n_pistons=5, continuous=False)

        def raw_step(row: np.ndarray) -> bool:
            for action in row.tolist():
                env.step(action)
            return env.terminate or env.truncate

        return lambda actions: _time_steps(lambda seed: env.reset(seed=seed), raw_step, actions)
    par = parallel_env(n_pistons=5, continuous=False)
    names = par.possible_agents

    def step(row: np.ndarray) -> bool:
        _, _, terms, truncs, _ = par.step(dict(zip(names, row.tolist(), strict=True)))
        return terms[names[0]] or truncs[names[0]]

    return lambda actions: _time_steps(lambda seed: par.reset(seed=seed), step, actions)


@dataclass(frozen=True)
class Case:
    env_id: str
    package: dict[str, Runner]
    """Package variants by label (empty where marlang's env has no package underneath)."""
    steps: int


def _cases(steps: int) -> list[Case]:
    return [
        Case("matrix/climbing", {}, steps),
        Case("lbf/8x8-2p-2f-coop", {"ForagingEnv.step": _lbf_package("lbf/8x8-2p-2f-coop")}, steps),
        Case("lbf/15x15-4p-5f", {"ForagingEnv.step": _lbf_package("lbf/15x15-4p-5f")}, steps),
        Case("rware/tiny-4ag", {"Warehouse.step": _rware_package("rware/tiny-4ag")}, steps // 2),
        Case(
            "pistonball/n5-sparse",
            {
                "pistonball_v6.parallel_env": _pistonball_package(raw=False),
                "raw AEC env, no obs": _pistonball_package(raw=True),
            },
            steps // 4,
        ),
        Case("babyai-marl/pickup", {}, steps // 2),
    ]


def main(steps: int = 2000, repeats: int = 3) -> dict[str, float]:
    figures: dict[str, float] = {}
    print(
        f"steps/s with random actions, best of {repeats} runs (resets not timed); "
        "ratio = time per step / the package's (target for numeric: < 1.5x)"
    )
    print(f"  {'env':<22} {'variant':<30} {'steps/s':>9} {'vs package':>11}")
    for case in _cases(steps):
        env = make(case.env_id)
        sizes = [env.action_space(a).n for a in env.possible_agents]
        rng = np.random.default_rng(0)
        actions = np.stack([rng.integers(0, n, size=case.steps) for n in sizes], axis=1)
        runs: dict[str, Runner] = dict(case.package)
        runs["marlang numeric"] = _marlang(case.env_id, "numeric")
        runs["marlang text"] = _marlang(case.env_id, "text")
        for run in runs.values():  # warm-up: imports, caches, first-call costs
            run(actions[:20])
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(repeats):  # interleaved, so a slow patch hits every variant alike
            for label, run in runs.items():
                best[label] = min(best[label], run(actions) / len(actions))
        reference = best[next(iter(case.package))] if case.package else None
        for label, per_step in best.items():
            key = f"{case.env_id}|{label}"
            figures[f"{key}|steps_per_s"] = 1 / per_step
            ratio = "" if reference is None else f"{per_step / reference:10.2f}x"
            if reference is not None:
                figures[f"{key}|vs_package"] = per_step / reference
            print(f"  {case.env_id:<22} {label:<30} {1 / per_step:9.0f} {ratio:>11}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps per run (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant (default 3)")
    args = parser.parse_args()
    main(steps=args.steps, repeats=args.repeats)
