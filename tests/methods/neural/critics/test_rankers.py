"""LCA's rankers: the heuristic is the env's rank_states, the synthetic ranker's measured
accuracy matches its setting, LLM answers are parsed or scored."""

from __future__ import annotations

import pytest

from marlang.methods.neural.critics.rankers import HeuristicRanker, LLMRanker, SyntheticRanker, parse_yes_no
from marlang.prompts import PromptLibrary
from tests.fakes import FakeRuleChatModel
from tests.methods.neural.critics.helpers import two_switch_queries


def test_heuristic_ranker_is_rank_states():
    env, queries = two_switch_queries(200)
    answers = HeuristicRanker(env).rank(queries, 2)
    assert answers == [[env.rank_states(q.agent, q.before.snapshot, q.after.snapshot)] * 2 for q in queries]
    assert {a[0] for a in answers} == {-1, 0, 1}  # random play moves both ways


@pytest.mark.parametrize("accuracy", [0.7, 0.8, 1.0])
def test_synthetic_ranker_accuracy_matches_its_setting(accuracy):
    env, queries = two_switch_queries(900)
    truth = HeuristicRanker(env).rank(queries, 1)
    decided = [(q, t[0]) for q, t in zip(queries, truth, strict=True) if t[0] != 0]
    answers = SyntheticRanker(env, accuracy, seed=3).rank([q for q, _ in decided], 4)
    flat = [(a, t) for (_, t), row in zip(decided, answers, strict=True) for a in row]
    measured = sum(a == t for a, t in flat) / len(flat)
    n = len(flat)
    assert n > 1500
    # Within 4 standard errors of the setting (flips are independent per query).
    assert abs(measured - accuracy) <= 4 * (accuracy * (1 - accuracy) / n) ** 0.5 + 1e-9
    if accuracy < 1:  # the queries of one pair disagree sometimes: flips are per query
        assert any(len(set(row)) > 1 for row in answers)


def test_synthetic_ranker_keeps_ties():
    env, queries = two_switch_queries(300)
    truth = HeuristicRanker(env).rank(queries, 1)
    ties = [q for q, t in zip(queries, truth, strict=True) if t[0] == 0]
    assert ties and all(row == [0, 0] for row in SyntheticRanker(env, 0.6, seed=1).rank(ties, 2))


def test_parse_yes_no_takes_the_last_answer():
    assert parse_yes_no("Yes") == 1
    assert parse_yes_no("It moved away, so no.") == -1
    assert parse_yes_no("At first yes... but on reflection: No") == -1
    assert parse_yes_no("I cannot tell") is None
    assert parse_yes_no("Nobody knows, yesterday") is None  # whole words only


def _ranker(model):
    prompts = PromptLibrary()
    return LLMRanker(model, preamble="PREAMBLE", question=prompts.get("lca_rank_behaviour"), max_tokens=32)


def test_llm_ranker_generates_and_parses():
    _, queries = two_switch_queries(6, texts=True)
    replies = iter(["Yes, it helped.", "no", "Unsure."] * 10)
    model = FakeRuleChatModel(rule=lambda messages: next(replies))
    ranker = _ranker(model)
    answers = ranker.rank(queries[:3], 1)
    assert answers == [[1], [-1], [None]]
    system, human = model.calls[0]
    assert system.content == "PREAMBLE"
    q = queries[0]
    assert q.before.texts[q.agent] in human.content and q.after.texts[q.agent] in human.content
    assert f"Your action: {q.action}" in human.content


def test_llm_ranker_samples_each_query_with_its_own_seed():
    _, queries = two_switch_queries(2, texts=True)
    model = FakeRuleChatModel(rule=lambda messages: "Yes")
    _ranker(model).rank(queries[:1], 3)
    seeds = [kw.get("seed") for kw in model.call_kwargs]
    assert len(set(seeds)) == 3 and all(kw.get("temperature") == 1.0 for kw in model.call_kwargs)


def test_llm_ranker_scores_where_the_model_can():
    _, queries = two_switch_queries(2, texts=True)
    model = FakeRuleChatModel(rule=lambda messages: "No", supports_choices=True)
    assert _ranker(model).rank(queries[:2], 1) == [[-1], [-1]]
    assert all(kw["choices"] == ["Yes", "No"] for kw in model.call_kwargs)

