"""PPO's losses as pure functions of tensors (CleanRL's ``ppo.py`` terms): the clipped policy
surrogate with its entropy bonus, the clipped value loss (per-agent heads and the central
head alike), and what an update logs: the approximate KL, the clip fraction and the value
heads' explained variance.

Each loss is a sum over some samples of a minibatch divided by ``total``, the minibatch's
size in all processes, so the parts of a minibatch add up to its mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_coef: float,
                       total: float) -> torch.Tensor:
    """``0.5 * max((v - R)^2, (v_clipped - R)^2)``, ``v_clipped`` within ``clip_coef`` of the
    value at sampling time."""
    clipped = old_values + (values - old_values).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.max((values - returns) ** 2, (clipped - returns) ** 2).sum() / total


def policy_terms(new_logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                 entropy: torch.Tensor, *, clip_coef: float, ent_coef: float, total: float) -> dict[str, Any]:
    """The clipped surrogate (``policy_loss``), ``loss`` (it minus the entropy bonus) and the
    terms logged, summed over the samples (no gradient): ``entropy``, the k3 approximate KL
    ``(ratio - 1) - log ratio`` (``approx_kl``), the plain one ``-log ratio``
    (``old_approx_kl``) and the ratios outside the clip (``clip_fraction``)."""
    logratio = new_logp - old_logp
    ratio = torch.exp(logratio)
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip_coef, 1 + clip_coef) * advantages)
    policy_loss = -surrogate.sum() / total
    loss = policy_loss - ent_coef * entropy.sum() / total
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).sum()
        old_approx_kl = (-logratio).sum()
        clip_fraction = ((ratio - 1).abs() > clip_coef).float().sum()
    return {"loss": loss, "policy_loss": policy_loss, "entropy": entropy.sum(), "approx_kl": approx_kl,
            "old_approx_kl": old_approx_kl, "clip_fraction": clip_fraction}


def reinforce_loss(logp: torch.Tensor, advantages: torch.Tensor, total: float) -> torch.Tensor:
    """REINFORCE on some tokens: their log-likelihood weighted by an advantage."""
    return -(advantages * logp).sum() / total


def explained_variance(predicted: Sequence[float], targets: Sequence[float]) -> float | None:
    """``1 - Var(targets - predicted) / Var(targets)``: how much of the returns' variance the
    value heads predicted at sampling time (None: fewer than two targets, or all equal)."""
    if len(targets) < 2:
        return None
    y = torch.tensor(targets, dtype=torch.float64)
    var = float(y.var(unbiased=False))
    if var == 0:
        return None
    residual = y - torch.tensor(predicted, dtype=torch.float64)
    return 1.0 - float(residual.var(unbiased=False)) / var
