"""PPO's pure losses and the diagnostics an update logs (CleanRL's terms)."""

from __future__ import annotations

import math

import pytest
import torch

from marlang.methods.ppo.loss import clipped_value_loss, explained_variance, policy_terms


def test_the_k3_kl_is_zero_on_policy_and_never_negative_off_it():
    old = torch.tensor([-1.0, -0.5, -2.0])
    entropy = torch.zeros(3)
    same = policy_terms(old.clone(), old, torch.ones(3), entropy, clip_coef=0.2, ent_coef=0.0, total=3)
    assert float(same["approx_kl"]) == 0.0 and float(same["clip_fraction"]) == 0.0
    new = old + torch.tensor([0.5, -0.3, 0.1])
    off = policy_terms(new, old, torch.ones(3), entropy, clip_coef=0.2, ent_coef=0.0, total=3)
    logratio = new - old
    assert float(off["approx_kl"]) == pytest.approx(float(((logratio.exp() - 1) - logratio).sum()))
    assert float(off["approx_kl"]) > 0 and float(off["old_approx_kl"]) == pytest.approx(-0.3)
    assert float(off["clip_fraction"]) == 2.0  # exp(0.5) and exp(-0.3) leave [0.8, 1.2]


def test_the_value_loss_takes_the_worse_of_the_clipped_and_unclipped_errors():
    old, ret = torch.tensor([0.0, 0.0]), torch.tensor([1.0, -1.0])
    values = torch.tensor([2.0, -0.5])
    # unclipped errors 1 and 0.25; clipped values 0.2 and -0.2: errors 0.64 and 0.64
    assert float(clipped_value_loss(values, old, ret, 0.2, total=2)) == pytest.approx(0.5 * (1.0 + 0.64) / 2)


def test_explained_variance_of_the_returns_by_the_values():
    assert explained_variance([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert explained_variance([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]) == 0.0
    assert explained_variance([1.0], [1.0]) is None and explained_variance([0.0, 1.0], [2.0, 2.0]) is None
    assert math.isclose(explained_variance([2.0, 2.0], [1.0, 3.0]), 0.0)
