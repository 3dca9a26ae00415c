"""A short IPPO + LCA run on Two-Switch with the heuristic ranker: the per-agent credit
reaches every training minibatch, and the run directory holds the rankings, the scoring
model and its accuracy."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from benchmarl.experiment.callback import Callback

from marlang.config import build_config
from marlang.run import Experiment


class CreditProbe(Callback):
    """Checks what the loss receives: the env's team reward (the same for both agents in
    Two-Switch) plus each agent's sigma(o') - sigma(o) from the critic's current models."""

    def __init__(self) -> None:
        super().__init__()
        self.run: Experiment | None = None
        self.minibatches = 0
        self.nonzero = 0
        self.batches = 0

    def __getstate__(self):  # BenchMARL pickles its callbacks; the run stays out
        return {"experiment": None}

    def on_batch_collected(self, batch):
        # The records the batch points to are the states of its steps: the state after is one
        # step later, and each record's step count is the observation's time feature.
        records = self.run.learner.critic.records
        before, after = records.lookup(batch, next_state=False), records.lookup(batch, next_state=True)
        steps = (batch.get(("agents", "observation"))[..., 0, -1].reshape(-1) * 40).round().tolist()
        pairs = [(b, a, s) for b, a, s in zip(before, after, steps, strict=True) if b is not None]
        assert len(pairs) == len(before)  # every step's records are there
        assert all(a.snapshot.step == b.snapshot.step + 1 and b.snapshot.step == s for b, a, s in pairs)
        self.batches += 1

    def on_train_step(self, batch, group):
        reward = batch.get(("next", "agents", "reward")).squeeze(-1)
        credit = self.run.learner.critic.credit(batch)
        # Two-Switch gives every agent the team reward: what differs between agents is the credit.
        torch.testing.assert_close(reward[..., 0] - reward[..., 1], credit[..., 0] - credit[..., 1])
        team = reward - credit
        torch.testing.assert_close(team[..., 0], team[..., 1])
        self.nonzero += int((credit.abs() > 1e-6).any())
        assert ("agents", "advantage") in batch.keys(True)  # GAE ran on these rewards
        self.minibatches += 1


def test_ippo_with_lca_heuristic_ranker_trains_on_the_credit(tmp_path):
    config = build_config({
        "env": {"id": "gridworld/two-switch", "max_steps": 40}, "agents": {"kind": "neural"},
        "learning": {"method": "ippo", "frames": 2000, "frames_per_batch": 1000, "n_envs": 4, "epochs": 2,
                     "minibatch_size": 500, "hidden": [32, 32], "evaluation_episodes": 2, "critic": "lca",
                     "ranker": "heuristic", "ranker_pairs": 64, "bt_epochs": 5},
    })
    probe = CreditProbe()
    run = Experiment(config, tmp_path / "run", callbacks=[probe])
    probe.run = run
    result = run.run()
    assert probe.batches == 2 and probe.minibatches == 2 * 2 * 2 and probe.nonzero == probe.minibatches

    run = tmp_path / "run"
    rankings = [json.loads(line) for line in (run / "credit" / "rankings.jsonl").read_text().splitlines()]
    assert len(rankings) == 2 * 64 * 2  # 2 critic calls x 64 pairs x 2 agents
    assert {r["agent"] for r in rankings} == {"agent_0", "agent_1"}
    assert all(r["answers"] == [r["heuristic"]] for r in rankings)  # the heuristic ranker
    steps = [json.loads(line) for line in (run / "credit" / "timesteps.jsonl").read_text().splitlines()]
    assert len(steps) == 2 * 1000  # every trained timestep, for marlang export
    ranked = [s for s in steps if s["rankings"]]
    assert len(ranked) == 2 * 64 and all(len(s["rankings"]) == 2 and len(s["rankings"][0]) == 1 for s in ranked)
    assert (run / "credit" / "bt_agent_0+agent_1.pt").is_file()  # one model: homogeneous agents
    calls = [json.loads(line) for line in (run / "credit" / "accuracy.jsonl").read_text().splitlines()]
    assert [c["batch"] for c in calls] == [0, 1] and all(c["ranker_agreement"] == 1.0 for c in calls)
    with open(run / "iterations.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert all(0.0 <= float(r["credit_accuracy"]) <= 1.0 for r in rows)
    assert all(float(r["train_reward_mean"]) != float(r["env_reward_mean"]) for r in rows)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["critic"]["critic"] == "lca" and manifest["critic"]["groups"] == {
        "agent_0+agent_1": ["agent_0", "agent_1"]}
    assert result.summary["episodes"] == 2


def test_an_unreachable_critic_model_stops_the_run_with_what_to_check(tmp_path):
    from marlang.models import ModelUnreachableError

    config = build_config({
        "env": {"id": "gridworld/two-switch", "max_steps": 20}, "agents": {"kind": "neural"},
        "model": {"base_url": "http://127.0.0.1:9/v1", "max_retries": 1, "timeout": 2, "cache": False},
        "learning": {"method": "ippo", "frames": 200, "frames_per_batch": 200, "n_envs": 2, "epochs": 1,
                     "minibatch_size": 200, "hidden": [8], "evaluation_episodes": 1, "critic": "lca",
                     "ranker": "llm", "critic_model": "openai:some-model", "ranker_pairs": 2},
    })
    with pytest.raises(ModelUnreachableError) as err:
        Experiment(config, tmp_path / "run").run()
    message = str(err.value)
    assert "learning.critic_model" in message and "127.0.0.1:9" in message
    assert json.loads((tmp_path / "run" / "neural_state.json").read_text())["status"] == "training"  # resumable
    assert "Team goal" in (tmp_path / "run" / "credit" / "key_steps.txt").read_text()
    assert not (tmp_path / "run" / "credit" / "rankings.jsonl").exists()  # nothing was ranked


def test_an_interrupted_lca_run_resumes_with_its_rankings_and_exports_each_batch_once(tmp_path):
    from marlang.methods.neural.critics.dataset import read_timesteps
    from tests.methods.neural.test_neural_methods import StopAfter

    config = build_config({
        "env": {"id": "gridworld/two-switch", "max_steps": 40}, "agents": {"kind": "neural"},
        "learning": {"method": "ippo", "frames": 1500, "frames_per_batch": 500, "n_envs": 2, "epochs": 1,
                     "minibatch_size": 250, "hidden": [16], "evaluation_episodes": 1, "critic": "lca",
                     "ranker": "heuristic", "ranker_pairs": 16, "bt_epochs": 2, "checkpoint_batches": 1},
    })
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        Experiment(config, out, callbacks=[StopAfter(2)]).run()
    ranked_before = len((out / "credit" / "rankings.jsonl").read_text().splitlines())
    assert ranked_before >= 2 * 16 * 2  # batches 0 and 1 were ranked before the interruption
    trainer = Experiment(config, out, resume=True)
    trainer.run()
    rankings = (out / "credit" / "rankings.jsonl").read_text().splitlines()
    assert len(rankings) > ranked_before  # the resumed run ranked on, after what it had
    # The resumed critic trained on every ranking of the run, those from before the interruption too.
    assert sum(len(rows) for rows in trainer.learner.critic.data.values()) == len(rankings)
    steps = list(read_timesteps(out))
    assert [s["iteration"] for s in steps] == [i for i in range(3) for _ in range(500)]
