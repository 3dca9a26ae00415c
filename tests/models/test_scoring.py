"""Action scorers: KV-cache reuse gives the same log-probs as the plain implementations."""

from __future__ import annotations

import pytest
import torch

from marlang.models import (
    ActionScorer,
    KVReuseScorer,
    LocalLM,
    PerCandidateScorer,
    RepeatedPromptScorer,
    make_scorer,
)
from marlang.testing import tiny_llama, tiny_tokenizer

ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
PROMPT = (
    "<|im_start|>system\nYou are an agent in a grid world.<|im_end|>\n"
    "<|im_start|>user\nMission: pick up the red key.\nYou see a wall 2 steps forward.\n"
    "You see a red key 1 step left.\nPossible actions: turn left, turn right, go forward, "
    "pick up, drop, toggle.<|im_end|>\n<|im_start|>assistant\nAction:"
)


def scorers(engine: LocalLM) -> tuple[KVReuseScorer, PerCandidateScorer, RepeatedPromptScorer]:
    return (
        KVReuseScorer(engine.model, engine.tokenizer),
        PerCandidateScorer(engine.model, engine.tokenizer),
        RepeatedPromptScorer(engine.model, engine.tokenizer),
    )


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("layout", ["packed", "batched"])
def test_kv_reuse_matches_the_reference_scorers(layout: str, attention: str) -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=1, attn_implementation=attention)
    candidates = [" " + a for a in ACTIONS] + [" go forward and then pick up the key"]
    kv = KVReuseScorer(model, tokenizer, layout=layout)
    lengths = {len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in candidates}
    assert len(lengths) > 2  # candidates of different lengths: padding / packing is exercised
    expected = PerCandidateScorer(model, tokenizer).score(PROMPT, candidates)
    assert kv.score(PROMPT, candidates) == pytest.approx(expected, abs=1e-4)
    repeated = RepeatedPromptScorer(model, tokenizer).score(PROMPT, candidates)
    assert repeated == pytest.approx(expected, abs=1e-4)
    assert all(s < 0 for s in expected) and len(set(expected)) == len(expected)


def test_layout_defaults_to_packed_where_custom_masks_work(tiny_engine: LocalLM) -> None:
    assert KVReuseScorer(tiny_engine.model, tiny_engine.tokenizer).layout == "packed"
    tiny_engine.model.config._attn_implementation = "flash_attention_2"
    assert KVReuseScorer(tiny_engine.model, tiny_engine.tokenizer).layout == "batched"
    with pytest.raises(ValueError, match="layout='batched'"):
        KVReuseScorer(tiny_engine.model, tiny_engine.tokenizer, layout="packed")


def test_single_token_candidates_need_only_the_prompt_pass(tiny_engine: LocalLM) -> None:
    tokenizer = tiny_engine.tokenizer
    candidates = [tokenizer.decode([i]) for i in (40, 41, 42)]
    assert all(len(tiny_engine.encode(c)) == 1 for c in candidates)
    kv, one_by_one, _ = scorers(tiny_engine)
    with torch.inference_mode():
        logits = tiny_engine.model(torch.tensor([tiny_engine.encode(PROMPT)])).logits[0, -1]
    direct = torch.log_softmax(logits, -1)[[40, 41, 42]].tolist()
    assert kv.score(PROMPT, candidates) == pytest.approx(direct, abs=1e-5)
    assert one_by_one.score(PROMPT, candidates) == pytest.approx(direct, abs=1e-5)


def test_scores_are_differentiable_for_training(tiny_engine: LocalLM) -> None:
    kv = KVReuseScorer(tiny_engine.model, tiny_engine.tokenizer)
    scores = kv.score_tensor(PROMPT, [" go forward", " pick up"])
    assert scores.requires_grad
    torch.log_softmax(scores, 0)[0].backward()
    grad = tiny_engine.model.model.embed_tokens.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_invalid_inputs(tiny_engine: LocalLM) -> None:
    kv = KVReuseScorer(tiny_engine.model, tiny_engine.tokenizer)
    assert isinstance(kv, ActionScorer)
    assert kv.score(PROMPT, []) == []
    with pytest.raises(ValueError, match="no tokens"):
        kv.score(PROMPT, [" go", ""])
    with pytest.raises(ValueError, match="prompt is empty"):
        kv.score("", [" go"])


@pytest.mark.real_model
def test_kv_reuse_matches_one_at_a_time_on_the_embedded_model(smollm2_engine: LocalLM) -> None:
    prompt = smollm2_engine.format_chat(
        [
            {
                "role": "system",
                "content": "You are an agent in a grid world. Answer with one action.",
            },
            {"role": "user", "content": PROMPT.split("user\n")[1].split("<|im_end|>")[0]},
        ]
    )
    candidates = ACTIONS + ["go forward twice"]
    kv = make_scorer("local:smollm2", engine=smollm2_engine)
    assert isinstance(kv, KVReuseScorer)
    one_by_one = PerCandidateScorer(smollm2_engine.model, smollm2_engine.tokenizer)
    expected = one_by_one.score(prompt, candidates)
    assert kv.score(prompt, candidates) == pytest.approx(expected, abs=1e-4)
    batched = KVReuseScorer(smollm2_engine.model, smollm2_engine.tokenizer, layout="batched")
    assert batched.score(prompt, candidates) == pytest.approx(expected, abs=1e-4)
    # The scores mean something: the shortest legal phrasing beats a longer one.
    assert expected[candidates.index("go forward")] > expected[-1]


def test_score_many_matches_one_prompt_at_a_time() -> None:
    from marlang.models import KVReuseScorer
    from marlang.testing import tiny_local_lm

    engine = tiny_local_lm()
    scorer = KVReuseScorer(engine.model, engine.tokenizer)
    items = [
        ("You see a red key 2 steps forward. Action:", [" turn left", " go forward", " pick up"]),
        ("hi", [" drop", " toggle the blue door now"]),
        ("A much longer prompt, to make the left padding of the others matter. Action:",
         [" a", " b"]),
    ]
    together = scorer.score_many(items)
    for (prompt, candidates), scores in zip(items, together, strict=True):
        assert scores == pytest.approx(scorer.score(prompt, candidates), abs=1e-4)
