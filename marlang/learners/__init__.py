"""Learning methods on one seam: ``none`` (static prompting), ``reflexion``, ``langmarl``,
and any registered with :func:`register_learner`."""

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
from marlang.learners.context import LearnerContext
from marlang.learners.langmarl import LangMARLLearner, LangMARLOptions, parse_credits
from marlang.learners.reflexion import ReflexionLearner, ReflexionOptions
from marlang.trainers.neural import methods as _neural_methods  # noqa: F401  registers mappo, ippo, qmix, vdn

__all__ = [
    "Candidate",
    "LangMARLLearner",
    "LangMARLOptions",
    "Learner",
    "LearnerContext",
    "LearnerOptions",
    "PolicyState",
    "ReflexionLearner",
    "ReflexionOptions",
    "RolloutPlan",
    "learner_entry",
    "list_learners",
    "parse_credits",
    "register_learner",
]
