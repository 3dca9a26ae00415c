"""Benchmark: LCA's LLM ranker on the embedded model, answering by scoring "Yes" against "No"
(one forward per query, always an answer) vs by generating a reply and parsing its yes/no.

Both rank the same Two-Switch state pairs (each agent's ego view before and after a random
step), with the same prompts, no response cache, side by side in one run. Then LLM-MCA critic
calls on LBF timesteps, decoded under the credit schema (llguidance) and unconstrained. Then
LCA's reward hook against the IPPO update it feeds, on 6000-frame Two-Switch batches (the
``hook_seconds`` and ``update_seconds`` of ``iterations.csv``): BT rewards alone, with every
timestep recorded, and with 256 pairs ranked (heuristic) and the scoring models trained.
Run: ``python benchmarks/bench_credit.py``; ``main()`` returns the figures as a dict.

``--accuracy N`` measures instead the embedded model's LCA rankings against each env's
heuristic on N held-out pairs of random play (pairs the heuristic does not tie), with the
prompts a run with ``learning.ranker: llm`` uses (task dependence where the agents differ):
``python benchmarks/bench_credit.py --accuracy 200``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marlang.envs import make
from marlang.methods.neural.critics.lca import default_groups, ranker_prompts
from marlang.methods.neural.critics.rankers import LLMRanker, random_queries
from marlang.models import LocalLM, load_chat_model
from marlang.prompts import PromptLibrary


def main(pairs: int = 32, max_tokens: int = 64, engine: LocalLM | None = None, *, mca_steps: int = 12,
         mca_calls_per_mode: int = 2, mca_max_tokens: int = 768, hook_batches: int = 3,
         hook_frames: int = 6000) -> dict[str, Any]:
    engine = engine or LocalLM.from_spec("local:smollm2")
    out = ranking_speed(engine, pairs, max_tokens)
    out.update(mca_calls(engine, steps=mca_steps, calls=mca_calls_per_mode, max_tokens=mca_max_tokens))
    out.update(hook_overhead(batches=hook_batches, frames_per_batch=hook_frames))
    _print_report(out)
    return out


def ranking_speed(engine: LocalLM, pairs: int = 32, max_tokens: int = 64) -> dict[str, Any]:
    """LCA ranking of ``pairs`` Two-Switch pairs on ``engine``: pairs per second scoring "Yes"
    against "No", and generating (up to ``max_tokens``) then parsing; ``speedup`` is their ratio."""
    preamble, question, _ = ranking_prompts("gridworld/two-switch")
    queries = random_queries(make("gridworld/two-switch", observation_mode="text"), pairs, texts=True)[:pairs]

    def ranker(scores: bool) -> LLMRanker:
        model = load_chat_model(engine.model_id, engine=engine, cache=None, temperature=0.0, max_tokens=max_tokens)
        r = LLMRanker(model, preamble=preamble, question=question, max_tokens=max_tokens, max_concurrency=pairs)
        r.scores = scores  # False: generate and parse, as with a backend that cannot score
        return r

    ranker(True).rank(queries[:2], 1)  # warm-up
    out: dict[str, Any] = {"model": engine.model_id, "pairs": pairs, "max_tokens": max_tokens}
    for name, scores in (("scoring", True), ("generating", False)):
        r = ranker(scores)
        start = time.perf_counter()
        answers = r.rank(queries, 1)
        seconds = time.perf_counter() - start
        out[f"{name}_pairs_per_s"] = round(pairs / seconds, 2)
        out[f"{name}_unparseable"] = sum(a[0] is None for a in answers)
        out[f"{name}_yes_share"] = round(sum(a[0] == 1 for a in answers) / pairs, 3)
    out["speedup"] = round(out["scoring_pairs_per_s"] / out["generating_pairs_per_s"], 2)
    return out


HOOK_CASES = {
    "rewards": {"critic_every": 1000, "record_timesteps": False},
    "rewards_recorded": {"critic_every": 1000, "record_timesteps": True},
    "ranked_every_batch": {"critic_every": 1, "record_timesteps": True},
}
"""LCA hook settings measured: BT rewards only (ranking at the first batch alone, which is left
out), the same with every timestep written to credit/timesteps.jsonl, and ranking every batch."""


def hook_overhead(batches: int = 3, frames_per_batch: int = 6000) -> dict[str, Any]:
    """Median over batches of LCA's hook time against the IPPO update's time, each case a
    short Two-Switch run with the paper's PPO settings (4 epochs of 128-frame minibatches)."""
    import statistics
    import tempfile

    from marlang.config import build_config
    from marlang.run import run_experiment as train

    out: dict[str, Any] = {"hook_frames_per_batch": frames_per_batch}
    for case, keys in HOOK_CASES.items():
        config = build_config({
            "env": {"id": "gridworld/two-switch"}, "agents": {"kind": "neural"},
            "learning": {"method": "ippo", "frames": batches * frames_per_batch, "frames_per_batch": frames_per_batch,
                         "n_envs": 8, "lr": 0.0028, "hidden": [64, 64], "epochs": 4, "minibatch_size": 128,
                         "evaluation_episodes": 1, "critic": "lca", "ranker": "heuristic", "ranker_pairs": 256,
                         **keys}})
        with tempfile.TemporaryDirectory() as tmp:
            rows = train(config, Path(tmp) / "run").summary["iterations"]
        # The first batch also ranks and trains the scoring models from nothing: left out where
        # the case ranks only then.
        measured = rows[1:] if keys["critic_every"] > 1 else rows
        hook = statistics.median(r["hook_seconds"] for r in measured)
        update = statistics.median(r["update_seconds"] for r in measured)
        out[f"hook_{case}_s"] = round(hook, 3)
        out[f"hook_{case}_update_s"] = round(update, 3)
        out[f"hook_{case}_share"] = round(hook / update, 4)
    return out


def ranking_prompts(env_id: str) -> tuple[str, Any, str]:
    """The prompts a run of ``env_id`` with ``learning.ranker: llm`` asks with (seed 0)."""
    groups = default_groups(make(env_id, observation_mode="numeric"))
    return ranker_prompts(PromptLibrary(), make(env_id), make(env_id), groups)


ACCURACY_ENVS = ("gridworld/two-switch", "gridworld/victim-rubble", "pistonball/n5-sparse")


def ranker_accuracy(env_id: str, pairs: int = 200, engine: LocalLM | None = None) -> dict[str, Any]:
    """The embedded model's LCA ranker (one query per pair, scored) against ``env_id``'s
    heuristic on ``pairs`` held-out steps of random play where the heuristic does not tie."""
    from marlang.methods.neural.critics.rankers import HeuristicRanker

    engine = engine or LocalLM.from_spec("local:smollm2")
    env = make(env_id)
    preamble, question, dependence = ranking_prompts(env_id)
    queries = random_queries(make(env_id, observation_mode="text"), 2 * pairs, seed=123, texts=True)
    truth = HeuristicRanker(env).rank(queries, 1)
    decided = [(q, t[0]) for q, t in zip(queries, truth, strict=True) if t[0] != 0][:pairs]
    model = load_chat_model(engine.model_id, engine=engine, cache=None, temperature=0.0)
    ranker = LLMRanker(model, preamble=preamble, question=question, max_concurrency=32)
    start = time.perf_counter()
    answers = ranker.rank([q for q, _ in decided], 1)
    n = len(decided)
    return {"env": env_id, "prompt": dependence, "pairs": n,
            "accuracy": round(sum(a[0] == t for (_, t), a in zip(decided, answers, strict=True)) / n, 3),
            "yes_share": round(sum(a[0] == 1 for a in answers) / n, 3),
            "heuristic_better_share": round(sum(t == 1 for _, t in decided) / n, 3),
            "seconds": round(time.perf_counter() - start)}


def mca_calls(engine: LocalLM, steps: int = 12, calls: int = 2, max_tokens: int = 768) -> dict[str, Any]:
    """LLM-MCA critic calls on LBF 8x8 timesteps (random play), the reply constrained to the
    credit schema (``model.structured: auto``) against unconstrained with the JSON prefill
    (``none``): seconds per call and credits missed."""
    import tempfile

    import numpy as np

    from marlang.config import build_config
    from marlang.methods.neural.critics.llm_mca import Chunk, LLMCreditCritic
    from marlang.methods.neural.critics.mca_parsing import parse_step_credits
    from marlang.models.structured import StructuredReplies

    config = build_config({"env": {"id": "lbf/8x8-2p-2f-coop"}, "agents": {"kind": "neural"},
                           "learning": {"method": "mappo", "critic": "llm_mca", "critic_max_tokens": max_tokens}})
    env = make("lbf/8x8-2p-2f-coop")
    rng = np.random.default_rng(0)
    chunks = []
    for c in range(calls):
        env.reset(seed=c)
        lines = ["Episode 0:"]
        for t in range(steps):
            acts = {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
            state = env.state_text()
            rewards = env.step(acts)[1]
            words = ", ".join(f"{a}: {env.action_names(a)[i]}" for a, i in acts.items())
            lines.append(f"t{t + 1}: {state} | {words} | team reward {sum(rewards.values()) / len(rewards):g}")
        chunks.append(Chunk(list(range(steps)), lines))
    out: dict[str, Any] = {"mca_steps_per_call": steps, "mca_calls": calls}
    for mode in ("auto", "none"):
        model = load_chat_model(engine.model_id, engine=engine, cache=None, temperature=0.0)
        with tempfile.TemporaryDirectory() as tmp:
            critic = LLMCreditCritic(make("lbf/8x8-2p-2f-coop"), model, PromptLibrary(), tmp,
                                     options=config.learning.options, seed=0, capacity=8, usage=None,
                                     structured=StructuredReplies(mode, model))
            start = time.perf_counter()
            replies = critic.ask(chunks, 0)
            seconds = time.perf_counter() - start
        labels = chunks[0].labels
        missed = sum(2 - len(parse_step_credits(r, labels, ["agent_0", "agent_1"])
                             .get(label, {"credits": {}})["credits"])
                     for r in replies for label in labels)
        out[f"mca_{mode}_s_per_call"] = round(seconds / calls, 1)
        out[f"mca_{mode}_missed"] = missed
    return out


def _print_report(r: dict[str, Any]) -> None:
    print(f"LCA ranking on {r['model']}: {r['pairs']} Two-Switch state pairs, one query each "
          f"(generation up to {r['max_tokens']} tokens), no cache, concurrent calls batched")
    for name in ("scoring", "generating"):
        print(f"  {name:<11} {r[f'{name}_pairs_per_s']:8.2f} pairs/s   unparseable {r[f'{name}_unparseable']:3d}"
              f"   'yes' {r[f'{name}_yes_share']:.0%}")
    print(f"  scoring / generating   {r['speedup']:6.2f}x   (target >= 3, 0 unparseable)")
    n = r["mca_steps_per_call"] * r["mca_calls"] * 2
    print(f"LLM-MCA critic on {r['model']}: {r['mca_calls']} calls of {r['mca_steps_per_call']} LBF timesteps, greedy")
    print(f"  constrained to the schema (auto)   {r['mca_auto_s_per_call']:6.1f} s/call   "
          f"credits missed {r['mca_auto_missed']} of {n}")
    print(f"  free, JSON prefill (none)          {r['mca_none_s_per_call']:6.1f} s/call   "
          f"credits missed {r['mca_none_missed']} of {n}")
    print(f"LCA reward hook vs the IPPO update, {r['hook_frames_per_batch']}-frame Two-Switch batches (median)")
    for case, what in (("rewards", "BT rewards sigma(o') - sigma(o)"),
                       ("rewards_recorded", "  + every timestep recorded"),
                       ("ranked_every_batch", "  + 256 pairs ranked, models trained")):
        print(f"  {what:<36} {r[f'hook_{case}_s']:7.3f} s   update {r[f'hook_{case}_update_s']:6.2f} s   "
              f"{r[f'hook_{case}_share']:6.1%} of the update" + ("   (target < 5%)" if case == "rewards" else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--accuracy", type=int, metavar="N", default=0,
                        help="measure ranking accuracy against the heuristic on N pairs per env instead")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.accuracy:
        shared = LocalLM.from_spec("local:smollm2")
        for env_id in ACCURACY_ENVS:
            r = ranker_accuracy(env_id, args.accuracy, shared)
            print(f"{r['env']:<24} {r['prompt']:<9} prompt: accuracy {r['accuracy']:.1%} on {r['pairs']} pairs   "
                  f"'yes' {r['yes_share']:.0%}   heuristic 'better' {r['heuristic_better_share']:.0%}   "
                  f"{r['seconds']} s", flush=True)
    else:
        main(pairs=args.pairs, max_tokens=args.max_tokens)
