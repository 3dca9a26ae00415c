"""Benchmark: Pistonball cycles per second with 20 pistons and random actions, side by side.

(a) PettingZoo's ``pistonball_v6.parallel_env`` (its own step, pixel observations included),
(b) the raw AEC env stepped with no observations at all (the physics floor), and
(c) ``PistonballTextEnv`` with text observations for every piston. Target: (c) costs less
than 2x (a) per cycle. Also (a'): (a) with ``render_mode="rgb_array"``; without a render mode
the package never redraws its screen, so (a)'s pixel observations do not show the ball.
The package variants are ~40x slower, so they run fewer cycles.
Run: ``python benchmarks/bench_envs_pistonball.py``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import numpy as np
from pettingzoo.butterfly.pistonball.pistonball import parallel_env, raw_env

from marlang.envs.pistonball.text import PISTONBALL_ACTIONS, PistonballTextEnv

N_PISTONS = 20


def _time_cycles(
    reset: Callable[[int], None], step: Callable[[np.ndarray], bool], actions: np.ndarray
) -> float:
    """Seconds spent in ``step`` over every row of ``actions`` (resets are not timed)."""
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


def _package(actions: np.ndarray, render_mode: str | None = None) -> float:
    env = parallel_env(n_pistons=N_PISTONS, continuous=False, render_mode=render_mode)
    names = env.possible_agents

    def step(row: np.ndarray) -> bool:
        _, _, terms, truncs, _ = env.step(dict(zip(names, row.tolist(), strict=True)))
        return terms[names[0]] or truncs[names[0]]

    return _time_cycles(lambda seed: env.reset(seed=seed), step, actions)


def _raw(actions: np.ndarray) -> float:
    env = raw_env(n_pistons=N_PISTONS, continuous=False)

    def step(row: np.ndarray) -> bool:
        for action in row.tolist():
            env.step(action)
        return env.terminate or env.truncate

    return _time_cycles(lambda seed: env.reset(seed=seed), step, actions)


def _text(actions: np.ndarray) -> float:
    env = PistonballTextEnv(N_PISTONS)
    names = env.possible_agents

    def step(row: np.ndarray) -> bool:
        joint = {name: PISTONBALL_ACTIONS[a] for name, a in zip(names, row.tolist(), strict=True)}
        env.step(joint)
        return not env.agents

    return _time_cycles(lambda seed: env.reset(seed=seed), step, actions)


def main(cycles: int = 3000, package_cycles: int = 200, repeats: int = 3) -> dict[str, float]:
    actions = np.random.default_rng(0).integers(0, 3, size=(max(cycles, package_cycles), N_PISTONS))
    runs: dict[str, tuple[str, Callable[[np.ndarray], float], int]] = {
        "package": ("(a) pistonball_v6.parallel_env (pixel obs)", _package, package_cycles),
        "package_rendered": (
            "(a') same, render_mode='rgb_array'",
            lambda rows: _package(rows, render_mode="rgb_array"),
            package_cycles,
        ),
        "raw": ("(b) raw env, no observations (floor)", _raw, cycles),
        "text": ("(c) PistonballTextEnv (text obs, 20 pistons)", _text, cycles),
    }
    for _, run, _ in runs.values():  # warm-up: imports, image loading, first-call costs
        run(actions[:20])
    # Interleave the repeats so that a slow patch of the machine hits every variant alike.
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, (_, run, n) in runs.items():
            best[name] = min(best[name], run(actions[:n]) / n)
    figures: dict[str, float] = {}
    for name, per_cycle in best.items():
        figures[f"{name}_cycles_per_s"] = 1 / per_cycle
        figures[f"{name}_ms_per_cycle"] = per_cycle * 1000
    figures["text_vs_package"] = best["text"] / best["package"]
    figures["text_vs_raw"] = best["text"] / best["raw"]

    print(
        f"pistonball, {N_PISTONS} pistons, random actions; best of {repeats} runs of "
        f"{package_cycles} cycles (a, a') and {cycles} cycles (b, c); resets not timed"
    )
    for name, (label, _, _) in runs.items():
        print(
            f"  {label:<46} {figures[f'{name}_cycles_per_s']:8.0f} cycles/s  "
            f"{figures[f'{name}_ms_per_cycle']:7.3f} ms/cycle"
        )
    print(f"  time per cycle (c)/(a): {figures['text_vs_package']:.3f}x  (target < 2x)")
    print(f"  time per cycle (c)/(b): {figures['text_vs_raw']:.2f}x")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=3000)
    ap.add_argument("--package-cycles", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    main(a.cycles, a.package_cycles, a.repeats)
