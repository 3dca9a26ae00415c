"""Episodes per minute with run.parallel = 1 and 8 on the embedded model, side by side.

Parallel episodes share the model: their concurrent calls are batched into one padded
generation (and one scoring pass), so 8 episodes at once cost less than 8 one after another.
Batching saves decoding time, which is memory-bound; prompt prefill is compute-bound on a
CPU and costs the same batched or not, so prompt-heavy steps bound the speedup there.
Usage: python benchmarks/bench_parallel.py [--episodes 8] [--max-steps 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from marlang.config import build_config
from marlang.run import Experiment, build_chat_model


def _config(parallel: int, episodes: int, max_steps: int):
    return build_config({
        "env": {"id": "babyai/pickup", "n_agents": 2, "max_steps": max_steps},
        "model": {"spec": "local:smollm2", "max_tokens": 40, "cache": False},
        "protocol": {"name": "none"},
        "learning": {"method": "none"},
        "run": {"name": f"bench-p{parallel}", "episodes": episodes, "parallel": parallel, "progress": False},
    })


def main(episodes: int = 8, max_steps: int = 4, model: Any = None, label: str = "local:smollm2") -> dict[str, float]:
    """Measure and print; ``model`` (a chat model, default the embedded one) plays every episode."""
    if model is None:
        model, _ = build_chat_model(_config(1, episodes, max_steps).model)
    # Warm-up: load weights and run one tiny episode so neither setting pays first-call costs.
    with tempfile.TemporaryDirectory() as tmp:
        Experiment(_config(1, 1, 1), Path(tmp) / "warm", chat_model=model).run()
        figures: dict[str, float] = {}
        for parallel in (1, 8):
            cfg = _config(parallel, episodes, max_steps)
            start = time.perf_counter()
            result = Experiment(cfg, Path(tmp) / f"p{parallel}", chat_model=model).run()
            elapsed = time.perf_counter() - start
            assert result.episodes_run == episodes
            figures[f"episodes_per_min_parallel_{parallel}"] = episodes / elapsed * 60
            figures[f"seconds_parallel_{parallel}"] = elapsed
    figures["speedup_8_vs_1"] = figures["episodes_per_min_parallel_8"] / figures["episodes_per_min_parallel_1"]
    print(f"parallel episodes ({episodes} episodes of {max_steps} steps, 2 agents, protocol none, {label})")
    for p in (1, 8):
        print(f"  run.parallel={p}: {figures[f'episodes_per_min_parallel_{p}']:.2f} episodes/min "
              f"({figures[f'seconds_parallel_{p}']:.1f} s)")
    print(f"  speedup 8 vs 1: {figures['speedup_8_vs_1']:.2f}x  (target >= 2.5x)")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=4)
    a = ap.parse_args()
    main(a.episodes, a.max_steps)
