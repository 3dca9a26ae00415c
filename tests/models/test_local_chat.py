"""LocalChatModel on the tiny engine: batching, sampling params, seeds, stops, usage."""

from __future__ import annotations

import asyncio

import pytest
import torch
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import ValidationError

from marlang.models import LocalChatModel, LocalLM, SamplingParams, load_chat_model
from marlang.models.generation import sample_token
from marlang.testing import TINY_MODEL_ID, tiny_chat_model, tiny_llama, tiny_tokenizer

QUESTIONS = [
    "hello",
    "You see a red key 2 steps forward. What now?",
    "go",
    "Possible actions: turn left, turn right, go forward",
    "What is the capital of France?",
]


def chat(text: str) -> list:
    return [SystemMessage("You are an agent."), HumanMessage(text)]


async def test_concurrent_calls_share_one_generate_call(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=12)
    replies = await asyncio.gather(*(model.ainvoke(chat(q)) for q in QUESTIONS))
    assert tiny_engine.counters.generate_calls == 1
    assert tiny_engine.counters.requests_served == len(QUESTIONS)
    # Left padding must not change greedy answers: compare with one request at a time.
    alone = [model.invoke(chat(q)).content for q in QUESTIONS]
    assert [r.content for r in replies] == alone
    assert tiny_engine.counters.generate_calls == 1 + len(QUESTIONS)


def test_batching_works_across_several_event_loops(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=4)

    async def round_of_calls() -> list[str]:
        replies = await model.abatch([chat(q) for q in QUESTIONS[:3]])
        return [r.content for r in replies]

    first = asyncio.run(round_of_calls())
    second = asyncio.run(round_of_calls())
    assert first == second
    assert tiny_engine.counters.generate_calls == 2
    assert tiny_engine.counters.requests_served == 6


async def test_mixed_sampling_params_in_one_batch(tiny_engine: LocalLM) -> None:
    greedy = tiny_chat_model(tiny_engine, max_tokens=10)
    sampled = greedy.model_copy(update={"temperature": 1.0, "top_p": 0.9})
    short = greedy.model_copy(update={"max_tokens": 3})
    solo = [
        (await greedy.ainvoke(chat(QUESTIONS[0]))).content,
        (await sampled.ainvoke(chat(QUESTIONS[1]), seed=11)).content,
        (await short.ainvoke(chat(QUESTIONS[2]))).content,
    ]
    calls_before = tiny_engine.counters.generate_calls
    together = await asyncio.gather(
        greedy.ainvoke(chat(QUESTIONS[0])),
        sampled.ainvoke(chat(QUESTIONS[1]), seed=11),
        short.ainvoke(chat(QUESTIONS[2])),
    )
    assert tiny_engine.counters.generate_calls == calls_before + 1
    # Each request keeps its own params and generator, whoever shares the batch; the short
    # request finishes first and leaves the batch (pruned from the KV cache).
    assert [r.content for r in together] == solo
    assert together[2].usage_metadata["output_tokens"] == 3


async def test_seed_makes_sampling_reproducible(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, temperature=1.0, max_tokens=16)
    a, b, c = await asyncio.gather(
        model.ainvoke(chat("hello"), seed=7),
        model.ainvoke(chat("hello"), seed=7),
        model.ainvoke(chat("hello"), seed=8),
    )
    assert a.content == b.content
    assert a.content != c.content
    seeded_default = model.model_copy(update={"seed": 7})
    assert (await seeded_default.ainvoke(chat("hello"))).content == a.content


def test_greedy_is_deterministic_and_sync_invoke_works(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=8)
    first = model.invoke(chat("go"))
    assert first.content == model.invoke(chat("go")).content
    assert first.response_metadata["finish_reason"] == "length"
    assert first.usage_metadata["output_tokens"] == 8


def test_usage_counts_the_chat_template_tokens(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=5)
    messages = chat("hello")
    reply = model.invoke(messages)
    prompt = tiny_engine.format_chat(
        [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "hello"}]
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    expected_input = len(tiny_engine.encode(prompt))
    assert reply.usage_metadata == {
        "input_tokens": expected_input,
        "output_tokens": 5,
        "total_tokens": expected_input + 5,
    }


def test_stop_sequence_truncates_the_text(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=12)
    full = model.invoke(chat("hello")).content
    stop = full[4:7]
    assert stop and stop in full
    reply = model.invoke(chat("hello"), stop=[stop])
    assert reply.content == full[: full.find(stop)]
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.usage_metadata["output_tokens"] < 12


def test_generation_ends_at_an_eos_token() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), eos_token_id=tokenizer.eos_token_id)
    probe = LocalChatModel(engine=LocalLM(model, tokenizer, TINY_MODEL_ID), max_tokens=6)
    tokens = probe.engine.generate([probe.build_request(chat("hello"))])[0].token_ids
    # Declare the third greedy token an end-of-sequence token: decoding must stop there.
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokens[2]]
    engine = LocalLM(model, tokenizer, TINY_MODEL_ID)
    output = engine.generate([probe.build_request(chat("hello"))])[0]
    assert output.token_ids == tokens[:3]
    assert output.finish_reason == "stop"
    assert output.text == tokenizer.decode(tokens[:2], skip_special_tokens=True)


def test_requests_beyond_max_batch_size_are_split() -> None:
    model = tiny_chat_model(max_tokens=2)
    model.engine.max_batch_size = 2
    replies = asyncio.run(model.abatch([chat(q) for q in QUESTIONS]))
    assert len(replies) == 5
    assert model.counters.generate_calls == 3
    assert model.counters.requests_served == 5


async def test_bad_request_fails_alone(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=4)
    too_long = model.model_copy(update={"max_tokens": 5000})  # > 2048 positions
    results = await asyncio.gather(
        model.ainvoke(chat("hello")), too_long.ainvoke(chat("hello")), return_exceptions=True
    )
    assert isinstance(results[1], ValueError) and "positions" in str(results[1])
    assert results[0].content


def test_copies_share_the_engine_and_its_counters(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=2)
    warm = model.model_copy(update={"temperature": 0.7})
    assert warm.engine is model.engine
    model.invoke(chat("a"))
    warm.invoke(chat("b"))
    assert model.counters.requests_served == warm.counters.requests_served == 2


def test_identifying_params_name_model_and_every_sampling_param(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, temperature=0.3, top_p=0.8, max_tokens=9, seed=5)
    assert model._identifying_params == {
        "model_id": TINY_MODEL_ID,
        "weights_id": tiny_engine.weights_id,
        "temperature": 0.3,
        "top_p": 0.8,
        "top_k": 0,
        "max_tokens": 9,
        "seed": 5,
        "stop": None,
    }


def test_unknown_params_are_errors(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine)
    with pytest.raises(ValueError, match="frequency_penalty"):
        model.invoke(chat("hi"), frequency_penalty=1.0)
    with pytest.raises(ValidationError):
        LocalChatModel(engine=tiny_engine, temprature=0.5)
    with pytest.raises(ValidationError):
        LocalChatModel(engine=tiny_engine, top_p=0.0)


def test_load_chat_model_reuses_a_given_engine(tiny_engine: LocalLM) -> None:
    model = load_chat_model(
        TINY_MODEL_ID, engine=tiny_engine, temperature=0.0, max_tokens=3, timeout=5, max_retries=2
    )
    assert isinstance(model, LocalChatModel) and model.engine is tiny_engine
    assert model.invoke(chat("hi")).usage_metadata["output_tokens"] == 3
    with pytest.raises(ValueError, match="engine holds"):
        load_chat_model("local:smollm2", engine=tiny_engine)


@pytest.mark.real_model
async def test_embedded_model_answers_in_batches(smollm2_engine: LocalLM) -> None:
    model = load_chat_model("local:smollm2", engine=smollm2_engine, max_tokens=12)
    calls_before = smollm2_engine.counters.generate_calls
    questions = ["What is the capital of France?", "What is 2+2?"]
    replies = await asyncio.gather(*(model.ainvoke([HumanMessage(q)]) for q in questions))
    assert smollm2_engine.counters.generate_calls == calls_before + 1
    assert "Paris" in replies[0].content
    assert "4" in replies[1].content
    assert replies[0].response_metadata["model_name"] == "local:smollm2"


def test_sync_batch_is_decoded_together(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, max_tokens=4)
    replies = model.batch([chat(q) for q in QUESTIONS])
    assert tiny_engine.counters.generate_calls == 1
    assert [r.content for r in replies] == [model.invoke(chat(q)).content for q in QUESTIONS]


def test_nucleus_sampling_keeps_only_the_top_mass() -> None:
    logits = torch.tensor([4.0, 3.0, 0.0, 0.0])  # probs ~ 0.71, 0.26, 0.013, 0.013
    generator = torch.Generator().manual_seed(0)
    nucleus = SamplingParams(temperature=1.0, top_p=0.9)
    assert {sample_token(logits, nucleus, generator) for _ in range(200)} == {0, 1}
    top_only = SamplingParams(temperature=1.0, top_p=0.5)
    assert {sample_token(logits, top_only, generator) for _ in range(50)} == {0}
    full = SamplingParams(temperature=1.0)
    assert {sample_token(logits, full, generator) for _ in range(400)} == {0, 1, 2, 3}


def test_top_k_samples_among_the_k_most_likely_tokens_then_the_nucleus() -> None:
    logits = torch.tensor([0.0, 3.0, 0.1, 2.9, 0.2])  # ranks: 1, 3, 4, 2, 0
    generator = torch.Generator().manual_seed(0)
    top2 = SamplingParams(temperature=1.0, top_k=2)
    assert {sample_token(logits, top2, generator) for _ in range(300)} == {1, 3}
    top3 = SamplingParams(temperature=5.0, top_k=3)
    assert {sample_token(logits, top3, generator) for _ in range(300)} == {1, 3, 4}
    # top_p then applies to the renormalised top-k mass: 0.51 of it is token 1 alone.
    both = SamplingParams(temperature=1.0, top_k=2, top_p=0.5)
    assert {sample_token(logits, both, generator) for _ in range(100)} == {1}
    assert {sample_token(logits, SamplingParams(temperature=1.0, top_k=99), generator)
            for _ in range(600)} == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError, match="top_k"):
        SamplingParams(top_k=-1)


def test_top_k_is_a_per_call_param_of_the_local_chat_model(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine, temperature=1.0, top_k=1, max_tokens=6, seed=3)
    greedy = tiny_chat_model(tiny_engine, temperature=0.0, max_tokens=6)
    assert model.invoke(chat("hi")).content == greedy.invoke(chat("hi")).content
    assert model.build_request(chat("hi"), top_k=4).sampling.top_k == 4


def test_models_without_a_chat_template_get_a_plain_one(tiny_engine: LocalLM) -> None:
    tiny_engine.tokenizer.chat_template = None
    prompt = tiny_engine.format_chat([{"role": "user", "content": "hi"}])
    assert prompt == "user: hi\nassistant: "
    assert tiny_chat_model(tiny_engine, max_tokens=2).invoke(chat("hi")).content is not None


ACTIONS = ["turn left", "turn right", "go forward", "pick up"]


async def test_choices_answer_the_most_likely_choice(tiny_engine: LocalLM) -> None:
    from marlang.models import PerCandidateScorer

    model = tiny_chat_model(tiny_engine)
    assert model.supports_choices
    reply = await model.ainvoke(chat(QUESTIONS[1]), choices=ACTIONS, choice_prefix="Action: ")
    scores = reply.response_metadata["choice_logprobs"]
    assert list(scores) == ACTIONS
    assert reply.content == max(scores, key=scores.get)
    assert tiny_engine.counters.generate_calls == 0 and tiny_engine.counters.requests_served == 1
    # The trailing space of the prefix moves onto the choices; the scores are exactly the
    # plain one-candidate-at-a-time log-probs of that text.
    prompt = tiny_engine.format_chat(
        [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": QUESTIONS[1]}]
    )
    reference = PerCandidateScorer(tiny_engine.model, tiny_engine.tokenizer).score(
        prompt + "Action:", [" " + a for a in ACTIONS]
    )
    assert [scores[a] for a in ACTIONS] == pytest.approx(reference, abs=1e-4)
    assert reply.usage_metadata["input_tokens"] == len(tiny_engine.encode(prompt + "Action:"))


def test_choice_offsets_shift_the_policy_and_the_greedy_choice(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine)
    plain = model.invoke(chat(QUESTIONS[1]), choices=ACTIONS, choice_prefix="Action: ")
    scores = [plain.response_metadata["choice_logprobs"][a] for a in ACTIONS]
    worst = min(range(len(ACTIONS)), key=scores.__getitem__)
    offsets = [0.0] * len(ACTIONS)
    offsets[worst] = 50.0  # lifts the least likely action above every other
    shifted = model.invoke(chat(QUESTIONS[1]), choices=ACTIONS, choice_prefix="Action: ",
                           choice_offsets=offsets)
    meta = shifted.response_metadata
    assert shifted.content == ACTIONS[worst] != plain.content
    assert [meta["choice_logprobs"][a] for a in ACTIONS] == pytest.approx(scores, abs=1e-5)  # raw scores kept
    assert meta["choice_offsets"] == offsets
    logits = torch.tensor(scores, dtype=torch.float64) + torch.tensor(offsets, dtype=torch.float64)
    assert meta["policy_logprob"] == pytest.approx(float(torch.log_softmax(logits, -1)[worst]), abs=1e-6)
    sampled = model.invoke(chat(QUESTIONS[1]), choices=ACTIONS, choice_prefix="Action: ",
                           choice_offsets=offsets, temperature=2.0, seed=3)
    index = ACTIONS.index(sampled.content)
    assert sampled.response_metadata["policy_logprob"] == pytest.approx(
        float(torch.log_softmax(logits / 2.0, -1)[index]), abs=1e-6)
    with pytest.raises(ValueError, match="one finite number per choice"):
        model.invoke(chat("go"), choices=ACTIONS, choice_offsets=[0.0])
    with pytest.raises(ValueError, match="one finite number per choice"):
        model.invoke(chat("go"), choices=ACTIONS, choice_offsets=[float("nan")] * len(ACTIONS))


def test_choices_are_part_of_the_cache_key(tmp_path) -> None:
    from marlang.models import SQLiteResponseCache

    engine_model = tiny_chat_model(cache=SQLiteResponseCache(tmp_path / "c.sqlite"))
    first = engine_model.invoke(chat("go"), choices=ACTIONS)
    again = engine_model.invoke(chat("go"), choices=ACTIONS)
    other = engine_model.invoke(chat("go"), choices=ACTIONS[:2])
    assert first.content == again.content and other.content in ACTIONS[:2]
    assert engine_model.counters.requests_served == 2  # the repeat was a cache hit


def test_bad_choices_are_a_clear_error(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine)
    with pytest.raises(ValueError, match="non-empty list"):
        model.invoke(chat("go"), choices=[])
    with pytest.raises(ValueError, match="Unsupported call parameter"):
        model.invoke(chat("go"), choices=ACTIONS, logit_bias=3)


async def test_concurrent_choices_are_scored_in_one_batch(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine)
    together = await asyncio.gather(
        *(model.ainvoke(chat(q), choices=ACTIONS, choice_prefix="Action: ") for q in QUESTIONS)
    )
    assert tiny_engine.counters.score_calls == 1 and tiny_engine.counters.requests_served == len(QUESTIONS)
    for q, reply in zip(QUESTIONS, together, strict=True):
        alone = model.invoke(chat(q), choices=ACTIONS, choice_prefix="Action: ")
        assert reply.content == alone.content
        assert list(reply.response_metadata["choice_logprobs"].values()) == pytest.approx(
            list(alone.response_metadata["choice_logprobs"].values()), abs=1e-4
        )


def test_prefill_starts_the_reply_the_model_continues():
    from langchain_core.messages import HumanMessage

    from marlang.testing import tiny_chat_model

    model = tiny_chat_model()
    messages = [HumanMessage("Answer in JSON.")]
    plain = model.build_request(messages)
    opened = model.build_request(messages, prefill='{"agent_0": "')
    n = len(plain.prompt_ids)
    assert opened.prompt_ids[:n] == plain.prompt_ids and len(opened.prompt_ids) > n
    assert model.engine.tokenizer.decode(opened.prompt_ids[n:]) == '{"agent_0": "'
    assert model.supports_prefill
