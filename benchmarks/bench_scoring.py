"""Benchmark: milliseconds per action decision for the action scorers on the embedded model.

Scores the 6 BabyAI actions after a ~250-token BabyAI-Text prompt with KV-cache reuse and
the two plain alternatives, next to the floor (one forward pass over the prompt alone).
Run: ``python benchmarks/bench_scoring.py``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from marlang.models import (
    KVReuseScorer,
    LocalLM,
    PerCandidateScorer,
    RepeatedPromptScorer,
    load_local_engine,
)

logger = logging.getLogger(__name__)

ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]

SYSTEM_TEXT = (
    "You are agent_0, one of two agents exploring a grid world together. Each step you "
    "receive a description of what you can see and must choose exactly one action. "
    "Rooms are separated by walls and locked doors; a key opens the door of its own "
    "colour. You can only carry one object at a time, and you can only pick up an object "
    "that is right in front of you."
)
OBSERVATION = [
    "You see a wall 3 steps forward.",
    "You see a wall 2 steps left.",
    "You see a red key 1 step right and 2 steps forward.",
    "You see a blue ball 2 steps left and 1 step forward.",
    "You see a closed yellow door 1 step right and 3 steps forward.",
    "You see a grey box 2 steps right.",
    "You see agent_1 1 step left and 2 steps forward.",
    "You carry nothing.",
]
MISSION = "pick up the red key, then open the yellow door"


def decision_prompt(engine: LocalLM) -> str:
    """A BabyAI-Text decision prompt in the model's chat format, ending where the action goes."""
    user = "\n".join(
        [
            f"Mission: {MISSION}.",
            "Your teammate said: I will look for the box in the next room.",
            "Last action: turn right.",
            *OBSERVATION,
            "Possible actions: " + ", ".join(ACTIONS) + ".",
            "Answer with the action only.",
        ]
    )
    return engine.format_chat(
        [{"role": "system", "content": SYSTEM_TEXT}, {"role": "user", "content": user}]
    )


def measure(
    methods: dict[str, Callable[[], object]], *, repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Milliseconds per call of each method, over ``repeats`` interleaved rounds.

    Rounds run every method once, so a slow spell on a shared machine hits all methods
    alike instead of skewing one of them.
    """
    for _ in range(warmup):
        for run in methods.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, run in methods.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000.0)
    return times


def main(repeats: int = 7, warmup: int = 2, engine: LocalLM | None = None) -> dict[str, Any]:
    """Measure and print; return median ms per decision for each method and the ratios."""
    engine = engine if engine is not None else load_local_engine("local:smollm2")
    model, tokenizer = engine.model, engine.tokenizer
    prompt = decision_prompt(engine)
    prompt_ids = torch.tensor([engine.encode(prompt)], device=engine.device)
    kv = KVReuseScorer(model, tokenizer)
    kv_batched = KVReuseScorer(model, tokenizer, layout="batched")
    per_candidate = PerCandidateScorer(model, tokenizer)
    repeated = RepeatedPromptScorer(model, tokenizer)

    with torch.inference_mode():
        expected = per_candidate.score(prompt, ACTIONS)
        max_diff = max(
            abs(a - b)
            for scorer in (kv, kv_batched)
            for a, b in zip(scorer.score(prompt, ACTIONS), expected, strict=True)
        )
        times = measure(
            {
                "floor_ms": lambda: model(input_ids=prompt_ids, logits_to_keep=1),
                "kv_reuse_ms": lambda: kv.score(prompt, ACTIONS),
                "kv_reuse_batched_ms": lambda: kv_batched.score(prompt, ACTIONS),
                "per_candidate_ms": lambda: per_candidate.score(prompt, ACTIONS),
                "repeated_prompt_ms": lambda: repeated.score(prompt, ACTIONS),
            },
            repeats=repeats,
            warmup=warmup,
        )
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    spread = max(max(ts) / min(ts) for ts in times.values())
    if spread > 1.5:
        logger.warning(
            "Timings varied up to %.1fx between rounds (a busy machine?); medians may be off",
            spread,
        )
    results: dict[str, Any] = {
        "model": engine.model_id,
        "prompt_tokens": int(prompt_ids.shape[1]),
        "candidates": len(ACTIONS),
        "kv_layout": kv.layout,
        "torch_threads": torch.get_num_threads(),
        **{name: round(ms, 2) for name, ms in medians.items()},
        "repeated_over_kv": round(medians["repeated_prompt_ms"] / medians["kv_reuse_ms"], 2),
        "per_candidate_over_kv": round(medians["per_candidate_ms"] / medians["kv_reuse_ms"], 2),
        "kv_over_floor": round(medians["kv_reuse_ms"] / medians["floor_ms"], 3),
        "kv_batched_over_floor": round(medians["kv_reuse_batched_ms"] / medians["floor_ms"], 3),
        "max_abs_diff_vs_per_candidate": max_diff,
        "max_round_spread": round(spread, 2),
    }
    results.update(_batched_decisions(engine, prompt, repeats=max(3, repeats // 2)))
    _print_report(results)
    return results


def _batched_decisions(engine: LocalLM, prompt: str, *, repeats: int, n: int = 8) -> dict[str, Any]:
    """n decisions (n agents or episodes acting at once): one at a time vs one scoring batch.

    The prompts differ in their last line, as the observations of concurrent agents do.
    """
    prompts = [prompt.replace("Last action: turn right.", f"Last action: step {i}.") for i in range(n)]
    items = [(p, ACTIONS) for p in prompts]
    times = measure(
        {
            "sequential_ms": lambda: [engine.score(p, ACTIONS) for p in prompts],
            "batched_ms": lambda: engine.score_batch(items),
        },
        repeats=repeats,
        warmup=1,
    )
    seq, bat = (statistics.median(times[k]) for k in ("sequential_ms", "batched_ms"))
    return {
        "batch_n": n,
        "batch_sequential_ms": round(seq, 1),
        "batch_batched_ms": round(bat, 1),
        "batch_speedup": round(seq / bat, 2),
    }


def _print_report(r: dict[str, Any]) -> None:
    print(
        f"Action scoring on {r['model']}: {r['prompt_tokens']}-token prompt, "
        f"{r['candidates']} candidates, {r['torch_threads']} torch threads (median ms/decision)"
    )
    rows = [
        ("floor: one forward over the prompt alone", r["floor_ms"]),
        (f"KV reuse (KVReuseScorer, {r['kv_layout']} layout)", r["kv_reuse_ms"]),
        ("KV reuse, batched layout (cache per candidate)", r["kv_reuse_batched_ms"]),
        ("(a) one forward per candidate", r["per_candidate_ms"]),
        ("(b) one batch, prompt repeated per candidate", r["repeated_prompt_ms"]),
    ]
    for name, ms in rows:
        print(f"  {name:<50} {ms:9.1f} ms")
    print(f"  (b) / KV reuse              {r['repeated_over_kv']:7.2f}x   (target >= 4)")
    print(f"  (a) / KV reuse              {r['per_candidate_over_kv']:7.2f}x")
    print(f"  KV reuse / floor            {r['kv_over_floor']:7.3f}x   (target <= 1.25)")
    print(f"  KV reuse batched / floor    {r['kv_batched_over_floor']:7.3f}x")
    print(f"  max |KV - (a)| log-prob     {r['max_abs_diff_vs_per_candidate']:.1e}")
    print(
        f"  {r['batch_n']} decisions at once: one at a time {r['batch_sequential_ms']:.0f} ms, "
        f"one scoring batch (LocalLM.score_batch) {r['batch_batched_ms']:.0f} ms: "
        f"{r['batch_speedup']:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    main(repeats=args.repeats, warmup=args.warmup)
