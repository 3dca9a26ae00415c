"""Reward hooks for the neural-learner tests: difference rewards from the climbing game's true
payoffs (a synthetic stand-in for an LLM critic's per-agent credit) and a hook that zeroes all."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from marlang.envs.credit.climbing import CLIMBING_PAYOFF


def difference_rewards(batch: TensorDictBase) -> torch.Tensor:
    """Agent i's reward: the joint payoff minus the payoff averaged over agent i's own actions
    with its teammate's action fixed; shaped like ``("next", "agents", "reward")``."""
    payoff = torch.as_tensor(CLIMBING_PAYOFF)
    actions = batch.get(("agents", "action")).long()
    row, column = actions[..., 0], actions[..., 1]
    joint = payoff[row, column]
    row_baseline = payoff[:, column].mean(dim=0)  # agent_0's actions averaged, agent_1's fixed
    column_baseline = payoff[row, :].mean(dim=-1)
    return torch.stack([joint - row_baseline, joint - column_baseline], dim=-1).unsqueeze(-1)


def zero_rewards(batch: TensorDictBase) -> torch.Tensor:
    """No reward at all: nothing left to learn from."""
    return torch.zeros_like(batch.get(("next", "agents", "reward")))
