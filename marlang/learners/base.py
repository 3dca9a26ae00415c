"""The learner seam: what every learning method shares, and the registry that names them.

A learner turns K trajectories played with the current policy state into the next state
(``update``). The training graph (``marlang/graphs/training.py``) drives the loop: rollout,
update, accept or roll back, review, commit, next iteration; one run directory, one resume.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from marlang.types import Trajectory

if TYPE_CHECKING:
    from marlang.learners.context import LearnerContext


@dataclass
class PolicyState:
    """What learning changes: policy texts and memories, per agent, with their versions.

    Weight-space learners keep adapter paths (or other artefacts) in ``extra``. The state is
    plain JSON so it lives in checkpoints and in ``learner_state.json``.
    """

    iteration: int = 0
    """Updates committed so far (the next rollouts belong to this iteration)."""
    policies: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    """Per agent: how many accepted updates changed its policy (0: the initial one)."""
    memories: dict[str, list[str]] = field(default_factory=dict)
    """Per agent: Reflexion's long-term reflections, oldest first."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyState:
        return cls(**copy.deepcopy({k: v for k, v in d.items() if k in cls.__dataclass_fields__}))


@dataclass
class Candidate:
    """An update a learner proposes; the training graph accepts, edits or rejects it per agent."""

    policies: dict[str, str] = field(default_factory=dict)
    """New policy text per agent (agents absent here keep theirs)."""
    memories: dict[str, list[str]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    """One row per agent for ``updates.jsonl`` (credits, gradients, reflections, failures)."""
    counters: dict[str, int] = field(default_factory=dict)
    """Run-level counts for ``iterations.csv`` (e.g. ``credit_failures``)."""

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        return cls(**copy.deepcopy(d))


@dataclass(frozen=True)
class RolloutPlan:
    """Which episodes one iteration plays: ids, env seeds and the branch group of each.

    ``branches`` > 1 plays each start state (env seed) that many times with different
    sampling seeds: the G branches of group-relative methods. ``max_steps`` caps each
    episode (fixed-length rollouts for PPO-style learners); None keeps the env's limit.
    """

    episodes: tuple[int, ...]
    seeds: tuple[int, ...]
    groups: tuple[int | None, ...]
    max_steps: int | None = None


class LearnerOptions(BaseModel):
    """Method-specific ``learning.*`` keys; each learner declares its own subclass."""

    model_config = ConfigDict(extra="forbid")


class Learner:
    """Base class: the ``none`` learner (static prompting, the CoT baseline).

    Subclasses override :meth:`update` (one step from K trajectories) or, when the update is
    itself a graph of LLM calls, :meth:`add_update_nodes` (LangMARL). ``uses_policies`` says
    whether updates rewrite policy texts (then ``policies.jsonl`` is written and
    ``learning.accept``/``learning.review`` apply).
    """

    name: ClassVar[str] = "none"
    options_model: ClassVar[type[LearnerOptions]] = LearnerOptions
    uses_policies: ClassVar[bool] = False
    roles: ClassVar[tuple[str, ...]] = ()
    """LLM roles this learner's calls are counted under in ``llm_calls.csv``."""

    def __init__(self, options: LearnerOptions, context: LearnerContext) -> None:
        self.options = options
        self.context = context

    # the seam ----------------------------------------------------------------------------
    @classmethod
    def label(cls, options: LearnerOptions) -> str:
        """The learner's name in tables."""
        return "static" if cls.name == "none" else cls.name

    def initial_state(self, policies: dict[str, str]) -> PolicyState:
        return PolicyState(
            iteration=0,
            policies=dict(policies),
            versions={a: 0 for a in policies},
            memories={a: [] for a in policies},
        )

    def rollout_plan(self, iteration: int, first_episode: int, count: int, seed: int) -> RolloutPlan:
        """The episodes of one iteration: ``count`` fresh ones by default. Override for
        branched (same start, G samples) or fixed-length rollouts."""
        episodes = tuple(range(first_episode, first_episode + count))
        return RolloutPlan(episodes, tuple(seed + e for e in episodes), tuple(None for _ in episodes))

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        """The proposed next state from this iteration's trajectories (``none``: no change)."""
        return Candidate()

    def add_update_nodes(self, builder: Any, source: str, target: str) -> None:
        """Add this learner's update to the training graph between ``source`` (rollout)
        and ``target`` (the node that takes the candidate). The default is one ``update``
        node calling :meth:`update`; graph learners add their own nodes and fan-outs."""
        from marlang.graphs.training import single_update_node

        builder.add_node("update", single_update_node(self))
        builder.add_edge(source, "update")
        builder.add_edge("update", target)


@dataclass(frozen=True)
class LearnerEntry:
    factory: Callable[[LearnerOptions, Any], Learner]
    options_model: type[LearnerOptions]
    description: str
    learner_class: type[Learner] | None = None

    def label(self, options: LearnerOptions) -> str:
        if self.learner_class is not None:
            return self.learner_class.label(options)
        return "?"


_LEARNERS: dict[str, LearnerEntry] = {}


def register_learner(
    name: str,
    learner: type[Learner] | Callable[[LearnerOptions, Any], Learner],
    description: str = "",
    options_model: type[LearnerOptions] | None = None,
) -> None:
    """Make a learner selectable by ``learning.method``. ``learner`` is a `Learner` subclass
    (its ``options_model`` validates the method's ``learning.*`` keys) or a factory
    ``(options, context) -> Learner`` with ``options_model`` given."""
    if isinstance(learner, type) and issubclass(learner, Learner):
        model = options_model or learner.options_model
        _LEARNERS[name] = LearnerEntry(learner, model, description, learner)
    else:
        _LEARNERS[name] = LearnerEntry(learner, options_model or LearnerOptions, description)


def list_learners() -> dict[str, str]:
    return {name: entry.description for name, entry in _LEARNERS.items()}


def learner_entry(name: str) -> LearnerEntry:
    if name not in _LEARNERS:
        raise ValueError(f"unknown learning.method {name!r}; valid choices: {', '.join(_LEARNERS)}")
    return _LEARNERS[name]


register_learner("none", Learner, "static prompting: policies never change (the CoT baseline)")
