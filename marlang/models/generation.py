"""What a local engine is asked and answers: sampling parameters, generation and scoring
requests and their outputs, a row's reusable KV cache, and the draw of one sampled token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens for one request. ``temperature == 0`` means greedy decoding."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    """Sample among the ``top_k`` most likely tokens only; 0: no limit."""
    max_tokens: int = 256
    seed: int | None = None
    """Seeds this request's own random generator: same seed, same sample."""
    stop: tuple[str, ...] = ()
    """Generation ends at the first of these strings, which is cut from the text."""
    logprobs: bool = False
    """Record each generated token's log-probability under the temperature-scaled
    distribution (before top-k and nucleus truncation): the sampling policy's log pi of the token."""
    keep_cache: bool = False
    """Return the row's KV cache (`RowCache`) for a later request that continues it."""
    ignore_eos: bool = False
    """Go on past the end-of-sequence token, to ``max_tokens`` (every row then decodes the same
    number of tokens: for measuring speed)."""
    grammar: str | None = None
    """A JSON schema (as JSON text): only tokens that keep the reply valid under it are chosen
    (`marlang.models.grammar`); the recorded log-probs are then those of the masked distribution."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0: no limit), got {self.top_k}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


@dataclass(frozen=True)
class RowCache:
    """The KV cache of one finished row: every layer's keys and values ``[heads, length,
    head_dim]`` over ``token_ids`` (its prompt and all but the last generated token, which
    was never run through the model)."""

    token_ids: tuple[int, ...]
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class GenerationRequest:
    """A tokenized prompt, the sampling parameters to continue it with, and the adapter (an
    agent's LoRA policy, see `LocalLM.attach_adapters`) that answers it; None: the base model.
    ``past``: a `RowCache` whose tokens begin ``prompt_ids`` (an earlier turn of the same
    conversation, under the same adapter): only the rest of the prompt is run."""

    prompt_ids: tuple[int, ...]
    sampling: SamplingParams = SamplingParams()
    adapter: str | None = None
    past: RowCache | None = None


@dataclass(frozen=True)
class ScoreRequest:
    """Candidates to score after a prompt (text), with the adapter that scores them."""

    prompt: str
    candidates: tuple[str, ...]
    adapter: str | None = None


@dataclass(frozen=True)
class ScoreOutput:
    """log p(candidate | prompt) per candidate, and the adapter's value estimate of the prompt
    where a value head is attached."""

    scores: list[float]
    value: float | None = None


@dataclass(frozen=True)
class GenerationOutput:
    """What one request produced."""

    text: str
    token_ids: tuple[int, ...]
    """Generated tokens, including a final end-of-sequence token if one was produced."""
    input_tokens: int
    finish_reason: str
    """``"stop"`` (end-of-sequence token or stop string) or ``"length"`` (max_tokens)."""
    token_logprobs: tuple[float, ...] | None = None
    """Per generated token, its log-probability (with ``SamplingParams.logprobs``)."""
    cache: RowCache | None = None
    """The row's KV cache (with ``SamplingParams.keep_cache``)."""

    @property
    def output_tokens(self) -> int:
        return len(self.token_ids)


def sample_token(logits: torch.Tensor, sampling: SamplingParams, generator: torch.Generator) -> int:
    """Draw one token id for one row of ``logits`` (`choose_tokens` on a batch of one)."""
    return int(choose_tokens(logits[None], [sampling], [generator])[0])


def choose_tokens(logits: torch.Tensor, samplings: Sequence[SamplingParams],
                  generators: Sequence[torch.Generator | None]) -> torch.Tensor:
    """Each row's next token of ``logits`` ``[rows, vocab]``: the most likely one where the row
    has no generator (greedy), else a draw from its temperature-scaled probabilities,
    truncated to its ``top_k`` most likely tokens and then to the nucleus of mass ``top_p``.

    The batch is decided in a few tensor ops, with no per-row reads back to the host. Each
    row's randomness comes from its own generator only: Exp(1) noise ``q`` over the
    vocabulary, and the token is ``argmax(p / q)`` (the exponential form of Gumbel-max, which
    is how ``torch.multinomial`` draws one sample), so a request draws the same tokens in any
    batch, and the same as one ``torch.multinomial(p, 1, generator)`` per row did.
    """
    tokens = logits.argmax(dim=-1)
    drawn = [i for i, generator in enumerate(generators) if generator is not None]
    if not drawn:
        return tokens
    vocab = logits.size(-1)
    rows = torch.tensor(drawn, device=logits.device)
    params = [samplings[i] for i in drawn]
    probs = torch.softmax(logits[rows].float() / _column([s.temperature for s in params], logits), dim=-1)
    # one Exp(1) draw per vocabulary entry, from the row's own generator (its only randomness)
    noise = torch.stack([torch.empty(vocab, dtype=probs.dtype, device=probs.device).exponential_(
        1, generator=generators[i]) for i in drawn])
    chosen = (probs / noise).argmax(dim=-1)
    cut = [j for j, s in enumerate(params) if s.top_p < 1 or 0 < s.top_k < vocab]
    if cut:
        chosen[cut] = _truncated_draw(probs[cut], noise[cut], [params[j] for j in cut])
    tokens[rows] = chosen
    return tokens


def _truncated_draw(probs: torch.Tensor, noise: torch.Tensor, params: Sequence[SamplingParams]) -> torch.Tensor:
    """`choose_tokens` for rows with a ``top_k`` or a ``top_p`` cut: the probabilities sorted,
    cut to the top k (and renormalised), then to the smallest prefix whose mass reaches
    top_p (always at least the top token); the noise applies to the sorted positions."""
    vocab = probs.size(-1)
    sorted_probs, order = torch.sort(probs, descending=True, dim=-1)
    top_k = [s.top_k if 0 < s.top_k < vocab else vocab for s in params]
    beyond_k = torch.arange(vocab, device=probs.device)[None, :] >= torch.tensor(top_k, device=probs.device)[:, None]
    sorted_probs = sorted_probs.masked_fill(beyond_k, 0.0)
    renormalise = [j for j, k in enumerate(top_k) if k < vocab]
    if renormalise:
        kept = sorted_probs[renormalise]
        sorted_probs[renormalise] = kept / kept.sum(dim=-1, keepdim=True)
    outside = sorted_probs.cumsum(-1) - sorted_probs >= _column([s.top_p for s in params], sorted_probs)
    sorted_probs = sorted_probs.masked_fill(outside, 0.0)
    return order.gather(-1, (sorted_probs / noise).argmax(dim=-1, keepdim=True)).squeeze(-1)


def token_logprobs(logits: torch.Tensor, samplings: Sequence[SamplingParams], tokens: torch.Tensor) -> list[float]:
    """Each row's log-probability of its chosen token under its temperature-scaled
    distribution (before top-k and nucleus truncation; greedy rows at temperature 1)."""
    scaled = logits.float() / _column([s.temperature or 1.0 for s in samplings], logits)
    return torch.log_softmax(scaled, dim=-1).gather(-1, tokens[:, None]).squeeze(-1).tolist()


def _column(values: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    """One float32 value per row, as a column that broadcasts over the vocabulary."""
    return torch.tensor(values, dtype=torch.float32, device=like.device)[:, None]
