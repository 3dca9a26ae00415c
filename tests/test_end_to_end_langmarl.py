"""One LangMARL iteration end to end on the embedded SmolLM2, on BabyAI, Overcooked and
Pistonball: the actors play, the same model writes credits, update directions and new
policies, and the run directory records them."""

from __future__ import annotations

import pytest

from marlang.config import build_config
from marlang.models import LocalChatModel
from marlang.run import Experiment
from marlang.rundir import RunDirectory

pytestmark = pytest.mark.real_model


@pytest.mark.parametrize(
    ("env", "n_agents", "max_steps"),
    [("babyai/goto-obj", 2, 3), ("overcooked/cramped-room", 2, 8), ("pistonball", 3, 3)],
)
def test_one_langmarl_iteration_on_smollm2(tmp_path, smollm2_engine, env, n_agents, max_steps):
    config = build_config({
        "env": {"id": env, "n_agents": n_agents, "max_steps": max_steps},
        "model": {"spec": "local:smollm2", "max_tokens": 8, "cache": False},
        "agents": {"policy": "Help the team.", "chain_of_thought": False},
        "learning": {"method": "langmarl", "rollouts": 2, "iterations": 1, "critic_max_tokens": 64,
                     "update_max_tokens": 24, "trajectory_tokens": 400, "steps_tokens": 150,
                     "policy_max_words": 20},
        "run": {"parallel": 2, "progress": False, "seed": 0},
    })
    result = Experiment(config, tmp_path / "run", chat_model=LocalChatModel(engine=smollm2_engine)).run()
    rd = RunDirectory(result.run_dir)
    agents = [f"agent_{i}" for i in range(n_agents)]
    (row,) = rd.read_iterations()
    assert row["episodes"] == 2 and row["critic_calls"] >= 2  # one per trajectory, plus any re-asks
    # a small model's critic may miss agents: each miss is counted, never filled with other text
    updates = rd.read_jsonl("updates.jsonl")
    assert [u["agent"] for u in updates] == agents
    failures = sum(t["credit_failed"] for u in updates for t in u["trajectories"])
    assert row["credit_failures"] == failures
    assert row["gradient_calls"] == 2 * n_agents - failures
    for u in updates:
        for t in u["trajectories"]:
            assert bool(t["credit"]) != t["credit_failed"]
            assert (t["gradient"] is None) == t["credit_failed"]
        if u["rewritten"]:
            assert u["new_policy"].strip() and u["aggregated_gradient"]
    policies = rd.read_jsonl("policies.jsonl")
    assert {p["agent"] for p in policies} == {u["agent"] for u in updates if u["rewritten"]}
    assert all(p["accepted"] and p["previous"] == "Help the team." for p in policies)
    assert result.summary["learner"] == "langmarl" and result.summary["episodes"] == 2
    state = rd.read_json("learner_state.json")
    assert state["iteration"] == 1
    assert all(state["policies"][p["agent"]] == p["text"] for p in policies)
