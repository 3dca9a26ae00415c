"""One short episode of Overcooked and of Pistonball through the alternating-proposals protocol
on the embedded SmolLM2: the protocols and the runner work on these envs unchanged."""

from __future__ import annotations

import json

import pytest

from marlang.config import build_config
from marlang.models import LocalChatModel
from marlang.run import Experiment

pytestmark = pytest.mark.real_model


@pytest.mark.parametrize(
    ("env", "n_agents", "max_steps"),
    [("overcooked/cramped-room", 2, 6), ("pistonball/n5", 5, 2)],
)
def test_alternating_episode_on_smollm2(tmp_path, smollm2_engine, env, n_agents, max_steps):
    config = build_config({
        "env": {"id": env, "n_agents": n_agents, "max_steps": max_steps},
        "model": {"spec": "local:smollm2", "max_tokens": 8, "message_max_tokens": 8, "cache": False},
        "protocol": {"name": "alternating", "rounds": 1},
        "learning": {"method": "none"},
        "run": {"episodes": 1, "progress": False, "seed": 0},
    })
    result = Experiment(config, tmp_path / "run", chat_model=LocalChatModel(engine=smollm2_engine)).run()
    (episode,) = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    agents = [f"agent_{i}" for i in range(n_agents)]
    assert episode["agents"] == agents and episode["n_steps"] >= 1
    for step in episode["steps"]:
        # one round: every agent speaks once, in order, over the shared transcript
        assert [m["sender"] for m in step["messages"]] == agents
        for agent, decision in step["decisions"].items():
            assert decision["action"] in step["observations"][agent]["legal_actions"]
        assert len(set(step["rewards"].values())) == 1  # shared team reward
    assert episode["steps"][-1]["truncated"] or episode["steps"][-1]["terminated"]
    assert result.summary["episodes"] == 1
    assert result.summary["invalid_action_rate"]["decisions"] == episode["n_steps"] * n_agents
