"""Token sampling decides a whole batch at once (`choose_tokens`): each row draws exactly what
one ``torch.multinomial`` per row drew before (the same tokens and log-probs, bit for bit), and
a row's draw depends on its own generator only, never on the rows batched with it."""

from __future__ import annotations

import random

import pytest
import torch

from marlang.models.generation import SamplingParams, choose_tokens, token_logprobs
from marlang.models.local_engine import GenerationRequest


def per_row_draw(logits: torch.Tensor, sampling: SamplingParams, generator: torch.Generator) -> int:
    """The reference: one row at a time, one ``torch.multinomial`` draw (the engine's former way)."""
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    if sampling.top_p >= 1 and not 0 < sampling.top_k < probs.size(-1):
        return int(torch.multinomial(probs, 1, generator=generator))
    sorted_probs, order = torch.sort(probs, descending=True)
    if 0 < sampling.top_k < probs.size(-1):
        sorted_probs[sampling.top_k:] = 0.0
        sorted_probs = sorted_probs / sorted_probs.sum()
    outside = sorted_probs.cumsum(-1) - sorted_probs >= sampling.top_p
    sorted_probs = sorted_probs.masked_fill(outside, 0.0)
    return int(order[torch.multinomial(sorted_probs, 1, generator=generator)])


def per_row_choose(logits, samplings, generators):
    tokens, logprobs = logits.argmax(dim=-1), []
    for i, (sampling, generator) in enumerate(zip(samplings, generators, strict=True)):
        if generator is not None:
            tokens[i] = per_row_draw(logits[i], sampling, generator)
        scaled = logits[i].float() / (sampling.temperature or 1.0)
        logprobs.append(float(torch.log_softmax(scaled, dim=-1)[tokens[i]]))
    return tokens, logprobs


def _generators(samplings, seeds):
    return [torch.Generator().manual_seed(s) if p.temperature > 0 else None for p, s in zip(samplings, seeds)]


def _case(rng: random.Random):
    rows, vocab = rng.randint(1, 8), rng.choice([5, 64, 1000, 49152])
    logits = torch.randn(rows, vocab) * rng.choice([0.5, 3.0, 10.0])
    if rng.random() < 0.3:
        logits[:, : vocab // 2] = logits[:, :1]  # ties: half the vocabulary equally likely
    logits = logits.to(rng.choice([torch.float32, torch.bfloat16]))
    samplings = [SamplingParams(temperature=rng.choice([0.0, 0.3, 0.7, 1.0, 1.3]), top_p=rng.choice([1.0, 0.9, 0.5]),
                                top_k=rng.choice([0, 2, 40, vocab + 3]))
                 for _ in range(rows)]
    return logits, samplings, [rng.randrange(2 ** 31) for _ in range(rows)]


@pytest.mark.parametrize("case", range(60))
def test_a_batch_draws_bit_for_bit_what_one_multinomial_per_row_drew(case):
    logits, samplings, seeds = _case(random.Random(case))
    batched, per_row = _generators(samplings, seeds), _generators(samplings, seeds)
    for _step in range(3):  # the generators go on from where the last step left them, alike
        expected, expected_logprobs = per_row_choose(logits.clone(), samplings, per_row)
        tokens = choose_tokens(logits.clone(), samplings, batched)
        assert torch.equal(tokens, expected)
        assert token_logprobs(logits, samplings, tokens) == expected_logprobs


def test_a_rows_draw_does_not_depend_on_the_rows_beside_it():
    rng = random.Random(7)
    logits = torch.randn(6, 1000) * 3
    samplings = [SamplingParams(temperature=1.0, top_p=rng.choice([1.0, 0.8]), top_k=rng.choice([0, 50]))
                 for _ in range(6)]
    seeds = [11, 12, 13, 14, 15, 16]
    together = choose_tokens(logits.clone(), samplings, _generators(samplings, seeds))
    for i in range(6):
        one = slice(i, i + 1)
        alone = choose_tokens(logits[one].clone(), samplings[one], _generators(samplings[one], seeds[one]))
        assert int(alone[0]) == int(together[i])
    # a different seed for row 0 changes row 0's noise only
    moved = choose_tokens(logits.clone(), samplings, _generators(samplings, [99] + seeds[1:]))
    assert torch.equal(moved[1:], together[1:])


def test_the_engine_generates_what_per_row_draws_generated(tiny_engine, monkeypatch):
    """Whole completions on the engine (prefill, decoding, finished rows dropped): token ids,
    texts and log-probs equal those of the per-row draw, for a batch of mixed requests."""
    prompt = tiny_engine.encode(tiny_engine.format_chat([{"role": "user", "content": "Write a poem."}]))
    requests = [GenerationRequest(prompt, SamplingParams(temperature=t, top_p=p, top_k=k, seed=s, max_tokens=24,
                                                         logprobs=True))
                for t, p, k, s in [(1.0, 1.0, 0, 1), (0.7, 0.9, 0, 2), (1.2, 1.0, 5, 3), (0.0, 1.0, 0, None),
                                   (1.0, 0.5, 20, 4), (1.0, 1.0, 0, 5)]]
    batched = tiny_engine.generate(requests)

    def reference(logits, rows):
        tokens, logprobs = per_row_choose(logits, [r.request.sampling for r in rows], [r.generator for r in rows])
        for row, logprob in zip(rows, logprobs, strict=True):
            row.logprobs.append(logprob)
        return tokens

    monkeypatch.setattr(tiny_engine, "_choose_tokens", reference)
    expected = tiny_engine.generate(requests)
    assert [o.token_ids for o in batched] == [o.token_ids for o in expected]
    assert [o.token_logprobs for o in batched] == [o.token_logprobs for o in expected]
    assert [o.text for o in batched] == [o.text for o in expected]
    assert len({o.token_ids for o in batched}) > 1  # the rows drew differently
