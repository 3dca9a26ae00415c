"""The GLAM scoring policy: one definition of log pi from scores, calibration offsets and
temperature, the same when acting (the chat model's choices) and when PPO re-derives it."""

from __future__ import annotations

import math

import pytest
import torch
from langchain_core.messages import HumanMessage

from marlang.models.policy import ActionPolicy
from marlang.testing import tiny_chat_model


def test_log_pi_is_the_softmax_of_offset_scores_over_the_temperature():
    scores, offsets = [-3.0, -1.0, -2.5], [0.5, -0.2, 0.0]
    policy = ActionPolicy(temperature=0.7)
    expected = torch.log_softmax(torch.tensor([(s + o) / 0.7 for s, o in zip(scores, offsets)]), -1)
    assert torch.allclose(policy.log_probs(torch.tensor(scores), offsets), expected)
    p = expected.exp()
    assert float(policy.entropy(torch.tensor(scores), offsets)) == pytest.approx(float(-(p * p.log()).sum()))
    best, logp = ActionPolicy(0.0).choose(scores, offsets)
    assert best == 1 and logp == pytest.approx(float(torch.log_softmax(torch.tensor(
        [s + o for s, o in zip(scores, offsets)], dtype=torch.float64), -1)[1]))


def test_a_sampled_choice_is_seeded_and_its_log_pi_is_the_policys():
    scores = [-1.0, -1.2, -0.9, -4.0]
    policy = ActionPolicy(temperature=1.0)
    draws = [policy.choose(scores, None, seed) for seed in range(40)]
    assert draws == [policy.choose(scores, None, seed) for seed in range(40)]
    assert len({i for i, _ in draws}) > 1
    for i, logp in draws:
        assert logp == pytest.approx(float(policy.log_probs(torch.tensor(scores, dtype=torch.float64))[i]))


def test_the_prefix_space_moves_onto_the_candidates():
    assert ActionPolicy.split_prefix("Action: ") == ("Action:", " ")
    assert ActionPolicy.split_prefix("Action:") == ("Action:", "")
    assert ActionPolicy.candidates(["go", "stop"], " ") == (" go", " stop")


def test_the_chat_models_recorded_log_pi_is_what_the_update_recomputes():
    model = tiny_chat_model()
    reply = model.invoke([HumanMessage("Pick one.")], choices=["left", "right", "wait"],
                         choice_prefix="Action: ", choice_offsets=[0.1, -0.3, 0.0], temperature=0.8, seed=3)
    meta = reply.response_metadata
    actions = list(meta["choice_logprobs"])
    scores = torch.tensor([meta["choice_logprobs"][a] for a in actions], dtype=torch.float32)
    recomputed = ActionPolicy(0.8).log_probs(scores, meta["choice_offsets"])[actions.index(reply.content)]
    assert math.isclose(float(recomputed), meta["policy_logprob"], rel_tol=1e-5, abs_tol=1e-5)
    assert meta["choice_lead"] == " " and meta["sampled"]
