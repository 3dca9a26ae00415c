"""One peer's side of benchmarks/peers.py: CoMLRL's MAGRPOTrainer or TRL's GRPOTrainer trained
for some steps, in .venv-peers (no marlang import): its prompts and reward come from marlang's
reward service (reward_service.py, a process in marlang's venv, JSON lines over a pipe).

Run: ``.venv-peers/bin/python peer_runner.py SPEC.json OUT.json``; SPEC says the peer, the model
directory, the settings and each step's problem seeds; OUT gets each step's seconds, generated
tokens and profile (generation, reward, the rest: forward/backward and optimizer), the last
step's rewards and the peak memory.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch


class Service:
    """marlang's reward service, a child process spoken to in JSON lines."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the reward service exited ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class Clock:
    """Seconds spent in generation and in the reward, and tokens generated, per step."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.generation = self.reward = 0.0
        self.tokens = 0
        self.rewards: list[float] = []

    def wrap_generate(self, model: Any, pad_id: int, count: bool) -> None:
        inner = model.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = inner(*args, **kwargs)
            self.generation += time.perf_counter() - start
            if count:  # the rows after the prompt, up to the padding after each one's end
                seqs = out.sequences if hasattr(out, "sequences") else out
                prompt = kwargs["input_ids"].size(1)
                self.tokens += int((seqs[:, prompt:] != pad_id).sum())
            return out

        model.generate = generate


def load(spec: dict[str, Any]) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype="auto")  # as marlang loads hf:PATH
    return tok, model


def distinct_pad(tok: Any, prompts: list[str]) -> None:
    """A pad token that no prompt contains: CoMLRL cuts a prompt at its first pad token, and
    SmolLM2 pads with <|im_end|>, which ends every chat turn of the prompt."""
    ids = {i for p in prompts for i in tok(p, add_special_tokens=False)["input_ids"]}
    if tok.pad_token_id is not None and tok.pad_token_id not in ids and tok.pad_token_id != tok.eos_token_id:
        return
    for token in tok.all_special_tokens:
        token_id = tok.convert_tokens_to_ids(token)
        if token_id not in ids and token_id != tok.eos_token_id:
            tok.pad_token = token
            return
    raise RuntimeError("no special token is free to pad with")


def lora(spec: dict[str, Any]) -> Any:
    from peft import LoraConfig

    lo = spec["lora"]
    return LoraConfig(r=lo["r"], lora_alpha=lo["alpha"], lora_dropout=lo["dropout"], target_modules=lo["targets"],
                      task_type="CAUSAL_LM")


def comlrl_magrpo(spec: dict[str, Any], service: Service, clock: Clock) -> list[dict[str, Any]]:
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    from datasets import Dataset
    from peft import get_peft_model
    from transformers import AutoTokenizer

    s = spec["settings"]
    steps: list[list[int]] = spec["steps"]
    seeds = [x for step in steps for x in step]
    prompts = dict(zip(seeds, service.ask({"op": "prompts", "seeds": seeds})["prompts"], strict=True))
    n = len(prompts[seeds[0]])
    tok = AutoTokenizer.from_pretrained(spec["model_dir"])
    text = {x: [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in prompts[x]]
            for x in seeds}
    distinct_pad(tok, [p for x in seeds for p in text[x]])
    agents = []
    for _ in range(n):  # CoMLRL trains one model per agent: a base each, with its LoRA
        _tok, base = load(spec)
        base.generation_config.pad_token_id = tok.pad_token_id
        agent = get_peft_model(base, lora(spec))
        clock.wrap_generate(agent, tok.pad_token_id, count=True)
        agents.append(agent)

    def reward(*completions: list[str], batch_items: list[dict[str, Any]] | None = None) -> list[float]:
        assert batch_items is not None
        start = time.perf_counter()
        r = service.ask({"op": "reward", "seed": batch_items[0]["seed"], "texts": [c[0] for c in completions]})
        clock.reward += time.perf_counter() - start
        clock.rewards.append(r["reward"])
        return [r["reward"]]

    per_step = len(steps[0])
    completions = per_step * s["num_generations"]
    args = MAGRPOConfig(num_train_epochs=1, agent_learning_rate=s["lr"], num_agents=n,
                        num_generations=s["num_generations"], max_new_tokens=s["max_new_tokens"],
                        temperature=s["temperature"], top_p=1.0, top_k=0, num_turns=1,
                        joint_mode="aligned", early_termination_threshold=None, eval_interval=0,
                        # one update per step: its problems' nodes buffered, minibatches of minibatch_size completions
                        rollout_buffer_size=per_step,
                        train_batch_size=max(1, s["minibatch_size"] // s["num_generations"]),
                        advantage_normalization=False, advantage_mode="mean")
    assert completions % s["minibatch_size"] == 0
    trainer = MAGRPOTrainer(agents=agents, num_agents=n, tokenizer=tok, reward_func=reward,
                            formatters=[(lambda item, i=i: item["prompts"][i]) for i in range(n)],
                            args=args, train_dataset=Dataset.from_dict({"seed": [0], "prompts": [["", ""]]}))
    trainer.verbose = False
    rows = []
    for step in steps:
        trainer.train_dataset = Dataset.from_dict({"seed": step, "prompts": [text[x] for x in step]})
        clock.reset()
        start = time.perf_counter()
        trainer.train()
        rows.append(step_row(time.perf_counter() - start, clock))
    return rows


def trl_grpo(spec: dict[str, Any], service: Service, clock: Clock) -> list[dict[str, Any]]:
    from datasets import Dataset
    from peft import get_peft_model
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    s = spec["settings"]
    steps: list[list[int]] = spec["steps"]
    seeds = [x for step in steps for x in step]
    prompts = dict(zip(seeds, service.ask({"op": "prompts", "seeds": seeds})["prompts"], strict=True))
    tok, base = load(spec)
    text = {x: tok.apply_chat_template(prompts[x][0], tokenize=False, add_generation_prompt=True) for x in seeds}
    model = get_peft_model(base, lora(spec))
    G, per_step = s["num_generations"], len(steps[0])
    completions = per_step * G
    optimizer_steps = completions // s["minibatch_size"]  # TRL steps per marlang step

    def reward(completions: list[str], seed: list[int], completion_ids: list[list[int]], **_: Any) -> list[float]:
        start = time.perf_counter()
        out = [service.ask({"op": "reward", "seed": x, "texts": [c]})["reward"] for c, x in zip(completions, seed,
                                                                                                 strict=True)]
        clock.reward += time.perf_counter() - start
        clock.tokens += sum(len(ids) for ids in completion_ids)
        clock.rewards.extend(out)
        return out

    rows: list[dict[str, Any]] = []

    class Steps(TrainerCallback):  # type: ignore[misc]
        start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % optimizer_steps == 0:
                rows.append(step_row(time.perf_counter() - self.start, clock))
                clock.reset()
                self.start = time.perf_counter()

    args = GRPOConfig(output_dir=spec["out_dir"], learning_rate=s["lr"],
                      per_device_train_batch_size=s["micro_batch_size"],
                      gradient_accumulation_steps=s["minibatch_size"] // s["micro_batch_size"],
                      num_generations=G, generation_batch_size=completions, max_completion_length=s["max_new_tokens"],
                      temperature=s["temperature"], top_p=1.0, top_k=0, beta=0.0, num_iterations=1,
                      # marlang's reinforce with the mean advantage: TRL's Dr. GRPO without std scaling is
                      # the same gradient up to a constant factor (1 / max_completion_length)
                      loss_type="dr_grpo", scale_rewards="none", shuffle_dataset=False,
                      max_steps=optimizer_steps * len(steps), lr_scheduler_type="constant", warmup_steps=0,
                      weight_decay=0.0, max_grad_norm=1.0, report_to="none", save_strategy="no", logging_steps=10**6,
                      use_cpu=not torch.cuda.is_available(), bf16=False, seed=spec["seed"], disable_dropout=False,
                      log_completions=False)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, processing_class=tok,
                          train_dataset=Dataset.from_dict({"prompt": [text[x] for x in seeds], "seed": seeds}),
                          callbacks=[Steps()])
    clock.wrap_generate(trainer.model, tok.pad_token_id, count=False)
    clock.reset()
    trainer.train()
    return rows


def step_row(seconds: float, clock: Clock) -> dict[str, Any]:
    return {"seconds": seconds, "tokens": clock.tokens, "generation_s": clock.generation, "reward_s": clock.reward,
            "rewards": list(clock.rewards)}


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    service = Service(spec["reward_command"])
    clock = Clock()
    began = time.perf_counter()
    try:
        rows = (comlrl_magrpo if spec["peer"] == "comlrl" else trl_grpo)(spec, service, clock)
    finally:
        service.close()
    gpu = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    Path(argv[1]).write_text(json.dumps({
        "steps": rows, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_gpu_bytes": gpu, "total_s": time.perf_counter() - began}))


if __name__ == "__main__":
    main(sys.argv[1:])
