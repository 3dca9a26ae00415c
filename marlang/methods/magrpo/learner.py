"""MAGRPO (``learning.method: magrpo``) and its one-agent case GRPO (``grpo``): group-relative
training of an LLM team on the coding and reasoning tasks, one LoRA adapter per agent.

Each problem of an iteration's rollout plan is played once, as the root of one tree
(``magrpo_tree``): at every node all agents' G completions are sampled in one batched generate
with per-row adapters (one per base model when slots are on several), the env judges each
joint answer from its saved episode state (``save_episode``/``restore_episode``: no copy of the
env or its sandbox), returns are backed up and advantages taken against the siblings. The
tree's first path (every agent's first completion at each turn) is recorded as the problem's
training episode in ``episodes.jsonl`` (the loop plays none itself: ``records_rollouts``).
Then each agent's adapter is trained on its completions with ``learning.loss`` (``reinforce``:
the MAGRPO paper's on-policy loss), one agent at a time; the adapters are saved under
``adapters/<iteration>/`` and the tree under
``trees/<iteration>.jsonl``.
With ``learning.rollout_server`` every rollout samples on a server that serves the adapters by
name instead (``rollout_server``); under ``accelerate`` each process grows its own trees and the
gradients are summed.
"""

from __future__ import annotations

import functools
import logging
import random
from typing import TYPE_CHECKING, Any, ClassVar

from marlang.learners.base import Learner, LearnerOptions
from marlang.methods.lora.options import AdapterOptions
from marlang.methods.lora.trainer import (
    SEED_OFFSET,
    EpochOrder,
    LoraTrainer,
    StepLog,
    check_local_model,
    evaluation_plan,
)
from marlang.methods.magrpo.grpo_loss import policy_loss, shared_prompt_logprobs
from marlang.methods.magrpo.options import MAGRPOOptions, check_config
from marlang.methods.magrpo.sampling import TreeRequest, open_server, sample_local, sample_remote
from marlang.methods.magrpo.tree import (
    Node,
    TrainingSample,
    backpropagate,
    drop_caches,
    first_path,
    grouped_order,
    iter_nodes,
    joint_actions,
    judge,
    should_expand,
    training_samples,
    tree_stats,
    write_trees,
)
from marlang.types import Acting, Candidate, PolicyState, RolloutPlan

if TYPE_CHECKING:
    from marlang.learners.context import LearnerContext

logger = logging.getLogger(__name__)

__all__ = ["GRPOLearner", "MAGRPOLearner"]

SEEDS_PER_NODE = 1_000_003
"""Spreads the sampling seeds of a tree's nodes apart."""


class MAGRPOLearner(Learner):
    """MAGRPO on the learner seam (see the module docstring)."""

    name: ClassVar[str] = "magrpo"
    options_model = MAGRPOOptions
    uses_adapters: ClassVar[bool] = True

    def __init__(self, options: MAGRPOOptions, context: LearnerContext) -> None:
        super().__init__(options, context)
        self.options: MAGRPOOptions = options
        self.trainer = LoraTrainer[TrainingSample](self.name, options, context, state_name="magrpo_state")

    @classmethod
    def check_config(cls, config: Any) -> None:
        """One-line errors for settings MAGRPO/GRPO cannot train, before anything is created."""
        check_config(config, cls.name)

    @classmethod
    def check_model(cls, model: Any, options: LearnerOptions) -> None:
        assert isinstance(options, AdapterOptions)
        check_local_model(cls.name, model, options)

    @classmethod
    def label(cls, options: LearnerOptions) -> str:
        return cls.name if getattr(options, "joint_mode", "align") == "align" else f"{cls.name} (cross)"

    graph_class: ClassVar[str | None] = "marlang.methods.magrpo.graph:GraphMAGRPOLearner"
    """A user's graph trains by groups of whole graph runs (`marlang.methods.magrpo.graph`)."""

    def evaluation_plan(self, iteration: int, seed: int, final: bool = False) -> RolloutPlan | None:
        return evaluation_plan(self.options, iteration, seed, final)

    # the rollout server --------------------------------------------------------------------
    _server: Any = None

    def rollout_server(self) -> Any:
        """The `RolloutServer` of ``learning.rollout_server`` (None when the local engine samples)."""
        if self.options.rollout_server is None:
            return None
        if self._server is None:
            self._server = open_server(self.options, self.trainer.run_path)
        return self._server

    async def prepare_rollout(self, state: PolicyState, phase: str) -> dict[str, Acting]:
        """The committed adapters; learning slots sample completions in training. With a
        rollout server, the adapters are loaded there first and every learning slot's calls
        go to its adapter by name."""
        options = self.options
        acting = await self.trainer.acting(state, phase, scores_actions=False, temperature=options.temperature,
                                           sampling={"temperature": options.temperature, "top_p": options.top_p,
                                                     "top_k": options.top_k})
        server = self.rollout_server()
        if server is None:
            return acting
        await self.trainer.local.run(self._publish, state)
        options = self.options
        for name, own in acting.items():
            chat = self.context.local[name].chat_models[name]
            params = {"temperature": options.temperature if phase == "train" else 0.0,
                      "max_tokens": chat.max_tokens, "seed": chat.seed, "stop": chat.stop}
            if phase == "train":
                params.update(top_p=options.top_p, top_k=options.top_k)
            acting[name] = Acting(server.chat_model(name, **params), None, own.action_selection,
                                  own.action_temperature)
        return acting

    def _publish(self, state: PolicyState) -> dict[str, str]:
        """Load ``state``'s adapters into the rollout server (the initial ones saved first under
        ``adapters/initial/``)."""
        server, team = self.rollout_server(), self.trainer.team
        assert server is not None
        refs = state.adapters
        if not refs:
            if self._initial_refs is None:  # saved once: the initial weights never change
                directory = self.trainer.run_path / "adapters" / "initial"
                with self.trainer.local.exclusive():  # the initial weights: prepare_rollout has loaded them
                    hashes = team.save(directory)
                self._initial_refs = {a: {"path": str(directory / team.adapter_for(a)), "hash": hashes[a]}
                                      for a in self.context.learning_agents}
            refs = self._initial_refs
        return server.publish({a: (team.adapter_for(a), ref["path"], ref["hash"]) for a, ref in refs.items()})

    _initial_refs: dict[str, dict[str, str]] | None = None

    def _tree_env(self) -> Any:
        env = self.context.env
        inner = getattr(env, "unwrapped", env)
        if not hasattr(inner, "save_episode"):
            raise ValueError(f"learning.method '{self.name}' needs an env that can save and restore "
                             f"its episode state; {type(inner).__name__} cannot")
        if len(self.context.agents) > 1 and getattr(inner, "structure", "joint") != "joint":
            raise ValueError(f"learning.method '{self.name}' has every agent answer at once: set "
                             "env.kwargs.structure: joint (got sequential)")
        return inner

    # the update ------------------------------------------------------------------------------
    records_rollouts: ClassVar[bool] = True  # the trees are the rollouts: each problem played once

    async def update_from_plan(self, state: PolicyState, plan: RolloutPlan) -> Candidate:
        options, trainer = self.options, self.trainer
        await self.prepare_rollout(state, "train")   # the committed adapters (and the server's)
        seeds = list(plan.seeds)
        roots = await trainer.local.run(self._grow, seeds, state.iteration)  # one tree per problem
        self._record_episodes(roots, plan, state)    # each tree's first path is the problem's episode
        backpropagate(roots, options.advantage)      # returns, and advantages against siblings
        samples: dict[str, list[TrainingSample]] = {}
        for root in roots:
            for agent, items in training_samples(root).items():
                if self.context.learns(agent):  # a frozen slot's answers are judged, not trained
                    samples.setdefault(agent, []).extend(items)
        records, counters = await self._fit(samples, state.iteration)  # epochs of minibatches
        trees = {k: v for k, v in tree_stats(roots).items() if v is not None}
        counters = {**trees, **counters}
        candidate = await trainer.save(state.iteration, records, counters)
        write_trees(trainer.run_path, state.iteration, roots, seeds)
        return candidate

    def _record_episodes(self, roots: list[Node], plan: RolloutPlan, state: PolicyState) -> None:
        """Write each planned episode: its tree's first path (``magrpo_tree.first_path``)."""
        record = self.context.record_episode
        for root, episode, seed in zip(roots, plan.episodes, plan.seeds, strict=True):
            record(first_path(root, self.context.agents, episode, seed), state)

    # sampling the trees ------------------------------------------------------------------------
    def _grow(self, seeds: list[int], iteration: int) -> list[Node]:
        """One tree per seed, grown a turn at a time: every frontier node's agents sample in
        one batched generate."""
        options = self.options
        env = self._tree_env()
        agents = list(self.context.agents)
        depth = options.num_turns or env.max_steps
        roots = []
        for seed in seeds:
            observations, _infos = env.reset(seed=seed)
            roots.append(Node(turn=0, state=env.save_episode(), outcome={"observations": dict(observations)}))
        frontier = [(root, i) for i, root in enumerate(roots)]
        parents: dict[int, Node] = {}
        stop = self.context.stop
        while frontier:
            stop.check("at a tree step")  # a Ctrl-C keeps the run's finished work: the update starts afresh
            requests = []
            for node, tree in frontier:
                env.restore_episode(node.state)
                for agent in agents:
                    prior = parents[id(node)].completions[agent][node.joint[agent]] \
                        if options.memory == "memoryful" and node.turn > 0 else None
                    obs = node.observations[agent] = env.observe(agent)
                    form = obs.data.get("answer_format", "text")
                    messages = self.context.act_messages(agent, obs, f"act_instruction_{form}")
                    requests.append(TreeRequest(node, tree, agent, obs, messages, prior))
            outs = self._sample(requests, iteration, cache_depth=depth if options.memory == "memoryful" else 0)
            for r, completions in zip(requests, outs, strict=True):
                r.node.completions[r.agent] = completions
            for node, _tree in frontier:  # the replies' caches are continued by the children only
                parent = parents.pop(id(node), None)
                if parent is not None:
                    drop_caches(parent)
            nxt = []
            for node, tree in frontier:
                for joint in joint_actions(agents, options.num_generations, options.joint_mode):
                    stop.check("judging a tree's answers")
                    env.restore_episode(node.state)
                    answers = {a: node.completions[a][g].answer for a, g in joint.items()}
                    node.children.append(judge(env, node, joint, answers, agents[0]))
                if not should_expand(node.children, options.termination_threshold):
                    node.terminated_early = True
                    continue
                for child in node.children:
                    if not child.done and child.turn < depth:
                        nxt.append((child, tree))
                        parents[id(child)] = node
            frontier = nxt
        for root in roots:  # no cache outlives the sampling
            for node in iter_nodes(root):
                drop_caches(node)
        return roots

    def _sample(self, requests: list[TreeRequest], iteration: int, cache_depth: int = 0) -> list[list[Any]]:
        """G completions per request (`marlang.methods.magrpo.sampling`): on the slots' local
        models, or on the rollout server."""
        def seed(k: int, g: int) -> int:
            r = requests[k]
            return self._seed(iteration, r.tree, r.node, k, g)

        server = self.rollout_server()
        if server is not None:
            return sample_remote(requests, self.options, server=server, local=self.trainer.local, seed=seed,
                                 stop=self.context.stop)
        return sample_local(requests, self.options, local_of=self.trainer.local_of, adapter_of=self._adapter_of,
                            seed=seed, cache_depth=cache_depth)

    def _adapter_of(self, agent: str) -> str | None:
        """The adapter ``agent``'s answers come from: its own while it learns; a frozen slot
        answers as it plays (the base model, or the adapters it plays back)."""
        if self.trainer.trains(agent):
            return self.trainer.team_of(agent).adapter_for(agent)
        return self.context.actors[agent].adapter

    def _seed(self, iteration: int, tree: int, node: Node, k: int, g: int) -> int:
        """The sampling seed of request ``k``'s ``g``-th completion (the same wherever it samples)."""
        options = self.options
        return (options.seed * SEED_OFFSET + iteration) * SEEDS_PER_NODE + tree * 997 + node.turn * 131 + k * 17 + g

    # training --------------------------------------------------------------------------------
    async def _fit(self, samples: dict[str, list[TrainingSample]], iteration: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``epochs`` passes of minibatches over each agent's completions, one adapter at a
        time (siblings together), and the update's records and counters."""
        options, trainer = self.options, self.trainer
        by_unit = trainer.by_unit((agent, s) for agent, items in samples.items() for s in items)
        order, log = EpochOrder.of(options.seed, iteration), StepLog()
        with trainer.seeded(iteration):              # LoRA dropout, the same when re-run
            await trainer.local.run(self._old_and_reference_logprobs, by_unit)
            for _epoch in range(options.epochs):
                for unit, batch in trainer.minibatches(by_unit, options.minibatch_size, order.adapters,
                                                       order=_grouped):
                    log.add(unit, await trainer.step(unit, batch, functools.partial(self._loss, unit),
                                                     weight=_weight))
        records = []
        for agent in self.context.learning_agents:
            mine = samples.get(agent, [])
            records.append({"agent": agent, "completions": len(mine),
                            "advantage_mean": (sum(s.advantage for s in mine) / len(mine)) if mine else None,
                            **log.means(trainer.unit_of(agent), ("loss", "grad_norm"))})
        counters = {"completions": sum(len(v) for v in samples.values()), "steps": log.steps,
                    "skipped_steps": log.skipped}
        return records, counters

    def _old_and_reference_logprobs(self, by_unit: dict[str, list[TrainingSample]]) -> None:
        """Set each completion's old log-probs (the ratio losses' old policy: those recorded
        when it was sampled; a rollout server records none: the adapters before this update,
        which it served) and, with ``beta`` > 0, its log-probs under the base model."""
        options = self.options
        if options.loss != "reinforce":
            for unit, items in by_unit.items():
                sampled = all(s.completion.logprobs is not None for s in items)
                old = [_sampled_logprobs(s) for s in items] if sampled else self._logprobs(unit, items)
                for s, lp in zip(items, old, strict=True):
                    s.old_logprobs = lp
        if options.beta > 0:
            for unit, items in by_unit.items():
                for s, lp in zip(items, self._logprobs(unit, items, base=True), strict=True):
                    s.ref_logprobs = lp

    def _loss(self, unit: str, part: list[TrainingSample], total: float) -> dict[str, Any]:
        """``learning.loss`` of some completions of a minibatch weighing ``total``: their
        weighted mean loss times their share of the minibatch's weight."""
        import torch

        options = self.options
        lp, mask = self._completion_logprobs(unit, part)
        mask = mask.to(lp.device)
        old = _padded([s.old_logprobs for s in part], lp) if options.loss != "reinforce" else None
        ref = _padded([s.ref_logprobs for s in part], lp) if options.beta > 0 else None
        adv = torch.tensor([s.advantage for s in part], device=lp.device)
        w = torch.tensor([float(s.weight) for s in part], device=lp.device)
        loss = policy_loss(lp, mask, adv, loss=options.loss, old_logps=old, ref_logps=ref, beta=options.beta,
                           epsilon_low=options.clip_coef, epsilon_high=options.clip_coef_high or options.clip_coef,
                           max_completion_length=options.max_new_tokens, weights=w)
        return {"loss": loss * (w.sum() / total)}

    def _logprobs(self, unit: str, items: list[TrainingSample], base: bool = False) -> list[Any]:
        """Per completion, its token log-probs under ``unit``'s adapter (or the base model), no
        gradient: the old policy of the ratio losses, or the KL's reference."""
        import contextlib

        import torch

        options = self.options
        team = self.trainer.team_of(unit)
        out: list[Any] = []
        with team.training(unit, train_mode=False), torch.no_grad():
            ctx = team.model.disable_adapter() if base else contextlib.nullcontext()
            with ctx:
                for start in range(0, len(items), options.micro_batch_size):
                    part = items[start:start + options.micro_batch_size]
                    lp, _mask = self._completion_logprobs(unit, part)
                    lp = lp.cpu()
                    out += [lp[i, :len(s.completion.token_ids)] for i, s in enumerate(part)]
        return out

    def _completion_logprobs(self, unit: str, part: list[TrainingSample]) -> tuple[Any, Any]:
        """Token log-probs ``[B, T]`` of ``part``'s completions (``unit``'s) and their mask,
        each shared prompt run once (``shared_prompt_logprobs``)."""
        trainer = self.trainer
        return shared_prompt_logprobs(trainer.team_of(unit).model, [s.completion.prompt_ids for s in part],
                                      [s.completion.token_ids for s in part], trainer.local_of(unit).pad_id,
                                      self.options.temperature)

def _grouped(items: list[TrainingSample], rng: random.Random) -> list[TrainingSample]:
    """An epoch's order of one unit's completions: groups of siblings kept together."""
    return [items[i] for i in grouped_order(items, rng)]


def _weight(sample: TrainingSample) -> float:
    return float(sample.weight)


def _sampled_logprobs(sample: TrainingSample) -> Any:
    import torch

    c = sample.completion
    if c.logprobs is None or len(c.logprobs) != len(c.token_ids):
        raise ValueError("a completion has no sampling-time log-probs; the ratio losses need them")
    return torch.tensor(c.logprobs, dtype=torch.float32)


def _padded(rows: list[Any], like: Any) -> Any:
    """Per-completion log-prob vectors zero-padded to ``like``'s width, on its device."""
    import torch

    out = torch.zeros((len(rows), like.size(1)), dtype=like.dtype)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out.to(like.device)


class GRPOLearner(MAGRPOLearner):
    """GRPO: MAGRPO with one agent (the single-agent baseline of the MAGRPO paper)."""

    name: ClassVar[str] = "grpo"
    graph_class: ClassVar[str | None] = "marlang.methods.magrpo.graph:GraphGRPOLearner"
