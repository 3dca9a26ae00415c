"""Benchmark: Overcooked ticks per second with text observations, against the package's own step.

(a) the package's game step ``OvercookedGridworld.get_state_transition`` with random joint
actions (its ``OvercookedEnv`` wraps this, but pickles a motion planner into site-packages on
first use, so it is not run here); (b) ``OvercookedTextEnv`` in primitive mode with random
actions (one tick and both cooks' text observations per step); (c) in subgoal mode with random
legal subgoals (planner moves every tick, text at each decision point; random choices end
subgoals far more often than purposeful ones, so this is the costly end). Only the step calls
are timed. Target: (b) and (c) cost less than 2x (a) per tick.
Run: ``python benchmarks/bench_envs_overcooked.py``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from marlang.envs.overcooked.package import Action
from marlang.envs.overcooked.subgoals import PRIMITIVE_ACTIONS
from marlang.envs.overcooked.text import OvercookedTextEnv

LAYOUTS = ("cramped-room", "counter-circuit")


def _package(layout: str, ticks: int, rng: np.random.Generator) -> float:
    mdp = OvercookedTextEnv(layout)._mdp
    state = mdp.get_standard_start_state()
    joints = [tuple(Action.ALL_ACTIONS[i] for i in row) for row in rng.integers(0, 6, size=(ticks, 2))]
    spent = 0.0
    for t, joint in enumerate(joints):
        if t % 400 == 0:
            state = mdp.get_standard_start_state()
        start = time.perf_counter()
        state, _ = mdp.get_state_transition(state, joint)
        spent += time.perf_counter() - start
    return spent / ticks


def _primitive(layout: str, ticks: int, rng: np.random.Generator) -> float:
    env = OvercookedTextEnv(layout, action_mode="primitive")
    names = list(PRIMITIVE_ACTIONS)
    rows = rng.integers(0, 6, size=(ticks, 2))
    env.reset(seed=0)
    spent = 0.0
    for row in rows:
        if not env.agents:
            env.reset(seed=0)
        joint = {"agent_0": names[row[0]], "agent_1": names[row[1]]}
        start = time.perf_counter()
        env.step(joint)
        spent += time.perf_counter() - start
    return spent / ticks


def _subgoal(layout: str, ticks: int, rng: np.random.Generator, own: list[float] | None = None) -> float:
    """Seconds per tick; ``own`` (if given) gets the seconds per tick spent in the package's step
    inside the env (on the states this run visits)."""
    env = OvercookedTextEnv(layout)
    inner, in_package = env._mdp.get_state_transition, [0.0]

    def timed(*args: object) -> object:
        start = time.perf_counter()
        out = inner(*args)
        in_package[0] += time.perf_counter() - start
        return out

    if own is not None:
        env._mdp.get_state_transition = timed
    observations, _ = env.reset(seed=0)
    spent, done = 0.0, 0
    while done < ticks:
        if not env.agents:
            observations, _ = env.reset(seed=0)
        joint = {
            agent: obs.legal_actions[int(rng.integers(len(obs.legal_actions)))]
            for agent, obs in observations.items()
        }
        start = time.perf_counter()
        observations, _, _, _, infos = env.step(joint)
        spent += time.perf_counter() - start
        done += infos["agent_0"]["ticks"]
    if own is not None:
        own.append(in_package[0] / done)
    return spent / done


def main(ticks: int = 4000, repeats: int = 3) -> dict[str, float]:
    runs = {"package": _package, "primitive": _primitive, "subgoal": _subgoal}
    figures: dict[str, float] = {}
    print(f"overcooked, random actions; best of {repeats} runs of {ticks} ticks; only step() timed")
    for layout in LAYOUTS:
        for run in runs.values():  # warm-up: planner tables, distance caches
            run(layout, 200, np.random.default_rng(1))
        best = dict.fromkeys(runs, float("inf"))
        own: list[float] = []
        for r in range(repeats):  # interleaved, so a slow patch of the machine hits all alike
            for name, run in runs.items():
                best[name] = min(best[name], run(layout, ticks, np.random.default_rng(r)))
            _subgoal(layout, ticks, np.random.default_rng(r), own)
        print(f"  {layout}")
        labels = {
            "package": "(a) package get_state_transition",
            "primitive": "(b) text env, primitive (text every tick)",
            "subgoal": "(c) text env, subgoal (planner + text)",
        }
        for name, per_tick in best.items():
            figures[f"{layout}_{name}_ticks_per_s"] = 1 / per_tick
            print(f"    {labels[name]:<44} {1 / per_tick:9.0f} ticks/s  {per_tick * 1e6:7.1f} us/tick")
        for name in ("primitive", "subgoal"):
            ratio = best[name] / best["package"]
            figures[f"{layout}_{name}_vs_package"] = ratio
            print(f"    time per tick, {name} / package: {ratio:.2f}x  (target < 2x)")
        # Subgoal play leaves items about and cooks soups, which makes the package's own step
        # dearer than on (a)'s random walks: its share of (c), on the states (c) visits.
        figures[f"{layout}_subgoal_package_share"] = share = min(own) / best["subgoal"]
        print(f"    (c)'s ticks in the package's step: {min(own) * 1e6:.1f} us/tick, {share:.0%} of (c)")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ticks", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    main(a.ticks, a.repeats)
