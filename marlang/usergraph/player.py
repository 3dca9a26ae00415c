"""The episodes of a run of a user's own LangGraph graph (``graph:`` and ``task:`` in the config):
`GraphPlayer` plays one input through the graph bound to the policy state's prompt texts and the
phase's models, scores it with the task's reward and gives it back as a `Trajectory`, which the
run writes like any episode (``episodes.jsonl``, ``metrics.csv``, ``llm_calls.csv``) and the
learners read; `MarkedModel` is a marked chat-model role as a weight-space learner's actor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from marlang.config.graph import GraphSpec, Reward, TaskItem, TaskSpec
from marlang.models.accounting import EPISODE_KEY, ITERATION_KEY
from marlang.prompts import lessons_text
from marlang.types import CallContext, PolicyState, Trajectory
from marlang.usergraph.binding import Binding
from marlang.usergraph.episode import arun_graph
from marlang.usergraph.task import score_episode
from marlang.usergraph.trajectory import graph_trajectory

MISSION_CHARS = 500
"""Characters of the input each step's observation carries as its mission (the whole input is in
the first call's messages and the episode's metrics)."""


@dataclass
class MarkedModel:
    """A marked chat-model role as a weight-space learner's actor: the model it plays (a local
    one, whose weights its adapter trains) and the adapter it plays back (None: its own, or the
    base model)."""

    role: str
    model: BaseChatModel
    adapter: str | None = None


def item_level(item: TaskItem, index: int) -> str:
    """How the tables name an input: its ``task_id`` where the data gives one, else its index."""
    if isinstance(item, Mapping) and isinstance(item.get("task_id"), str | int):
        return str(item["task_id"])
    return f"input {index}"


def input_of(item: TaskItem, key: str) -> Any:
    """What the graph is given of ``item``: the value of its input key (the item itself for a str)."""
    return item[key] if isinstance(item, Mapping) else item


@dataclass
class GraphPlayer:
    """Plays episodes of ``graph`` over the task's ``items``: episode seed s plays item s mod n.
    ``prompts`` are the marked prompts the run trains, with their defaults (what a prompt plays
    until the policy state holds a text for it); ``model`` plays every marked chat model (None:
    each mark's own default)."""

    graph: Any
    spec: GraphSpec
    task: TaskSpec
    items: list[TaskItem]
    reward: Reward
    prompts: dict[str, str]
    model: BaseChatModel | None = None
    models: dict[str, BaseChatModel] = field(default_factory=dict)
    """Marked roles that play a model of their own (a weight-space learner's adapters)."""

    @property
    def played(self) -> str:
        return self.spec.played

    def binding(self, policy: PolicyState, models: Mapping[str, BaseChatModel] | None = None) -> Binding:
        """The prompt texts and models of one invocation under ``policy``; ``models``: roles that
        play a model of their own in it (a phase's acting models, a group's sampling models)."""
        # a prompt's text, then its Reflexion lessons where the run keeps any (learning.method reflexion)
        texts = {name: "\n\n".join(filter(None, (policy.policies.get(name) or default,
                                                   lessons_text(policy.memories.get(name, [])))))
                 for name, default in self.prompts.items()}
        versions = {name: policy.versions.get(name, 0) for name in self.prompts}
        return Binding(prompts=texts, versions=versions, models={**self.models, **(models or {})}, model=self.model)

    async def play(self, episode: int, seed: int, policy: PolicyState, ctx: CallContext,
                   models: Mapping[str, BaseChatModel] | None = None) -> Trajectory:
        """One input through the graph: its calls recorded by node (and by the run's callbacks,
        tagged with the episode), its answer scored; a failure of the graph or the reward is a
        failed episode with its error, never an exception. The roles the phase acts with
        (``ctx.acting``: a weight-space learner's adapters) and ``models`` play their own models."""
        acting = {role: act.model for role, act in ctx.acting.items() if act.model is not None}
        index = seed % len(self.items)
        item = self.items[index]
        metadata = {EPISODE_KEY: episode, ITERATION_KEY: ctx.iteration}
        binding = self.binding(policy, {**acting, **(models or {})})
        played = await arun_graph(self.graph, {self.spec.input: input_of(item, self.spec.input)}, binding,
                                  recursion_limit=self.spec.recursion_limit,
                                  callbacks=ctx.callbacks, metadata=metadata)
        played.input = item
        await score_episode(played, item, self.spec.output, self.reward)
        mission = str(input_of(item, self.spec.input))[:MISSION_CHARS]
        # the prompts this input's nodes read are the episode's agents (a branch not taken has none)
        agents = [name for name in self.prompts if name in played.prompt_reads]
        trajectory = graph_trajectory(played, episode_id=episode, seed=seed, agents=agents, played=self.played,
                                      level=item_level(item, index), mission=mission, success_at=self.task.success)
        # the texts the episode's prompts played: what replaying it (the credit oracle) binds again
        trajectory.metrics["prompt_texts"] = {name: binding.prompts[name] for name in agents}
        return trajectory
