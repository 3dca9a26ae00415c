"""Grading against the oracle: Spearman with ties, top-agent agreement with ties at the top,
chance levels, and units left out where the oracle ties."""

from __future__ import annotations

import pytest

from marlang.evaluation.creditcheck.grading import grade, spearman, top_agents

AGENTS = ["a", "b", "c"]


def test_spearman_uses_average_ranks_and_is_undefined_on_ties():
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [1, 1, 2]) == pytest.approx(0.8660254)
    assert spearman([1, 1, 1], [1, 2, 3]) is None and spearman([1, 2, 3], [5, 5, 5]) is None


def test_top_agent_agreement_counts_a_tie_at_the_top_as_a_fair_pick():
    oracle = {(0, 0): {"a": 3, "b": 1, "c": 0}, (0, 1): {"a": 1, "b": 1, "c": 1}, (0, 2): {"a": 0, "b": 2, "c": 1}}
    critic = {(0, 0): {"a": 1, "b": 1, "c": 0}, (0, 1): {"a": 9, "b": 0, "c": 0}, (0, 2): {"a": 0, "b": 1, "c": 5}}
    out = grade(oracle, critic, AGENTS)
    assert out["oracle_ties"] == 1 and out["graded"] == 2 and out["units"] == 3
    # step 0: the critic's top {a, b} holds the oracle's a: 1/2; step 2: c is not b: 0.
    assert out["top_agent"]["mean"] == pytest.approx(0.25)
    assert out["top_agent_chance"] == pytest.approx(1 / 3)
    assert out["spearman"]["n"] == 2 and out["spearman_chance"] == 0.0
    assert top_agents({"a": 1.0, "b": 1.0, "c": 0.0}) == {"a", "b"}


def test_a_perfect_critic_scores_one_with_an_interval_in_range():
    from marlang.statistics.intervals import NO_SPREAD

    oracle = {(e, t): {"a": float(t), "b": float(-t), "c": 0.5} for e in range(3) for t in range(1, 4)}
    out = grade(oracle, oracle, AGENTS)
    assert out["spearman"]["mean"] == pytest.approx(1.0) and out["top_agent"]["mean"] == pytest.approx(1.0)
    # every unit agrees alike: no interval of no width is claimed
    assert out["top_agent"]["interval"] == NO_SPREAD and out["top_agent"]["high"] is None
    # one unit where the critic errs: an interval, inside each quantity's range
    critic = {**oracle, (0, 1): {"a": -1.0, "b": 1.0, "c": 0.5}}
    out = grade(oracle, critic, AGENTS)
    assert 0.0 <= out["top_agent"]["low"] <= out["top_agent"]["high"] <= 1.0
    assert -1.0 <= out["spearman"]["low"] <= out["spearman"]["high"] <= 1.0


def test_units_the_critic_did_not_credit_are_not_graded():
    out = grade({(0, 0): {"a": 1, "b": 0, "c": 0}}, {}, AGENTS)
    assert out["units"] == 0 and out["top_agent"]["mean"] is None and out["top_agent_chance"] is None


def test_each_unit_is_graded_over_its_own_agents():
    """A graph's episodes credit only the prompts they read: a unit with two of the three agents is
    graded over those two (chance 1/2), and one with a single agent counts as an oracle tie."""
    oracle = {(0, -1): {"a": 1.0, "b": 0.0}, (1, -1): {"c": 1.0}}
    critic = {(0, -1): {"a": 2.0, "b": 1.0}, (1, -1): {"c": 0.0}}
    out = grade(oracle, critic, AGENTS)
    assert out["graded"] == 1 and out["oracle_ties"] == 1
    assert out["top_agent"]["mean"] == 1.0 and out["top_agent_chance"] == 0.5
