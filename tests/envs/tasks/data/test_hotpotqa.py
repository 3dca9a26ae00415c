"""HotPotQA answer scoring: SQuAD-style normalization, exact match and token F1."""

from __future__ import annotations

import pytest

from marlang.envs.tasks.data import normalize_qa_answer, qa_exact_match, qa_f1


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Blue River", "blue river"),
        ("  an   Apple, a day!  ", "apple day"),
        ("U.S.A.", "usa"),
        ("Theatre", "theatre"),  # an article only as a whole word
        ("", ""),
        (None, ""),
    ],
)
def test_normalize_qa_answer(raw, normalized):
    assert normalize_qa_answer(raw) == normalized


def test_exact_match_ignores_case_punctuation_and_articles():
    assert qa_exact_match("the Blue River.", "Blue river")
    assert qa_exact_match("Yes", "yes")
    assert not qa_exact_match("Blue River Delta", "Blue River")
    assert not qa_exact_match("no", "yes")


def test_f1_gives_partial_credit_for_shared_tokens():
    assert qa_f1("Blue River", "the Blue River") == 1.0
    # predicted {blue, river, delta} vs gold {blue, river}: P = 2/3, R = 1, F1 = 0.8
    assert qa_f1("Blue River Delta", "Blue River") == pytest.approx(0.8)
    assert qa_f1("Dana Example", "Dana") == pytest.approx(2 / 3)
    assert qa_f1("red red", "red") == pytest.approx(2 / 3)  # repeated tokens count once each
    assert qa_f1("green", "Blue River") == 0.0


def test_f1_yes_no_answers_get_no_partial_credit():
    assert qa_f1("no", "no way") == 0.0
    assert qa_f1("yes it is", "yes") == 0.0
    assert qa_f1("noanswer", "no answer") == 0.0
    assert qa_f1("Yes.", "yes") == 1.0


def test_f1_of_empty_answers():
    assert qa_f1("", "") == 1.0
    assert qa_f1("", "Blue River") == 0.0
    assert qa_f1("the", "Blue River") == 0.0  # only an article: empty after normalization
