"""GRPO and MAGRPO on a user's own LangGraph graph (``graph:``, ``learning.method: grpo | magrpo``).

Each input of an iteration's plan is played G times through the graph (its group), all groups'
runs at once. Every marked chat-model role plays a LoRA adapter on the one local base: a
`GraphChatModel` samples each call the graph makes under the role's adapter with a per-call seed
and keeps the prompt's token ids, the reply's token ids and each token's log-prob as the engine
drew them (token in, token out: the training scores exactly those ids). The G runs' rewards give
each run its group-relative advantage (``learning.advantage``); each role's adapter is trained on
its own calls with its run's advantage by MAGRPO's losses and minibatches. ``magrpo`` gives every
role its own adapter; ``grpo`` one adapter the roles share (one policy), unless
``learning.sharing`` says otherwise. A group's first run is the input's training episode.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import PrivateAttr

from marlang.agents.calls import call_seed
from marlang.methods.magrpo.grpo_loss import group_advantages
from marlang.methods.magrpo.learner import GRPOLearner, MAGRPOLearner
from marlang.methods.magrpo.options import MAGRPOOptions
from marlang.methods.magrpo.tree import Completion, TrainingSample
from marlang.models.local_chat import ADAPTER_PARAM, LocalChatModel
from marlang.types import Acting, CallContext, Candidate, PolicyState, RolloutPlan, Trajectory

if TYPE_CHECKING:
    from marlang.learners.context import LearnerContext
    from marlang.models.local_engine import GenerationOutput, GenerationRequest
    from marlang.usergraph import GraphPlayer

TREE_KEYS = ("joint_mode", "num_turns", "termination_threshold", "max_joint_actions", "memory", "rollout_server")
"""MAGRPO keys of its env trees (and its rollout server), which a graph's groups do not have."""


class GraphChatModel(LocalChatModel):
    """A local chat model that answers every call under ``adapter`` and, with ``record``, samples
    each call with its own seed (``seed`` and the call's count) and keeps what it drew as a
    `Completion` of ``role``: the prompt's token ids, the reply's and their log-probs."""

    adapter: str | None = None
    role: str = ""
    record: bool = False
    _completions: list[Completion] = PrivateAttr(default_factory=list)
    _prompts: dict[str, tuple[int, ...]] = PrivateAttr(default_factory=dict)
    _count: int = PrivateAttr(0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def completions(self) -> list[Completion]:
        """The calls answered so far, in the order they were answered."""
        with self._lock:
            return list(self._completions)

    def _get_invocation_params(self, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault(ADAPTER_PARAM, self.adapter)  # the cache key names the adapter that answers
        return super()._get_invocation_params(stop=stop, **kwargs)

    def _request(self, messages: Any, stop: list[str] | None = None, **kwargs: Any) -> tuple[GenerationRequest, str]:
        kwargs.setdefault(ADAPTER_PARAM, self.adapter)
        # a node's own max_tokens is kept up to the learner's longest completion
        kwargs["max_tokens"] = min(int(kwargs.get("max_tokens") or self.max_tokens), self.max_tokens)
        request, prompt = super()._request(messages, stop, **kwargs)
        if not self.record:
            return request, prompt
        with self._lock:
            count, self._count = self._count, self._count + 1
            self._prompts[prompt] = tuple(request.prompt_ids)
        seed = call_seed(self.seed, self.role, count) if self.temperature > 0 else None
        return replace(request, sampling=replace(request.sampling, logprobs=True, seed=seed)), prompt

    def _to_reply(self, output: GenerationOutput, prompt: str) -> Any:
        if self.record:
            with self._lock:
                prompt_ids = self._prompts[prompt]
                self._completions.append(Completion(self.role, prompt_ids, tuple(output.token_ids), output.text,
                                                    output.text, logprobs=output.token_logprobs))
        return super()._to_reply(output, prompt)


@dataclass
class _Run:
    """One run of a group: its trajectory and each role's sampling model."""

    trajectory: Trajectory
    models: dict[str, GraphChatModel]


class GraphMAGRPOLearner(MAGRPOLearner):
    """MAGRPO on a user's graph (see the module docstring): an adapter per marked model role."""

    graph_class: ClassVar[str | None] = None

    @classmethod
    def graph_learner(cls) -> type[MAGRPOLearner]:
        return cls

    @classmethod
    def check_config(cls, config: Any) -> None:
        check_graph_config(config, cls.name)

    @property
    def player(self) -> GraphPlayer:
        if self.context.graph is None:
            raise ValueError(f"learning.method '{self.name}' on a graph plays it: the run gives its player")
        return self.context.graph

    def _model(self, role: str, *, record: bool, seed: int = 0) -> GraphChatModel:
        """``role``'s model on the local base: its adapter, sampling (``record``) or greedy."""
        options, local = self.options, self.trainer.local_of(role)
        base = local.chat_models[role]
        settings = {"temperature": options.temperature, "top_p": options.top_p, "top_k": options.top_k} \
            if record else {"temperature": 0.0}
        # the engine answers an agent's name with its adapter (the shared one where sharing)
        return GraphChatModel(engine=base.engine, adapter=role, role=role,
                              record=record, seed=seed, max_tokens=options.max_new_tokens, stop=base.stop,
                              cache=False if record else base.cache, **settings)

    async def prepare_rollout(self, state: PolicyState, phase: str) -> dict[str, Acting]:
        """The committed adapters: each role plays its own greedily (the loop's episodes are
        evaluations; training runs are the update's groups)."""
        await self.trainer.restore(state)
        return {role: Acting(self._model(role, record=False), role) for role in self.context.learning_agents}

    async def update_from_plan(self, state: PolicyState, plan: RolloutPlan) -> Candidate:
        options, trainer = self.options, self.trainer
        await trainer.restore(state)
        groups = await asyncio.gather(*(self._group(state, episode, seed)
                                        for episode, seed in zip(plan.episodes, plan.seeds, strict=True)))
        rewards = [[run.trajectory.team_return for run in runs] for runs in groups]
        advantages = group_advantages(rewards, options.advantage)
        samples: dict[str, list[TrainingSample]] = {}
        for runs, advs in zip(groups, advantages, strict=True):
            for run, advantage in zip(runs, advs, strict=True):
                for role, model in run.models.items():
                    for turn, completion in enumerate(model.completions, start=1):
                        samples.setdefault(role, []).append(TrainingSample(completion, advantage, 1, turn))
        for runs, group_rewards in zip(groups, rewards, strict=True):  # each input's first run is its episode
            first = runs[0].trajectory
            first.metrics["group_rewards"] = group_rewards
            self.context.record_episode(first, state)
        records, counters = await self._fit(samples, state.iteration)
        flat = [r for g in rewards for r in g]
        failed = sum(bool(run.trajectory.metrics.get("error")) for runs in groups for run in runs)
        counters = {"graph_runs": len(flat), "failed_runs": failed,
                    "reward_mean": sum(flat) / len(flat) if flat else None, **counters}
        return await trainer.save(state.iteration, records, counters)

    async def _group(self, state: PolicyState, episode: int, seed: int) -> list[_Run]:
        """G runs of the graph on the input of ``seed``, concurrently, each role sampling on its
        adapter with seeds of its own run."""
        options, call = self.options, self.context.call

        async def run(g: int) -> _Run:
            base = call_seed(options.seed, state.iteration, episode, g)
            models = {role: self._model(role, record=True, seed=base) for role in self.context.learning_agents}
            ctx = CallContext(episode=episode, seed=call.seed, callbacks=call.callbacks, limiter=call.limiter,
                              iteration=state.iteration, salt=g)
            return _Run(await self.player.play(episode, seed, state, ctx, models=models), models)

        return list(await asyncio.gather(*(run(g) for g in range(options.num_generations))))


class GraphGRPOLearner(GraphMAGRPOLearner):
    """GRPO on a user's graph: one adapter the marked model roles share (one policy), unless
    ``learning.sharing`` is given."""

    name: ClassVar[str] = GRPOLearner.name

    def __init__(self, options: MAGRPOOptions, context: LearnerContext) -> None:
        if "sharing" not in options.model_fields_set:
            options = options.model_copy(update={"sharing": "shared"})
        super().__init__(options, context)


def check_graph_config(config: Any, method: str) -> None:
    """One-line errors for a graph run MAGRPO/GRPO (``method``) cannot train."""
    options: MAGRPOOptions = config.learning.options
    spec = config.model.spec
    if not spec.startswith(("local:", "hf:")):
        raise ValueError(f"learning.method '{method}' trains a LoRA adapter per marked model on a local base, and "
                         f"model.spec {spec!r} has none here; use local:smollm2 or hf:PATH")
    tree = [key for key in TREE_KEYS if key in options.model_fields_set]
    if tree:
        raise ValueError(f"learning.{tree[0]} shapes MAGRPO's trees over an env's turns; a graph's group is "
                         f"learning.num_generations whole runs of the graph (remove learning.{tree[0]})")

