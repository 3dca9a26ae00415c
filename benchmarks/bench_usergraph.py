"""A user's own LangGraph graph under marlang, on the solver -> checker graph of
examples/math_team.py: what recording costs, and what playing 8 inputs at once gives.

Recording: the same compiled graph on a scripted model, invoked bare (``ainvoke``, no binding,
no callbacks: the app as its user runs it), through `arun_graph` (binding and node-call
recorder) and through `GraphPlayer.play` (what a run does per episode: binding, recorder, the
run's usage recorder, the reward, the Trajectory), interleaved round by round so the machine's
other work hits all three alike. Target: each at most 1.05x the bare graph's median wall time;
a model answering at once is the worst case, one that sleeps 5 ms per call a fast remote model.
Concurrency: `marlang run` of the graph on the embedded model, run.parallel 1 and 8 over the
same 8 episodes (greedy, no response cache; the example's nodes are sync: LangGraph runs them
in the event loop's worker threads, and the engine's mean batch says whether their calls still
reach it together), beside
benchmarks/bench_parallel.py's speedup measured in the same invocation. Target: a speedup at
least bench_parallel's, and the parallel run within 1.1x of its floor (its own generation
requests on the engine alone, in batches of one call per episode).
Usage: python benchmarks/bench_usergraph.py [--rounds 30] [--per-round 20] [--episodes 8]
       [--max-tokens 48] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # examples/ is imported from the repository root
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_parallel
from langchain_core.messages import BaseMessage

from examples import math_team
from marlang.config import build_config
from marlang.models import UsageRecorder
from marlang.models.capabilities import engine_of
from marlang.run import Experiment, build_chat_model
from marlang.testing import ScriptedChatModel
from marlang.types import CallContext, PolicyState
from marlang.usergraph import Binding, GraphPlayer, GraphSpec, TaskSpec, app_marks, arun_graph

OVERHEAD_TARGET = 1.05
FLOOR_TARGET = 1.1
MAX_TOKENS = 48
"""Tokens per reply of the concurrency part (the example's own 256 take minutes on a CPU)."""

GRAPH = {"build": "examples.math_team:build_graph", "input": "problem", "output": "answer"}
TASK = {"data": "examples.math_team:problems", "reward": "examples.math_team:score"}


def math_team_graph() -> Any:
    """The example's graph with `MAX_TOKENS` per reply (what the concurrency part's config builds)."""
    return math_team.build_graph(max_tokens=MAX_TOKENS)


def _scripted(sleep_s: float) -> ScriptedChatModel:
    def reply(messages: Sequence[BaseMessage]) -> str:
        if sleep_s:
            time.sleep(sleep_s)
        return "Adding the two terms gives 10, so the answer is \\boxed{10}."

    return ScriptedChatModel(reply_fn=reply)


def _bootstrap_median(values: Sequence[float], resamples: int = 2000) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the median of ``values``."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def recording_overhead(sleep_s: float, rounds: int, per_round: int) -> dict[str, float]:
    """Median per-invocation wall time of the graph bare, under `arun_graph` and under
    `GraphPlayer.play`, the three timed in turns (the order rotating each round), and per
    round each one's mean over the bare graph's; prints one row per way and returns the figures."""
    model = _scripted(sleep_s)
    graph = math_team.build_graph(model=model)  # type: ignore[arg-type]  # a chat model is a valid default
    spec, task = GraphSpec(**GRAPH), TaskSpec(**TASK)
    # the player a run builds (the app's marked prompts at their defaults, the run's model playing
    # every marked model) on this very graph object, so that the three ways play one graph
    player = GraphPlayer(graph=graph, spec=spec, task=task, items=task.load_items(spec.input),
                         reward=task.reward_function(), prompts=app_marks(spec.build).prompt_defaults(), model=model)
    problem = player.items[0]["problem"]  # type: ignore[index]  # the example's items are mappings
    policy = PolicyState()
    context = CallContext(callbacks=[UsageRecorder()])

    async def bare() -> None:
        await graph.ainvoke({"problem": problem})

    async def recorded() -> None:
        episode = await arun_graph(graph, {"problem": problem}, Binding(model=model))
        assert not episode.failed and len(episode.calls) == 2, episode.error

    episode_ids = iter(range(1 << 30))

    async def played() -> None:
        trajectory = await player.play(next(episode_ids), 0, policy, context)
        assert trajectory.metrics["error"] is None and len(trajectory.steps) == 2, trajectory.metrics["error"]

    ways: dict[str, Callable[[], Awaitable[None]]] = {"bare": bare, "arun_graph": recorded, "GraphPlayer.play": played}

    async def measure() -> dict[str, list[float]]:
        for way in ways.values():  # warm-up: imports, LangGraph's first-call setup
            for _ in range(3):
                await way()
        means: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                start = time.perf_counter()
                for _ in range(per_round):
                    await ways[name]()
                means[name].append((time.perf_counter() - start) / per_round)
        return means

    means = asyncio.run(measure())
    figures: dict[str, float] = {}
    label = "answering at once" if not sleep_s else f"sleeping {1000 * sleep_s:.0f} ms per call"
    print(f"recording, scripted model {label} ({rounds} rounds of {per_round} invocations each way, 2 calls each):")
    bare_ms = 1000 * statistics.median(means["bare"])
    print(f"  bare graph.ainvoke: {bare_ms:.2f} ms per invocation (median of round means)")
    for name in ("arun_graph", "GraphPlayer.play"):
        ratios = [b / a for a, b in zip(means["bare"], means[name], strict=True)]
        ratio = statistics.median(ratios)
        low, high = _bootstrap_median(ratios)
        verdict = "PASS" if ratio <= OVERHEAD_TARGET else "MISS"
        extra_ms = 1000 * statistics.median([b - a for a, b in zip(means["bare"], means[name], strict=True)])
        print(f"  {name}: {1000 * statistics.median(means[name]):.2f} ms (+{extra_ms:.2f} ms), {ratio:.3f}x bare "
              f"(95% interval {low:.3f}-{high:.3f} over rounds; target <= {OVERHEAD_TARGET}x: {verdict})")
        figures[f"{name}_vs_bare"] = ratio
    figures["bare_ms"] = bare_ms
    return figures


def _graph_config(parallel: int, episodes: int) -> Any:
    return build_config({
        "graph": {**GRAPH, "build": "bench_usergraph:math_team_graph"},
        "task": TASK,
        "model": {"spec": "local:smollm2", "temperature": 0.0, "max_tokens": MAX_TOKENS, "cache": False},
        "learning": {"method": "none"},
        "run": {"name": f"bench-graph-p{parallel}", "episodes": episodes, "parallel": parallel, "progress": False},
    })


def concurrency(model: Any, episodes: int, label: str) -> dict[str, float]:
    """Seconds of `marlang run` of the math team graph with run.parallel 1 and 8 over ``episodes``,
    the engine's batches in each, and the floor: the parallel run's generation requests on the
    engine alone, batched as fully as it allows."""
    engine = engine_of(model)
    figures: dict[str, float] = {}
    clocks: dict[int, bench_parallel.EngineClock] = {}
    counters: dict[int, tuple[int, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        Experiment(_graph_config(1, 1), Path(tmp) / "warm", chat_model=model).run()  # weights, first calls
        for parallel in (1, 8):
            clock = bench_parallel.EngineClock(engine) if engine is not None else None
            if clock is not None:
                clocks[parallel] = clock
            before = (engine.counters.generate_calls, engine.counters.requests_served) if engine is not None else (0, 0)
            start = time.perf_counter()
            try:
                result = Experiment(_graph_config(parallel, episodes), Path(tmp) / f"p{parallel}",
                                    chat_model=model).run()
            finally:
                if clock is not None:
                    clock.stop()
            figures[f"seconds_parallel_{parallel}"] = time.perf_counter() - start
            assert result.episodes_run == episodes
            if engine is not None:
                counters[parallel] = (engine.counters.generate_calls - before[0],
                                      engine.counters.requests_served - before[1])
    figures["speedup_8_vs_1"] = figures["seconds_parallel_1"] / figures["seconds_parallel_8"]
    print(f"graph episodes ({episodes} episodes of examples/math_team.py's solver -> checker graph, "
          f"{MAX_TOKENS} tokens per reply, greedy, no cache, {label})")
    for p in (1, 8):
        line = f"  run.parallel={p}: {episodes / figures[f'seconds_parallel_{p}'] * 60:.2f} episodes/min " \
               f"({figures[f'seconds_parallel_{p}']:.1f} s"
        if engine is not None:
            c, (batches, requests) = clocks[p], counters[p]
            figures[f"mean_batch_parallel_{p}"] = requests / batches if batches else 0.0
            # CPU time, not wall: callers of the engine from several threads wait for its lock inside the clock
            line += (f"; engine {requests} requests in {batches} batches, mean batch "
                     f"{figures[f'mean_batch_parallel_{p}']:.2f}, {c.cpu_seconds:.1f} s CPU")
        print(line + ")")
    if engine is not None:
        requests = clocks[8].requests["generation"]
        # batches of 8 at most: the checker's call of an episode waits for its solver's, so the most
        # calls the parallel run can have in flight at once is one per episode
        cpu, start = time.thread_time(), time.perf_counter()
        for first in range(0, len(requests), 8):
            engine.generate(requests[first:first + 8])
        figures["seconds_floor"], floor_cpu = time.perf_counter() - start, time.thread_time() - cpu
        figures["parallel_vs_floor"] = figures["seconds_parallel_8"] / figures["seconds_floor"]
        figures["cpu_parallel_vs_floor"] = clocks[8].cpu_seconds / floor_cpu
        print(f"  floor, the parallel run's {len(requests)} generation requests on the engine alone in batches of "
              f"up to 8 (one call per episode in flight): {figures['seconds_floor']:.1f} s ({floor_cpu:.1f} s CPU)")
    return figures


def main(rounds: int = 30, per_round: int = 20, episodes: int = 8, max_tokens: int = MAX_TOKENS,
         parallel_steps: int = 2, smoke: bool = False) -> dict[str, float]:
    """Measure and print. ``smoke``: seconds, at most 3 rounds of 2 invocations, a scripted model
    in place of the embedded one and no bench_parallel beside it (every row printed, none of them
    a figure to read)."""
    global MAX_TOKENS  # read by math_team_graph, which the config's graph.build names
    MAX_TOKENS = max_tokens
    if smoke:
        rounds, per_round = min(rounds, 3), min(per_round, 2)
    figures: dict[str, float] = {}
    for sleep_s in (0.0, 0.005):
        figures.update({f"{k}_sleep_{sleep_s}": v for k, v in recording_overhead(sleep_s, rounds, per_round).items()})
    if smoke:
        figures.update(concurrency(_scripted(0.0), episodes, "scripted model"))
        return figures
    model, _ = build_chat_model(_graph_config(1, 1).model)
    figures.update(concurrency(model, episodes, "local:smollm2"))
    print("bench_parallel beside it, on the same model:")
    reference = bench_parallel.main(episodes=episodes, max_steps=parallel_steps, model=model)
    speedup, target = figures["speedup_8_vs_1"], reference["speedup_8_vs_1"]
    print(f"graph speedup 8 vs 1: {speedup:.2f}x against bench_parallel's {target:.2f}x: "
          f"{'PASS' if speedup >= target else 'MISS'}")
    if "parallel_vs_floor" in figures:
        ratio = figures["parallel_vs_floor"]
        print(f"graph run.parallel=8 / floor: {ratio:.2f}x (target <= {FLOOR_TARGET}x: "
              f"{'PASS' if ratio <= FLOOR_TARGET else 'MISS'}); in engine CPU time "
              f"{figures['cpu_parallel_vs_floor']:.2f}x (hardly moved by the machine's other work)")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=30, help="rounds of the recording part")
    ap.add_argument("--per-round", type=int, default=20, help="invocations each way per round")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    ap.add_argument("--parallel-steps", type=int, default=2, help="bench_parallel's max steps per episode")
    ap.add_argument("--smoke", action="store_true", help="seconds: tiny sizes, a scripted model")
    a = ap.parse_args()
    # run the module as imported: the config's graph.build names bench_usergraph:math_team_graph,
    # which must read the MAX_TOKENS that main sets, not a second copy's
    import bench_usergraph

    bench_usergraph.main(a.rounds, a.per_round, a.episodes, a.max_tokens, a.parallel_steps, a.smoke)
