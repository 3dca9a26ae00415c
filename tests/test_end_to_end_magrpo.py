"""MAGRPO end to end on the embedded SmolLM2: one real iteration on HumanEval with two agents
(helper + main) answering jointly (the runtime's sampled episode, a tree of G = 2 joint answers
judged in the sandbox, a LoRA update of both adapters), then ``marlang run --set
model.adapters=RUN`` plays the trained team back from the command line."""

from __future__ import annotations

import json

import pytest
import yaml

from marlang.cli import main
from marlang.config import build_config
from marlang.models import LocalChatModel, LocalLM
from marlang.run import Experiment
from marlang.rundir import RunDirectory

pytestmark = pytest.mark.real_model

CONFIG = {
    "env": {"id": "code/humaneval", "n_agents": 2, "max_steps": 1, "kwargs": {"structure": "joint"}},
    "model": {"spec": "local:smollm2", "cache": False, "max_tokens": 32},
    "agents": {"chain_of_thought": False, "history": 1},
    "learning": {"method": "magrpo", "iterations": 1, "rollouts": 1, "num_generations": 2, "max_new_tokens": 32,
                 "eval_episodes": 0, "minibatch_size": 4, "lora": {"r": 4, "alpha": 8}},
    "run": {"parallel": 1, "progress": False, "seed": 0},
}


def test_magrpo_iteration_on_smollm2_then_play_back_from_the_cli(tmp_path):
    engine = LocalLM.from_spec("local:smollm2")  # a fresh engine: MAGRPO attaches adapters to it
    trained = Experiment(build_config(CONFIG), tmp_path / "train", chat_model=LocalChatModel(engine=engine)).run()
    rd = RunDirectory(trained.run_dir)
    state = rd.read_json("learner_state.json")
    assert set(state["adapters"]) == {"agent_0", "agent_1"}
    (row,) = rd.read_iterations()
    # one node, G = 2 joint actions, each agent trained on its 2 completions
    assert row["nodes_expanded"] == 1 and row["joint_actions"] == 2 and row["completions"] == 4
    assert row["skipped_steps"] == 0 and row["tokens_sampled"] > 0
    tree = [json.loads(line) for line in (trained.run_dir / "trees" / "0.jsonl").read_text().splitlines()]
    assert len(tree) == 2 and all(set(t["answers"]) == {"agent_0", "agent_1"} for t in tree)
    assert sum(t["advantage"] for t in tree) == pytest.approx(0.0)  # a mean baseline over siblings
    assert rd.read_json("manifest.json")["learner"] == "magrpo"
    # the adapters moved from their initial weights: LoRA B starts at zero, so any change shows
    from safetensors.torch import load_file

    for agent in ("agent_0", "agent_1"):
        weights = load_file(str(trained.run_dir / "adapters" / "0" / agent / "adapter_model.safetensors"))
        lora_b = [w for k, w in weights.items() if "lora_B" in k]
        assert lora_b and any(float(w.abs().max()) > 0 for w in lora_b) or all(
            t["advantage"] == 0 for t in tree)

    play_config = tmp_path / "play.yaml"
    play_config.write_text(yaml.safe_dump({**CONFIG, "learning": {"method": "none"},
                                           "run": {"episodes": 1, "progress": False, "seed": 0}}))
    out = tmp_path / "play"
    assert main(["run", str(play_config), "--set", f"model.adapters={trained.run_dir}", "--out", str(out)]) == 0
    played = json.loads((out / "manifest.json").read_text())
    assert played["adapters"].keys() == state["adapters"].keys()
    (episode,) = RunDirectory(out).load_episode_dicts()
    assert episode["steps"] and set(episode["steps"][0]["decisions"]) == {"agent_0", "agent_1"}
