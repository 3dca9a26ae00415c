"""The training loop of every learner as one LangGraph state machine:

    rollout -> <the learner's update> -> [evaluate] -> [review] -> commit -> rollout | end

``rollout`` plays the iteration's K episodes with the current policy state; the learner
proposes a candidate; ``evaluate`` (``learning.accept: improved``) plays fresh episodes
with it; ``review`` (``learning.review: true``) pauses for a person; ``commit`` applies
what was accepted and writes the run files. With a checkpointer, a run that dies resumes
at the last finished node. The state is plain JSON; trajectories stay in the run directory.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from marlang.learners.base import Candidate, Learner, PolicyState


def merge_or_reset(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Dict channel that merges concurrent writes; writing None empties it (next iteration)."""
    if right is None:
        return {}
    return {**(left or {}), **right}


class TrainingState(TypedDict, total=False):
    policy: dict[str, Any]
    """The accepted `PolicyState` the next rollouts act with."""
    episodes: list[int]
    """This iteration's training episode ids (their trajectories are in the run directory)."""
    candidate: dict[str, Any] | None
    """The learner's proposed `Candidate`."""
    evaluation: dict[str, Any] | None
    review: dict[str, Any] | None
    # LangMARL's stage outputs, keyed by episode / agent; emptied at every commit.
    credits: Annotated[dict[str, Any], merge_or_reset]
    gradients: Annotated[dict[str, Any], merge_or_reset]
    aggregated: Annotated[dict[str, Any], merge_or_reset]
    optimized: Annotated[dict[str, Any], merge_or_reset]


class TrainingRuntime(Protocol):
    """What the training graph needs from the run (``Experiment`` provides it)."""

    def total_iterations(self) -> int: ...

    async def rollout(self, policy: PolicyState) -> list[int]: ...

    async def evaluate(self, policy: PolicyState, candidate: Candidate, episodes: list[int]) -> dict[str, Any]: ...

    def review_payload(self, state: dict[str, Any]) -> dict[str, Any]: ...

    async def commit(self, state: dict[str, Any]) -> PolicyState: ...


def single_update_node(learner: Learner) -> Any:
    """The ``update`` node of learners whose update is one Python call."""

    async def update(state: TrainingState) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        load = learner.context.trajectory
        trajectories = [load(e) for e in state["episodes"]] if load is not None else []
        candidate = await learner.update(policy, trajectories)
        return {"candidate": candidate.to_dict()}

    return update


def build_training_graph(runtime: TrainingRuntime, learner: Learner, *, accept: str = "always",
                         review: bool = False, checkpointer: Any = None) -> Any:
    """Compile the loop for ``learner``; ``runtime`` plays episodes and writes the run."""

    async def rollout(state: TrainingState) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        episodes = await runtime.rollout(policy)
        return {"episodes": episodes, "candidate": None, "evaluation": None, "review": None}

    async def evaluate(state: TrainingState) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        candidate = Candidate.from_dict(state["candidate"] or {})
        return {"evaluation": await runtime.evaluate(policy, candidate, state["episodes"])}

    async def review_node(state: TrainingState) -> dict[str, Any]:
        decision = interrupt(runtime.review_payload(dict(state)))
        return {"review": decision}

    async def commit(state: TrainingState) -> dict[str, Any]:
        policy = await runtime.commit(dict(state))
        return {"policy": policy.to_dict(), "candidate": None, "evaluation": None, "review": None,
                "credits": None, "gradients": None, "aggregated": None, "optimized": None}

    def next_iteration(state: TrainingState) -> str:
        return "rollout" if state["policy"]["iteration"] < runtime.total_iterations() else END

    builder = StateGraph(TrainingState)
    builder.add_node("rollout", rollout)
    builder.add_edge(START, "rollout")
    after_update = "evaluate" if accept == "improved" else ("review" if review else "commit")
    learner.add_update_nodes(builder, "rollout", after_update)
    if accept == "improved":
        builder.add_node("evaluate", evaluate)
        builder.add_edge("evaluate", "review" if review else "commit")
    if review:
        builder.add_node("review", review_node)
        builder.add_edge("review", "commit")
    builder.add_node("commit", commit)
    builder.add_conditional_edges("commit", next_iteration, ["rollout", END])
    return builder.compile(checkpointer=checkpointer, name=f"training:{learner.name}")
