"""Bradley-Terry state-scoring models for LCA: an MLP sigma(o) over an agent's numeric ego
observation, trained on ranked pairs with confidence-weighted cross-entropy, and the
potential-difference rewards sigma(o') - sigma(o) it gives.

Loss of one pair (o_a, o_b) with confidence c that o_b is the better one (the share of
queries that said so): -[c log sigmoid(sigma(o_b) - sigma(o_a)) + (1 - c) log sigmoid(sigma(o_a) - sigma(o_b))].
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class StateScorer(nn.Module):
    """sigma: an observation vector to one score (the potential)."""

    def __init__(self, obs_dim: int, hidden: Sequence[int] = (64, 64)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        size = obs_dim
        for width in hidden:
            layers += [nn.Linear(size, width), nn.Tanh()]
            size = width
        layers.append(nn.Linear(size, 1))
        self.net = nn.Sequential(*layers)
        self.obs_dim = obs_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.reshape(*obs.shape[:-1], self.obs_dim)).squeeze(-1)


def bt_loss(score_a: torch.Tensor, score_b: torch.Tensor, confidence_b: torch.Tensor) -> torch.Tensor:
    """Mean confidence-weighted Bradley-Terry cross-entropy (``confidence_b``: P(b better))."""
    margin = score_b - score_a
    return -(confidence_b * nn.functional.logsigmoid(margin)
             + (1 - confidence_b) * nn.functional.logsigmoid(-margin)).mean()


def train_scorer(model: StateScorer, obs_a: torch.Tensor, obs_b: torch.Tensor, confidence_b: torch.Tensor,
                 *, steps: int, lr: float, batch_size: int = 64, generator: torch.Generator | None = None,
                 optimizer: torch.optim.Optimizer | None = None) -> float:
    """Fit ``model`` on the pairs for ``steps`` minibatch steps (passes over the pairs in random
    orders); returns the mean loss of the last ``len(pairs) / batch_size`` steps."""
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    n = obs_a.shape[0]
    recent: list[float] = []
    window = max(1, -(-n // batch_size))
    order = torch.empty(0, dtype=torch.long)
    model.train()
    for _ in range(steps):
        if len(order) == 0:
            order = torch.randperm(n, generator=generator)
        idx, order = order[:batch_size], order[batch_size:]
        loss = bt_loss(model(obs_a[idx]), model(obs_b[idx]), confidence_b[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        recent = [*recent[-window + 1:], float(loss.detach())] if window > 1 else [float(loss.detach())]
    model.eval()
    return sum(recent) / len(recent) if recent else float("nan")


def potential_rewards(model: StateScorer, obs: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
    """sigma(o') - sigma(o) for every position (shapes ``[..., obs_dim]`` -> ``[...]``)."""
    with torch.no_grad():
        return model(next_obs) - model(obs)
