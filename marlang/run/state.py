"""The training loop's state: the channels LangGraph checkpoints between its nodes, as typed
records of plain data (the checkpoint serializer admits dicts, lists, strings and numbers
only, so a run written before these types keeps loading).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from marlang.types import CandidateRecord, PolicyStateRecord


class EvaluationRecord(TypedDict):
    """A candidate's check (``learning.accept: improved``): fresh episodes with the candidate
    policies against the same seeds with the current ones."""

    baseline_return: float | None
    """The current policies' mean return (no check: the iteration's rollouts')."""
    candidate_return: float | None
    """The candidate's mean return (None: nothing to check, the candidate changes no policy)."""
    accepted: bool
    episodes: list[int]
    """The candidate's check episodes."""
    baseline_episodes: NotRequired[list[int]]
    """The current policies' episodes on the same seeds (absent: no check was played)."""


class ReviewDecision(TypedDict, total=False):
    """A reviewer's decision on one agent's candidate policy (``marlang review``)."""

    action: str
    """``accept``, ``reject`` or ``edit``."""
    text: str
    """The edited policy text (``edit``)."""


ReviewDecisions = dict[str, ReviewDecision]
"""A review: agent -> decision; an agent not named is decided by the candidate's check."""


class TrainingState(TypedDict, total=False):
    """The training graph's state; a node returns the channels it changes."""

    policy: PolicyStateRecord
    """The accepted `PolicyState` the next rollouts act with."""
    rollouts: int
    """K, trajectories per update: fixed when the run starts, so a resume with another
    ``run.parallel`` plays and trains on the same episodes."""
    next_episode: int
    """The id of the next training episode: ids are never reused across iterations."""
    episodes: list[int]
    """This iteration's training episode ids (their trajectories are in the run directory)."""
    candidate: CandidateRecord | None
    """The learner's proposed `Candidate`."""
    evaluation: EvaluationRecord | None
    review: ReviewDecisions | None
