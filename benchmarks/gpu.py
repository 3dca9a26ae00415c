"""The GPU check: every GPU target of docs/benchmarks.md measured in one run (`make bench-gpu`),
each GPU ratio side by side with its CPU figure and its target.

No download: the models are Qwen2-shaped (the real 0.5B and 1.5B sizes: layers, widths, heads,
vocabulary) with random weights built on the device, and the tokenizer is a byte-level BPE
trained in-process on the benchmarks' own prompts; random weights time and size like trained
ones. Each row reuses the measuring function of its CPU benchmark (bench_ppo, bench_magrpo,
bench_credit, bench_parallel, and peers for CoMLRL's and TRL's training steps, where their
packages import); a row that fails prints its error on one line and the check goes on; rows
still to run when the time budget is spent are skipped. ``--dry-run`` runs every row at tiny
sizes on the CPU in seconds (tests/test_gpu_check.py), so the check cannot rot.
Run: ``python benchmarks/gpu.py [--dry-run] [--sizes 0.5b,1.5b] [--budget-s S] [--out FILE.json]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_credit
import bench_magrpo
import bench_parallel
import bench_ppo
import torch

from marlang.models import LocalLM
from marlang.models.local_chat import LocalChatModel
from marlang.models.scoring import score_decisions
from marlang.testing import tiny_tokenizer

logger = logging.getLogger(__name__)

SHAPES: dict[str, dict[str, Any]] = {
    # Qwen2-0.5B and Qwen2-1.5B (their config.json); "tiny" is the dry run's.
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936},
    "1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936},
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": None},
}


@dataclass(frozen=True)
class Sizes:
    """How much work each row does: the GPU run's sizes, or the dry run's."""

    decisions: int = 16  # PPO minibatch and rollout decisions (bench_ppo's 16)
    repeats: int = 3
    warmup: int = 1
    pairs: int = 32  # LCA pairs ranked (bench_credit's 32)
    reply_tokens: int = 16  # LCA's generated reply: random weights never stop, so this is its length
    new_tokens: int = 64  # MAGRPO tokens per completion (bench_magrpo's 64)
    episodes: int = 8  # parallel episodes (bench_parallel's 8 of 4 steps)
    max_steps: int = 4
    episode_tokens: int = 40  # an agent's reply in an episode (bench_parallel's model.max_tokens)
    tokenizer_vocab: int = 8192
    budget_s: float = 420.0  # rows left when this is spent are skipped (the limit is 8 min)
    peer_steps: int = 2  # training steps of each side of the peer rows (the first is not timed)


DRY_RUN = Sizes(decisions=4, repeats=1, warmup=0, pairs=2, reply_tokens=4, new_tokens=4, episodes=2,
                max_steps=1, episode_tokens=4, tokenizer_vocab=600, budget_s=120.0, peer_steps=1)


@dataclass
class Row:
    """One GPU figure next to its CPU counterpart and its target."""

    name: str
    size: str
    value: float | None = None  # the ratio measured here (None: not measured, see ``note``)
    cpu: str = "n/a"  # the CPU figure quoted from docs/benchmarks.md
    target: str = ""  # ">= 1.5" or "<= 0.5"
    note: str = ""  # the figures behind the ratio, or why there is none
    seconds: float = 0.0

    @property
    def met(self) -> str:
        if self.value is None or not self.target:
            return ""
        op, goal = self.target.split()
        return "met" if (self.value >= float(goal) if op == ">=" else self.value <= float(goal)) else "MISSED"


@dataclass
class Bench:
    """The model of one size on the device, and what builds it again (rows that need their own)."""

    size: str
    device: torch.device
    dtype: torch.dtype
    sizes: Sizes
    tokenizer: Any
    rows: list[Row] = field(default_factory=list)

    def model(self) -> Any:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        shape = dict(SHAPES[self.size])
        # past the tokenizer's ids, as a real vocabulary is (ids it never makes decode to "")
        shape["vocab_size"] = shape["vocab_size"] or len(self.tokenizer) + 64
        config = Qwen2Config(**shape, max_position_embeddings=32768, tie_word_embeddings=True,
                             eos_token_id=self.tokenizer.eos_token_id, pad_token_id=self.tokenizer.pad_token_id,
                             attn_implementation="sdpa")
        torch.manual_seed(0)
        with torch.device(self.device):
            model = Qwen2ForCausalLM(config)
        return model.to(self.dtype).eval()

    def engine(self) -> LocalLM:
        return LocalLM(self.model(), self.tokenizer, f"hf:random-qwen2-{self.size}")


def build_tokenizer(vocab_size: int) -> Any:
    """The in-process tokenizer, its merges learned on the prompts the rows send."""
    import random

    from marlang.envs.tasks.data.humaneval import read_packaged_humaneval

    class Joined:  # bench_ppo's prompts through a plain template, for the corpus only
        def apply_chat_template(self, messages: list[dict[str, str]], **_: Any) -> str:
            return "\n".join(m["content"] for m in messages)

    rng = random.Random(0)
    lines = [bench_ppo.observation_prompt(Joined(), rng, a, k) for k in range(40) for a in bench_ppo.AGENTS]
    preamble, question, _ = bench_credit.ranking_prompts("gridworld/two-switch")
    lines += [preamble, str(question)]
    lines += [row["prompt"] for row in read_packaged_humaneval()[:40]]
    return tiny_tokenizer(vocab_size, corpus=[ln for text in lines for ln in text.splitlines()])


def _ratio(value: float) -> float:
    return round(float(value), 3)


# ------------------------------------------------------------------------------------ the rows


def rollout_rows(b: Bench) -> list[Row]:
    """Mixed-adapter rollout decisions of 4 and 8 agents: per-agent forwards / one forward."""
    s = b.sizes
    agents = [f"agent_{k}" for k in range(8)]
    team = bench_ppo.ppo_team(b.model(), agents)
    rows = []
    for n, cpu in ((4, "0.93x"), (8, "n/a")):
        mb = bench_ppo.make_minibatch(b.tokenizer, max(s.decisions, n), seed=1, agents=agents[:n]).to(b.device)
        r = bench_ppo.rollout_times(team, mb, b.tokenizer.pad_token_id, repeats=s.repeats, warmup=s.warmup)
        rows.append(Row(f"rollout, {n} agents: per agent / mixed", b.size, _ratio(r["rollout_speedup"]), cpu,
                        ">= 1.5", f"mixed {r['rollout_mixed_ms']:.0f} ms, per agent {r['rollout_per_agent_ms']:.0f}"
                        f" ms, {len(mb)} decisions, |diff| {r['rollout_max_abs_diff']:.0e}"))
    return rows


def ppo_rows(b: Bench) -> list[Row]:
    """One PPO minibatch, forward + backward: packed against its floor and against repeated prompts."""
    s = b.sizes
    team = bench_ppo.ppo_team(b.model(), bench_ppo.AGENTS[:1])
    mb = bench_ppo.make_minibatch(b.tokenizer, s.decisions, seed=0).to(b.device)
    chunk = max(1, s.decisions // len(bench_ppo.CANDIDATES))
    r = bench_ppo.minibatch_times(team, mb, b.tokenizer.pad_token_id, repeats=s.repeats, warmup=s.warmup,
                                  chunk=chunk)
    tokens = f"{len(mb)} decisions, prompts {min(mb.prompt_tokens)}-{max(mb.prompt_tokens)} tokens"
    return [
        Row("PPO minibatch: packed / floor", b.size, _ratio(r["ppo_packed_over_plain"]), "1.11x", "<= 1.3",
            f"packed {r['ppo_packed_ms']:.0f} ms, floor {r['ppo_plain_ms']:.0f} ms, {tokens}"),
        Row("PPO minibatch: repeated prompt / packed", b.size, _ratio(r["ppo_repeated_over_packed"]), "4.7x",
            ">= 3", f"repeated {r['ppo_repeated_ms']:.0f} ms, grad rel diff {r['ppo_grad_rel_diff']:.0e}"),
    ]


def lca_rows(b: Bench) -> list[Row]:
    """LCA ranking: pairs per second scoring "Yes" against "No" / generating a reply."""
    s = b.sizes
    r = bench_credit.ranking_speed(b.engine(), s.pairs, s.reply_tokens)
    return [Row("LCA ranking: scoring / generating", b.size, _ratio(r["speedup"]), "1.59x", ">= 3",
                f"{r['scoring_pairs_per_s']} vs {r['generating_pairs_per_s']} pairs/s, {s.pairs} pairs, "
                f"replies of {s.reply_tokens} tokens")]


def magrpo_rows(b: Bench) -> list[Row]:
    """MAGRPO: one turn's batched sampling with per-row adapters, and one agent's training step."""
    s = b.sizes
    engine = b.engine()
    team = bench_magrpo.magrpo_team(engine)
    r = bench_magrpo.sampling_times(engine, team, s.new_tokens, repeats=s.repeats, warmup=s.warmup)
    r.update(bench_magrpo.training_times(engine, team, repeats=s.repeats, warmup=s.warmup))
    return [
        Row("MAGRPO sampling: per-agent generate / batched", b.size, _ratio(r["sampling_speedup_vs_generate"]),
            "1.63x", ">= 1.5", f"batched {r['sampling_batched_ms']:.0f} ms, per agent "
            f"{r['sampling_per_agent_generate_ms']:.0f} ms, {r['sampling_tokens']} tokens"),
        Row("MAGRPO training: per completion / shared prompt", b.size,
            _ratio(r["training_speedup_vs_per_completion"]), "2.25x", ">= 2",
            f"shared {r['training_shared_prompt_ms']:.0f} ms, per completion "
            f"{r['training_per_completion_ms']:.0f} ms, padded batch {r['training_padded_batch_ms']:.0f} ms"),
    ]


def parallel_rows(b: Bench) -> list[Row]:
    """Episodes per minute with run.parallel 8 against 1 (BabyAI pickup, 2 agents)."""
    s = b.sizes
    chat = LocalChatModel(engine=b.engine(), max_tokens=s.episode_tokens)
    r = bench_parallel.main(s.episodes, s.max_steps, model=chat, label=f"random qwen2-{b.size}")
    return [Row("parallel episodes: 8 at once / one at a time", b.size, _ratio(r["speedup_8_vs_1"]), "1.34x",
                ">= 2.5", f"{r['seconds_parallel_1']:.1f} s vs {r['seconds_parallel_8']:.1f} s for "
                f"{s.episodes} episodes")]


def _update_peak(b: Bench, variant: str, checkpointing: bool) -> tuple[float, int]:
    """Peak GPU memory of two PPO updates (forward, backward, AdamW) above the memory before them."""
    update = bench_ppo.UpdateParts.build(b.model(), b.tokenizer, variant, b.sizes.decisions, checkpointing)
    with torch.no_grad():
        score_decisions(update.policy, update.mb.items[:1], update.pad_id)
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with update.context:
        update.run(2)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    trainable = sum(p.numel() for p in update.params)
    del update
    gc.collect()
    torch.cuda.empty_cache()
    return peak / 2**20, trainable


def memory_rows(b: Bench) -> list[Row]:
    """Peak GPU memory of a LoRA PPO update / a full fine-tuning one, without and with checkpointing."""
    names = ("PPO update memory: LoRA / full", "PPO update memory, checkpointing: LoRA / full")
    if b.device.type != "cuda":
        return [Row(name, b.size, None, cpu, "<= 0.5", "n/a (no GPU: peak GPU memory is measured on CUDA only)")
                for name, cpu in zip(names, ("0.47x", "0.33x"), strict=True)]
    rows = []
    for name, cpu, checkpointing in zip(names, ("0.47x", "0.33x"), (False, True), strict=True):
        lora, lora_params = _update_peak(b, "lora", checkpointing)
        full, full_params = _update_peak(b, "full", checkpointing)
        rows.append(Row(name, b.size, _ratio(lora / full), cpu, "<= 0.5",
                        f"LoRA +{lora:.0f} MiB ({lora_params / 1e6:.1f} M trainable), full +{full:.0f} MiB "
                        f"({full_params / 1e6:.0f} M), {b.sizes.decisions} decisions, {b.dtype}"))
    return rows


PEER_PACKAGES = ("comlrl", "trl", "peft", "datasets")


def peer_rows(b: Bench) -> list[Row]:
    """marlang's MAGRPO and GRPO steps against CoMLRL's and TRL's on this size's model
    (benchmarks/peers.py, each side in a process of its own, the peers in this interpreter)."""
    import importlib.util
    import tempfile

    import peers

    names = [f"{c.name}: {c.peer_label.split()[0]} step / marlang step" for c in peers.CASES]
    if missing := [p for p in PEER_PACKAGES if importlib.util.find_spec(p) is None]:
        return [Row(name, b.size, None, "see docs", ">= 1.5", f"n/a (needs {', '.join(missing)} in this "
                    "interpreter: the peers' packages are in .venv-peers, benchmarks/peers/requirements.txt)")
                for name in names]
    s = b.sizes
    sizes = peers.Sizes(seeds=1, steps=s.peer_steps, max_new_tokens=s.new_tokens)
    rows = []
    with tempfile.TemporaryDirectory(prefix="marlang-gpu-peers-") as tmp:
        scratch = Path(tmp)
        model = scratch / "model"
        b.model().save_pretrained(model)  # in the check's dtype: both sides load it as saved
        b.tokenizer.save_pretrained(model)
        for name, case in zip(names, peers.CASES, strict=True):
            ours = peers.run_side("marlang", case, sizes, model, 0, scratch, Path(sys.executable))
            theirs = peers.run_side("peer", case, sizes, model, 0, scratch, Path(sys.executable))
            r = peers.row(case, sizes, [ours], [theirs])
            rows.append(Row(name, b.size, _ratio(r["speedup"]), "see docs", ">= 1.5",
                            f"marlang {r['marlang']['step_s']:.1f} s, peer {r['peer_figures']['step_s']:.1f} s per "
                            f"step; memory {r['memory_ratio']:.2f}x; reward {r['verdicts']['reward']}"))
    return rows


ROWS: dict[str, tuple[str, Callable[[Bench], list[Row]]]] = {
    "rollout": ("mixed-adapter rollouts", rollout_rows),
    "ppo": ("packed PPO scoring", ppo_rows),
    "lca": ("LCA ranking", lca_rows),
    "magrpo": ("MAGRPO sampling and training", magrpo_rows),
    "parallel": ("parallel episodes", parallel_rows),
    "memory": ("LoRA vs full fine-tuning memory", memory_rows),
    "peers": ("CoMLRL and TRL side by side", peer_rows),
}
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def run_size(b: Bench, deadline: float, keys: list[str]) -> None:
    for title, measure in (ROWS[k] for k in keys):
        start = time.perf_counter()
        if start > deadline:
            b.rows.append(Row(title, b.size, None, note="skipped: the time budget was spent"))
            continue
        try:
            rows = measure(b)
        except Exception as exc:  # noqa: BLE001 - one row's failure is a finding, not the end of the check
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            rows = [Row(title, b.size, None, note=f"failed: {type(exc).__name__}: {first}"[:200])]
        elapsed = time.perf_counter() - start
        for row in rows:
            row.seconds = round(elapsed / len(rows), 1)
        b.rows.extend(rows)
        print(f"[{b.size}] {title}: {elapsed:.1f} s", flush=True)
        gc.collect()
        if b.device.type == "cuda":
            torch.cuda.empty_cache()


def print_table(rows: list[Row]) -> None:
    print(f"\n{'size':<5} {'row':<48} {'GPU':>8} {'CPU':>7} {'target':>7}  {'':6} {'s':>5}  figures")
    for r in rows:
        value = f"{r.value:.2f}x" if r.value is not None else "n/a"
        print(f"{r.size:<5} {r.name:<48} {value:>8} {r.cpu:>7} {r.target:>7}  {r.met:6} {r.seconds:5.1f}  {r.note}")


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU (seconds): checks the check")
    parser.add_argument("--sizes", default="0.5b,1.5b", help="model shapes, of " + ", ".join(SHAPES))
    parser.add_argument("--out", type=Path, help="also write the rows as JSON")
    parser.add_argument("--rows", default=",".join(ROWS), help="which rows, of " + ", ".join(ROWS))
    parser.add_argument("--dtype", choices=list(DTYPES), help="the weights' dtype (default: bfloat16 on a GPU, "
                        "float32 on the CPU); float32 on a GPU checks the rows' |diff| figures without bf16 rounding")
    parser.add_argument("--budget-s", type=float, help="skip the rows still to run after this many seconds "
                        f"(default {Sizes.budget_s:g}; the dry run's {DRY_RUN.budget_s:g})")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*generation flags are not valid.*")
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
    sizes = DRY_RUN if args.dry_run else Sizes()
    if args.budget_s is not None:
        sizes = replace(sizes, budget_s=args.budget_s)
    names = ["tiny"] if args.dry_run else [n.strip() for n in args.sizes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; known: {', '.join(SHAPES)}")
    keys = [k.strip() for k in args.rows.split(",") if k.strip()]
    if unknown := [k for k in keys if k not in ROWS]:
        parser.error(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    device = torch.device("cuda" if torch.cuda.is_available() and not args.dry_run else "cpu")
    dtype = DTYPES[args.dtype] if args.dtype else torch.bfloat16 if device.type == "cuda" else torch.float32
    threads = torch.get_num_threads()
    if args.dry_run:  # tiny matrices: more threads only wait for each other, the more so on a busy machine
        torch.set_num_threads(1)
    try:
        return _check(args, names, keys, sizes, device, dtype)
    finally:
        torch.set_num_threads(threads)


def _check(args: argparse.Namespace, names: list[str], keys: list[str], sizes: Sizes, device: torch.device,
           dtype: torch.dtype) -> list[Row]:
    begin = time.perf_counter()
    deadline = begin + sizes.budget_s
    tokenizer = build_tokenizer(sizes.tokenizer_vocab)
    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else "no GPU"
    print(f"GPU check on {device} ({gpu}), {dtype}, torch {torch.__version__}; sizes {', '.join(names)}; "
          f"CPU figures and targets from docs/benchmarks.md", flush=True)
    if args.dry_run:
        print("dry run: tiny sizes, no warm-up; its ratios check that every row runs, not the targets", flush=True)
    rows: list[Row] = []
    for name in names:
        bench = Bench(name, device, dtype, sizes, tokenizer)
        run_size(bench, deadline, keys)
        rows.extend(bench.rows)
    print_table(rows)
    print(f"\nGPU check: {time.perf_counter() - begin:.0f} s")
    if args.out:
        args.out.write_text(json.dumps({"device": gpu, "dtype": str(dtype), "torch": torch.__version__,
                                        "rows": [asdict(r) | {"met": r.met} for r in rows]}, indent=2))
    return rows


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
