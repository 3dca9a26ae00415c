"""The LLM ranker on the embedded SmolLM2: it scores "Yes"/"No" (always an answer), every
call is counted as role critic, and a second pass replays from the response cache."""

from __future__ import annotations

import pytest

from marlang.envs import make
from marlang.methods.neural.critics.lca import key_steps
from marlang.methods.neural.critics.rankers import LLMRanker
from marlang.models import SQLiteResponseCache, UsageRecorder, load_chat_model
from marlang.prompts import PromptLibrary
from tests.methods.neural.critics.helpers import two_switch_queries

pytestmark = pytest.mark.real_model


def test_smollm2_ranks_pairs_by_scoring(smollm2_engine, response_cache_path):
    env, queries = two_switch_queries(2, texts=True, mode="text")
    steps = key_steps(make("gridworld/two-switch"), seed=0)
    prompts = PromptLibrary()
    preamble = prompts.get("lca_preamble").render(world=env.world_description, mission=env.mission,
                                                  key_steps="\n".join(steps))
    cache = SQLiteResponseCache(response_cache_path)
    usage = UsageRecorder()

    def ranker():
        model = load_chat_model("local:smollm2", engine=smollm2_engine, cache=cache)
        return LLMRanker(model, preamble=preamble, question=prompts.get("lca_rank_behaviour"), callbacks=[usage])

    first = ranker()
    assert first.scores  # the local model scores choices
    answers = first.rank(queries[:4], 1)
    assert all(a in ([1], [-1]) for a in answers)
    rows = usage.rows
    assert len(rows) == 4 and {r.role for r in rows} == {"critic"} and not any(r.cached for r in rows)
    assert ranker().rank(queries[:4], 1) == answers  # replayed
    assert len(usage.rows) == 8 and all(r.cached for r in usage.rows[4:])


def test_key_steps_are_the_rewarded_steps_in_order():
    steps = key_steps(make("gridworld/two-switch"), seed=0)
    assert len(steps) == 3
    assert "triggered switch" in steps[0] and "triggered switch" in steps[1] and "reached the goal" in steps[2]
