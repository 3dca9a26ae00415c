"""Benchmark: PPO with LoRA on the embedded SmolLM2-135M (fp32, CPU): one minibatch's forward and
backward, mixed-adapter rollout batches, and peak memory of LoRA vs full fine-tuning.

1. One PPO minibatch (16 decisions x 6 BabyAI actions after ~250-token BabyAI-Text prompts of
   varied lengths), forward and backward of PPOLearner's loss (log-softmax over candidates,
   clipped ratio, entropy, clipped value loss from a value head on the prompt's last hidden
   state) through one agent's LoRA adapter (r 16, alpha 32 on q_proj, v_proj):
   (a) ``score_decisions``, packed: each prompt and its candidates in one row, one forward;
   (b) GLAM without pre-encoding: one prompt + candidate row per candidate (``layout="repeated"``,
       run in chunks of decisions with gradients accumulated, so memory stays near (a)'s);
   (c) the floor: the same rows as (a) as plain causal sequences (no 4D mask, no position ids,
       no hidden-state outputs), with the same loss read from the same positions.
2. Rollout decisions of 4 agents (4 adapters, eval mode, inference mode): one mixed-adapter
   forward (PEFT ``adapter_names``) vs one forward per agent, next to all the decisions in one
   forward under a single adapter (what batching alone gains, without adapter routing).
3. Peak memory of one PPO update (forward, backward, AdamW step; two updates, so the second runs
   with AdamW's state allocated) with LoRA vs full fine-tuning, each in a fresh subprocess: the
   peak resident set size (VmHWM, reset after model load and setup) minus the resident set size
   just before the first update; without and with gradient checkpointing (PPO's
   ``gradient_checkpointing`` option).

Times are medians over rounds that run every variant once, in alternating order. With 2 torch
threads on a 2-core machine, any other busy process stalls every parallelised op (the threads
wait for each other), by up to several times: read the ratios from a run whose printed load
averages stay near 2 (this benchmark's own threads).
Run: ``python benchmarks/bench_ppo.py [--quick]``; ``main()`` returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import logging
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from marlang.methods.lora.team import LoraOptions, TeamAdapters, ValueHeadOptions
from marlang.models.local_engine import LocalLM
from marlang.models.local_weights import load_smollm2
from marlang.models.scoring import score_decisions
from marlang.models.scoring_batches import packed_batch

logger = logging.getLogger(__name__)

THREADS = 2
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
CANDIDATES = [" " + a for a in ACTIONS]
AGENTS = ["agent_0", "agent_1", "agent_2", "agent_3"]
# PPOLearner's defaults.
CLIP, ENTROPY_COEF, VALUE_COEF = 0.2, 0.01, 0.5

COLOURS = ["red", "green", "blue", "purple", "yellow", "grey"]
OBJECTS = ["key", "ball", "box"]
MISSIONS = [
    "pick up the {c} key, then open the {d} door",
    "go to the {c} ball",
    "put the {c} box next to the {d} ball",
    "open the {d} door",
    "pick up a {c} ball and bring it to agent_{k}",
    "open the {d} door, then go to the {c} box",
]
MESSAGES = [
    "I will look for the {c} box in the next room.",
    "The {d} door is locked, I am going back for the key.",
    "I see a {c} ball behind the wall, wait for me.",
    "Nothing here, I am heading north.",
    "Can you open the {d} door? I carry the {c} key.",
]


def _steps(n: int, word: str) -> str:
    return f"{n} step{'s' if n != 1 else ''} {word}"


def observation_prompt(tokenizer: Any, rng: random.Random, agent: str, step: int) -> str:
    """A BabyAI-Text decision prompt in the model's chat format, ending where the action goes."""
    c, d = rng.choice(COLOURS), rng.choice(COLOURS)
    teammate = rng.choice([a for a in AGENTS if a != agent])
    system = (
        f"You are {agent}, one of {len(AGENTS)} agents exploring a grid world together. Each "
        "step you receive a description of what you can see and must choose exactly one "
        "action. Rooms are separated by walls and locked doors; a key opens the door of its "
        "own colour. You can only carry one object at a time, and you can only pick up an "
        "object that is right in front of you."
    )
    lines = [f"Mission: {rng.choice(MISSIONS).format(c=c, d=d, k=rng.randrange(4))}."]
    lines.append(f"Step {step} of 64.")
    if rng.random() < 0.8:
        lines.append(f"{teammate} said: {rng.choice(MESSAGES).format(c=c, d=d)}")
    history = rng.sample(ACTIONS, rng.randint(1, 4))
    lines.append("Last actions: " + ", ".join(history) + ".")
    seen = [
        f"You see a wall {_steps(rng.randint(1, 4), rng.choice(['forward', 'left', 'right']))}."
    ]
    for _ in range(rng.randint(2, 6)):
        kind = rng.random()
        where = _steps(rng.randint(1, 3), rng.choice(["left", "right"]))
        if rng.random() < 0.6:
            where += " and " + _steps(rng.randint(1, 4), "forward")
        if kind < 0.6:
            seen.append(f"You see a {rng.choice(COLOURS)} {rng.choice(OBJECTS)} {where}.")
        elif kind < 0.85:
            state = rng.choice(["closed", "locked", "open"])
            article = "an" if state == "open" else "a"
            seen.append(f"You see {article} {state} {rng.choice(COLOURS)} door {where}.")
        else:
            seen.append(f"You see {rng.choice([a for a in AGENTS if a != agent])} {where}.")
    lines += seen
    carry = rng.choice(["nothing", f"a {c} key", f"a {rng.choice(COLOURS)} ball"])
    lines.append(f"You carry {carry}.")
    lines.append("Possible actions: " + ", ".join(ACTIONS) + ".")
    lines.append("Answer with the action only.")
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(lines)},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text + "Action:"


@dataclass
class Minibatch:
    """Tokenized decisions and PPO's per-decision constants (as `DecisionSample` holds them)."""

    items: list[tuple[list[int], list[list[int]]]]
    agents: list[str]
    action: torch.Tensor
    old_logprob: torch.Tensor
    advantage: torch.Tensor
    old_value: torch.Tensor
    ret: torch.Tensor

    def __len__(self) -> int:
        return len(self.items)

    @property
    def prompt_tokens(self) -> list[int]:
        return [len(p) for p, _ in self.items]

    def to(self, device: str | torch.device) -> Minibatch:
        """The same decisions with PPO's constants on ``device`` (the policy's)."""
        return Minibatch(
            self.items,
            self.agents,
            *(t.to(device) for t in (self.action, self.old_logprob, self.advantage, self.old_value, self.ret)),
        )

    def rows(self, chunk: slice) -> Minibatch:
        return Minibatch(
            self.items[chunk],
            self.agents[chunk],
            self.action[chunk],
            self.old_logprob[chunk],
            self.advantage[chunk],
            self.old_value[chunk],
            self.ret[chunk],
        )


def make_minibatch(
    tokenizer: Any, n: int, *, seed: int = 0, agents: Sequence[str] = AGENTS[:1]
) -> Minibatch:
    """``n`` decisions, spread over ``agents`` in blocks (decision i is agent i * len // n's)."""
    rng = random.Random(seed)

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    candidates = [encode(c) for c in CANDIDATES]
    owners = [agents[i * len(agents) // n] for i in range(n)]
    items = [
        (encode(observation_prompt(tokenizer, rng, a, rng.randint(1, 60))), candidates)
        for a in owners
    ]
    g = torch.Generator().manual_seed(seed)
    return Minibatch(
        items=items,
        agents=owners,
        action=torch.randint(len(CANDIDATES), (n,), generator=g),
        old_logprob=torch.log(torch.full((n,), 1 / len(CANDIDATES)))
        + 0.1 * torch.randn(n, generator=g),
        advantage=torch.randn(n, generator=g),
        old_value=0.1 * torch.randn(n, generator=g),
        ret=torch.randn(n, generator=g),
    )


def ppo_loss(
    scores: Sequence[torch.Tensor], values: torch.Tensor, mb: Minibatch, total: int
) -> torch.Tensor:
    """PPOLearner._loss (temperature 1, per-agent value head), summed over ``mb``'s
    decisions and divided by ``total``, so chunks of a minibatch add up to its mean loss."""
    logp = torch.log_softmax(torch.stack(list(scores)), dim=-1)
    new_logp = logp.gather(1, mb.action[:, None])[:, 0]
    entropy = -(logp.exp() * logp).sum(-1)
    ratio = torch.exp(new_logp - mb.old_logprob)
    surrogate = torch.min(ratio * mb.advantage, ratio.clamp(1 - CLIP, 1 + CLIP) * mb.advantage)
    clipped = mb.old_value + (values - mb.old_value).clamp(-CLIP, CLIP)
    value_loss = 0.5 * torch.max((values - mb.ret) ** 2, (clipped - mb.ret) ** 2)
    return (-surrogate - ENTROPY_COEF * entropy + VALUE_COEF * value_loss).sum() / total


def measure(
    methods: dict[str, Callable[[], object]], *, repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Milliseconds per call of each method over ``repeats`` rounds, each running every method
    once, in alternating order (forward, then reversed), after ``warmup`` such rounds."""
    names = list(methods)
    # A GPU runs a method's kernels after it returns: wait for them inside its time.
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        for name in names:
            methods[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            sync()
            start = time.perf_counter()
            methods[name]()
            sync()
            times[name].append((time.perf_counter() - start) * 1000.0)
    return times


def _stats(prefix: str, times: dict[str, list[float]]) -> dict[str, float]:
    """``{prefix}_{name}_ms`` (median), ``_min_ms`` and ``_max_ms`` of each method's times."""
    spread = max(max(ts) / min(ts) for ts in times.values())
    if spread > 1.5:
        logger.warning("Timings varied up to %.1fx between rounds (a busy machine?)", spread)
    stats: dict[str, float] = {}
    for name, ts in times.items():
        stats[f"{prefix}_{name}_ms"] = statistics.median(ts)
        stats[f"{prefix}_{name}_min_ms"] = min(ts)
        stats[f"{prefix}_{name}_max_ms"] = max(ts)
    return stats


def ppo_team(model: Any, agents: Sequence[str]) -> TeamAdapters:
    team = TeamAdapters(
        model,
        agents,
        base_id="local:smollm2",
        lora=LoraOptions(r=16, alpha=32),
        value_head=ValueHeadOptions(),
        seed=0,
    )
    # PEFT starts every lora_B at zero (every adapter = the base model); make the agents differ
    # so the mixed-adapter check below compares something.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in team.model.named_parameters():
            if "lora_B" in name:
                param.copy_(0.02 * torch.randn(param.shape, generator=g))
    return team


# ------------------------------------------------------------------------- 1. one PPO minibatch


def _floor_inputs(mb: Minibatch, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    batch = packed_batch(mb.items, pad_id, torch.float32)
    return {
        "input_ids": batch.input_ids.to(device),
        "prompt_last": batch.prompt_last.to(device),
        "predictors": batch.predictors.to(device),
        "targets": batch.targets.to(device),
        "owners": batch.owners.to(device),
    }


def minibatch_times(
    team: TeamAdapters, mb: Minibatch, pad_id: int, *, repeats: int, warmup: int, chunk: int
) -> dict[str, Any]:
    from trl.trainer.utils import selective_log_softmax

    agent = mb.agents[0]
    model = team.model
    inner = model.get_base_model().model  # the decoder stack, LoRA layers included
    lm_head = model.get_output_embeddings()
    params = team.parameters_of(agent)
    device = mb.action.device
    floor = _floor_inputs(mb, pad_id, device)
    grads: dict[str, list[torch.Tensor]] = {}

    def finish(name: str) -> None:
        grads[name] = [
            p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params
        ]
        for p in params:
            p.grad = None

    def packed(batch: Minibatch = mb) -> None:  # (a): the library's training path
        scored = score_decisions(model, batch.items, pad_id)
        ppo_loss(
            scored.scores, team.value(agent, scored.prompt_hidden), batch, len(batch)
        ).backward()
        finish("packed")

    def repeated(batch: Minibatch = mb) -> None:  # (b): one row per candidate, prompt repeated
        for start in range(0, len(batch), chunk):
            part = batch.rows(slice(start, start + chunk))
            scored = score_decisions(model, part.items, pad_id, layout="repeated")
            ppo_loss(
                scored.scores, team.value(agent, scored.prompt_hidden), part, len(batch)
            ).backward()
        finish("repeated")

    def plain() -> None:  # (c): the floor, on (a)'s rows without its mask and position ids
        hidden = inner(input_ids=floor["input_ids"], use_cache=False).last_hidden_state
        rows, cols = floor["prompt_last"].unbind(-1)
        prompt_hidden = hidden[rows, cols]
        rows, cols = floor["predictors"].unbind(-1)
        logits = lm_head(hidden[rows, cols]).float()
        token_logprobs = selective_log_softmax(logits[None], floor["targets"][None])[0]
        flat = torch.zeros(len(mb) * len(CANDIDATES), device=device).index_add(
            0, floor["owners"], token_logprobs
        )
        ppo_loss(
            flat.split(len(CANDIDATES)), team.value(agent, prompt_hidden), mb, len(mb)
        ).backward()
        finish("plain")

    with team.training(agent):
        times = measure(
            {"packed": packed, "repeated": repeated, "plain": plain}, repeats=repeats, warmup=warmup
        )
    # (a) and (b) give the same gradients (up to float rounding) with LoRA dropout off (it
    # draws different masks); checked on the first two decisions.
    with team.training(agent, train_mode=False):
        packed(mb.rows(slice(0, 2)))
        repeated(mb.rows(slice(0, 2)))
    diff = max(
        float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))
        for a, b in zip(grads["packed"], grads["repeated"], strict=True)
    )
    stats = _stats("ppo", times)
    return {
        **stats,
        "ppo_repeated_over_packed": stats["ppo_repeated_ms"] / stats["ppo_packed_ms"],
        "ppo_packed_over_plain": stats["ppo_packed_ms"] / stats["ppo_plain_ms"],
        "ppo_grad_rel_diff": diff,
        "ppo_tokens": int(floor["input_ids"].numel()),
        "ppo_repeated_chunk": chunk,
    }


# ------------------------------------------------------------------------------ 2. rollouts


def rollout_times(
    team: TeamAdapters, mb: Minibatch, pad_id: int, *, repeats: int, warmup: int
) -> dict[str, Any]:
    model = team.model
    names = team.adapter_names(mb.agents)
    by_agent = {
        a: [i for i, owner in enumerate(mb.agents) if owner == a] for a in dict.fromkeys(mb.agents)
    }
    out: dict[str, list[torch.Tensor]] = {}

    def mixed() -> None:
        out["mixed"] = score_decisions(model, mb.items, pad_id, adapter_names=names).scores

    def per_agent() -> None:
        scores: list[torch.Tensor] = [torch.empty(0)] * len(mb)
        for agent, rows in by_agent.items():
            model.set_adapter(team.adapter_for(agent))
            part = score_decisions(model, [mb.items[i] for i in rows], pad_id).scores
            for i, s in zip(rows, part, strict=True):
                scores[i] = s
        out["per_agent"] = scores

    def one_adapter() -> None:  # the same 16 decisions under one adapter: batching's ceiling
        model.set_adapter(team.adapter_for(mb.agents[0]))
        score_decisions(model, mb.items, pad_id)

    previous = model.active_adapter
    model.eval()
    try:
        with torch.inference_mode():
            times = measure(
                {"mixed": mixed, "per_agent": per_agent, "one_adapter": one_adapter},
                repeats=repeats,
                warmup=warmup,
            )
    finally:
        model.set_adapter(previous)
    diff = max(
        float((a - b).abs().max()) for a, b in zip(out["mixed"], out["per_agent"], strict=True)
    )
    stats = _stats("rollout", times)
    return {
        **stats,
        "rollout_speedup": stats["rollout_per_agent_ms"] / stats["rollout_mixed_ms"],
        "rollout_ceiling": stats["rollout_per_agent_ms"] / stats["rollout_one_adapter_ms"],
        "rollout_max_abs_diff": diff,
        "rollout_agents": len(by_agent),
    }


# --------------------------------------------------------------------------------- 3. memory


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


@dataclass
class UpdateParts:
    """What one PPO update of ``variant`` ("lora": one agent's adapter and value head; "full":
    every weight and a value head) runs on: the policy, its trainable parameters and AdamW."""

    policy: Any
    params: list[torch.nn.Parameter]
    value: Callable[[torch.Tensor], torch.Tensor]
    context: Any
    mb: Minibatch
    pad_id: int
    optimizer: torch.optim.Optimizer

    @classmethod
    def build(
        cls, model: Any, tokenizer: Any, variant: str, decisions: int, checkpointing: bool = False
    ) -> UpdateParts:
        if checkpointing:  # as LoraTrainer does with gradient_checkpointing: true
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        mb = make_minibatch(tokenizer, decisions).to(model.device)
        pad_id = int(tokenizer.pad_token_id)
        if variant == "lora":
            team = ppo_team(model, AGENTS[:1])
            params = team.parameters_of(AGENTS[0])
            policy = team.model

            def value(hidden: torch.Tensor) -> torch.Tensor:
                return team.value(AGENTS[0], hidden)

            context: Any = team.training(AGENTS[0])
        elif variant == "full":
            head = torch.nn.Sequential(
                torch.nn.Linear(model.config.hidden_size, model.config.hidden_size),
                torch.nn.Tanh(),
                torch.nn.Linear(model.config.hidden_size, 1),
            ).to(device=model.device, dtype=model.dtype)
            model.requires_grad_(True)
            model.train()
            params = [*model.parameters(), *head.parameters()]
            policy = model

            def value(hidden: torch.Tensor) -> torch.Tensor:
                return head(hidden).squeeze(-1)

            context = contextlib.nullcontext()
        else:
            raise ValueError(f"unknown variant {variant!r}")
        optimizer = torch.optim.AdamW(params, lr=1e-5)
        return cls(policy, params, value, context, mb, pad_id, optimizer)

    def run(self, updates: int) -> None:
        """``updates`` PPO updates (forward, backward, AdamW step); call inside ``context``."""
        for _ in range(updates):
            scored = score_decisions(self.policy, self.mb.items, self.pad_id)
            ppo_loss(scored.scores, self.value(scored.prompt_hidden), self.mb, len(self.mb)).backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)


def memory_child(
    variant: str,
    decisions: int,
    checkpointing: bool = False,
    updates: int = 2,
    threads: int = THREADS,
) -> dict[str, Any]:
    """In a fresh process: set up ``variant`` ("lora" or "full"), then ``updates`` PPO updates;
    returns the peak resident set size above the resident set size before the first update."""
    torch.set_num_threads(threads)
    model, tokenizer = load_smollm2(device="cpu")
    # The weights are mapped from the checkpoint file and paged in as the first forward pass
    # touches them: copy them into memory so that paging-in is not counted as the update's.
    with torch.no_grad():
        for param in model.parameters():
            param.data = param.data.clone()
    update = UpdateParts.build(model, tokenizer, variant, decisions, checkpointing)
    policy, mb, pad_id, context = update.policy, update.mb, update.pad_id, update.context
    # One-time costs (trl's import on the first scoring, thread pools) are not the update's.
    with torch.no_grad():
        score_decisions(policy, mb.items[:1], pad_id)
    gc.collect()
    baseline_kb = _rss_kb("VmRSS")
    try:  # reset the peak (VmHWM) to the current RSS: model loading peaked higher than this
        Path("/proc/self/clear_refs").write_text("5")
        peak_field = "VmHWM"
    except OSError:
        peak_field = ""
    start = time.perf_counter()
    with context:
        update.run(updates)
    seconds = (time.perf_counter() - start) / updates
    peak_kb = (
        _rss_kb(peak_field) if peak_field else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    )
    return {
        "variant": variant,
        "baseline_mb": baseline_kb / 1024,
        "peak_mb": peak_kb / 1024,
        "increase_mb": (peak_kb - baseline_kb) / 1024,
        "after_mb": (_rss_kb("VmRSS") - baseline_kb) / 1024,
        "trainable_params": sum(p.numel() for p in update.params),
        "peak_source": peak_field or "ru_maxrss (VmHWM reset unavailable: includes model loading)",
        "update_s": seconds,
    }


def memory_figures(decisions: int, threads: int = THREADS) -> dict[str, Any]:
    # glibc serves allocations below its (self-raising) mmap threshold from heaps it seldom
    # trims, so RSS would keep freed tensors; a fixed 64 KiB threshold puts every tensor of
    # note in its own mapping, returned on free, and RSS tracks live tensor memory.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    results: dict[str, Any] = {}
    for checkpointing in (False, True):
        for variant in ("lora", "full"):
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--memory-child",
                variant,
                "--decisions",
                str(decisions),
                "--threads",
                str(threads),
            ]
            if checkpointing:
                command.append("--checkpointing")
            proc = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"memory child {variant} failed:\n{proc.stderr[-3000:]}")
            key = f"memory_{variant}{'_gc' if checkpointing else ''}"
            results[key] = json.loads(proc.stdout.strip().splitlines()[-1])
    for suffix in ("", "_gc"):
        results[f"memory_lora_over_full{suffix}"] = (
            results[f"memory_lora{suffix}"]["increase_mb"]
            / results[f"memory_full{suffix}"]["increase_mb"]
        )
    return results


# ------------------------------------------------------------------------------------- main


def main(
    decisions: int = 16,
    repeats: int = 3,
    warmup: int = 1,
    memory: bool = True,
    rollout_decisions: int | None = None,
    threads: int = THREADS,
    engine: LocalLM | None = None,
) -> dict[str, Any]:
    """Measure and print; return the figures (ms medians, ratios, memory in MB). ``engine``: the
    model of parts 1 and 2 (default the embedded SmolLM2-135M; the smoke size passes a tiny one)."""
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    load_before = os.getloadavg()[0]
    model, tokenizer = (engine.model, engine.tokenizer) if engine is not None else load_smollm2(device="cpu")
    pad_id = int(tokenizer.pad_token_id)
    team = ppo_team(model, AGENTS)
    mb = make_minibatch(tokenizer, decisions, seed=0)
    # (b) in chunks of decisions whose rows (one per candidate) are no more than (a)'s rows.
    chunk = max(1, decisions // len(CANDIDATES))
    results: dict[str, Any] = {
        "model": engine.model_id if engine is not None else "SmolLM2-135M-Instruct (fp32, CPU)",
        "torch_threads": torch.get_num_threads(),
        "decisions": decisions,
        "candidates": len(CANDIDATES),
        "prompt_tokens_min": min(mb.prompt_tokens),
        "prompt_tokens_mean": statistics.mean(mb.prompt_tokens),
        "prompt_tokens_max": max(mb.prompt_tokens),
        "candidate_tokens": sum(len(c) for c in mb.items[0][1]),
        "repeats": repeats,
        "warmup": warmup,
    }
    results.update(minibatch_times(team, mb, pad_id, repeats=repeats, warmup=warmup, chunk=chunk))
    n_roll = rollout_decisions if rollout_decisions is not None else decisions
    rollout_mb = make_minibatch(tokenizer, n_roll, seed=1, agents=AGENTS)
    results.update(rollout_times(team, rollout_mb, pad_id, repeats=repeats, warmup=warmup))
    results["rollout_decisions"] = n_roll
    del team, model
    _release_freed_memory()
    if memory:
        results.update(memory_figures(decisions, threads))
    results["load_average"] = (load_before, os.getloadavg()[0])
    _print_report(results)
    return results


def _release_freed_memory() -> None:
    """Hand the heap memory freed by the timed runs back to the system (glibc only), so that
    the memory subprocesses have the machine's memory to themselves."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _row(name: str, r: dict[str, Any], key: str) -> None:
    print(
        f"  {name:<60} {r[key + '_ms']:8.0f} ms  "
        f"[{r[key + '_min_ms']:.0f}-{r[key + '_max_ms']:.0f}]"
    )


def _print_report(r: dict[str, Any]) -> None:
    print(
        f"PPO with LoRA (r16 alpha32, q_proj+v_proj) on {r['model']}, {r['torch_threads']} torch "
        f"threads; median [min-max] of {r['repeats']} rounds after {r['warmup']} warm-up; "
        f"1-min load average {r['load_average'][0]:.1f} at start, {r['load_average'][1]:.1f} at end"
    )
    print(
        f"1. One PPO minibatch, forward + backward: {r['decisions']} decisions x {r['candidates']} "
        f"actions ({r['candidate_tokens']} candidate tokens per decision), prompts "
        f"{r['prompt_tokens_min']}-{r['prompt_tokens_max']} tokens "
        f"(mean {r['prompt_tokens_mean']:.0f})"
    )
    _row("(a) KV-reuse/packed: score_decisions, one pass", r, "ppo_packed")
    _row(
        f"(b) GLAM, prompt repeated per candidate ({r['ppo_repeated_chunk']} dec./chunk)",
        r,
        "ppo_repeated",
    )
    _row(f"(c) floor: same {r['ppo_tokens']} tokens, plain causal batch", r, "ppo_plain")
    _ratio("(b) / (a)", r["ppo_repeated_over_packed"], ">=", 3.0)
    _ratio("(a) / (c)", r["ppo_packed_over_plain"], "<=", 1.3)
    print(f"  max relative |grad (a) - grad (b)| (dropout off)   {r['ppo_grad_rel_diff']:.1e}")
    print(
        f"2. Rollout decisions, {r['rollout_decisions']} decisions of {r['rollout_agents']} agents "
        "(one adapter each), eval + inference mode"
    )
    _row("one mixed-adapter forward (adapter_names)", r, "rollout_mixed")
    _row(f"one forward per agent ({r['rollout_agents']} x set_adapter)", r, "rollout_per_agent")
    _row("reference: all decisions under one adapter, one forward", r, "rollout_one_adapter")
    _ratio("per agent / mixed", r["rollout_speedup"], ">=", 1.5)
    print(f"  batching's ceiling here: per agent / one adapter    {r['rollout_ceiling']:5.2f}x")
    print(f"  max |mixed - per agent| log-prob                   {r['rollout_max_abs_diff']:.1e}")
    if "memory_lora" in r:
        print(
            f"3. Peak memory of a PPO update (forward, backward, AdamW step; 2 updates) on the "
            f"{r['decisions']}-decision minibatch, fresh process each: peak RSS "
            f"({r['memory_lora']['peak_source']}, reset after setup) above RSS after setup"
        )
        for suffix, label in (("", "no checkpointing"), ("_gc", "gradient checkpointing")):
            for name in ("lora", "full"):
                m = r[f"memory_{name}{suffix}"]
                title = f"{'LoRA' if name == 'lora' else 'full fine-tuning'}, {label}"
                print(
                    f"  {title:<40} {m['trainable_params'] / 1e6:7.2f} M trainable  "
                    f"peak +{m['increase_mb']:6.0f} MB  ({m['update_s']:.1f} s/update)"
                )
        _ratio("LoRA / full", r["memory_lora_over_full"], "<=", 0.5)
        _ratio("LoRA / full, checkpointing", r["memory_lora_over_full_gc"], "<=", 0.5)


def _ratio(name: str, value: float, op: str, target: float) -> None:
    met = value >= target if op == ">=" else value <= target
    print(f"  {name:<30} {value:7.2f}x   (target {op} {target:g}: {'met' if met else 'MISSED'})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="4 decisions, 1 round: a smoke run (the figures are not the targets')",
    )
    parser.add_argument("--decisions", type=int, default=None, help="decisions per minibatch (16)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (3)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up rounds (1)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    parser.add_argument("--threads", type=int, default=THREADS, help=f"torch threads ({THREADS})")
    parser.add_argument("--memory-child", choices=["lora", "full"], help=argparse.SUPPRESS)
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
    if args.memory_child:
        print(
            json.dumps(
                memory_child(
                    args.memory_child,
                    args.decisions or 16,
                    args.checkpointing,
                    threads=args.threads,
                )
            )
        )
        sys.exit(0)
    quick = args.quick
    main(
        decisions=args.decisions or (4 if quick else 16),
        repeats=args.repeats or (1 if quick else 3),
        warmup=args.warmup if args.warmup is not None else 1,
        memory=not args.no_memory,
        threads=args.threads,
    )
