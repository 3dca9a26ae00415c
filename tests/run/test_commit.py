"""The end of an iteration, decided from the typed training state: a reviewer's decisions
first, else the candidate check's verdict, else every part of the candidate is accepted."""

from __future__ import annotations

from marlang.run.commit import decide_commit, review_payload
from marlang.run.state import EvaluationRecord, TrainingState
from marlang.types import Candidate, PolicyState


def _state(evaluation: EvaluationRecord | None = None, review=None) -> TrainingState:
    policy = PolicyState(iteration=2, policies={"agent_0": "old 0", "agent_1": "old 1"},
                         versions={"agent_0": 1, "agent_1": 0})
    candidate = Candidate(policies={"agent_0": "new 0", "agent_1": "new 1"},
                          adapters={"agent_0": {"path": "adapters/2/agent_0", "hash": "abc"}},
                          records=[{"agent": "agent_0", "loss": 0.5}], counters={"credit_failures": 1})
    return {"policy": policy.to_dict(), "episodes": [4, 5], "candidate": candidate.to_dict(),
            "evaluation": evaluation, "review": review}


def test_without_a_check_or_a_review_every_part_of_the_candidate_is_accepted() -> None:
    commit = decide_commit(_state())
    assert commit.iteration == 2 and commit.policy.iteration == 3
    assert commit.policy.policies == {"agent_0": "new 0", "agent_1": "new 1"}
    assert commit.policy.versions == {"agent_0": 2, "agent_1": 1}
    assert commit.policy.adapters == {"agent_0": {"path": "adapters/2/agent_0", "hash": "abc"}}
    assert [r["decided_by"] for r in commit.policy_rows] == ["always", "always"]
    assert commit.update_rows == [{"iteration": 2, "agent": "agent_0", "loss": 0.5, "accepted": True,
                                   "evaluation": None}]
    assert commit.evaluation is None and commit.review is None and commit.counters == {"credit_failures": 1}


def test_a_check_the_candidate_lost_keeps_the_current_policies_and_adapters() -> None:
    lost: EvaluationRecord = {"baseline_return": 1.0, "candidate_return": 0.5, "accepted": False,
                              "episodes": [9], "baseline_episodes": [19]}
    commit = decide_commit(_state(lost))
    assert commit.policy.policies == {"agent_0": "old 0", "agent_1": "old 1"}
    assert commit.policy.adapters == {} and commit.accepted == [False, False, False]
    assert [r["decided_by"] for r in commit.policy_rows] == ["evaluation", "evaluation"]
    assert commit.update_rows[0]["evaluation"] == lost


def test_a_reviewer_edits_one_policy_and_rejects_the_other() -> None:
    review = {"agent_0": {"action": "edit", "text": "edited 0"}, "agent_1": {"action": "reject"}}
    state = _state(review=review)
    commit = decide_commit(state)
    assert commit.policy.policies == {"agent_0": "edited 0", "agent_1": "old 1"}
    assert [(r["text"], r["accepted"], r["decided_by"]) for r in commit.policy_rows] == [
        ("edited 0", True, "review"), ("new 1", False, "review")]
    assert commit.review is not None and commit.review["decisions"] == review
    assert commit.review["agents"] == review_payload(state)["agents"]


def test_an_edit_without_text_keeps_the_candidate_text() -> None:
    commit = decide_commit(_state(review={"agent_0": {"action": "edit"}}))
    assert commit.policy.policies["agent_0"] == "new 0"
