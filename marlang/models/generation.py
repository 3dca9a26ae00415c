"""What a local engine is asked and answers: sampling parameters, generation and scoring
requests and their outputs, a row's reusable KV cache, and the draw of one sampled token.
"""

from __future__ import annotations

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
    """Draw one token id from temperature-scaled probabilities, truncated to the ``top_k``
    most likely tokens and then to the nucleus of mass ``top_p``."""
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    if sampling.top_p >= 1 and not 0 < sampling.top_k < probs.size(-1):
        return int(torch.multinomial(probs, 1, generator=generator))
    sorted_probs, order = torch.sort(probs, descending=True)
    if 0 < sampling.top_k < probs.size(-1):
        sorted_probs[sampling.top_k:] = 0.0
        sorted_probs = sorted_probs / sorted_probs.sum()
    # Keep the smallest prefix whose mass reaches top_p (always at least the top token).
    outside = sorted_probs.cumsum(-1) - sorted_probs >= sampling.top_p
    sorted_probs = sorted_probs.masked_fill(outside, 0.0)
    return int(order[torch.multinomial(sorted_probs, 1, generator=generator)])

