"""The learner seam: what every learning method shares, and the functions that name them.

A learner turns K trajectories played with the current policy state into a proposed next
state (a `Candidate`). The training graph (``marlang/run/loop.py``) drives the loop:
rollout, the learner's update subgraph, accept or roll back, review, commit; one run
directory, one resume.

The names live in ``marlang.registry.LEARNERS``, below ``marlang.config``, so configs validate
``learning.method`` and its keys without importing this package. The builtins (``none``,
``langmarl``, ``reflexion``, the neural ``mappo``/``ippo``/``qmix``/``vdn``, ``ppo``) are
declared there by entry point (``"marlang.methods.ppo.learner:PPOLearner"``) and imported on first
use; :func:`register_learner` adds or replaces one at runtime, and :func:`learner_entry`
gives any of them as a :class:`LearnerEntry`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, cast

from langgraph.graph import END, START, StateGraph
from pydantic import ConfigDict

from marlang.config import ModelConfig, NumbersNotBooleans
from marlang.registry import LEARNERS
from marlang.seeds import env_seeds
from marlang.types import Acting, Candidate, CandidateRecord, PolicyState, PolicyStateRecord, RolloutPlan, Trajectory

if TYPE_CHECKING:
    from marlang.learners.context import LearnerContext

logger = logging.getLogger(__name__)


class LearnerOptions(NumbersNotBooleans):
    """Method-specific ``learning.*`` keys; each learner declares its own subclass. A key it
    does not declare is refused (the config names the valid ones)."""

    model_config = ConfigDict(extra="forbid")

    @property
    def learning_model(self) -> ModelConfig | None:
        """The model section of the learner's own LLM calls (``learning.model``, where the
        method has one); None: they use the actors' model."""
        return None

    @property
    def memory_capacity(self) -> int:
        """Reflections each agent's memory keeps (``learning.memory_size``, where the method
        has one)."""
        return 3


class UpdateState(TypedDict, total=False):
    """What an update subgraph reads from the training loop and gives back to it. A learner's
    own subgraph adds channels of its own (LangMARL's credits, gradients, ...); they live
    and die with one update and never reach the shared training state."""

    policy: PolicyStateRecord
    """The `PolicyState` the iteration's rollouts acted with."""
    episodes: list[int]
    """This iteration's training episode ids."""
    candidate: CandidateRecord | None
    """The proposed `Candidate` (the subgraph's output)."""


class UpdateOutput(TypedDict):
    """What an update subgraph hands back to the training loop: only the candidate."""

    candidate: CandidateRecord | None


class Learner:
    """Base class: the ``none`` learner (static prompting, the CoT baseline).

    Subclasses override :meth:`update` (one step from K trajectories) or, when the update is
    itself a graph (LangMARL's fan-out of LLM calls, a trainer's stages), :meth:`update_graph`.
    ``uses_policies`` says whether updates rewrite policy texts (then ``policies.jsonl`` is
    written and the loop's keys ``learning.accept``/``eval_rollouts``/``review`` apply: see
    ``marlang.config.LoopConfig``); ``uses_adapters`` whether they
    train weights (adapters under ``adapters/<iteration>/<agent>/``).
    """

    name: ClassVar[str] = "none"
    options_model: ClassVar[type[LearnerOptions]] = LearnerOptions
    uses_policies: ClassVar[bool] = False
    uses_adapters: ClassVar[bool] = False
    agents_kind: ClassVar[str] = "llm"
    """The agents this learner trains: ``llm``, or ``neural`` (networks on numeric observations)."""
    roles: ClassVar[tuple[str, ...]] = ()
    """LLM roles this learner's calls are counted under in ``llm_calls.csv``."""
    own_experience: ClassVar[bool] = False
    """The update collects its own experience and writes its own ``iterations.csv`` rows (a
    neural learner's BenchMARL run): the loop plays no LLM episodes for it."""
    records_rollouts: ClassVar[bool] = False
    """The update plays the iteration's training episodes itself (MAGRPO grows one tree from
    each planned episode's start) and writes one trajectory per planned episode through
    ``context.record_episode``: the loop's rollout node plays none of them, so each problem
    is played once. Such a learner implements :meth:`update_from_plan`."""

    def __init__(self, options: LearnerOptions, context: LearnerContext) -> None:
        self.options = options
        self.context = context
        self._structured: Any = None

    def structured_replies(self) -> Any:
        """How this learner's calls that want JSON ask for it (``model.structured``; a
        `marlang.models.structured.StructuredReplies`, one per run: a fallback sticks)."""
        if self._structured is None:
            from marlang.models.structured import StructuredReplies

            self._structured = StructuredReplies(self.context.structured, self.context.model)
        return self._structured

    # the seam ----------------------------------------------------------------------------
    @classmethod
    def label(cls, options: LearnerOptions) -> str:
        """The learner's name in tables."""
        return "static" if cls.name == "none" else cls.name

    graph_class: ClassVar[str | None] = None
    """``"package.module:Class"`` of the learner that trains a user's own LangGraph graph
    (``graph:``) by this method where a graph needs one of its own (MAGRPO plays groups of whole
    graph runs); imported when a graph run asks for it (`graph_learner`)."""

    @classmethod
    def graph_learner(cls) -> type[Learner] | None:
        """The learner that trains a user's own graph by this method: `graph_class`, this class
        where it trains a graph as it trains a team (``none``, LangMARL), None where it cannot."""
        if cls.graph_class is not None:
            import importlib

            module, _, name = cls.graph_class.partition(":")
            found = getattr(importlib.import_module(module), name)
            if not (isinstance(found, type) and issubclass(found, Learner)):
                raise TypeError(f"{cls.__name__}.graph_class {cls.graph_class!r} is no Learner")
            return found
        return cls if cls.name == "none" else None

    @classmethod
    def iterations(cls, options: LearnerOptions) -> int | None:
        """The loop's iterations where the learner fixes them (a neural learner: one update
        of its whole frame budget); None: ``learning.iterations``, or ``run.episodes`` / K."""
        return None

    def start(self) -> dict[str, Any]:
        """Called once per invocation of the run, before its manifest is written (a resume
        too); returns the manifest entries this learner adds or overrides."""
        return {}

    def summary(self, setting: str) -> dict[str, Any] | None:
        """The run's ``summary.json`` where the learner's run has a summary of its own (one
        that plays no LLM episodes); None: the run summarizes its episodes."""
        return None

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
        return RolloutPlan(episodes, env_seeds(seed, "train", episodes), tuple(None for _ in episodes))

    def evaluation_plan(self, iteration: int, seed: int, final: bool = False) -> RolloutPlan | None:
        """Held-out evaluation episodes of the policy of ``iteration`` (played before its
        rollouts, and after the last update: ``final``), or None (the default: no
        evaluation). ``seed`` is ``run.eval_seed``: the held-out env seeds are its ``test``
        stream (:mod:`marlang.seeds`), the same for every training seed and never a training
        episode's; the policy acts greedily (``prepare_rollout(state, "test")``)."""
        return None

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Raise a one-line ``ValueError`` for settings this learner cannot train (called
        before the run directory is created)."""

    @classmethod
    def check_model(cls, model: Any, options: LearnerOptions) -> None:
        """Raise a one-line ``ValueError`` for a loaded chat model this learner cannot train
        (called once the model is built, before the run directory is created)."""

    async def prepare_rollout(self, state: PolicyState, phase: str) -> Mapping[str, Acting] | None:
        """Get ready to act with ``state`` before a phase's episodes are played (``phase``:
        ``train``, ``eval`` (a candidate's check) or ``test`` (held-out evaluation)) and say
        how each agent acts in them: the run hands the returned `Acting` of each agent to every
        episode of the phase (None or a missing agent: as configured). Weight-space learners
        load the committed adapters here and have their slots act with them, sampling in
        training and greedily in evaluation."""
        return None

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        """The proposed next state from this iteration's trajectories (``none``: no change)."""
        return Candidate()

    async def update_from_plan(self, state: PolicyState, plan: RolloutPlan) -> Candidate:
        """A learner with ``records_rollouts``: play the planned training episodes (recording
        each through ``context.record_episode``) and propose the next state from them."""
        raise NotImplementedError(f"learner {self.name!r} records its own rollouts but has no update_from_plan")

    def planned(self, iteration: int, episodes: list[int]) -> RolloutPlan:
        """The rollout plan of an iteration whose training episode ids are ``episodes``."""
        return self.rollout_plan(iteration, min(episodes), len(episodes), self.context.config.run.seed)

    def update_graph(self) -> Any:
        """This learner's update as a compiled LangGraph graph over `UpdateState` (or a state
        schema extending it): it reads ``policy`` and ``episodes`` and writes ``candidate``.
        The training graph runs it as its ``update`` node, checkpointed with the run. The
        default is one node calling :meth:`update`."""

        async def update(state: UpdateState) -> UpdateOutput:
            policy = PolicyState.from_dict(state["policy"])
            if self.records_rollouts:  # the update plays the planned episodes itself
                candidate = await self.update_from_plan(policy, self.planned(policy.iteration, state["episodes"]))
                return {"candidate": candidate.to_dict()}
            load = self.context.trajectory
            trajectories = [load(e) for e in state["episodes"]] if load is not None else []
            candidate = await self.update(policy, trajectories)
            return {"candidate": candidate.to_dict()}

        builder = StateGraph(UpdateState, output_schema=UpdateOutput)
        builder.add_node("update", update)
        builder.add_edge(START, "update")
        builder.add_edge("update", END)
        return builder.compile(name=f"update:{self.name}")


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

    def check_config(self, config: Any) -> None:
        """The learner's own check of a whole config (one-line ``ValueError``)."""
        if self.learner_class is not None:
            self.learner_class.check_config(config)

    def check_model(self, model: Any, options: LearnerOptions) -> None:
        """The learner's check of the loaded chat model (one-line ``ValueError``)."""
        if self.learner_class is not None:
            self.learner_class.check_model(model, options)


def register_learner(
    name: str,
    learner: type[Learner] | Callable[[LearnerOptions, Any], Learner] | str,
    description: str = "",
    options_model: type[LearnerOptions] | None = None,
) -> None:
    """Make a learner selectable by ``learning.method`` (in configs too). ``learner`` is a
    `Learner` subclass (its ``options_model`` validates the method's ``learning.*`` keys), a
    factory ``(options, context) -> Learner`` with ``options_model`` given, or the entry point
    ``"package.module:LearnerClass"`` of a subclass, imported when the method is first used."""
    if isinstance(learner, str):
        LEARNERS.register(name, learner, description)
    elif isinstance(learner, type) and issubclass(learner, Learner):
        model = options_model or learner.options_model
        LEARNERS.register(
            name, LearnerEntry(learner, model, description, learner), description,
            agents_kind=learner.agents_kind,
        )
    else:  # what the signature leaves: a factory (a class not deriving from Learner is one too)
        factory = cast(Callable[[LearnerOptions, Any], Learner], learner)
        entry = LearnerEntry(factory, options_model or LearnerOptions, description)
        LEARNERS.register(name, entry, description, agents_kind="llm")


def learner_plugin_problem(value: Any, entry_point: str) -> str | None:
    """Why a learner plugin is not a `Learner` subclass or `LearnerEntry`, or None."""
    if isinstance(value, LearnerEntry) or (isinstance(value, type) and issubclass(value, Learner)):
        return None
    return "not a Learner subclass (see marlang.learners.Learner)"


def list_learners() -> dict[str, str]:
    return LEARNERS.describe()


def learner_entry(name: str) -> LearnerEntry:
    """The learner registered as ``name`` (its module imported if it was declared by entry
    point); ``ValueError`` naming the valid choices if there is none."""
    if name not in LEARNERS:
        raise ValueError(f"unknown learning.method {name!r}; valid choices: {', '.join(LEARNERS)}")
    found = LEARNERS.load(name)
    if isinstance(found, LearnerEntry):
        return found
    if isinstance(found, type) and issubclass(found, Learner):
        return LearnerEntry(found, found.options_model, LEARNERS.entry(name).description, found)
    raise TypeError(
        f"learning.method {name!r} is registered as {found!r}: "
        "not a Learner subclass or LearnerEntry"
    )
