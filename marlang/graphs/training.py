"""The training loop of every learner as one LangGraph state machine:

    rollout -> update (the learner's own subgraph) -> [evaluate] -> [review] -> commit -> rollout | end

``rollout`` plays the iteration's K episodes with the current policy state; the learner's
update subgraph proposes a candidate; ``evaluate`` (``learning.accept: improved``) plays
fresh episodes with it; ``review`` (``learning.review: true``) pauses for a person;
``commit`` applies what was accepted and writes the run files. With a checkpointer, a run
that dies resumes at the last finished node (inside the update subgraph too). The state is
plain JSON; trajectories stay in the run directory.
"""

from __future__ import annotations

from typing import Any, Protocol, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from marlang.types import Candidate, PolicyState


class TrainingState(TypedDict, total=False):
    policy: dict[str, Any]
    """The accepted `PolicyState` the next rollouts act with."""
    rollouts: int
    """K, trajectories per update: fixed when the run starts, so a resume with another
    ``run.parallel`` plays and trains on the same episodes."""
    next_episode: int
    """The id of the next training episode: ids are never reused across iterations."""
    episodes: list[int]
    """This iteration's training episode ids (their trajectories are in the run directory)."""
    candidate: dict[str, Any] | None
    """The learner's proposed `Candidate`."""
    evaluation: dict[str, Any] | None
    review: dict[str, Any] | None


class TrainingRuntime(Protocol):
    """What the training graph needs from the run (`marlang.runtime.RunRuntime` provides it)."""

    def finished(self, state: dict[str, Any]) -> bool: ...

    async def rollout(self, policy: PolicyState, first_episode: int, rollouts: int) -> list[int]: ...

    async def evaluate(self, policy: PolicyState, candidate: Candidate, episodes: list[int]) -> dict[str, Any]: ...

    def review_payload(self, state: dict[str, Any]) -> dict[str, Any]: ...

    async def commit(self, state: dict[str, Any]) -> PolicyState: ...


class UpdatingLearner(Protocol):
    """A learner as the training graph sees it: a name and its update subgraph."""

    name: str

    def update_graph(self) -> Any: ...


def build_training_graph(runtime: TrainingRuntime, learner: UpdatingLearner, *, accept: str = "always",
                         review: bool = False, checkpointer: Any = None) -> Any:
    """Compile the loop for ``learner``; ``runtime`` plays episodes and writes the run.

    The graph's input is ``{"policy": ..., "rollouts": K, "next_episode": 0}``."""

    async def rollout(state: TrainingState) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        k = int(state["rollouts"])
        first = int(state.get("next_episode", policy.iteration * k))
        episodes = await runtime.rollout(policy, first, k)
        return {"episodes": episodes, "next_episode": max(episodes, default=first - 1) + 1,
                "candidate": None, "evaluation": None, "review": None}

    async def evaluate(state: TrainingState) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        candidate = Candidate.from_dict(state["candidate"] or {})
        return {"evaluation": await runtime.evaluate(policy, candidate, state["episodes"])}

    async def review_node(state: TrainingState) -> dict[str, Any]:
        decision = interrupt(runtime.review_payload(dict(state)))
        return {"review": decision}

    async def commit(state: TrainingState) -> dict[str, Any]:
        policy = await runtime.commit(dict(state))
        return {"policy": policy.to_dict(), "candidate": None, "evaluation": None, "review": None}

    def next_iteration(state: TrainingState) -> str:
        return END if runtime.finished(dict(state)) else "rollout"

    builder = StateGraph(TrainingState)
    builder.add_node("rollout", rollout)
    builder.add_edge(START, "rollout")
    builder.add_node("update", learner.update_graph())
    builder.add_edge("rollout", "update")
    after_update = "evaluate" if accept == "improved" else ("review" if review else "commit")
    builder.add_edge("update", after_update)
    if accept == "improved":
        builder.add_node("evaluate", evaluate)
        builder.add_edge("evaluate", "review" if review else "commit")
    if review:
        builder.add_node("review", review_node)
        builder.add_edge("review", "commit")
    builder.add_node("commit", commit)
    builder.add_conditional_edges("commit", next_iteration, ["rollout", END])
    return builder.compile(checkpointer=checkpointer, name=f"training:{learner.name}")
