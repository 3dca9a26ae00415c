"""marlang's side of benchmarks/peers.py: a MAGRPO or GRPO run (``run_experiment``) in a
process of its own, so that its peak RSS is its own.

Run: ``python marlang_runner.py SPEC.json OUT.json``; SPEC holds the run's config, the problem
seeds each step must train on (checked against the run's plan), the torch threads and the run
directory; OUT gets each step's seconds, generated tokens and profile (sampling, the sandbox's
verdicts, the rest: forward/backward, optimizer, saving), the steps' rewards and the peak memory.
"""

from __future__ import annotations

import functools
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

import marlang.methods.magrpo.learner as magrpo_learner
from marlang.config import build_config
from marlang.run import run_experiment


class Profile:
    """Each update's seconds, split into sampling, judging and the rest, and what it sampled.
    The learner module's ``sample_local`` and ``judge`` are wrapped for the measurement only."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.plans: list[list[int]] = []
        self._step()

    def _step(self) -> None:
        self.generation = self.reward = 0.0
        self.tokens = 0
        self.rewards: list[float] = []

    def install(self) -> None:
        sample, judge = magrpo_learner.sample_local, magrpo_learner.judge
        update = magrpo_learner.MAGRPOLearner.update_from_plan

        @functools.wraps(sample)
        def timed_sample(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = sample(*args, **kwargs)
            self.generation += time.perf_counter() - start
            self.tokens += sum(len(c.token_ids) for group in out for c in group)
            return out

        @functools.wraps(judge)
        def timed_judge(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            node = judge(*args, **kwargs)
            self.reward += time.perf_counter() - start
            self.rewards.append(float(node.reward))
            return node

        @functools.wraps(update)
        async def timed_update(learner: Any, state: Any, plan: Any) -> Any:
            self._step()
            self.plans.append(list(plan.seeds))
            start = time.perf_counter()
            out = await update(learner, state, plan)
            self.rows.append({"seconds": time.perf_counter() - start, "tokens": self.tokens,
                              "generation_s": self.generation, "reward_s": self.reward, "rewards": self.rewards})
            return out

        magrpo_learner.sample_local = timed_sample  # type: ignore[assignment]
        magrpo_learner.judge = timed_judge  # type: ignore[assignment]
        magrpo_learner.MAGRPOLearner.update_from_plan = timed_update  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    torch.set_num_threads(spec["threads"])
    profile = Profile()
    profile.install()
    began = time.perf_counter()
    run_experiment(build_config(spec["config"]), spec["out_dir"])
    if profile.plans != spec["steps"]:
        raise RuntimeError(f"marlang trained on problem seeds {profile.plans}, the peer on {spec['steps']}")
    gpu = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    Path(argv[1]).write_text(json.dumps({
        "steps": profile.rows, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_gpu_bytes": gpu, "total_s": time.perf_counter() - began}))


if __name__ == "__main__":
    main(sys.argv[1:])
