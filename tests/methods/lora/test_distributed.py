"""Data-parallel PPO and MAGRPO under accelerate (two CPU processes, gloo): after an update the
adapters are identical in both processes and equal one process's on the same decisions (the
same completions); a short `marlang run` under accelerate trains and keeps every process's
adapters identical."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

HERE = Path(__file__).parent
ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def _launch(args: list[str], cwd: Path) -> None:
    done = subprocess.run([*ACCELERATE, *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_processes_take_the_same_step_as_one(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    script = str(HERE / "ddp_ppo_step.py")
    single = subprocess.run([sys.executable, script, str(one)], check=False, capture_output=True, text=True,
                            timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    _launch([script, str(two)], tmp_path)
    ranks = [torch.load(two / f"rank{r}.pt") for r in (0, 1)]
    alone = torch.load(one / "rank0.pt")
    assert ranks[0].keys() == alone.keys()
    for key in alone:
        assert torch.equal(ranks[0][key], ranks[1][key]), key
        assert torch.allclose(ranks[0][key], alone[key], atol=1e-6), key
    moved = [k for k in alone if "lora_B" in k and alone[k].abs().max() > 0]
    assert moved, "the update must have trained the adapters"
    # each process's loss is its share of the minibatch's: they add up to one process's loss
    losses = [json.loads((two / f"rank{r}.json").read_text())["losses"] for r in (0, 1)]
    single_losses = json.loads((one / "rank0.json").read_text())["losses"]
    for agent, loss in single_losses.items():
        assert sum(part[agent] for part in losses) == pytest.approx(loss, abs=1e-5)


@pytest.mark.parametrize("loss", ["reinforce", "grpo"])
def test_two_magrpo_processes_take_the_same_steps_as_one(tmp_path, loss):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    script = str(HERE / "ddp_magrpo_step.py")
    single = subprocess.run([sys.executable, script, str(one), loss, "64"], check=False, capture_output=True,
                            text=True, timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    _launch([script, str(two), loss, "64"], tmp_path)
    ranks = [torch.load(two / f"rank{r}.pt") for r in (0, 1)]
    alone = torch.load(one / "rank0.pt")
    for key in alone:
        assert torch.equal(ranks[0][key], ranks[1][key]), key
        assert torch.allclose(ranks[0][key], alone[key], atol=1e-6), key
    assert [k for k in alone if "lora_B" in k and alone[k].abs().max() > 0], "the update must train"
    # each process's loss is its share of the step's weighted mean
    parts = [json.loads((two / f"rank{r}.json").read_text()) for r in (0, 1)]
    single_losses = json.loads((one / "rank0.json").read_text())["losses"]
    for agent, value in single_losses.items():
        assert sum(p["losses"][agent] for p in parts) == pytest.approx(value, abs=1e-5)


def test_magrpo_processes_with_unequal_minibatches_take_the_same_steps(tmp_path):
    # minibatches of 4: process 0 holds 2 nodes (2 minibatches per agent), process 1 one node
    _launch([str(HERE / "ddp_magrpo_step.py"), str(tmp_path), "reinforce", "4"], tmp_path)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    for key in ranks[0]:
        assert torch.equal(ranks[0][key], ranks[1][key]), key
    parts = [json.loads((tmp_path / f"rank{r}.json").read_text())["counters"] for r in (0, 1)]
    assert parts[0]["steps"] == parts[1]["steps"] == 4
    assert parts[0]["skipped_steps"] == parts[1]["skipped_steps"] == 0


def test_a_short_ppo_run_under_accelerate(tmp_path):
    from marlang.testing import tiny_llama, tiny_tokenizer

    model_dir = tmp_path / "tiny"
    tokenizer = tiny_tokenizer()
    tiny_llama(len(tokenizer), seed=0, eos_token_id=tokenizer.eos_token_id).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    config = tmp_path / "ppo.yaml"
    config.write_text(yaml.safe_dump({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
        "model": {"spec": f"hf:{model_dir}", "cache": False},
        "agents": {"chain_of_thought": False, "action_selection": "score"},
        "learning": {"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                     "eval_episodes": 0, "device": "cpu", "lora": {"r": 4, "alpha": 8}},
        "run": {"parallel": 2, "progress": False},
    }))
    out = tmp_path / "run"
    _launch(["-m", "marlang.cli", "run", str(config), "--out", str(out)], tmp_path)
    first = json.loads((out / "learner_state.json").read_text())
    second = json.loads((out / "rank1" / "learner_state.json").read_text())
    # the processes played different episodes but hold the same adapters
    seeds = [{json.loads(line)["seed"] for line in (d / "episodes.jsonl").read_text().splitlines()}
             for d in (out, out / "rank1")]
    assert not seeds[0] & seeds[1]
    for agent in ("agent_0", "agent_1"):
        a = Path(first["adapters"][agent]["path"]) / "adapter_model.safetensors"
        b = Path(second["adapters"][agent]["path"]) / "adapter_model.safetensors"
        assert a.read_bytes() == b.read_bytes()
    shutil.rmtree(model_dir)
