"""Action scorers: KV-cache reuse and the packed single pass give the same log-probs (and, for
training, the same gradients) as the plain implementations."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from marlang.models import (
    ActionScorer,
    KVReuseScorer,
    LocalLM,
    PackedScorer,
    PerCandidateScorer,
    RepeatedPromptScorer,
    ScoredDecisions,
    make_scorer,
    score_decisions,
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


# --- the packed single pass (training) -------------------------------------------------------

DECISIONS = [
    ("You see a red key 2 steps forward. Action:", [" go forward", " a", " pick up the key"]),
    ("hi", [" drop"]),
    (
        "A much longer prompt, so that the rows of the others need padding. Action:",
        [" turn left", " toggle the blue door now", " b", " c"],
    ),
]


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _items(tokenizer: PreTrainedTokenizerBase) -> list[tuple[list[int], list[list[int]]]]:
    items = [(_ids(tokenizer, p), [_ids(tokenizer, c) for c in cs]) for p, cs in DECISIONS]
    lengths = {len(c) for _, cands in items for c in cands}
    assert 1 in lengths and len(lengths) > 2  # 1-token candidates and several lengths
    return items


def _plain_prompt_hidden(model: PreTrainedModel, prompt_ids: list[int]) -> torch.Tensor:
    """The final hidden state at the prompt's last token, from a plain forward of the prompt."""
    out = model(input_ids=torch.tensor([prompt_ids]), output_hidden_states=True)
    return out.hidden_states[-1][0, -1]


def _checkpointed_training(model: PreTrainedModel) -> None:
    # transformers 5 renamed gradient_checkpointing_enable (the old name still works, warning)
    enable = getattr(model, "activation_checkpointing_enable", None)
    (enable or model.gradient_checkpointing_enable)()
    model.train()
    assert model.config.attention_dropout == 0.0  # training mode changes no numbers


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("layout", ["packed", "repeated"])
def test_single_pass_matches_one_forward_per_candidate(layout: str, attention: str) -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=2, attn_implementation=attention)
    items = _items(tokenizer)
    reference = PerCandidateScorer(model, tokenizer)
    with torch.no_grad():
        out = score_decisions(model, items, tokenizer.pad_token_id, layout=layout)
        assert isinstance(out, ScoredDecisions) and len(out.scores) == len(items)
        assert out.prompt_hidden.shape == (len(items), model.config.hidden_size)
        for i, (prompt, cands) in enumerate(items):
            assert out.scores[i].dtype == torch.float32
            torch.testing.assert_close(
                out.scores[i], reference.score_ids(prompt, cands), atol=1e-5, rtol=0
            )
            hidden = _plain_prompt_hidden(model, prompt)
            torch.testing.assert_close(out.prompt_hidden[i], hidden, atol=1e-5, rtol=0)
            # It is the state after the final norm: the LM head maps it to the next-token logits.
            logits = model(input_ids=torch.tensor([prompt])).logits[0, -1]
            torch.testing.assert_close(model.lm_head(hidden), logits, atol=1e-5, rtol=0)


def test_single_pass_default_layout_follows_the_attention() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=2)
    items = _items(tokenizer)
    calls: list[dict[str, Any]] = []
    forward = model.forward

    def spy(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return forward(**kwargs)

    model.forward = spy
    with torch.no_grad():
        score_decisions(model, items, 0)
        assert calls[-1]["attention_mask"].dim() == 4 and len(calls[-1]["input_ids"]) == 3
        model.config._attn_implementation = "flash_attention_2"  # no custom 4D masks there
        with pytest.raises(ValueError, match="'packed' or 'repeated'"):
            score_decisions(model, items, 0, layout="batched")  # type: ignore[arg-type]
        model.config._attn_implementation = "sdpa"  # the tiny CPU model has no flash kernels
        score_decisions(model, items, 0, layout="repeated")
        assert calls[-1]["attention_mask"].dim() == 2 and len(calls[-1]["input_ids"]) == 8


@pytest.mark.parametrize("layout", ["packed", "repeated"])
def test_forward_kwargs_reach_the_model_one_per_row(layout: str) -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=2)
    items = _items(tokenizer)
    seen: list[Any] = []
    forward = model.forward

    def spy(*, adapter_names: list[str], **kwargs: Any) -> Any:  # as PEFT's mixed batches
        assert len(adapter_names) == len(kwargs["input_ids"])
        seen.append(adapter_names)
        return forward(**kwargs)

    model.forward = spy
    with torch.no_grad():
        score_decisions(model, items, 0, layout=layout, adapter_names=["x", "y", "z"])
    rows = ["x", "y", "z"] if layout == "packed" else ["x"] * 3 + ["y"] + ["z"] * 4
    assert seen == [rows]


def test_items_without_candidates_still_give_the_prompt_hidden_state() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=2)
    (prompt, cands), (other, _) = _items(tokenizer)[:2]
    with torch.no_grad():
        for layout in ("packed", "repeated"):
            out = score_decisions(model, [(other, []), (prompt, cands)], 0, layout=layout)
            assert out.scores[0].shape == (0,) and out.scores[1].shape == (len(cands),)
            hidden = _plain_prompt_hidden(model, other)
            torch.testing.assert_close(out.prompt_hidden[0], hidden, atol=1e-5, rtol=0)
            out = score_decisions(model, [(other, [])], 0, layout=layout)
            assert out.scores[0].shape == (0,) and out.prompt_hidden.shape[0] == 1
        with pytest.raises(ValueError, match="no tokens"):
            score_decisions(model, [(prompt, [[5], []])], 0)
        with pytest.raises(ValueError, match="prompt is empty"):
            score_decisions(model, [([], [[5]])], 0)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointed-train"])
def test_single_pass_gradients_match_the_plain_forward(checkpointing: bool, attention: str) -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=4, attn_implementation=attention)
    items = _items(tokenizer)
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(len(cands), generator=generator) for _, cands in items]
    directions = torch.randn(len(items), model.config.hidden_size, generator=generator)

    def loss(scores: list[torch.Tensor], hidden: torch.Tensor) -> torch.Tensor:
        policy = sum((w * s).sum() for w, s in zip(weights, scores, strict=True))
        return policy + (directions * hidden).sum()

    # Reference: one plain forward per candidate (prompt + candidate) and one per prompt.
    reference = PerCandidateScorer(model, tokenizer)
    loss(
        [reference.score_ids(p, c) for p, c in items],
        torch.stack([_plain_prompt_hidden(model, p) for p, _ in items]),
    ).backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    if checkpointing:
        _checkpointed_training(model)
    out = score_decisions(model, items, tokenizer.pad_token_id)
    loss(out.scores, out.prompt_hidden).backward()
    scale = max(g.abs().max().item() for g in expected.values())
    assert scale > 0
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        torch.testing.assert_close(param.grad, expected[name], atol=1e-5 * scale, rtol=0)


@pytest.mark.parametrize("layout", ["packed", "batched"])
def test_kv_reuse_under_checkpointed_training_still_scores_after_the_prompt(layout: str) -> None:
    # Gradient checkpointing in train mode makes transformers drop the KV cache: the packed
    # layout used to crash and the batched one to score candidates without their prompt.
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=1)
    candidates = [" " + a for a in ACTIONS] + [" go forward and then pick up the key"]
    expected = PerCandidateScorer(model, tokenizer).score(PROMPT, candidates)
    _checkpointed_training(model)
    kv = KVReuseScorer(model, tokenizer, layout=layout)
    assert kv.score(PROMPT, candidates) == pytest.approx(expected, abs=1e-5)
    scores = kv.score_tensor(PROMPT, candidates)
    assert scores.requires_grad
    assert scores.tolist() == pytest.approx(expected, abs=1e-5)
    items = [(PROMPT, candidates), ("hi", [" drop", " toggle"])]
    together = kv.score_many(items)
    assert together[0] == pytest.approx(expected, abs=1e-5)
    model.eval()
    assert together[1] == pytest.approx(kv.score("hi", [" drop", " toggle"]), abs=1e-5)


def test_packed_scorer_is_an_action_scorer() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=1)
    packed = PackedScorer(model, tokenizer)
    assert isinstance(packed, ActionScorer)
    candidates = [" " + a for a in ACTIONS]
    expected = PerCandidateScorer(model, tokenizer).score(PROMPT, candidates)
    assert packed.score(PROMPT, candidates) == pytest.approx(expected, abs=1e-5)
    assert packed.score(PROMPT, []) == []
    with pytest.raises(ValueError, match="no tokens"):
        packed.score(PROMPT, [" go", ""])
    with pytest.raises(ValueError, match="prompt is empty"):
        packed.score("", [" go"])
    items = [(PROMPT, candidates), ("hi", [" drop", " toggle the blue door"])]
    many = packed.score_many(items)
    assert many[0] == pytest.approx(expected, abs=1e-5)
    assert many[1] == pytest.approx(packed.score(*items[1]), abs=1e-5)
    # score_tensor and score_batch follow the caller's grad mode; score does not need grads.
    assert packed.score_tensor(PROMPT, candidates).requires_grad
    batch = packed.score_batch(items)
    assert batch.scores[0].requires_grad and batch.prompt_hidden.requires_grad
    with torch.no_grad():
        assert not packed.score_batch(items).scores[0].requires_grad



def test_the_cache_argument_rename_warning_of_transformers_is_not_repeated_per_forward_pass():
    import warnings

    from marlang.models.local_engine import ScoreRequest
    from marlang.testing import tiny_local_lm

    engine = tiny_local_lm()
    with warnings.catch_warnings(record=True) as caught:  # the filters as they are, marlang's included
        for _ in range(3):
            engine.score_requests([ScoreRequest("hi", (" a", " b"))])
            warnings.filterwarnings("ignore", message="an unrelated filter change")
    assert [str(w.message) for w in caught if "past_key_values" in str(w.message)] == []
