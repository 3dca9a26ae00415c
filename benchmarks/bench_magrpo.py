"""Benchmark: MAGRPO's sampling and training step on the embedded SmolLM2-135M (fp32, CPU),
against the way the MAGRPO paper's reference code does each.

1. Sampling one turn: N = 2 agents (two LoRA adapters, r 16 on q_proj, v_proj), G = 4
   completions each, after HumanEval prompts in the chat template:
   (a) marlang: all 8 rows in one batched generate with per-row adapters (``LocalLM.generate``,
       PEFT ``adapter_names``), each row with its own seeded sampler;
   (b) the reference's way: one transformers ``generate`` per agent (its adapter active) with
       ``num_return_sequences=G``;
   (c) ``LocalLM.generate`` once per agent: (a)'s decoding loop without the cross-agent batch,
       to tell batching from the decoding loop itself.
   Every row decodes exactly ``new_tokens`` tokens (EOS ignored), so all three produce the
   same number of tokens.
2. One training step of one agent: 8 completions (2 prompts x G = 4, 48-128 tokens) after
   ~300-token prompts, the reinforce loss (sum of token log-probs x advantage), forward and
   backward through the agent's adapter:
   (a) marlang: micro-batches of 4 with each shared prompt run once and its completions packed
       after it (``shared_prompt_logprobs``);
   (b) the reference's way: one forward (and backward) per completion, prompt repeated;
   (c) micro-batches of 4 as plain padded prompt + completion rows (TRL's layout,
       ``completion_logprobs``): batching without sharing the prompt.
3. One decoding step's token choice for 8 sampled rows (temperature 1, top_p 0.9 on half of
   them, each row its own seeded generator) over a vocabulary of 49,152 (SmolLM2) and 151,936
   (Qwen2) entries: (a) the batch in one ``choose_tokens`` call (what the engine does), (b) one
   ``sample_token`` per row, each read back to the host (the engine's former per-row draw,
   which drew the same tokens). On a GPU each per-row read back is a synchronisation.

Times are medians over rounds that run every variant once, in alternating order; with 2 torch
threads on a 2-core machine, read the ratios from a run whose load averages stay near 2.
Run: ``python benchmarks/bench_magrpo.py [--quick]``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from bench_ppo import measure

from marlang.envs.tasks.data import load_task
from marlang.methods.lora.team import LoraOptions, TeamAdapters
from marlang.methods.magrpo.grpo_loss import (
    completion_logprobs,
    pack_completions,
    policy_loss,
    shared_prompt_logprobs,
)
from marlang.models import LocalLM
from marlang.models.generation import choose_tokens, sample_token
from marlang.models.local_engine import GenerationRequest, SamplingParams

THREADS = 2
AGENTS = ("agent_0", "agent_1")
G = 4


def magrpo_team(engine: LocalLM) -> TeamAdapters:
    team = TeamAdapters(engine.model, list(AGENTS), base_id="smollm2",
                        lora=LoraOptions(r=16, alpha=32, targets=["q_proj", "v_proj"], dropout=0.0),
                        value_head=None, seed=0)
    gen = torch.Generator().manual_seed(0)
    for agent in AGENTS:  # LoRA B starts at zero: give each agent its own policy
        for p in team.parameters_of(agent):
            p.data.add_((torch.randn(p.shape, generator=gen) * 0.01).to(p.device, p.dtype))
    engine.attach_adapters(team)
    return team


def _prompts(engine: LocalLM, n: int) -> list[tuple[int, ...]]:
    problems = load_task("humaneval", "test[:8]")
    out = []
    for agent, problem in zip(range(n), problems[2:], strict=False):
        role = "a helper function" if agent == 0 else "the main function"
        messages = [{"role": "system", "content": f"You are a Python programmer writing {role} for your team."},
                    {"role": "user", "content": f"Complete this function:\n{problem.prompt}"}]
        out.append(engine.encode(engine.format_chat(messages)))
    return out


def sampling_times(engine: LocalLM, team: TeamAdapters, new_tokens: int, *, repeats: int, warmup: int
                   ) -> dict[str, Any]:
    prompts = _prompts(engine, len(AGENTS))
    pad = engine.pad_id

    def requests(agents: tuple[str, ...]) -> list[GenerationRequest]:
        # ignore_eos: every row decodes new_tokens tokens
        return [GenerationRequest(prompts[AGENTS.index(a)], SamplingParams(temperature=1.0, max_tokens=new_tokens,
                                                                           seed=k * 10 + g, ignore_eos=True),
                                  adapter=a)
                for k, a in enumerate(agents) for g in range(G)]

    counts: dict[str, int] = {}

    def batched() -> None:
        outs = engine.generate(requests(AGENTS))
        counts["batched"] = sum(len(o.token_ids) for o in outs)

    def per_agent_hf() -> None:
        total = 0
        with torch.inference_mode():
            for agent in AGENTS:
                team.model.set_adapter(team.adapter_for(agent))
                ids = torch.tensor([prompts[AGENTS.index(agent)]], device=engine.device)
                out = team.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                          temperature=1.0, top_p=1.0, top_k=0, num_return_sequences=G,
                                          max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=pad)
                total += int(out[:, ids.size(1):].numel())
        counts["per_agent_generate"] = total

    def per_agent_engine() -> None:
        counts["per_agent_engine"] = sum(len(o.token_ids) for a in AGENTS for o in engine.generate(requests((a,))))

    team.model.eval()
    times = measure({"batched": batched, "per_agent_generate": per_agent_hf,
                     "per_agent_engine": per_agent_engine}, repeats=repeats, warmup=warmup)
    if len(set(counts.values())) != 1:
        raise RuntimeError(f"the variants decoded different token counts: {counts}")
    out: dict[str, Any] = {"sampling_tokens": counts["batched"],
                           "sampling_prompt_tokens": [len(p) for p in prompts]}
    for name, ts in times.items():
        out[f"sampling_{name}_ms"] = statistics.median(ts)
    out["sampling_speedup_vs_generate"] = out["sampling_per_agent_generate_ms"] / out["sampling_batched_ms"]
    out["sampling_speedup_vs_engine_per_agent"] = out["sampling_per_agent_engine_ms"] / out["sampling_batched_ms"]
    return out


def training_times(engine: LocalLM, team: TeamAdapters, *, repeats: int, warmup: int) -> dict[str, Any]:
    rng = random.Random(0)
    base = _prompts(engine, 2)
    # ~300-token prompts: the problem after a page of earlier-turn feedback
    filler = engine.encode(" ".join(["The previous answer failed test 2: expected 3, got 4."] * 24))
    prompts = [tuple(filler) + p for p in base]
    vocab = len(engine.tokenizer)
    items = [(prompts[i // G], tuple(rng.randrange(100, vocab) for _ in range(rng.randint(48, 128))))
             for i in range(2 * G)]
    adv = torch.tensor([rng.uniform(-1, 1) for _ in items])
    pad = engine.pad_id
    agent = AGENTS[0]
    micro = 4

    def step(logprobs: Callable[[list[tuple[Any, Any]]], tuple[torch.Tensor, torch.Tensor]], size: int) -> None:
        with team.training(agent):
            for start in range(0, len(items), size):
                part = items[start:start + size]
                lp, mask = logprobs(part)
                loss = policy_loss(lp, mask.to(lp.device), adv[start:start + size].to(lp.device)) * (
                    len(part) / len(items))
                loss.backward()
        for p in team.parameters_of(agent):
            p.grad = None

    def shared(part: list[tuple[Any, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        return shared_prompt_logprobs(team.model, [p for p, _ in part], [c for _, c in part], pad)

    def padded(part: list[tuple[Any, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        batch = pack_completions([p for p, _ in part], [c for _, c in part], pad)
        return completion_logprobs(team.model, batch), batch["completion_mask"]

    times = measure({"shared_prompt": lambda: step(shared, micro),
                     "per_completion": lambda: step(padded, 1),
                     "padded_batch": lambda: step(padded, micro)}, repeats=repeats, warmup=warmup)
    out: dict[str, Any] = {"training_completions": len(items),
                           "training_prompt_tokens": [len(p) for p in prompts],
                           "training_completion_tokens": sum(len(c) for _, c in items)}
    for name, ts in times.items():
        out[f"training_{name}_ms"] = statistics.median(ts)
    out["training_speedup_vs_per_completion"] = out["training_per_completion_ms"] / out["training_shared_prompt_ms"]
    out["training_speedup_vs_padded_batch"] = out["training_padded_batch_ms"] / out["training_shared_prompt_ms"]
    return out


def token_choice_times(repeats: int, rows: int = 8, vocabularies: tuple[int, ...] = (49152, 151936),
                       device: str = "cpu") -> dict[str, Any]:
    """Part 3: one step's token choice for ``rows`` sampled rows, batched against per row."""
    out: dict[str, Any] = {"choice_rows": rows}
    for vocab in vocabularies:
        logits = torch.randn(rows, vocab, device=device) * 3
        samplings = [SamplingParams(temperature=1.0, top_p=0.9 if i % 2 else 1.0, seed=i) for i in range(rows)]
        generators = [torch.Generator(device=device).manual_seed(i) for i in range(rows)]

        def batched(logits: torch.Tensor = logits, samplings: list[SamplingParams] = samplings,
                    generators: list[torch.Generator] = generators) -> None:
            choose_tokens(logits.clone(), samplings, generators).tolist()

        def per_row(logits: torch.Tensor = logits, samplings: list[SamplingParams] = samplings,
                    generators: list[torch.Generator] = generators) -> None:
            [sample_token(logits[i], samplings[i], generators[i]) for i in range(rows)]

        times = measure({"batched": batched, "per_row": per_row}, repeats=repeats, warmup=1)
        out[f"choice_batched_ms_{vocab}"] = statistics.median(times["batched"])
        out[f"choice_per_row_ms_{vocab}"] = statistics.median(times["per_row"])
        out[f"choice_speedup_{vocab}"] = out[f"choice_per_row_ms_{vocab}"] / out[f"choice_batched_ms_{vocab}"]
    return out


def main(new_tokens: int = 64, repeats: int = 3, warmup: int = 1, threads: int = THREADS,
         engine: LocalLM | None = None, choice_vocabularies: tuple[int, ...] = (49152, 151936)) -> dict[str, Any]:
    """Measure and print; return the figures (ms medians and ratios). ``engine``: the model
    (default the embedded SmolLM2-135M); the smoke size passes a tiny one."""
    warnings.filterwarnings("ignore", message=".*generation flags are not valid.*")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    load_before = os.getloadavg()[0]
    engine = engine if engine is not None else LocalLM.from_spec("local:smollm2", device="cpu")
    team = magrpo_team(engine)
    results: dict[str, Any] = {"model": f"{engine.model_id} (fp32, CPU)", "torch_threads": torch.get_num_threads(),
                               "agents": len(AGENTS), "num_generations": G, "new_tokens": new_tokens,
                               "repeats": repeats}
    results.update(sampling_times(engine, team, new_tokens, repeats=repeats, warmup=warmup))
    results.update(training_times(engine, team, repeats=repeats, warmup=warmup))
    results.update(token_choice_times(repeats=max(5, 5 * repeats), vocabularies=choice_vocabularies))
    results["load_average"] = (load_before, os.getloadavg()[0])
    _print_report(results)
    return results


def _print_report(r: dict[str, Any]) -> None:
    print(f"{r['model']}, {r['torch_threads']} torch threads; N = {r['agents']} agents, G = {r['num_generations']}")
    print(f"1. sampling one turn: {r['sampling_tokens']} tokens ({r['new_tokens']} per row) after prompts of "
          f"{r['sampling_prompt_tokens']} tokens")
    print(f"  (a) one batched generate, per-row adapters        {r['sampling_batched_ms']:8.0f} ms")
    print(f"  (b) one generate per agent, num_return_sequences  {r['sampling_per_agent_generate_ms']:8.0f} ms"
          f"   (a) is {r['sampling_speedup_vs_generate']:.2f}x faster")
    print(f"  (c) LocalLM.generate per agent                    {r['sampling_per_agent_engine_ms']:8.0f} ms"
          f"   (a) is {r['sampling_speedup_vs_engine_per_agent']:.2f}x faster")
    print(f"2. one agent's training step: {r['training_completions']} completions "
          f"({r['training_completion_tokens']} tokens) after prompts of {r['training_prompt_tokens']} tokens")
    print(f"  (a) shared prompts packed, micro-batches of 4     {r['training_shared_prompt_ms']:8.0f} ms")
    print(f"  (b) one forward per completion                    {r['training_per_completion_ms']:8.0f} ms"
          f"   (a) is {r['training_speedup_vs_per_completion']:.2f}x faster")
    print(f"  (c) padded prompt + completion rows, batches of 4 {r['training_padded_batch_ms']:8.0f} ms"
          f"   (a) is {r['training_speedup_vs_padded_batch']:.2f}x faster")
    print(f"3. one step's token choice, {r['choice_rows']} sampled rows")
    for vocab in sorted(int(k.rsplit("_", 1)[1]) for k in r if k.startswith("choice_speedup_")):
        print(f"  vocabulary {vocab:>6}: (a) batched {r[f'choice_batched_ms_{vocab}']:6.1f} ms, (b) per row "
              f"{r[f'choice_per_row_ms_{vocab}']:6.1f} ms   (a) is {r[f'choice_speedup_{vocab}']:.2f}x faster")
    print(f"load average before / after: {r['load_average'][0]:.2f} / {r['load_average'][1]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tokens and rounds (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    figures = main(new_tokens=16, repeats=1, warmup=0) if args.quick else main()
    if args.json:
        print(json.dumps(figures, indent=2))
