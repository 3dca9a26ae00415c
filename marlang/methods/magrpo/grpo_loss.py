"""Group-relative advantages and the policy losses of MAGRPO / GRPO.

Advantages (``learning.advantage``) of a sibling set of returns (the joint actions under one
node, see ``magrpo_tree``):

- ``mean``: the return minus the siblings' mean (MAGRPO's unbiased baseline, Dr. GRPO);
- ``group_std``: the same divided by the siblings' standard deviation (Bessel-corrected) plus
  1e-4, as TRL's ``scale_rewards: group``;
- ``batch_std``: divided by the standard deviation of every return of the batch instead
  (TRL's ``scale_rewards: batch``);
- ``rloo``: the return minus the mean of the *other* siblings (leave one out).

Losses (``learning.loss``) of one agent's completions, from per-token log-probabilities:

- ``reinforce``: MAGRPO's on-policy loss, ``-(sum of the completion's token log-probs) x
  advantage``, averaged over completions (no ratio, no clipping);
- ``grpo``, ``dr_grpo``, ``dapo``: the clipped token-level ratio loss with the normalisation TRL
  gives each (per-completion token mean, then mean; sum over ``B x max_completion_length``;
  sum over the batch's completion tokens), for ``learning.epochs`` > 1 where the ratio moves.

``beta`` > 0 adds the k3 estimate of KL(policy || base) per token times the ratio, as TRL does
(``use_bias_correction_kl``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

ADVANTAGES = ("mean", "group_std", "batch_std", "rloo")
LOSSES = ("reinforce", "grpo", "dr_grpo", "dapo")
STD_EPS = 1e-4
"""Added to a standard deviation before dividing by it (TRL's constant)."""


def _std(values: Sequence[float]) -> float:
    """Bessel-corrected standard deviation; 0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def group_advantages(groups: Sequence[Sequence[float]], mode: str = "mean") -> list[list[float]]:
    """The advantage of every return, group by group (a group: one sibling set)."""
    if mode not in ADVANTAGES:
        raise ValueError(f"unknown advantage {mode!r}; valid choices: {', '.join(ADVANTAGES)}")
    batch_std = _std([r for g in groups for r in g]) if mode == "batch_std" else 0.0
    out: list[list[float]] = []
    for group in groups:
        n = len(group)
        mean = sum(group) / n if n else 0.0
        if mode == "mean":
            out.append([r - mean for r in group])
        elif mode == "group_std":
            std = _std(group)
            out.append([(r - mean) / (std + STD_EPS) for r in group])
        elif mode == "batch_std":
            out.append([(r - mean) / (batch_std + STD_EPS) for r in group])
        else:  # rloo
            out.append([(r - (sum(group) - r) / (n - 1)) if n > 1 else 0.0 for r in group])
    return out


# ------------------------------------------------------------------------------ log-probs


def pack_completions(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad_id: int
                     ) -> dict[str, torch.Tensor]:
    """One batch: prompts left-padded, completions right-padded after them (TRL's layout), with
    the 0/1 masks and position ids counting real tokens only."""
    width_p = max(len(p) for p in prompts)
    width_c = max(max((len(c) for c in completions), default=0), 1)
    n = len(prompts)
    prompt_ids = torch.full((n, width_p), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((n, width_p), dtype=torch.long)
    completion_ids = torch.full((n, width_c), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((n, width_c), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        prompt_ids[i, width_p - len(p):] = torch.tensor(list(p), dtype=torch.long)
        prompt_mask[i, width_p - len(p):] = 1
        if c:
            completion_ids[i, :len(c)] = torch.tensor(list(c), dtype=torch.long)
            completion_mask[i, :len(c)] = 1
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
            "completion_ids": completion_ids, "completion_mask": completion_mask}


def completion_logprobs(model: Any, batch: dict[str, torch.Tensor], temperature: float = 1.0,
                        **forward_kwargs: Any) -> torch.Tensor:
    """log p(token | prompt, earlier tokens) of every completion token ``[B, T]`` (masked
    positions hold garbage: multiply by ``completion_mask``), from logits divided by the
    sampling ``temperature``. Every completion token is scored, the last (EOS) included."""
    from trl.trainer.utils import selective_log_softmax  # trl is slow to import

    device = next(model.parameters()).device
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1).to(device)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1).to(device)
    position_ids = (mask.cumsum(-1) - 1).clamp_min(0)
    width = batch["completion_ids"].size(1)
    logits = model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                   logits_to_keep=width + 1, **forward_kwargs).logits
    logits = logits[:, :-1, :].float() / temperature  # position t predicts token t + 1
    return selective_log_softmax(logits, batch["completion_ids"].to(device))


def shared_prompt_logprobs(model: Any, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                           pad_id: int, temperature: float = 1.0, **forward_kwargs: Any
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """The same log-probs as ``completion_logprobs`` (``[B, T]``, and the ``[B, T]`` 0/1 mask),
    with each distinct prompt run once: the completions that share a prompt (a node's G
    samples of one agent) follow it in one packed row under a block-causal mask
    (``score_decisions``' packed layout, where the attention takes a 4D mask), so a prompt of
    P tokens and G completions of C tokens cost P + G*C positions instead of G*(P + C).
    Empty completions get an all-zero mask row."""
    from marlang.models.scoring import score_decisions

    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        if c:
            groups.setdefault(tuple(p), []).append(i)
    width = max(max((len(c) for c in completions), default=0), 1)
    mask = torch.zeros((len(completions), width), dtype=torch.long)
    for i, c in enumerate(completions):
        mask[i, :len(c)] = 1
    device = model.get_input_embeddings().weight.device
    if not groups:
        return torch.zeros((len(completions), width), device=device), mask
    items = [(prompt, [list(completions[i]) for i in rows]) for prompt, rows in groups.items()]
    scored = score_decisions(model, items, pad_id, temperature=temperature, **forward_kwargs)
    order = [i for rows in groups.values() for i in rows]
    rows_out = [torch.zeros(width, device=device)] * len(completions)
    for i, lp in zip(order, scored.token_logprobs, strict=True):
        rows_out[i] = torch.nn.functional.pad(lp, (0, width - lp.size(0)))
    return torch.stack(rows_out), mask


def policy_loss(logps: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, *, loss: str = "reinforce",
                old_logps: torch.Tensor | None = None, ref_logps: torch.Tensor | None = None,
                beta: float = 0.0, epsilon_low: float = 0.2, epsilon_high: float = 0.2,
                max_completion_length: int | None = None, weights: torch.Tensor | None = None) -> torch.Tensor:
    """One agent's loss over ``B`` completions (see the module docstring).

    ``logps``, ``mask``: ``[B, T]``; ``advantages``: ``[B]``; ``old_logps``: the log-probs the
    completions were sampled with (None: these, detached, so the ratio is 1); ``ref_logps``:
    the base model's, for ``beta`` > 0; ``weights``: ``[B]`` how many samples each completion
    stands for (a completion shared by several joint actions under ``cross``), 1 by default.
    """
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; valid choices: {', '.join(LOSSES)}")
    mask = mask.to(logps.dtype)
    adv = advantages.to(logps.dtype).unsqueeze(1)
    w = torch.ones(logps.size(0), dtype=logps.dtype, device=logps.device) if weights is None \
        else weights.to(logps.dtype)
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)  # 1 on-policy, with the gradient of log p
    if loss == "reinforce":
        per_token = -logps * adv
    else:
        clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
        per_token = -torch.min(ratio * adv, clipped * adv)
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs the base model's log-probs (ref_logps)")
        delta = ref_logps - logps
        # times the ratio: the unbiased reverse-KL gradient (TRL's use_bias_correction_kl default)
        per_token = per_token + beta * (torch.exp(delta) - delta - 1) * ratio
    per_token = per_token * mask
    if loss == "reinforce":
        return (per_token.sum(-1) * w).sum() / w.sum()
    if loss == "grpo":
        return ((per_token.sum(-1) / mask.sum(-1).clamp(min=1.0)) * w).sum() / w.sum()
    if loss == "dr_grpo":
        length = max_completion_length if max_completion_length is not None else logps.size(1)
        return (per_token.sum(-1) * w).sum() / (w.sum() * length)
    # dapo: every completion token of the batch weighs the same
    return (per_token.sum(-1) * w).sum() / (mask.sum(-1) * w).sum().clamp(min=1.0)
