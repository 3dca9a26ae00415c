"""LLM-MCA with the embedded SmolLM2 as the critic: a short MAPPO run on the climbing game in
which the critic's credits are read from its real replies, trained on, and accounted; a second
run replays every call from the response cache."""

from __future__ import annotations

import csv
import json

import pytest

import marlang.methods.neural.critics.critic as critic_module
from marlang.config import build_config
from marlang.models import SQLiteResponseCache, load_chat_model
from marlang.run import Experiment

pytestmark = pytest.mark.real_model


def test_smollm2_credits_a_climbing_batch(tmp_path, monkeypatch, smollm2_engine, response_cache_path):
    cache = SQLiteResponseCache(response_cache_path)
    monkeypatch.setattr(critic_module, "critic_chat_model",
                        lambda config: load_chat_model("local:smollm2", engine=smollm2_engine, cache=cache,
                                                       temperature=0.0))
    config = build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
        "learning": {"method": "mappo", "frames": 50, "frames_per_batch": 50, "n_envs": 2, "epochs": 1,
                     "minibatch_size": 50, "hidden": [8], "evaluation_episodes": 1, "critic": "llm_mca",
                     "critic_steps": 6, "critic_max_tokens": 256},
    })

    def run(name):
        Experiment(config, tmp_path / name).run()
        rows = [json.loads(line) for line in (tmp_path / name / "credit" / "llm_credit.jsonl").read_text().splitlines()]
        with open(tmp_path / name / "llm_calls.csv", newline="") as fh:
            calls = list(csv.DictReader(fh))
        with open(tmp_path / name / "iterations.csv", newline="") as fh:
            iteration = next(csv.DictReader(fh))
        return rows, calls, iteration

    rows, calls, iteration = run("first")
    assert 6 <= len(rows) < 50 and calls and {c["role"] for c in calls} == {"critic"}
    assert not any(c["cached"] == "True" for c in calls)
    credited = [r for r in rows if not r["missed"]]
    assert credited  # the prefilled JSON gets real credits out of the 135M model
    for row in rows:
        assert sum(row["credit"].values()) == pytest.approx(row["team_reward"], abs=1e-4)
    assert int(iteration["critic_failures"]) == sum(len(r["missed"]) for r in rows)
    assert float(iteration["critic_tokens_per_kframe"]) > 0

    again, calls_again, _ = run("second")
    assert [r["credit"] for r in again] == [r["credit"] for r in rows]
    assert all(c["cached"] == "True" for c in calls_again)
