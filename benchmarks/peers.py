"""Side by side with the peers: the same training in marlang and in the peers themselves, on the
same problems, base weights, LoRA, settings and reward (`make bench-peers`).

1. MAGRPO, 2 agents (configs/magrpo_humaneval_cpu.yaml: 8 HumanEval problems, the joint answer
   judged by marlang's sandbox): marlang's ``magrpo`` against CoMLRL's ``MAGRPOTrainer``.
2. GRPO, 1 agent (configs/grpo_humaneval_cpu.yaml): marlang's ``grpo`` against TRL's
   ``GRPOTrainer``.
Both sides load the embedded SmolLM2-135M's transformers checkpoint (one directory), train LoRA
adapters with the same r, alpha, dropout and targets, sample G completions per problem with the
same temperature and max_new_tokens, train with the same learning rate on the same problems per
step (the run seed's problem seeds: the peer gets marlang's plan) for the same number of steps,
and score with the same reward: the peers call marlang's reward service (peers/reward_service.py,
in marlang's venv), which builds each agent's prompt as marlang's learner does and judges the
joint answer in marlang's sandbox. The peers run in their own virtualenv (.venv-peers, from
peers/requirements.txt; ``--setup`` makes it), each side in a process of its own (its peak RSS is
its own), the runs interleaved seed by seed with the order alternating.

Each row: seconds per step (an iteration: sample, judge, update; the median of the steps after
the first), generated tokens per second, peak RSS (peak GPU memory with CUDA), the reward of the
last step's samples pooled over seeds with its 95% interval; each as marlang / peer, and PASS or
MISS against the targets (>= 1.5x the peer's steps/s, <= its peak memory, the reward inside its
interval); and where each side's step time goes (generation, the sandbox's verdicts, the rest:
forward/backward, optimizer, bookkeeping).
Run: ``python benchmarks/peers.py [--dry-run] [--seeds N] [--steps N] [--max-new-tokens N]
[--out FILE.json]``; ``--setup`` only makes .venv-peers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from marlang.seeds import env_seeds
from marlang.statistics.intervals import pooled_interval

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent / "peers"
VENV = ROOT / ".venv-peers"
REQUIREMENTS = HERE / "requirements.txt"
STAMP = VENV / ".installed"
"""Written after a complete install, as the Makefile's $(STAMP): newer than requirements.txt means done."""

SPEEDUP_TARGET = 1.5


@dataclass(frozen=True)
class Case:
    """One comparison: marlang's method on its config against a peer's trainer."""

    name: str
    config: str
    peer: str  # the peer runner's name: comlrl, trl
    peer_label: str
    differences: str  # what the peer does differently, where it cannot do what marlang does


CASES = (
    Case("MAGRPO, 2 agents", "configs/magrpo_humaneval_cpu.yaml", "comlrl", "CoMLRL 1.4.3 MAGRPOTrainer",
         "CoMLRL: a base model per agent (marlang: one base, an adapter per agent); one generate per agent; "
         "one forward per completion; loss on untempered logits"),
    Case("GRPO, 1 agent", "configs/grpo_humaneval_cpu.yaml", "trl", "TRL 1.16.0 GRPOTrainer",
         "TRL: Dr. GRPO loss without std scaling (marlang's reinforce up to a constant factor); one base, "
         "one adapter, as marlang"),
)


@dataclass(frozen=True)
class Sizes:
    """How much each side trains: the comparison's sizes, or the dry run's."""

    seeds: int = 2
    steps: int = 2
    max_new_tokens: int = 32
    problems: int = 2  # per step (learning.rollouts)
    num_generations: int = 4
    minibatch_size: int = 8
    micro_batch_size: int = 4
    threads: int = 2
    tiny: bool = False  # a tiny random model instead of SmolLM2-135M


DRY_RUN = Sizes(seeds=1, steps=1, max_new_tokens=4, problems=1, num_generations=2, minibatch_size=2,
                micro_batch_size=2, threads=1, tiny=True)


# the peers' virtualenv -------------------------------------------------------------------------
def ensure_venv() -> Path:
    """.venv-peers with peers/requirements.txt installed (nothing to do when its stamp is newer
    than the requirements); its python."""
    python = VENV / "bin" / "python"
    if STAMP.exists() and STAMP.stat().st_mtime >= REQUIREMENTS.stat().st_mtime:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    # torch first and pinned, as the requirements say: pip keeps a CPU build where one is at hand
    torch_pin = next(line for line in REQUIREMENTS.read_text().splitlines() if line.startswith("torch=="))
    subprocess.run([*pip, torch_pin], check=True)
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    STAMP.touch()
    return python


# the model -------------------------------------------------------------------------------------
def model_dir(sizes: Sizes, scratch: Path) -> Path:
    """The transformers checkpoint both sides load: SmolLM2-135M converted from the embedded
    GGUF file (marlang's cached conversion), or a tiny random Llama for the dry run."""
    if sizes.tiny:
        from marlang.testing import tiny_llama, tiny_tokenizer

        path = scratch / "tiny"
        tok = tiny_tokenizer()
        tiny_llama(len(tok), seed=0, eos_token_id=tok.eos_token_id).save_pretrained(path)
        tok.save_pretrained(path)
        return path
    from marlang.models.local_weights import (
        convert_gguf_checkpoint,
        ensure_checkpoint,
        smollm2_checkpoint_dir,
        smollm2_gguf_path,
    )

    return ensure_checkpoint(smollm2_checkpoint_dir(), lambda out: convert_gguf_checkpoint(smollm2_gguf_path(), out))


# one side's run --------------------------------------------------------------------------------
def case_config(case: Case, sizes: Sizes, model: Path, seed: int) -> dict[str, Any]:
    """The case's shipped config at ``sizes``, on ``model``, with run seed ``seed``."""
    data: dict[str, Any] = yaml.safe_load((ROOT / case.config).read_text())
    data["model"].update(spec=f"hf:{model}", max_tokens=sizes.max_new_tokens)
    data["learning"].update(iterations=sizes.steps, rollouts=sizes.problems, num_generations=sizes.num_generations,
                            max_new_tokens=sizes.max_new_tokens, minibatch_size=sizes.minibatch_size,
                            micro_batch_size=sizes.micro_batch_size, eval_episodes=0)
    data["run"].update(seed=seed, progress=False)
    return data


def step_seeds(sizes: Sizes, seed: int) -> list[list[int]]:
    """Each step's problem seeds: the run seed's training stream, ``problems`` per iteration
    (what marlang's plan gives; its runner checks)."""
    n = sizes.problems
    return [list(env_seeds(seed, "train", range(k * n, (k + 1) * n))) for k in range(sizes.steps)]


def run_side(side: str, case: Case, sizes: Sizes, model: Path, seed: int, scratch: Path, peer_python: Path
             ) -> dict[str, Any]:
    """One side's run in its own process; its result (per-step rows, peak memory)."""
    work = Path(tempfile.mkdtemp(prefix=f"{side}-{case.peer}-{seed}-", dir=scratch))
    config = case_config(case, sizes, model, seed)
    (work / "config.json").write_text(json.dumps(config))
    spec: dict[str, Any] = {"threads": sizes.threads, "seed": seed, "steps": step_seeds(sizes, seed),
                            "out_dir": str(work / "out")}
    if side == "marlang":
        spec["config"] = config
        command = [sys.executable, str(HERE / "marlang_runner.py")]
    else:
        learning = config["learning"]
        spec.update(peer=case.peer, model_dir=str(model), lora=learning["lora"],
                    reward_command=[sys.executable, str(HERE / "reward_service.py"), str(work / "config.json")],
                    settings={k: learning[k] for k in ("num_generations", "max_new_tokens", "temperature", "lr",
                                                       "minibatch_size", "micro_batch_size")})
        command = [str(peer_python), str(HERE / "peer_runner.py")]
    (work / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "OMP_NUM_THREADS": str(sizes.threads), "TOKENIZERS_PARALLELISM": "false",
           "WANDB_MODE": "disabled", "PYTHONWARNINGS": "ignore"}
    began = time.perf_counter()
    done = subprocess.run([*command, str(work / "spec.json"), str(work / "result.json")], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{side} side of {case.name} (seed {seed}) failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads((work / "result.json").read_text())
    if len(result["steps"]) != sizes.steps:
        raise RuntimeError(f"{side} side of {case.name} ran {len(result['steps'])} steps, not {sizes.steps}")
    result["wall_s"] = time.perf_counter() - began
    return result


# the rows --------------------------------------------------------------------------------------
def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's figures over its seeds: steps after the first timed (all when there is one)."""
    timed = [s for r in runs for s in (r["steps"][1:] or r["steps"])]
    seconds = sum(s["seconds"] for s in timed)
    gpu = [r["peak_gpu_bytes"] for r in runs if r.get("peak_gpu_bytes") is not None]
    return {
        "step_s": statistics.median(s["seconds"] for s in timed),
        "tokens_per_s": sum(s["tokens"] for s in timed) / seconds,
        "tokens_per_step": statistics.mean(s["tokens"] for s in timed),
        "generation_s": statistics.mean(s["generation_s"] for s in timed),
        "reward_s": statistics.mean(s["reward_s"] for s in timed),
        "rest_s": statistics.mean(s["seconds"] - s["generation_s"] - s["reward_s"] for s in timed),
        "peak_rss_mb": max(r["peak_rss_bytes"] for r in runs) / 2**20,
        "peak_gpu_mb": max(gpu) / 2**20 if gpu else None,
        "reward": pooled_interval([r["steps"][-1]["rewards"] for r in runs]),
    }


def row(case: Case, sizes: Sizes, marlang: list[dict[str, Any]], peer: list[dict[str, Any]]) -> dict[str, Any]:
    ours, theirs = summary(marlang), summary(peer)
    speedup = theirs["step_s"] / ours["step_s"]
    memory = ours["peak_rss_mb"] / theirs["peak_rss_mb"]
    if ours["peak_gpu_mb"] is not None and theirs["peak_gpu_mb"]:
        memory = ours["peak_gpu_mb"] / theirs["peak_gpu_mb"]
    low, high, mean = theirs["reward"]["low"], theirs["reward"]["high"], ours["reward"]["mean"]
    if low is None or mean is None:  # no interval (too few values, or all equal): equal means pass
        inside = mean is not None and mean == theirs["reward"]["mean"]
    else:
        inside = low <= mean <= high
    return {
        "case": case.name, "peer": case.peer_label, "differences": case.differences, "sizes": asdict(sizes),
        "marlang": ours, "peer_figures": theirs,
        "speedup": speedup, "tokens_per_s_ratio": ours["tokens_per_s"] / theirs["tokens_per_s"],
        "memory_ratio": memory,
        "verdicts": {"speed": "PASS" if speedup >= SPEEDUP_TARGET else "MISS",
                     "memory": "PASS" if memory <= 1.0 else "MISS",
                     "reward": "PASS" if inside else "MISS"},
    }


def _reward(stat: dict[str, Any]) -> str:
    mean = "-" if stat["mean"] is None else f"{stat['mean']:.3f}"
    if stat["low"] is None:
        return f"{mean} ({stat['interval']}, n {stat['n']})"
    return f"{mean} [{stat['low']:.3f}, {stat['high']:.3f}] (n {stat['n']})"


def print_row(r: dict[str, Any]) -> None:
    ours, theirs, v = r["marlang"], r["peer_figures"], r["verdicts"]
    print(f"== {r['case']}: marlang vs {r['peer']} ==")
    print(f"  {'':28}{'marlang':>14}{'peer':>14}{'marlang/peer':>14}")
    print(f"  {'seconds per step':28}{ours['step_s']:14.2f}{theirs['step_s']:14.2f}"
          f"{ours['step_s'] / theirs['step_s']:14.2f}   steps/s {r['speedup']:.2f}x, target >= "
          f"{SPEEDUP_TARGET}x: {v['speed']}")
    print(f"  {'generated tokens per second':28}{ours['tokens_per_s']:14.1f}{theirs['tokens_per_s']:14.1f}"
          f"{r['tokens_per_s_ratio']:14.2f}   ({ours['tokens_per_step']:.0f} / {theirs['tokens_per_step']:.0f} "
          "tokens per step)")
    print(f"  {'peak RSS (MB)':28}{ours['peak_rss_mb']:14.0f}{theirs['peak_rss_mb']:14.0f}"
          f"{ours['peak_rss_mb'] / theirs['peak_rss_mb']:14.2f}" + ("" if ours["peak_gpu_mb"] is not None else
                                                                     f"   target <= 1: {v['memory']}"))
    if ours["peak_gpu_mb"] is not None:
        print(f"  {'peak GPU memory (MB)':28}{ours['peak_gpu_mb']:14.0f}{theirs['peak_gpu_mb']:14.0f}"
              f"{r['memory_ratio']:14.2f}   target <= 1: {v['memory']}")
    print(f"  reward after {r['sizes']['steps']} steps: marlang {_reward(ours['reward'])}, peer "
          f"{_reward(theirs['reward'])}   inside the peer's interval: {v['reward']}")
    for name, f in (("marlang", ours), ("peer", theirs)):
        print(f"  {name:>7}'s step: generation {f['generation_s']:.2f} s, reward {f['reward_s']:.2f} s, "
              f"forward/backward, optimizer and the rest {f['rest_s']:.2f} s")
    print(f"  closest configuration: {r['differences']}")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run both comparisons (or set up .venv-peers only); print and return the rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="only make .venv-peers (idempotent)")
    parser.add_argument("--dry-run", action="store_true", help="one step each, tiny sizes (make test)")
    parser.add_argument("--seeds", type=int, help="run seeds per side (default 2)")
    parser.add_argument("--steps", type=int, help="training steps per run (default 2)")
    parser.add_argument("--max-new-tokens", type=int, help="tokens per completion at most (default 32)")
    parser.add_argument("--problems", type=int, help="problems per step (default 2; the configs' 4)")
    parser.add_argument("--cases", default="magrpo,grpo", help="which comparisons: magrpo, grpo")
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    peer_python = ensure_venv()
    if args.setup:
        STAMP.touch()  # newer than marlang's venv too: the Makefile's rule is done
        print(f"{VENV} is set up")
        return []
    sizes = DRY_RUN if args.dry_run else Sizes()
    for key in ("seeds", "steps", "max_new_tokens", "problems"):
        if getattr(args, key) is not None:
            sizes = replace(sizes, **{key: getattr(args, key)})
    wanted = {c.strip() for c in args.cases.split(",")}
    cases = [c for c in CASES if c.config.split("/")[-1].split("_")[0] in wanted]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="marlang-peers-") as tmp:
        scratch = Path(tmp)
        model = model_dir(sizes, scratch)
        print(f"{'dry run' if sizes.tiny else 'SmolLM2-135M (fp32)'}, {sizes.threads} torch threads each side; "
              f"{sizes.seeds} seeds x {sizes.steps} steps, {sizes.problems} problems x G {sizes.num_generations} "
              f"per step, max_new_tokens {sizes.max_new_tokens}; load average {os.getloadavg()[0]:.2f}")
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for seed in range(sizes.seeds):  # interleaved: machine noise hits both sides alike
            for case in cases:
                order = ("marlang", "peer") if seed % 2 == 0 else ("peer", "marlang")
                for side in order:
                    result = run_side(side, case, sizes, model, seed, scratch, peer_python)
                    runs.setdefault((case.name, side), []).append(result)
                    print(f"  {case.name}, seed {seed}, {side}: {result['wall_s']:.0f} s", flush=True)
    rows = [row(c, sizes, runs[(c.name, "marlang")], runs[(c.name, "peer")]) for c in cases]
    for r in rows:
        print_row(r)
    print(f"({(time.perf_counter() - began) / 60:.1f} minutes; load average {os.getloadavg()[0]:.2f})")
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
