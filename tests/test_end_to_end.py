"""End to end on the embedded SmolLM2: a real alternating-proposals episode with Reflexion,
then a rerun from the response cache that reproduces it without touching the model."""

from __future__ import annotations

import json

import pytest

from marlang.config import build_config
from marlang.models import LocalChatModel, SQLiteResponseCache
from marlang.run import Experiment

pytestmark = pytest.mark.real_model


def _config():
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
        "model": {"spec": "local:smollm2", "max_tokens": 12, "message_max_tokens": 10,
                  "reflection_max_tokens": 12},
        "protocol": {"name": "alternating", "rounds": 1},
        "learning": {"method": "reflexion"},
        "run": {"episodes": 2, "parallel": 2, "progress": False, "seed": 5},
    })


def _episodes(run_dir):
    rows = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    return sorted(rows, key=lambda d: d["episode"])


def _without_cache_counts(episode):
    return {k: v for k, v in episode.items() if k != "metrics"} | {
        "metrics": {k: v for k, v in episode["metrics"].items() if k != "cached_calls"}
    }


def test_alternating_episode_on_smollm2_then_an_exact_free_replay(tmp_path, smollm2_engine):
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    model = LocalChatModel(engine=smollm2_engine, cache=cache)

    served_before = smollm2_engine.counters.requests_served
    first = Experiment(_config(), tmp_path / "first", chat_model=model, cache=cache).run()
    served = smollm2_engine.counters.requests_served - served_before
    episodes = _episodes(first.run_dir)
    assert [e["episode"] for e in episodes] == [0, 1]
    step = episodes[0]["steps"][0]
    # alternating, one round: agent_0 then agent_1 speak over a shared transcript
    assert [m["sender"] for m in step["messages"]] == ["agent_0", "agent_1"]
    assert all(m["content"].strip() for m in step["messages"])
    legal = step["observations"]["agent_0"]["legal_actions"]
    for decision in step["decisions"].values():
        assert decision["action"] in legal and decision["valid"]  # scoring picks legal actions
        assert decision["logprob"] is not None and decision["logprob"] < 0  # log p(action | prompt), for PPO
    from marlang.rundir import RunDirectory

    (update,) = [u for u in RunDirectory(first.run_dir).read_jsonl("updates.jsonl") if u["agent"] == "agent_0"]
    assert [r["episode"] for r in update["reflections"]] == [0, 1]
    assert all(r["text"].strip() for r in update["reflections"])
    assert update["memory_after"] == [r["text"] for r in update["reflections"]]
    # per step: 2 messages + 2 x (thought + choice); per episode: 2 reflections; a request the
    # run made twice (two levels can read alike, and a greedy choice has no seed) is served once
    n_steps = sum(e["n_steps"] for e in episodes)
    assert served + cache.hits == n_steps * 6 + 2 * 2 and cache.hits <= 2
    assert smollm2_engine.counters.generate_calls > 0

    served_before = smollm2_engine.counters.requests_served
    again = Experiment(_config(), tmp_path / "again", chat_model=model, cache=cache).run()
    assert smollm2_engine.counters.requests_served == served_before  # every call a cache hit
    assert [_without_cache_counts(e) for e in _episodes(again.run_dir)] == [
        _without_cache_counts(e) for e in episodes
    ]
    assert again.summary["steps"] == first.summary["steps"]
