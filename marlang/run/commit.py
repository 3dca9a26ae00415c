"""The end of an iteration: what a reviewer is shown, and the commit that applies the
accepted parts of the learner's candidate and writes the iteration's files."""

from __future__ import annotations

import logging
from typing import Any

from marlang.report import iteration_row
from marlang.types import Candidate, PolicyState

logger = logging.getLogger(__name__)


def review_payload(state: dict[str, Any]) -> dict[str, Any]:
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


async def commit_candidate(loop: Any, state: dict[str, Any]) -> PolicyState:
    """Apply the accepted parts of the candidate (``loop`` is the run's `RunLoop`) and write
    the iteration's files; returns the policy state the next iteration acts with."""
    policy = PolicyState.from_dict(state["policy"])
    candidate = Candidate.from_dict(state.get("candidate") or {})
    evaluation = state.get("evaluation") or {}
    decisions = state.get("review") or {}
    i = policy.iteration
    new = PolicyState.from_dict(policy.to_dict())
    policy_rows = []
    accepted_by_eval = evaluation.get("accepted", True)
    for agent, text in candidate.policies.items():
        decision = decisions.get(agent) or {}
        action = decision.get("action") or ("accept" if accepted_by_eval else "reject")
        final = decision.get("text") if action == "edit" and decision.get("text") else text
        accepted = action in ("accept", "edit")
        old = policy.policies.get(agent, "")
        if accepted and final != old:
            new.policies[agent] = final
            new.versions[agent] = policy.versions.get(agent, 0) + 1
        policy_rows.append({
            "iteration": i, "agent": agent, "text": final, "accepted": accepted, "previous": old,
            "version": new.versions.get(agent, 0), "decided_by": "review" if decision else (
                "evaluation" if evaluation.get("candidate_return") is not None else "always"),
        })
    for agent, memory in candidate.memories.items():
        new.memories[agent] = list(memory)
    adapter_rows = []
    for agent, ref in candidate.adapters.items():
        accepted = bool(accepted_by_eval)
        if accepted:
            new.adapters[agent] = dict(ref)
            new.versions[agent] = policy.versions.get(agent, 0) + 1
        adapter_rows.append({"agent": agent, "accepted": accepted, **ref})
    if candidate.extra:
        new.extra.update(candidate.extra)
    new.iteration = i + 1
    if loop.finished({**state, "policy": new.to_dict()}):
        await loop.evaluate_policy(new, final=True)  # the trained policy's held-out evaluation
    record, rd = loop.record, loop.run_dir
    record.write_calls(loop.recorder)
    if loop.learner is not None and loop.learner.uses_policies:
        record.append_iteration_rows("policies.jsonl", i, policy_rows)
    verdicts = {r["agent"]: r["accepted"] for r in policy_rows + adapter_rows}
    record.append_iteration_rows("updates.jsonl", i, [
        {"iteration": i, **r, "accepted": verdicts.get(r["agent"]), "evaluation": evaluation or None}
        for r in candidate.records
    ])
    if decisions:
        rd.write_json("review.json", {**review_payload(state), "decided": True, "decisions": decisions})
    if loop.learner is not None and loop.learner.own_experience:
        # Its iterations.csv rows are its own trainer's, written as it trained; the episodes
        # its trainer played (a greedy evaluation) count as this invocation's.
        rd.write_json("learner_state.json", new.to_dict())
        loop.played += int(candidate.counters.get("episodes", 0))
        return new
    episodes = loop.trajectories(state.get("episodes") or [])
    row = iteration_row(i, episodes, record.calls.of_iteration(i), candidate.counters, evaluation,
                        accepted=[r["accepted"] for r in policy_rows + adapter_rows])
    row.update(record.test_columns(i))
    record.append_iteration_csv(row)
    rd.write_json("learner_state.json", new.to_dict())
    logger.info("iteration %d committed: mean return %.3f", i, row["return_mean"])
    return new
