"""Episodes per minute with run.parallel = 1 and 8 on the embedded model, side by side, and
the floor: the parallel run's model requests sent to the engine alone.

Parallel episodes share the model: their concurrent calls are batched into one padded
generation (and one scoring pass), so 8 episodes at once cost less than 8 one after another.
Batching saves decoding time, which is memory-bound; prompt prefill and action scoring are
compute-bound on a CPU and cost the same batched or not, so prompt-heavy steps bound the
speedup there. The floor replays the parallel run's generation and scoring requests on the
engine in as few batches as it takes (``max_batch_size``), with no episodes, graph or env
around them: parallel / floor is what marlang adds to the model's own work, and sequential
/ floor the most that batching could give on this machine.
Usage: python benchmarks/bench_parallel.py [--episodes 8] [--max-steps 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from marlang.config import build_config
from marlang.models.capabilities import engine_of
from marlang.run import Experiment, build_chat_model


def _config(parallel: int, episodes: int, max_steps: int):
    return build_config({
        "env": {"id": "babyai/pickup", "n_agents": 2, "max_steps": max_steps},
        "model": {"spec": "local:smollm2", "max_tokens": 40, "cache": False},
        "protocol": {"name": "none"},
        "learning": {"method": "none"},
        "run": {"name": f"bench-p{parallel}", "episodes": episodes, "parallel": parallel, "progress": False},
    })


class EngineClock:
    """Times the batches an engine runs (generation and scoring, on its compute thread) and
    keeps the requests they answered; ``stop()`` puts the engine's own methods back."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.seconds = {"generation": 0.0, "scoring": 0.0}
        self.cpu_seconds = 0.0
        """CPU time of the compute thread in those batches (torch runs on it, one thread on a
        small CPU): unlike the wall time, hardly moved by other work on the machine."""
        self.batches = {"generation": 0, "scoring": 0}
        self.requests: dict[str, list[Any]] = {"generation": [], "scoring": []}
        self._own = {"generation": engine._generate_batch, "scoring": engine.score_requests}
        engine._generate_batch = self._timed("generation")
        engine.score_requests = self._timed("scoring")

    def _timed(self, kind: str) -> Any:
        run = self._own[kind]

        def timed(requests: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return run(requests)
            finally:
                self.seconds[kind] += time.perf_counter() - start
                self.cpu_seconds += time.thread_time() - cpu
                self.batches[kind] += 1
                self.requests[kind].extend(requests)

        return timed

    def stop(self) -> None:
        for name in ("_generate_batch", "score_requests"):
            vars(self.engine).pop(name, None)

    @property
    def busy(self) -> float:
        return sum(self.seconds.values())


def _floor(engine: Any, requests: dict[str, list[Any]]) -> dict[str, float]:
    """Seconds the engine alone takes for the same requests, batched as fully as it allows."""
    out = {}
    cpu = time.thread_time()
    start = time.perf_counter()
    if requests["generation"]:
        engine.generate(requests["generation"])
    out["generation"] = time.perf_counter() - start
    start = time.perf_counter()
    if requests["scoring"]:
        engine.score_requests(requests["scoring"])
    out["scoring"] = time.perf_counter() - start
    out["cpu"] = time.thread_time() - cpu
    return out


def main(episodes: int = 8, max_steps: int = 4, model: Any = None, label: str = "local:smollm2") -> dict[str, float]:
    """Measure and print; ``model`` (a chat model, default the embedded one) plays every episode."""
    if model is None:
        model, _ = build_chat_model(_config(1, episodes, max_steps).model)
    engine = engine_of(model)
    # Warm-up: load weights and run one tiny episode so neither setting pays first-call costs.
    with tempfile.TemporaryDirectory() as tmp:
        Experiment(_config(1, 1, 1), Path(tmp) / "warm", chat_model=model).run()
        figures: dict[str, float] = {}
        clocks: dict[int, EngineClock] = {}
        for parallel in (1, 8):
            cfg = _config(parallel, episodes, max_steps)
            clock = clocks[parallel] = EngineClock(engine) if engine is not None else None
            start = time.perf_counter()
            try:
                result = Experiment(cfg, Path(tmp) / f"p{parallel}", chat_model=model).run()
            finally:
                if clock is not None:
                    clock.stop()
            elapsed = time.perf_counter() - start
            assert result.episodes_run == episodes
            figures[f"episodes_per_min_parallel_{parallel}"] = episodes / elapsed * 60
            figures[f"seconds_parallel_{parallel}"] = elapsed
            if clock is not None:
                figures[f"engine_seconds_parallel_{parallel}"] = clock.busy
    figures["speedup_8_vs_1"] = figures["episodes_per_min_parallel_8"] / figures["episodes_per_min_parallel_1"]
    floor = _floor(engine, clocks[8].requests) if engine is not None else None
    print(f"parallel episodes ({episodes} episodes of {max_steps} steps, 2 agents, protocol none, {label})")
    for p in (1, 8):
        line = (f"  run.parallel={p}: {figures[f'episodes_per_min_parallel_{p}']:.2f} episodes/min "
                f"({figures[f'seconds_parallel_{p}']:.1f} s")
        if engine is not None:
            c = clocks[p]
            line += (f"; engine {c.seconds['generation']:.1f} s generating in {c.batches['generation']} "
                     f"batches, {c.seconds['scoring']:.1f} s scoring in {c.batches['scoring']}; "
                     f"{figures[f'seconds_parallel_{p}'] - c.busy:.1f} s outside the engine")
        print(line + ")")
    if floor is not None:
        figures["seconds_floor"] = floor["generation"] + floor["scoring"]
        figures["parallel_vs_floor"] = figures["seconds_parallel_8"] / figures["seconds_floor"]
        figures["sequential_vs_floor"] = figures["seconds_parallel_1"] / figures["seconds_floor"]
        n = {k: len(v) for k, v in clocks[8].requests.items()}
        print(f"  floor, the parallel run's {n['generation']} generation and {n['scoring']} scoring requests "
              f"on the engine alone in batches of up to {engine.max_batch_size}: {figures['seconds_floor']:.1f} s "
              f"({floor['generation']:.1f} s generating, {floor['scoring']:.1f} s scoring)")
        figures["engine_cpu_parallel_vs_floor"] = clocks[8].cpu_seconds / floor["cpu"]
        print(f"  CPU time of the engine's thread: {clocks[8].cpu_seconds:.1f} s in the parallel run, "
              f"{floor['cpu']:.1f} s in the floor ({figures['engine_cpu_parallel_vs_floor']:.2f}x; "
              "the wall times move with the machine's other work)")
    print(f"  speedup 8 vs 1: {figures['speedup_8_vs_1']:.2f}x  (target >= 2.5x)")
    if floor is not None:
        print(f"  time of run.parallel=8 / floor: {figures['parallel_vs_floor']:.2f}x (what marlang adds); "
              f"run.parallel=1 / floor: {figures['sequential_vs_floor']:.2f}x (the most batching gives here)")
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=4)
    a = ap.parse_args()
    main(a.episodes, a.max_steps)
