"""Action scoring: log p(candidate | prompt) for every candidate action string (the GLAM policy).

A candidate's score is the sum of its tokens' log-probabilities after the prompt (no length
normalisation, as in GLAM/lamorel).

- `KVReuseScorer` runs the prompt once and scores all candidates in one more forward pass
  over its key/value cache: the fast path for acting.
- `score_decisions` (and its scorer wrapper `PackedScorer`) scores a batch of decisions in
  ONE forward pass without any cache, each prompt and its candidates packed into one row
  under a block-causal mask, and also returns the final hidden state at each prompt's last
  token (for a value head): the path for training, where gradients flow and gradient
  checkpointing drops KV caches. `KVReuseScorer` routes to it in that case.
- `PerCandidateScorer` and `RepeatedPromptScorer` are the plain reference implementations
  the others are tested and benchmarked against.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, runtime_checkable

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from marlang.models.scoring_batches import (
    drops_kv_cache,
    left_padded_prefill,
    packed_batch,
    repeated_batch,
    sum_token_logprobs,
)


# transformers 5 renamed the models' past_key_values argument to cache and warns about the old
# name again and again (its "already shown" record is cleared whenever any library changes the
# warning filters, so even a "once" filter repeats it). The old name is what transformers 4,
# which marlang supports, understands: it is kept, and the warning, which says nothing a user
# can act on, is not shown.
def ignore_cache_rename_warning() -> None:
    """Hide transformers' warning about the past_key_values argument (again where a block of
    ``warnings.catch_warnings`` that first imported this module has since dropped it)."""
    warnings.filterwarnings("ignore", message=r"`past_key_values` is deprecated", category=FutureWarning)


ignore_cache_rename_warning()

PACKED_ATTENTION = frozenset({"sdpa", "eager"})
"""Attention implementations that accept custom (block-causal) 4D attention masks."""


@runtime_checkable
class ActionScorer(Protocol):
    """Scores candidate continuations of a prompt by their total log-probability."""

    def score(self, prompt: str, candidates: Sequence[str]) -> list[float]:
        """log p(candidate | prompt), summed over each candidate's tokens."""
        ...


class CausalLMScorer(ABC):
    """Shared tokenization for scorers over a local causal LM.

    The prompt is already-formatted text and is tokenized as is (no special tokens added);
    each candidate is tokenized on its own, without special tokens, and appended after the
    prompt's tokens, so leading spaces in candidates matter. `score` runs under
    ``torch.inference_mode``; `score_tensor` follows the caller's grad mode, so a trainer
    can backpropagate through the scores.
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        self.model = model
        self.tokenizer = tokenizer
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        self._pad_id = int(pad) if pad is not None else 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def score(self, prompt: str, candidates: Sequence[str]) -> list[float]:
        with torch.inference_mode():
            return self.score_tensor(prompt, candidates).tolist()

    def score_tensor(self, prompt: str, candidates: Sequence[str]) -> torch.Tensor:
        """The scores as a float32 tensor of shape ``[len(candidates)]``."""
        if not candidates:
            return torch.empty(0, device=self.device)
        return self.score_ids(*self._tokenize(prompt, candidates))

    def _tokenize(
        self, prompt: str, candidates: Sequence[str]
    ) -> tuple[list[int], list[list[int]]]:
        """Token ids of the prompt and of each candidate, all checked to be non-empty."""
        prompt_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if not prompt_ids:
            raise ValueError("The prompt is empty: candidates need something to be scored after")
        candidate_ids = [
            self.tokenizer(c, add_special_tokens=False)["input_ids"] for c in candidates
        ]
        empty = [c for c, ids in zip(candidates, candidate_ids, strict=True) if not ids]
        if empty:
            raise ValueError(f"Candidates with no tokens cannot be scored: {empty!r}")
        return prompt_ids, candidate_ids

    @abstractmethod
    def score_ids(self, prompt_ids: list[int], candidate_ids: list[list[int]]) -> torch.Tensor:
        """Scores from token ids (prompt and candidates non-empty)."""

    def _padded(self, candidate_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded candidate ids and their 0/1 mask, both ``[n, longest]``."""
        longest = max(len(ids) for ids in candidate_ids)
        ids = torch.full((len(candidate_ids), longest), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(candidate_ids), longest), dtype=torch.long)
        for i, cand in enumerate(candidate_ids):
            ids[i, : len(cand)] = torch.tensor(cand, dtype=torch.long)
            mask[i, : len(cand)] = 1
        return ids.to(self.device), mask.to(self.device)


class KVReuseScorer(CausalLMScorer):
    """Runs the prompt once and reuses its key/value cache for all candidates.

    The first candidate token is scored from the prompt's last logits, so only the first
    ``len - 1`` tokens of each candidate are fed, all in one more forward pass over the
    cache (none at all when every candidate is a single token). Two layouts for that pass:

    - ``"packed"``: the candidates' tokens side by side in one row, each attending to the
      prompt and its own earlier tokens (a block-causal 4D mask), with positions
      continuing after the prompt. The prompt cache is used as is, never copied.
    - ``"batched"``: the prompt cache repeated once per candidate and the candidates
      right-padded into a batch, with a 2D padding mask. Works with every attention
      backend, at the cost of one copy of the prompt cache per candidate.

    The default picks ``"packed"`` where the model's attention takes custom 4D masks
    (``sdpa``, ``eager``) and ``"batched"`` elsewhere (e.g. flash-attention).

    Under gradient checkpointing in training mode transformers drops the cache between the
    two passes (each checkpointed layer is called with ``past_key_values=None``), which would
    crash the packed layout and make the batched one score candidates without their prompt.
    In that state every call is routed to the cache-free `score_decisions` instead (same
    scores, one pass).
    """

    PACKED_ATTENTION = PACKED_ATTENTION
    """Attention implementations that accept the packed layout's custom 4D mask."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        layout: Literal["packed", "batched"] | None = None,
    ) -> None:
        super().__init__(model, tokenizer)
        attention = getattr(model.config, "_attn_implementation", None)
        if layout is None:
            layout = "packed" if attention in self.PACKED_ATTENTION else "batched"
        elif layout == "packed" and attention not in self.PACKED_ATTENTION:
            raise ValueError(
                f"The packed layout needs custom 4D attention masks, which {attention!r} "
                "attention does not take; use layout='batched'"
            )
        elif layout not in ("packed", "batched"):
            raise ValueError(f"layout must be 'packed' or 'batched', got {layout!r}")
        self.layout = layout

    def score_ids(self, prompt_ids: list[int], candidate_ids: list[list[int]]) -> torch.Tensor:
        # Where the cache would be dropped, _score_ids_batch scores without one.
        if self.layout == "packed" or drops_kv_cache(self.model):
            return self._score_ids_batch([(prompt_ids, candidate_ids)])[0]
        device = self.device
        cache = DynamicCache(config=self.model.config)
        prompt_out = self.model(
            input_ids=torch.tensor([prompt_ids], device=device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        first_logprobs = torch.log_softmax(prompt_out.logits[0, -1].float(), dim=-1)
        firsts = torch.tensor([ids[0] for ids in candidate_ids], device=device)
        scores = first_logprobs[firsts]
        if all(len(ids) == 1 for ids in candidate_ids):
            return scores
        return scores + self._batched_rest(len(prompt_ids), candidate_ids, cache)

    def score_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """`score` for several (prompt, candidates) pairs at once, under inference mode.

        With the packed layout the prompts run as one left-padded batch and all candidates
        in one more pass (one packed row per prompt); otherwise one prompt at a time.
        """
        if self.layout != "packed" and not drops_kv_cache(self.model):
            return [self.score(prompt, candidates) for prompt, candidates in items]
        if not all(candidates for _, candidates in items):
            raise ValueError("score_many needs at least one candidate for every prompt")
        tokenized = [self._tokenize(prompt, candidates) for prompt, candidates in items]
        with torch.inference_mode():
            return [t.tolist() for t in self._score_ids_batch(tokenized)]

    def _score_ids_batch(
        self, items: list[tuple[list[int], list[list[int]]]]
    ) -> list[torch.Tensor]:
        if drops_kv_cache(self.model):
            return score_decisions(self.model, items, self._pad_id).scores
        device, dtype = self.device, self.model.dtype
        n_rows = len(items)
        lengths = [len(p) for p, _ in items]
        last_logits, cache, prompt_mask, _ = left_padded_prefill(
            self.model, [p for p, _ in items], self._pad_id
        )
        width = prompt_mask.shape[1]
        first_logprobs = torch.log_softmax(last_logits.float(), dim=-1)
        scores = [
            first_logprobs[b, torch.tensor([c[0] for c in cands], device=device)]
            for b, (_, cands) in enumerate(items)
        ]
        # One packed row per prompt: each candidate token sees its own prompt (not the left
        # padding) and the earlier tokens of its own candidate.
        rows = []
        for _, cands in items:
            owner, offset, fed, target = [], [], [], []
            for i, cand in enumerate(cands):
                for j in range(len(cand) - 1):
                    owner.append(i)
                    offset.append(j)
                    fed.append(cand[j])
                    target.append(cand[j + 1])
            rows.append((owner, offset, fed, target))
        n_fed = max(len(r[2]) for r in rows)
        if n_fed == 0:
            return scores
        fed_ids = torch.full((n_rows, n_fed), self._pad_id, dtype=torch.long, device=device)
        positions = torch.zeros((n_rows, n_fed), dtype=torch.long, device=device)
        allowed = torch.zeros((n_rows, n_fed, width + n_fed), dtype=torch.bool, device=device)
        pad_diagonal = torch.eye(n_fed, dtype=torch.bool, device=device)
        for b, (owner, offset, fed, _) in enumerate(rows):
            k = len(fed)
            allowed[b, :, width:] = pad_diagonal  # padding queries attend to themselves only
            if k == 0:
                continue
            owner_t = torch.tensor(owner, device=device)
            offset_t = torch.tensor(offset, device=device)
            fed_ids[b, :k] = torch.tensor(fed, device=device)
            positions[b, :k] = lengths[b] + offset_t
            allowed[b, :k, :width] = prompt_mask[b].bool()
            allowed[b, :k, width : width + k] = (owner_t[:, None] == owner_t[None, :]) & (
                offset_t[:, None] >= offset_t[None, :]
            )
        mask = torch.zeros((n_rows, 1, n_fed, width + n_fed), dtype=dtype, device=device)
        mask = mask.masked_fill(~allowed[:, None], torch.finfo(dtype).min)
        logits = self.model(
            input_ids=fed_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        ).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        for b, (owner, _, fed, target) in enumerate(rows):
            if not fed:
                continue
            picked = logprobs[b, : len(fed)].gather(
                -1, torch.tensor(target, device=device)[:, None]
            )[:, 0]
            scores[b] = scores[b].index_add(0, torch.tensor(owner, device=device), picked)
        return scores

    def _batched_rest(
        self, prompt_len: int, candidate_ids: list[list[int]], cache: DynamicCache
    ) -> torch.Tensor:
        """log p of every candidate token after the first, from one right-padded batch."""
        n = len(candidate_ids)
        ids, mask = self._padded(candidate_ids)
        cache.batch_repeat_interleave(n)
        fed = ids[:, :-1]
        positions = torch.arange(prompt_len, prompt_len + fed.shape[1], device=self.device)
        logits = self.model(
            input_ids=fed,
            attention_mask=torch.cat([mask.new_ones((n, prompt_len)), mask[:, :-1]], dim=1),
            position_ids=positions.expand(n, -1),
            past_key_values=cache,
            use_cache=True,
        ).logits
        return sum_token_logprobs(logits, ids[:, 1:], mask[:, 1:])


class PerCandidateScorer(CausalLMScorer):
    """Reference: one forward pass over prompt + candidate for each candidate."""

    def score_ids(self, prompt_ids: list[int], candidate_ids: list[list[int]]) -> torch.Tensor:
        device = self.device
        prompt_len = len(prompt_ids)
        scores = []
        for cand in candidate_ids:
            ids = torch.tensor([prompt_ids + cand], device=device)
            # Logits at positions prompt_len-1 ... end-1 predict the candidate's tokens.
            keep = torch.arange(prompt_len - 1, prompt_len - 1 + len(cand), device=device)
            logits = self.model(input_ids=ids, logits_to_keep=keep).logits
            target = ids[:, prompt_len:]
            scores.append(sum_token_logprobs(logits, target, torch.ones_like(target))[0])
        return torch.stack(scores)


class RepeatedPromptScorer(CausalLMScorer):
    """Reference: one batch of prompt + candidate rows, the prompt repeated in every row."""

    def score_ids(self, prompt_ids: list[int], candidate_ids: list[list[int]]) -> torch.Tensor:
        device = self.device
        n, prompt_len = len(candidate_ids), len(prompt_ids)
        cand_ids, cand_mask = self._padded(candidate_ids)
        prompt = torch.tensor(prompt_ids, device=device).expand(n, -1)
        ids = torch.cat([prompt, cand_ids], dim=1)
        mask = torch.cat([cand_mask.new_ones((n, prompt_len)), cand_mask], dim=1)
        keep = torch.arange(prompt_len - 1, prompt_len - 1 + cand_ids.shape[1], device=device)
        logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits
        return sum_token_logprobs(logits, cand_ids, cand_mask)


class PackedScorer(CausalLMScorer):
    """Scores with `score_decisions`: one cache-free forward pass, differentiable.

    The scorer for training: it follows the caller's grad mode (``score_tensor``,
    ``score_batch``) and works under gradient checkpointing. ``score_batch`` also returns the
    final hidden state at each prompt's last token, for a value head.
    """

    def score_ids(self, prompt_ids: list[int], candidate_ids: list[list[int]]) -> torch.Tensor:
        return score_decisions(self.model, [(prompt_ids, candidate_ids)], self._pad_id).scores[0]

    def score_batch(
        self, items: Sequence[tuple[str, Sequence[str]]], **forward_kwargs: Any
    ) -> ScoredDecisions:
        """`score_decisions` on (prompt, candidates) texts, tokenized as `score` does."""
        tokenized = [self._tokenize(prompt, candidates) for prompt, candidates in items]
        return score_decisions(self.model, tokenized, self._pad_id, **forward_kwargs)

    def score_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """`score` for several (prompt, candidates) pairs in one pass, under inference mode."""
        if not all(candidates for _, candidates in items):
            raise ValueError("score_many needs at least one candidate for every prompt")
        with torch.inference_mode():
            return [t.tolist() for t in self.score_batch(items).scores]


@dataclass
class ScoredDecisions:
    """What `score_decisions` returns, one entry per decision (item)."""

    scores: list[torch.Tensor]
    """Per item, ``[n_candidates]`` float32: the summed log-probs of its candidates."""
    prompt_hidden: torch.Tensor
    """``[n_items, hidden]``: the final-layer hidden state (after the final norm) at each
    prompt's last token, the state the first candidate token is predicted from."""
    token_logprobs: list[torch.Tensor] = field(default_factory=list)
    """Per candidate, over all items in order, ``[candidate tokens]`` float32: the log-prob of
    each of its tokens (``scores`` are their sums)."""


def score_decisions(
    model: PreTrainedModel,
    items: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
    pad_id: int,
    *,
    layout: Literal["packed", "repeated"] | None = None,
    temperature: float = 1.0,
    **forward_kwargs: Any,
) -> ScoredDecisions:
    """Score a batch of decisions in one forward pass, with no KV cache, differentiably.

    Each item is ``(prompt_ids, [candidate_ids, ...])``; the prompt and every candidate must
    be non-empty (an item without candidates gets empty scores, and its hidden state). A
    candidate's score is the sum of log p(token) over its tokens after the prompt, computed
    in float32 (no length normalisation), from the logits divided by ``temperature`` (1: the
    model's own distribution; a sampling temperature scores completions as they were sampled).
    Runs in the caller's grad mode, so the scores and
    hidden states carry gradients unless the caller disabled them, and works with gradient
    checkpointing in training mode (it never relies on a cache).

    Layouts:

    - ``"packed"`` (default where the attention takes custom 4D masks: sdpa, eager): one row
      per item, the prompt followed by all its candidates side by side. A block-causal 4D
      mask lets each candidate token see the whole prompt and its own earlier tokens only,
      and its position id continues after the prompt (``prompt_len + j``), so each candidate
      is scored exactly as if it alone followed the prompt. Rows are right-padded. The mask
      is ``[items, 1, width, width]`` in the model's dtype: fine for decision-sized rows.
    - ``"repeated"`` (the fallback elsewhere, e.g. flash-attention): one row per candidate,
      prompt + candidate, right-padded under a plain 2D mask. Same numbers, more compute.

    ``forward_kwargs`` go to ``model(...)`` unchanged. Per-row arguments are per item, as
    there is one packed row per item: PEFT's mixed-adapter ``adapter_names`` has one name
    per item (the repeated layout repeats it for each candidate's row; PEFT accepts it only
    in eval mode). Logits are computed only at the positions that
    predict candidate tokens, by applying ``model.get_output_embeddings()`` to the gathered
    final hidden states; so with mixed-adapter batches the output embedding must not carry
    adapters (it runs outside ``model(...)``, where PEFT routes rows to their adapter).
    """
    if not items:
        raise ValueError("score_decisions needs at least one item")
    for prompt_ids, candidates in items:
        if not prompt_ids:
            raise ValueError("The prompt is empty: candidates need something to be scored after")
        if any(len(c) == 0 for c in candidates):
            raise ValueError("Candidates with no tokens cannot be scored")
    attention = getattr(model.config, "_attn_implementation", None)
    if layout is None:
        layout = "packed" if attention in PACKED_ATTENTION else "repeated"
    elif layout not in ("packed", "repeated"):
        raise ValueError(f"layout must be 'packed' or 'repeated', got {layout!r}")
    # where the ids must go; the input embedding's weight is a Parameter (nn.Module types it loosely)
    device = cast(torch.Tensor, model.get_input_embeddings().weight).device
    if layout == "packed":
        batch = packed_batch(items, pad_id, model.dtype)
    else:
        batch = repeated_batch(items, pad_id)
        names = forward_kwargs.get("adapter_names")
        if names is not None:  # PEFT's per-row adapters: one row per candidate here
            forward_kwargs["adapter_names"] = [
                name
                for name, (_, cands) in zip(names, items, strict=True)
                for _ in range(max(1, len(cands)))
            ]
    out = model(
        input_ids=batch.input_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        position_ids=None if batch.position_ids is None else batch.position_ids.to(device),
        use_cache=False,
        output_hidden_states=True,
        # The model's own logits are not used: keep it from projecting every position.
        **{"logits_to_keep": 1, **forward_kwargs},
    )
    # In transformers' causal LMs the last hidden state is taken after the final norm, i.e.
    # exactly what the output embedding (lm_head) is applied to.
    hidden = out.hidden_states[-1]
    rows, cols = batch.prompt_last.to(hidden.device).unbind(-1)
    prompt_hidden = hidden[rows, cols]
    n_candidates = [len(candidates) for _, candidates in items]
    if batch.targets.numel() == 0:  # only items without candidates
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return ScoredDecisions([empty for _ in items], prompt_hidden)
    rows, cols = batch.predictors.to(hidden.device).unbind(-1)
    logits = model.get_output_embeddings()(hidden[rows, cols]).float()
    if temperature != 1.0:
        logits = logits / temperature
    from trl.trainer.utils import selective_log_softmax  # trl is slow to import

    # A leading batch dim of 1: trl's unfused path (no GPU/triton) loops over the first dim.
    token_logprobs = selective_log_softmax(logits[None], batch.targets.to(hidden.device)[None])[0]
    flat = torch.zeros(sum(n_candidates), device=hidden.device, dtype=torch.float32)
    flat = flat.index_add(0, batch.owners.to(hidden.device), token_logprobs)
    lengths = [len(c) for _, candidates in items for c in candidates]
    return ScoredDecisions(list(flat.split(n_candidates)), prompt_hidden,
                           list(token_logprobs.split(lengths)))


