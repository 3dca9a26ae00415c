"""The learner seam the training loop drives: the `Learner` base class (the ``none`` learner),
its options and context, and the functions that name learners. The methods themselves live in
``marlang.methods`` (one folder each) and are named in ``marlang.registry.LEARNERS`` (by entry
point for the builtins, or with :func:`register_learner`), so this package imports none of them."""

from marlang.learners.base import (
    Candidate,
    Learner,
    LearnerOptions,
    PolicyState,
    RolloutPlan,
    learner_entry,
    list_learners,
    register_learner,
)
from marlang.learners.context import CheckpointBarrier, EpisodeSink, LearnerContext

__all__ = [
    "Candidate",
    "CheckpointBarrier",
    "EpisodeSink",
    "Learner",
    "LearnerContext",
    "LearnerOptions",
    "PolicyState",
    "RolloutPlan",
    "learner_entry",
    "list_learners",
    "register_learner",
]
