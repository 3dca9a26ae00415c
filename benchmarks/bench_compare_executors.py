"""Wall time of one comparison grid (4 settings) run by the local executor (one setting after
another, in this process) and by the Ray executor (each setting a Ray task of 1 CPU) on a Ray
instance of this machine's cores, side by side, and their ratio.

The settings are scripted teams on BabyAI PickUp, one per seed: CPU-bound work of a few
seconds each, which parallelises over the cores. The Ray instance starts before the clock
(a cluster is up before a grid is sent to it); its start is printed apart. The Ray figure
includes what each task costs: a worker importing marlang, sending the config, and the
run writing its directory.
Usage: python benchmarks/bench_compare_executors.py [--episodes 60] [--settings 4]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from marlang.evaluation.compare import run_comparison


def _base(episodes: int) -> dict:
    return {"env": {"id": "babyai/pickup", "n_agents": 2}, "agents": {"kind": "scripted"},
            "run": {"name": "bench", "episodes": episodes, "parallel": 8, "progress": False}}


def main(episodes: int = 100, settings: int = 4) -> dict[str, float]:
    import ray

    from marlang.run.executors import RayExecutor

    grid = [("run.seed", list(range(settings)))]
    cores = os.cpu_count() or 1
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        local = run_comparison(_base(episodes), grid, Path(tmp) / "local", reference=False)
        figures["seconds_local"] = time.perf_counter() - start
        # Workers import marlang from where this process does.
        import marlang

        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(marlang.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p)
        start = time.perf_counter()
        ray.init(num_cpus=cores, include_dashboard=False, logging_level="ERROR")
        figures["seconds_ray_start"] = time.perf_counter() - start
        try:
            start = time.perf_counter()
            remote = run_comparison(_base(episodes), grid, Path(tmp) / "ray", reference=False,
                                    executor=RayExecutor())
            figures["seconds_ray"] = time.perf_counter() - start
        finally:
            ray.shutdown()
    assert remote.table == local.table and not remote.failed
    figures["speedup_ray_vs_local"] = figures["seconds_local"] / figures["seconds_ray"]
    print(f"comparison grid: {settings} settings (scripted team, babyai/pickup, {episodes} episodes each), "
          f"{cores} CPU cores")
    print(f"  local executor (sequential): {figures['seconds_local']:.1f} s")
    print(f"  Ray executor ({cores} CPUs):     {figures['seconds_ray']:.1f} s "
          f"(Ray instance start, not counted: {figures['seconds_ray_start']:.1f} s)")
    print(f"  speedup Ray vs local: {figures['speedup_ray_vs_local']:.2f}x  (target >= 1.6x on 2 cores)")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--settings", type=int, default=4)
    a = ap.parse_args()
    main(a.episodes, a.settings)
