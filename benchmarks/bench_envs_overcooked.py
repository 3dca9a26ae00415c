"""Benchmark: Overcooked ticks per second with text observations, against the package's own step.

(a) the package's game step ``OvercookedGridworld.get_state_transition`` with random joint
actions from the start state (its ``OvercookedEnv`` wraps this, but pickles a motion planner
into site-packages on first use, so it is not run here); (b) ``OvercookedTextEnv`` in primitive
mode with random actions (one tick and both cooks' text observations per step); (c) in subgoal
mode with random legal subgoals (planner moves every tick, text at each decision point; random
choices end subgoals far more often than purposeful ones: a decision every 1.5 ticks in cramped
room, 2.4 in counter circuit, the costly end); (d) in subgoal mode played by the scripted
reference team (purposeful play: a decision every 2.4 and 3.5 ticks). Only the step calls are
timed. The envs of a layout share its kitchen (``kitchen_of``), so later runs find the lines and
plans earlier ones made, as the later episodes of a run do.

Each episode of (b) to (d) starts the cooks on cells drawn from its own seed. The package's
step costs more on the states play visits than on (a)'s random walks from the start (items on
counters, soups cooking): each of (b) to (d) also times the package's step inside the env, on
the very ticks it runs, and the headline ratio (``*_vs_package_same_ticks``) is the env's time
per tick over that; the timing wrapper's own cost, and any garbage collection that falls inside
the package's step, count against the env. The ratio against (a) (``*_vs_random_walk``) is
printed beside it. Target: (b) to (d) cost less than 2x the package's step on the same ticks.
Run: ``python benchmarks/bench_envs_overcooked.py``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from marlang.envs.overcooked.kitchen import PRIMITIVE_ACTIONS
from marlang.envs.overcooked.package import Action
from marlang.envs.overcooked.text import OvercookedTextEnv

LAYOUTS = ("cramped-room", "counter-circuit")


def _package(layout: str, ticks: int, rng: np.random.Generator) -> tuple[float, float]:
    """(seconds per tick, the same): the package's step alone."""
    mdp = OvercookedTextEnv(layout).mdp
    state = mdp.get_standard_start_state()
    joints = [tuple(Action.ALL_ACTIONS[i] for i in row) for row in rng.integers(0, 6, size=(ticks, 2))]
    spent = 0.0
    for t, joint in enumerate(joints):
        if t % 400 == 0:
            state = mdp.get_standard_start_state()
        start = time.perf_counter()
        state, _ = mdp.get_state_transition(state, joint)
        spent += time.perf_counter() - start
    return spent / ticks, spent / ticks


def _play(env: OvercookedTextEnv, ticks: int, rng: np.random.Generator, choose: Callable[[dict], dict],
          reset: Callable[[], None]) -> tuple[float, float]:
    """(seconds per tick in ``env.step``, seconds per tick in the package's step inside it).

    Each episode starts from its own seed (``rng``; the envs start cooks on random cells). A
    garbage collection that falls inside the package's step is charged to the env (whose
    objects it mostly walks), not to the package."""
    spans: list[float] = []  # (start, end) of each package step, flat
    collections: list[float] = []  # (start, end) of each garbage collection, flat

    def timed(state: object, joint: object, _inner=env.mdp.get_state_transition, _now=time.perf_counter,
              _note=spans.append) -> object:  # (as light as a wrapper gets: its cost counts against the env)
        _note(_now())
        out = _inner(state, joint)
        _note(_now())
        return out

    def collection(phase: str, _: dict) -> None:
        collections.append(time.perf_counter())

    env.mdp.get_state_transition = timed
    gc.callbacks.append(collection)
    try:
        spent, done = 0.0, 0
        while done < ticks:
            if not env.agents:
                reset()
                observations, _ = env.reset(seed=int(rng.integers(2**31)))
            joint = choose(observations)
            start = time.perf_counter()
            observations, _, _, _, infos = env.step(joint)
            spent += time.perf_counter() - start
            done += infos["agent_0"]["ticks"]
    finally:
        gc.callbacks.remove(collection)
    starts = spans[0::2]
    in_package = sum(end - start for start, end in zip(starts, spans[1::2]))
    for begun, ended in zip(collections[0::2], collections[1::2]):  # a collection inside a step
        k = bisect.bisect_right(starts, begun) - 1
        if k >= 0 and ended <= spans[2 * k + 1]:
            in_package -= ended - begun
    return spent / done, in_package / done


def _primitive(layout: str, ticks: int, rng: np.random.Generator) -> tuple[float, float]:
    env = OvercookedTextEnv(layout, action_mode="primitive", random_start=True)
    names = list(PRIMITIVE_ACTIONS)

    def choose(observations: dict) -> dict:
        return {agent: names[int(rng.integers(6))] for agent in observations}

    return _play(env, ticks, rng, choose, lambda: None)


def _subgoal(layout: str, ticks: int, rng: np.random.Generator) -> tuple[float, float]:
    env = OvercookedTextEnv(layout, random_start=True)

    def choose(observations: dict) -> dict:
        return {
            agent: obs.legal_actions[int(rng.integers(len(obs.legal_actions)))]
            for agent, obs in observations.items()
        }

    return _play(env, ticks, rng, choose, lambda: None)


def _scripted(layout: str, ticks: int, rng: np.random.Generator) -> tuple[float, float]:
    env = OvercookedTextEnv(layout, random_start=True)
    team = env.scripted_team()
    return _play(env, ticks, rng, team.act, team.reset)


RUNS = {"package": _package, "primitive": _primitive, "subgoal": _subgoal, "scripted": _scripted}
LABELS = {
    "package": "(a) package get_state_transition, random walk",
    "primitive": "(b) text env, primitive, random moves",
    "subgoal": "(c) text env, subgoal, random legal subgoals",
    "scripted": "(d) text env, subgoal, scripted team",
}


def main(ticks: int = 4000, repeats: int = 3) -> dict[str, float]:
    figures: dict[str, float] = {}
    print(f"overcooked; {repeats} run(s) of {ticks} ticks each, interleaved; only step() timed; "
          "medians over the runs")
    for layout in LAYOUTS:
        for run in RUNS.values():  # warm-up: the package's own tables and caches
            run(layout, 200, np.random.default_rng(10_000))
        seen: dict[str, list[tuple[float, float]]] = {name: [] for name in RUNS}
        for r in range(repeats):  # interleaved, so a slow patch of the machine hits all alike
            for name, run in RUNS.items():
                seen[name].append(run(layout, ticks, np.random.default_rng(r)))
        walk = statistics.median(t for t, _ in seen["package"])
        print(f"  {layout}")
        for name, runs in seen.items():
            per_tick = statistics.median(t for t, _ in runs)
            figures[f"{layout}_{name}_ticks_per_s"] = 1 / per_tick
            line = f"    {LABELS[name]:<46} {1 / per_tick:7.0f} ticks/s {per_tick * 1e6:6.1f} us/tick"
            if name != "package":
                same = statistics.median(t / own for t, own in runs)
                figures[f"{layout}_{name}_vs_package_same_ticks"] = same
                figures[f"{layout}_{name}_vs_random_walk"] = per_tick / walk
                own = statistics.median(own for _, own in runs)
                line += (f"  package {own * 1e6:5.1f} us of it: {same:.2f}x the package's step"
                         f" (vs (a): {per_tick / walk:.2f}x)")
            print(line)
    print("  target: (b) to (d) under 2x the package's step on the same ticks")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ticks", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    main(a.ticks, a.repeats)
