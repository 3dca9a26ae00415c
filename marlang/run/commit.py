"""The end of an iteration, decided: what a reviewer is shown, and which parts of the
learner's candidate are accepted into the policy state the next iteration acts with. Pure
functions of the training state; `marlang.run.record.RunRecord.write_commit` writes the
result and `marlang.run.loop.RunLoop.commit` runs both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marlang.run.state import EvaluationRecord, ReviewDecisions, TrainingState
from marlang.types import Candidate, PolicyState


def review_payload(state: TrainingState) -> dict[str, Any]:
    """What the reviewer of the candidate in ``state`` sees."""
    policy = PolicyState.from_dict(state["policy"])
    candidate = Candidate.from_dict(state.get("candidate") or {})
    return {
        "iteration": policy.iteration,
        "evaluation": state.get("evaluation"),
        "agents": {
            r["agent"]: {
                "old_policy": r.get("old_policy", policy.policies.get(r["agent"], "")),
                "new_policy": candidate.policies.get(r["agent"], policy.policies.get(r["agent"], "")),
                "credits": [t.get("credit") for t in r.get("trajectories", [])],
                "aggregated_gradient": r.get("aggregated_gradient"),
            }
            for r in candidate.records
        },
        "decided": False,
    }


@dataclass(frozen=True)
class Commit:
    """One iteration's commit: the next policy state and the rows that record the verdicts."""

    iteration: int
    """The iteration committed (the policy state that played its rollouts)."""
    policy: PolicyState
    """The policy state the next iteration acts with."""
    policy_rows: list[dict[str, Any]]
    """``policies.jsonl``: each candidate policy text, accepted or not, and who decided."""
    adapter_rows: list[dict[str, Any]]
    update_rows: list[dict[str, Any]]
    """``updates.jsonl``: the learner's records of the update, each with its agent's verdict."""
    evaluation: EvaluationRecord | None
    """The candidate check's result (None: no check)."""
    review: dict[str, Any] | None
    """``review.json`` as decided, where a reviewer decided."""
    counters: dict[str, Any]
    """The update's counters (``iterations.csv`` columns)."""

    @property
    def accepted(self) -> list[bool]:
        return [r["accepted"] for r in self.policy_rows + self.adapter_rows]


def decide_commit(state: TrainingState) -> Commit:
    """Apply the accepted parts of the candidate in the training ``state``: a reviewer's
    decisions first, else the candidate check's verdict (no check: accepted)."""
    policy = PolicyState.from_dict(state["policy"])
    candidate = Candidate.from_dict(state.get("candidate") or {})
    evaluation = state.get("evaluation")
    decisions: ReviewDecisions = state.get("review") or {}
    i = policy.iteration
    new = PolicyState.from_dict(policy.to_dict())
    policy_rows: list[dict[str, Any]] = []
    accepted_by_eval = evaluation["accepted"] if evaluation else True
    for agent, text in candidate.policies.items():
        decision = decisions.get(agent) or {}
        action = decision.get("action") or ("accept" if accepted_by_eval else "reject")
        final = (decision.get("text") or text) if action == "edit" else text
        accepted = action in ("accept", "edit")
        old = policy.policies.get(agent, "")
        if accepted and final != old:
            new.policies[agent] = final
            new.versions[agent] = policy.versions.get(agent, 0) + 1
        policy_rows.append({
            "iteration": i, "agent": agent, "text": final, "accepted": accepted, "previous": old,
            "version": new.versions.get(agent, 0), "decided_by": "review" if decision else (
                "evaluation" if evaluation and evaluation.get("candidate_return") is not None else "always"),
        })
    for agent, memory in candidate.memories.items():
        new.memories[agent] = list(memory)
    adapter_rows: list[dict[str, Any]] = []
    for agent, ref in candidate.adapters.items():
        accepted = bool(accepted_by_eval)
        if accepted:
            new.adapters[agent] = dict(ref)
            new.versions[agent] = policy.versions.get(agent, 0) + 1
        adapter_rows.append({"agent": agent, "accepted": accepted, **ref})
    if candidate.extra:
        new.extra.update(candidate.extra)
    new.iteration = i + 1
    verdicts = {r["agent"]: r["accepted"] for r in policy_rows + adapter_rows}
    update_rows = [{"iteration": i, **r, "accepted": verdicts.get(r["agent"]), "evaluation": evaluation or None}
                   for r in candidate.records]
    review = {**review_payload(state), "decided": True, "decisions": decisions} if decisions else None
    return Commit(i, new, policy_rows, adapter_rows, update_rows, evaluation, review, dict(candidate.counters))
