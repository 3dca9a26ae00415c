"""The run's own cost per episode, early and late in a long run: a 2,000-episode run of the
``none`` learner on a scripted chat model (no model time), one-step BabyAI episodes.

What is left per episode is the run's bookkeeping: writing the episode and its calls,
indexing them, the commit of each iteration. It must not grow with the run: the mean time of
the last 200 episodes over that of the first 200 (target: at most 1.2).

    python benchmarks/bench_run_overhead.py [--episodes 2000] [--parallel 1] [--window 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from marlang.config import build_config
from marlang.testing import ScriptedChatModel

try:
    from marlang.run import Experiment
except ImportError:  # a checkout from before marlang.run, to compare with
    from marlang.run import Experiment


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--parallel", type=int, default=1, help="run.parallel (K episodes per iteration)")
    parser.add_argument("--window", type=int, default=200, help="episodes averaged at each end")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: a temporary one)")
    args = parser.parse_args(argv)

    config = build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 1},
        "agents": {"chain_of_thought": False, "reprompt": False},
        "model": {"cache": False},
        "protocol": {"name": "none"},
        "learning": {"method": "none"},
        "run": {"name": "overhead", "episodes": args.episodes, "parallel": args.parallel,
                "progress": False},
    })
    finished: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "run"
        started = time.perf_counter()
        Experiment(config, out, chat_model=ScriptedChatModel(replies=["Action: go forward"]),
                   on_episode=lambda _: finished.append(time.perf_counter())).run()
        total = time.perf_counter() - started
    gaps = [b - a for a, b in zip([started, *finished], finished)]
    w = min(args.window, len(gaps) // 2)
    first, last = sum(gaps[:w]) / w, sum(gaps[-w:]) / w
    print(f"{len(finished)} episodes in {total:.1f} s (run.parallel {args.parallel})")
    print(f"per-episode overhead, first {w}: {1000 * first:.2f} ms")
    print(f"per-episode overhead, last {w}:  {1000 * last:.2f} ms")
    print(f"ratio last/first: {last / first:.2f}x (target <= 1.2x)")
    return {"episodes": len(finished), "seconds": total, "first_ms": 1000 * first, "last_ms": 1000 * last,
            "ratio": last / first}


if __name__ == "__main__":
    main()
