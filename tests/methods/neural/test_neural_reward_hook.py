"""The per-agent reward hook reaches the loss: synthetic difference rewards from the climbing
game's true payoffs are what MAPPO's and QMIX's training batches carry, and a hook that zeroes
the rewards stops learning."""

from __future__ import annotations

import json

import pytest
import torch
from benchmarl.experiment.callback import Callback
from tensordict import TensorDict

from marlang.config import build_config
from marlang.methods.neural.reward_hook import apply_reward_hook
from marlang.run import run_experiment as train
from tests.methods.neural.climbing_credit import difference_rewards


class RewardProbe(Callback):
    """Checks every training minibatch (what the loss receives) against the hook's rewards."""

    def __init__(self) -> None:
        super().__init__()
        self.minibatches = 0
        self.team_rewards_checked = 0

    def on_train_step(self, batch, group):
        expected = difference_rewards(batch)
        torch.testing.assert_close(batch.get(("next", "agents", "reward")), expected)
        if ("next", "reward") in batch.keys(True):  # QMIX/VDN learn from the team reward
            torch.testing.assert_close(batch.get(("next", "reward")), expected.mean(-2))
            self.team_rewards_checked += 1
        if ("agents", "advantage") in batch.keys(True):  # PPO: GAE ran on the hooked rewards
            assert batch.get(("agents", "value_target")).shape == expected.shape
        self.minibatches += 1


def climbing(method: str, **learning):
    return build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
        "learning": {"method": method, "n_envs": 4, "hidden": [32, 32], "evaluation_episodes": 2,
                     **learning},
    })


def test_mappo_trains_on_difference_rewards_from_the_config(tmp_path):
    probe = RewardProbe()
    config = climbing("mappo", frames=2000, frames_per_batch=1000, epochs=2, minibatch_size=500,
                      reward_hook="tests.methods.neural.climbing_credit:difference_rewards")
    result = train(config, tmp_path / "run", callbacks=[probe])
    assert probe.minibatches == 2 * 2 * 2  # 2 batches x 2 epochs x 2 minibatches, all checked
    rows = result.summary["iterations"]
    assert all(r["train_reward_mean"] != r["env_reward_mean"] for r in rows)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["reward_hook"] == "tests.methods.neural.climbing_credit:difference_rewards"


def test_qmix_trains_on_the_team_mean_of_a_python_hook(tmp_path):
    probe = RewardProbe()
    config = climbing("qmix", frames=400, frames_per_batch=200, optimizer_steps=5, batch_size=64)
    # A closure works too (BenchMARL pickles its callbacks; the hook is left out there).
    train(config, tmp_path / "run", reward_hook=lambda batch: difference_rewards(batch), callbacks=[probe])
    assert probe.minibatches == 2 * 5 and probe.team_rewards_checked == 10


def slow_env_rewards(batch):
    import time

    time.sleep(0.3)
    return batch.get(("next", "agents", "reward")).clone()


def test_iterations_say_how_long_the_hook_and_the_update_took(tmp_path):
    config = climbing("mappo", frames=400, frames_per_batch=200, epochs=1, minibatch_size=200)
    rows = train(config, tmp_path / "hooked", reward_hook=slow_env_rewards).summary["iterations"]
    assert len(rows) == 2
    assert all(r["hook_seconds"] >= 0.3 and r["update_seconds"] > 0 for r in rows)
    plain = train(config, tmp_path / "plain").summary["iterations"]
    assert all("hook_seconds" not in r and r["update_seconds"] > 0 for r in plain)


def test_zero_rewards_stop_learning(tmp_path):
    config = climbing("mappo", frames=3000, frames_per_batch=1000, lr=5e-3, epochs=4, minibatch_size=250,
                      reward_hook="tests.methods.neural.climbing_credit:zero_rewards")
    rows = train(config, tmp_path / "run").summary["iterations"]
    assert all(r["train_reward_mean"] == 0.0 and r["env_reward_mean"] != 0.0 for r in rows)
    # Only the entropy bonus is left: the policy drifts to uniform (a random team: about -86),
    # where the same run with the env's rewards climbs above zero (test_neural_learning).
    assert rows[-1]["return_mean"] < rows[0]["return_mean"] - 20
    assert rows[-1]["return_mean"] < -60


def test_hook_output_is_checked():
    batch = TensorDict({("agents", "action"): torch.tensor([[[0, 0], [1, 2]]]),
                        ("next", "agents", "reward"): torch.full((1, 2, 2, 1), 11.0)}, batch_size=[1, 2])
    stats = apply_reward_hook(lambda b: torch.ones(1, 2, 2), batch)  # [..., n_agents] is accepted
    assert stats == {"env_reward_mean": 11.0, "train_reward_mean": 1.0}
    assert batch.get(("next", "agents", "reward")).shape == (1, 2, 2, 1)
    with pytest.raises(ValueError, match=r"returned shape \(2,\); expected \(1, 2, 2, 1\)"):
        apply_reward_hook(lambda b: torch.ones(2), batch)
    with pytest.raises(ValueError, match="non-finite"):
        apply_reward_hook(lambda b: torch.full((1, 2, 2, 1), float("nan")), batch)
    with pytest.raises(TypeError, match="not a torch.Tensor"):
        apply_reward_hook(lambda b: [1.0], batch)
