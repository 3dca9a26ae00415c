"""How a scoring pass lays prompts and candidates out in a batch (packed under a block-causal
mask, or a repeated prompt per candidate), prefills left-padded prompts, and sums the
candidates' token log-probs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel


@dataclass
class ScoringBatch:
    """Inputs of one scoring pass and where to read the results from it (on the CPU)."""

    input_ids: torch.Tensor  # [rows, width]
    attention_mask: torch.Tensor  # [rows, 1, width, width] additive, or [rows, width] 0/1
    position_ids: torch.Tensor | None  # [rows, width]; None: the model's default 0, 1, ...
    prompt_last: torch.Tensor  # [items, 2]: (row, column) of each prompt's last token
    predictors: torch.Tensor  # [tokens, 2]: (row, column) predicting each candidate token
    targets: torch.Tensor  # [tokens]: the candidate tokens, in candidate order
    owners: torch.Tensor  # [tokens]: index of each token's candidate, counted over all items


def packed_batch(
    items: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], pad_id: int, dtype: torch.dtype
) -> ScoringBatch:
    """One row per item: prompt, then every candidate, under a block-causal 4D mask."""
    widths = [len(p) + sum(len(c) for c in cands) for p, cands in items]
    width = max(widths)
    input_ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((len(items), width), dtype=torch.long)
    # Segment of each column: 0 prompt, i + 1 the i-th candidate, -1 padding.
    segment = torch.full((len(items), width), -1, dtype=torch.long)
    prompt_last: list[tuple[int, int]] = []
    predictors: list[tuple[int, int]] = []
    targets: list[int] = []
    owners: list[int] = []
    owner = 0
    for b, (prompt, cands) in enumerate(items):
        n = len(prompt)
        input_ids[b, :n] = torch.tensor(prompt, dtype=torch.long)
        position_ids[b, :n] = torch.arange(n)
        segment[b, :n] = 0
        prompt_last.append((b, n - 1))
        start = n
        for i, cand in enumerate(cands):
            m = len(cand)
            input_ids[b, start : start + m] = torch.tensor(cand, dtype=torch.long)
            position_ids[b, start : start + m] = torch.arange(n, n + m)
            segment[b, start : start + m] = i + 1
            # Token 0 is predicted from the prompt's last position, token j from token j - 1.
            predictors += [(b, n - 1)] + [(b, start + j - 1) for j in range(1, m)]
            targets += cand
            owners += [owner] * m
            owner += 1
            start += m
    column = torch.arange(width)
    causal = column[:, None] >= column[None, :]  # [query, key]
    seg_q, seg_k = segment[:, :, None], segment[:, None, :]
    allowed = causal & (seg_q >= 0) & ((seg_k == 0) | (seg_k == seg_q))
    # Padding queries attend to themselves only: a fully masked row would give NaNs.
    allowed |= torch.eye(width, dtype=torch.bool)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return ScoringBatch(
        input_ids=input_ids,
        attention_mask=mask[:, None],
        position_ids=position_ids,
        prompt_last=torch.tensor(prompt_last, dtype=torch.long),
        predictors=torch.tensor(predictors, dtype=torch.long).reshape(-1, 2),
        targets=torch.tensor(targets, dtype=torch.long),
        owners=torch.tensor(owners, dtype=torch.long),
    )


def repeated_batch(
    items: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], pad_id: int
) -> ScoringBatch:
    """One right-padded row per candidate, prompt + candidate (the prompt alone if none)."""
    rows: list[tuple[list[int], list[int]]] = []
    prompt_last = []
    for prompt, cands in items:
        prompt_last.append((len(rows), len(prompt) - 1))  # read from the item's first row
        rows += [(list(prompt), list(c)) for c in cands] or [(list(prompt), [])]
    width = max(len(p) + len(c) for p, c in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    predictors, targets, owners = [], [], []
    owner = 0
    for r, (prompt, cand) in enumerate(rows):
        n = len(prompt) + len(cand)
        input_ids[r, :n] = torch.tensor(prompt + cand, dtype=torch.long)
        attention_mask[r, :n] = 1
        if cand:
            predictors += [(r, len(prompt) - 1 + j) for j in range(len(cand))]
            targets += cand
            owners += [owner] * len(cand)
            owner += 1
    return ScoringBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=None,
        prompt_last=torch.tensor(prompt_last, dtype=torch.long),
        predictors=torch.tensor(predictors, dtype=torch.long).reshape(-1, 2),
        targets=torch.tensor(targets, dtype=torch.long),
        owners=torch.tensor(owners, dtype=torch.long),
    )


def drops_kv_cache(model: PreTrainedModel) -> bool:
    """Whether transformers will drop a KV cache passed to ``model``: gradient checkpointing
    is on and the model is training (checkpointed layers then get ``past_key_values=None``)."""
    if not model.training:
        return False
    # transformers 5 renamed the property (the old name warns); 4.x only has the old one.
    checkpointing = getattr(model, "is_activation_checkpointing", None)
    if checkpointing is None:
        checkpointing = getattr(model, "is_gradient_checkpointing", False)
    return bool(checkpointing)


def left_padded_prefill(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], pad_id: int, *,
    pasts: Sequence[Any] | None = None, **forward_kwargs: Any
) -> tuple[torch.Tensor, DynamicCache, torch.Tensor, torch.Tensor]:
    """Run token-id prompts of different lengths as one left-padded batch.

    Every row ends at the last column, so the returned logits ``[n, vocab]`` are each
    prompt's next-token logits. Also returns the KV cache, the 0/1 attention mask and the
    position ids (counting real tokens only), for the passes that continue the rows.
    ``pasts``: per row, None or a cache of the prompt's first tokens (``RowCache``: per-layer
    keys and values ``[heads, length, dim]``); those rows run only the rest of their prompt,
    after their cache, left-padded to the longest cache (the padding masked out), so the
    numbers are those of the whole prompt run from scratch.
    ``forward_kwargs`` go to ``model(...)`` (e.g. PEFT's per-row ``adapter_names``).
    """
    device = next(model.parameters()).device
    lengths = [p.length if p is not None else 0 for p in pasts] if pasts is not None else [0] * len(prompts)
    rests = [list(ids)[n:] for ids, n in zip(prompts, lengths, strict=True)]
    width_past, width = max(lengths), max(len(r) for r in rests)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width_past + width), dtype=torch.long)
    for i, (ids, n) in enumerate(zip(rests, lengths, strict=True)):
        input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention_mask[i, width_past - n : width_past] = 1
        attention_mask[i, width_past + width - len(ids) :] = 1
    input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    position_ids = ((attention_mask.cumsum(-1) - 1).clamp_min(0))[:, width_past:]
    cache = DynamicCache(config=model.config)
    if width_past:
        assert pasts is not None
        some = next(p for p in pasts if p is not None)
        for layer in range(len(some.keys)):
            heads, _, dim = some.keys[layer].shape
            keys = some.keys[layer].new_zeros((len(prompts), heads, width_past, dim))
            values = torch.zeros_like(keys)
            for i, past in enumerate(pasts):
                if past is not None:
                    keys[i, :, width_past - past.length :] = past.keys[layer]
                    values[i, :, width_past - past.length :] = past.values[layer]
            cache.update(keys.to(device), values.to(device), layer)
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
        **forward_kwargs,
    ).logits[:, -1, :]
    return logits, cache, attention_mask, position_ids


def sum_token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Sum over positions of log p(target) under ``logits`` ``[n, len, vocab]``, masked."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    picked = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (picked * mask).sum(dim=-1)

