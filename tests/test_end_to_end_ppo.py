"""PPO end to end on the embedded SmolLM2: one real iteration (sampled rollouts, a real LoRA
update of both agents' adapters, greedy held-out evaluation), then ``marlang run --set
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
    "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2, "kwargs": {"room_size": 5, "num_dists": 1}},
    "model": {"spec": "local:smollm2", "cache": False},
    "agents": {"chain_of_thought": False, "action_selection": "score", "history": 1},
    "learning": {"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                 "eval_episodes": 1, "lora": {"r": 4, "alpha": 8}},
    "run": {"parallel": 2, "progress": False, "seed": 0},
}


def test_ppo_iteration_on_smollm2_then_play_back_from_the_cli(tmp_path, capsys):
    # a fresh engine: PPO attaches adapters to the model it trains
    engine = LocalLM.from_spec("local:smollm2")
    trained = Experiment(build_config(CONFIG), tmp_path / "train", chat_model=LocalChatModel(engine=engine)).run()
    rd = RunDirectory(trained.run_dir)
    state = rd.read_json("learner_state.json")
    assert set(state["adapters"]) == {"agent_0", "agent_1"}
    (row,) = rd.read_iterations()
    assert row["decisions"] == 8 and row["minibatches"] == 2 and row["skipped_minibatches"] == 0
    manifest = rd.read_json("manifest.json")
    assert manifest["weights_id"] and manifest["learner"] == "ppo"
    train = [d for d in rd.load_episode_dicts() if d["phase"] == "train"]
    assert all(dec["sampled"] for d in train for s in d["steps"] for dec in s["decisions"].values())

    play_config = tmp_path / "play.yaml"
    play_config.write_text(yaml.safe_dump({**CONFIG, "learning": {"method": "none"},
                                           "run": {"episodes": 1, "progress": False, "seed": 0}}))
    out = tmp_path / "play"
    code = main(["run", str(play_config), "--set", f"model.adapters={trained.run_dir}", "--out", str(out)])
    assert code == 0
    played = json.loads((out / "manifest.json").read_text())
    hashes = {a: r["hash"] for a, r in state["adapters"].items()}
    assert played["adapters"].keys() == hashes.keys()
    (episode,) = RunDirectory(out).load_episode_dicts()
    first = episode["steps"][0]["decisions"]
    # the trained team acted: greedy decisions scored by its adapters, with its value heads
    assert all(d["value"] is not None and not d["sampled"] for d in first.values())
    assert "run directory" in capsys.readouterr().out
