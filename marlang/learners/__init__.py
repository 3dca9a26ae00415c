"""Learning methods on one seam: ``none`` (static prompting), ``reflexion``, ``langmarl``,
the neural ``mappo``/``ippo``/``qmix``/``vdn`` and ``ppo`` (``marlang.trainers``), and any
registered with :func:`register_learner`. All are named in ``marlang.registry.LEARNERS`` (by
entry point for the builtins), so this package never imports the trainers above it."""

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
