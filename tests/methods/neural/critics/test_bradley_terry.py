"""Bradley-Terry scoring models: training on rankings recovers a known potential, confidence
weights the loss, and potential-difference rewards telescope over an episode."""

from __future__ import annotations

import pytest
import torch

from marlang.methods.neural.critics.bradley_terry import StateScorer, bt_loss, potential_rewards, train_scorer
from marlang.methods.neural.critics.lca import confidence


def _pairs(n: int, dim: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, dim, generator=g) * 2 - 1, torch.rand(n, dim, generator=g) * 2 - 1, g


def _potential(x: torch.Tensor) -> torch.Tensor:
    """The known potential the rankings come from (non-linear, so the MLP has to learn it)."""
    return 2 * x[..., 0] - x[..., 1] + torch.sin(3 * x[..., 2])


def _pairwise_accuracy(model: StateScorer, a: torch.Tensor, b: torch.Tensor) -> float:
    with torch.no_grad():
        return float(((model(b) > model(a)) == (_potential(b) > _potential(a))).float().mean())


@pytest.mark.parametrize("accuracy", [1.0, 0.8])
def test_bt_training_recovers_a_known_potential_from_synthetic_rankings(accuracy):
    torch.manual_seed(0)
    a, b, g = _pairs(2000, 4, seed=1)
    better_b = (_potential(b) > _potential(a)).float()
    # Four synthetic queries per pair, each right with probability `accuracy`.
    votes = torch.stack([torch.where(torch.rand(len(a), generator=g) < accuracy, better_b, 1 - better_b)
                         for _ in range(4)]).mean(0)
    model = StateScorer(4, [32, 32])
    test_a, test_b, _ = _pairs(2000, 4, seed=2)
    before = _pairwise_accuracy(model, test_a, test_b)
    train_scorer(model, a, b, votes, steps=600, lr=3e-3, batch_size=64, generator=g)
    after = _pairwise_accuracy(model, test_a, test_b)
    assert after > 0.9 > before + 0.2
    with torch.no_grad():  # the learnt scores order states as the potential does
        scores, truth = model(test_a), _potential(test_a)
    ranks = lambda x: x.argsort().argsort().float()
    assert torch.corrcoef(torch.stack([ranks(scores), ranks(truth)]))[0, 1] > 0.9


def test_loss_is_the_confidence_weighted_cross_entropy():
    sa, sb = torch.tensor([0.0, 1.0]), torch.tensor([2.0, -1.0])
    c = torch.tensor([0.75, 0.5])
    p = torch.sigmoid(sb - sa)
    expected = -(c * p.log() + (1 - c) * (1 - p).log()).mean()
    torch.testing.assert_close(bt_loss(sa, sb, c), expected)
    # Even votes pull the two scores together: the loss is lowest at equal scores.
    assert bt_loss(torch.zeros(1), torch.zeros(1), torch.tensor([0.5])) < bt_loss(sa[:1], sb[:1], torch.tensor([0.5]))


def test_confidence_is_the_share_of_queries():
    assert confidence([1, 1, -1, 1]) == 0.75
    assert confidence([1, 0]) == 0.75  # a tie counts half
    assert confidence([-1, None]) == 0.0  # unparsed answers do not count
    assert confidence([None]) is None


def test_potential_difference_rewards_telescope_over_an_episode():
    model = StateScorer(5, [16])
    episode = torch.randn(12, 5)  # o_0 ... o_11
    rewards = potential_rewards(model, episode[:-1], episode[1:])
    with torch.no_grad():
        total = model(episode[-1]) - model(episode[0])
    torch.testing.assert_close(rewards.sum(), total, atol=1e-5, rtol=1e-5)
