"""The local engine and a stopped run: decoding ends at the next step, queued jobs never start,
and the engine serves the next run as before."""

from __future__ import annotations

import asyncio

import pytest

from marlang.models import LocalLM
from marlang.models.local_engine import GenerationRequest, SamplingParams
from marlang.types import StopFlag, Stopped


def _long_request(engine: LocalLM) -> GenerationRequest:
    prompt = engine.encode(engine.format_chat([{"role": "user", "content": "Tell a long story."}]))
    return GenerationRequest(prompt, SamplingParams(temperature=1.0, seed=0, max_tokens=60))


def test_a_stopped_run_stops_the_engine_at_its_next_decoding_step(tiny_engine, monkeypatch):
    flag, steps = StopFlag(), []
    choose = tiny_engine._choose_tokens

    def counting(logits, rows):
        steps.append(len(rows))
        if len(steps) == 3:
            flag.set()  # Ctrl-C while the third token is chosen
        return choose(logits, rows)

    monkeypatch.setattr(tiny_engine, "_choose_tokens", counting)
    tiny_engine._eos_ids = frozenset()  # no early end: max_tokens steps unless stopped
    with tiny_engine.watching(flag), pytest.raises(Stopped):
        tiny_engine.generate([_long_request(tiny_engine)] * 2)
    assert len(steps) == 3  # not the 60 of max_tokens
    # The run has let go of its flag: the engine serves the next one in full.
    (out,) = tiny_engine.generate([_long_request(tiny_engine)])
    assert out.output_tokens == 60


async def test_a_job_queued_on_the_engine_does_not_start_once_the_run_stopped(tiny_engine):
    flag, ran = StopFlag(), []
    with tiny_engine.watching(flag):
        flag.set()
        with pytest.raises(Stopped):
            await tiny_engine.run(ran.append, 1)
    assert ran == []
    assert tiny_engine.wait_idle(timeout=5.0)
    await tiny_engine.run(ran.append, 2)  # the flag went with its run
    assert ran == [2]


async def test_callers_of_a_stopped_batch_get_the_stop_not_a_hang(tiny_engine, monkeypatch):
    flag, steps = StopFlag(), []
    choose = tiny_engine._choose_tokens

    def counting(logits, rows):
        steps.append(len(rows))
        if len(steps) == 2:
            flag.set()
        return choose(logits, rows)

    monkeypatch.setattr(tiny_engine, "_choose_tokens", counting)
    tiny_engine._eos_ids = frozenset()
    with tiny_engine.watching(flag):
        calls = [tiny_engine.agenerate(_long_request(tiny_engine)) for _ in range(3)]
        results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout=10)
    assert all(isinstance(r, Stopped) for r in results), results
    assert steps == [3, 3]  # one batch of the three, stopped at its second step


def test_stop_strings_checked_on_the_tail_stop_where_the_whole_text_would(tiny_engine, monkeypatch):
    prompt = tiny_engine.encode(tiny_engine.format_chat([{"role": "user", "content": "Say something."}]))
    stops = [("e",), ("th", "\n"), ("an", "a b", "."), ("zz",)]
    requests = [GenerationRequest(prompt, SamplingParams(temperature=1.0, seed=seed, max_tokens=40, stop=stop))
                for seed in range(12) for stop in stops]
    tail = tiny_engine.generate(requests)
    # the whole text decoded at every token: what the engine did before the tail check
    monkeypatch.setattr(tiny_engine, "_tail_has_stop", lambda token_ids, stops: True)
    whole = tiny_engine.generate(requests)
    assert [(o.text, o.token_ids, o.finish_reason) for o in tail] == \
        [(o.text, o.token_ids, o.finish_reason) for o in whole]
    assert sum(o.finish_reason == "stop" for o in tail) > 10  # the stop strings were met


def test_ignore_eos_decodes_max_tokens_past_the_end_of_sequence(tiny_engine):
    prompt = tiny_engine.encode(tiny_engine.format_chat([{"role": "user", "content": "Hi."}]))
    tiny_engine._eos_ids = frozenset(range(len(tiny_engine.tokenizer)))  # every token ends a reply
    stops, goes_on = tiny_engine.generate([
        GenerationRequest(prompt, SamplingParams(temperature=1.0, seed=0, max_tokens=7)),
        GenerationRequest(prompt, SamplingParams(temperature=1.0, seed=0, max_tokens=7, ignore_eos=True))])
    assert (stops.output_tokens, stops.finish_reason) == (1, "stop")
    assert (goes_on.output_tokens, goes_on.finish_reason) == (7, "length")
    assert goes_on.token_ids[0] == stops.token_ids[0]
