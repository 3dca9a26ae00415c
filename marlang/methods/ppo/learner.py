"""GLAM-style PPO for teams of LLM agents (``learning.method: ppo``), one LoRA adapter per agent.

The policy of an agent is the softmax over its legal actions' scores (`ActionPolicy`: log p(action
| prompt) summed over the action's tokens, calibration offsets, temperature); its value head
reads the last prompt token's hidden state (or, with ``value: central``, one head reads every
agent's). Rollouts sample actions from the policy with the committed adapters; an update builds
per-agent GAE advantages from each agent's own rewards (``samples``), then runs epochs of
clipped-ratio minibatches (``loss``) through the LoRA trainer (``marlang.methods.lora.trainer``),
the central head (if any) one more unit, and saves the adapters, value heads and optimizer
state under ``adapters/<iteration>/``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar

from marlang.agents.llm_agent import ACTION_PREFIX
from marlang.learners.base import Learner, LearnerOptions
from marlang.methods.lora.distributed import launched_rank, launched_world_size
from marlang.methods.lora.options import AdapterOptions
from marlang.methods.lora.team import CENTRAL, ValueHeadOptions
from marlang.methods.lora.trainer import EpochOrder, LoraTrainer, StepLog, check_local_model, evaluation_plan
from marlang.methods.ppo.loss import clipped_value_loss, explained_variance, policy_terms, reinforce_loss
from marlang.methods.ppo.options import PPOOptions, check_config, load_hook
from marlang.methods.ppo.samples import CentralSample, DecisionSample, PPOSamples, build_samples, with_central_values
from marlang.models.policy import ActionPolicy
from marlang.seeds import env_seeds
from marlang.types import Acting, Candidate, PolicyState, RolloutPlan, Trajectory

if TYPE_CHECKING:
    from marlang.learners.context import LearnerContext

__all__ = ["PPOLearner", "PPOOptions"]

MEAN_TERMS = ("entropy", "approx_kl", "old_approx_kl", "clip_fraction")  # per decision, not summed
LOGGED = ("loss", "policy_loss", "value_loss", "message_loss", *MEAN_TERMS, "grad_norm")  # iterations.csv


class PPOLearner(Learner):
    """GLAM/FAMA PPO on the learner seam (see the module docstring)."""

    name: ClassVar[str] = "ppo"
    options_model = PPOOptions
    uses_adapters: ClassVar[bool] = True

    def __init__(self, options: PPOOptions, context: LearnerContext) -> None:
        super().__init__(options, context)
        self.options: PPOOptions = options
        heads = ValueHeadOptions(per_agent=True, central=options.value == "central")
        self.trainer = LoraTrainer[DecisionSample | CentralSample](
            self.name, options, context, state_name="ppo_state", value_heads=heads, value_lr=options.value_lr)

    @classmethod
    def label(cls, options: LearnerOptions) -> str:
        return "ppo (central value)" if getattr(options, "value", "agent") == "central" else "ppo"

    @classmethod
    def check_config(cls, config: Any) -> None:
        check_config(config)  # one-line errors for settings PPO cannot train

    @classmethod
    def check_model(cls, model: Any, options: LearnerOptions) -> None:
        assert isinstance(options, AdapterOptions)
        check_local_model(cls.name, model, options)

    # rollouts --------------------------------------------------------------------------------
    def rollout_plan(self, iteration: int, first_episode: int, count: int, seed: int) -> RolloutPlan:
        options = self.options
        plan = super().rollout_plan(iteration, first_episode, count, seed)
        world, rank = launched_world_size(), launched_rank()
        seeds = plan.seeds if world == 1 else env_seeds(seed, "train", [e * world + rank for e in plan.episodes])
        max_steps = None if options.steps is None else max(1, -(-options.steps // count))
        # Under a launcher each process plays its own episodes (seeds apart), K per process.
        return RolloutPlan(plan.episodes, seeds, plan.groups, max_steps=max_steps)

    def evaluation_plan(self, iteration: int, seed: int, final: bool = False) -> RolloutPlan | None:
        return evaluation_plan(self.options, iteration, seed, final)

    async def prepare_rollout(self, state: PolicyState, phase: str) -> dict[str, Acting]:
        """The committed adapters; learning slots sample from the softmax policy in training."""
        return await self.trainer.acting(state, phase, scores_actions=True, temperature=self.options.temperature)

    # the update ------------------------------------------------------------------------------
    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        options, trainer = self.options, self.trainer
        await trainer.restore(state)                          # the committed adapters and optimizers
        samples = await self._samples(trajectories)           # decisions with GAE advantages
        decisions = samples.decisions
        by_unit = trainer.by_unit((s.agent, s) for s in decisions)  # one unit per adapter
        order, log = EpochOrder.of(options.seed, state.iteration), StepLog()
        with trainer.seeded(state.iteration):                 # LoRA dropout, the same when re-run
            for _epoch in range(options.epochs):
                batches: list[tuple[str, list[Any]]] = trainer.minibatches(by_unit, options.minibatch_size,
                                                                           order.adapters)
                order.interleave.shuffle(batches)             # the agents' minibatches interleaved
                if trainer.has_central:                       # the central value head: one more unit
                    batches += trainer.minibatches({CENTRAL: samples.central}, options.minibatch_size,
                                                   order.central, units=[CENTRAL])
                for unit, batch in batches:
                    loss = self._central_loss if unit == CENTRAL else functools.partial(self._loss, unit)
                    log.add(unit, await trainer.step(unit, batch, loss, mean_terms=MEAN_TERMS))
        records = []
        for agent in self.context.learning_agents:
            mine = [s for s in decisions if s.agent == agent]
            records.append({"agent": agent, "decisions": len(mine), **log.means(trainer.unit_of(agent), LOGGED),
                            "explained_variance": explained_variance([s.old_value for s in mine],
                                                                     [s.ret for s in mine])})
        counters: dict[str, Any] = {"decisions": len(decisions), "minibatches": log.steps,
                                    "skipped_minibatches": log.skipped}
        if decisions:
            counters["advantage_mean"] = sum(s.advantage for s in decisions) / len(decisions)
        return await trainer.save(state.iteration, records, counters)

    async def _samples(self, trajectories: list[Trajectory]) -> PPOSamples:
        """Every learning agent's decisions with GAE advantages (bootstrapped where an episode
        was cut off), and with a central value head that head's samples."""
        options = self.options
        hook = load_hook(options.reward_hook, options.gamma) if options.reward_hook else None
        boots: dict[tuple[int, str], float] = {}
        for traj in trajectories:
            last = traj.steps[-1] if traj.steps else None
            if last is None or not last.truncated or last.terminated:
                continue
            for agent in self.context.learning_agents:
                boots[(traj.episode, agent)] = await self._bootstrap_value(traj, agent)
        samples = build_samples(trajectories, self.context.learning_agents, gamma=options.gamma,
                                gae_lambda=options.gae_lambda,
                                bootstrap=lambda t, a: boots.get((t.episode, a), 0.0), rewards=hook)
        if options.value != "central":
            return PPOSamples(samples)
        import torch

        steps: dict[tuple[int, int], dict[str, str | None]] = {}
        for s in samples:
            steps.setdefault((s.episode, s.t), {}).update(s.observations)
        states = await self.trainer.prompt_states(steps)
        with torch.no_grad():
            values = {k: float(self.trainer.team.value(CENTRAL, h)) for k, h in states.items()}
        return PPOSamples(samples, with_central_values(samples, states, values, boots, gamma=options.gamma,
                                                       gae_lambda=options.gae_lambda))

    async def _bootstrap_value(self, traj: Trajectory, agent: str) -> float:
        """V of a cut-off episode's final observation, from the agent's value head, read on the
        prompt its next decision would be scored after (`LLMAgent.next_decision_messages`)."""
        obs = traj.final_observations.get(agent)
        if obs is None or agent not in self.context.actors or len(obs.legal_actions) < 2:
            return 0.0
        local = self.trainer.local_of(agent)
        end, lead = ActionPolicy.split_prefix(ACTION_PREFIX)
        prompt = local.render(self.context.actors[agent].next_decision_messages(traj)) + end
        out = await local.run(local.score_actions, prompt, ActionPolicy.candidates(obs.legal_actions, lead), agent)
        return float(out.value or 0.0)

    def _loss(self, unit: str, part: list[Any], total: float) -> dict[str, Any]:
        """PPO's loss terms of some decisions of a minibatch of ``total``, scored under the
        adapter being trained (`loss.policy_terms`, the clipped value loss of the agent's
        head, and with ``train_messages`` REINFORCE on the messages it sent)."""
        import torch

        options, team, local = self.options, self.trainer.team_of(unit), self.trainer.local_of(unit)
        scored = local.score_tokens([(local.encode(s.prompt), [local.encode(c) for c in s.candidates]) for s in part])
        policy = ActionPolicy(options.temperature)  # the policy the rollouts sampled from
        pairs = list(zip(scored.scores, part, strict=True))
        new_logp = torch.stack([policy.log_probs(sc, s.offsets)[s.action_index] for sc, s in pairs])
        entropy = torch.stack([policy.entropy(sc, s.offsets) for sc, s in pairs])
        device = new_logp.device
        old_logp = torch.tensor([s.old_logprob for s in part], dtype=torch.float32, device=device)
        adv = torch.tensor([s.advantage for s in part], dtype=torch.float32, device=device)
        terms = policy_terms(new_logp, old_logp, adv, entropy, clip_coef=options.clip_coef,
                             ent_coef=options.ent_coef, total=total)
        loss, value_loss, message_loss = terms["loss"], torch.zeros((), device=device), torch.zeros((), device=device)
        if options.value == "agent":
            values = team.value(unit, scored.prompt_hidden)
            old_v = torch.tensor([s.old_value for s in part], dtype=torch.float32, device=values.device)
            ret = torch.tensor([s.ret for s in part], dtype=torch.float32, device=values.device)
            value_loss = clipped_value_loss(values, old_v, ret, options.clip_coef, total)
            loss = loss + options.vf_coef * value_loss
        spoken = [(i, p, m) for i, s in enumerate(part) for p, m in s.messages]
        if options.train_messages == "reinforce" and spoken:
            # each message's log-likelihood under the speaker's adapter, weighted by the
            # advantage of the step it was sent at
            message_items = [(local.encode(p), [local.encode(m)]) for _, p, m in spoken]
            message_logp = torch.stack([sc[0] for sc in local.score_tokens(message_items).scores])
            message_loss = reinforce_loss(message_logp, adv[torch.tensor([i for i, _, _ in spoken], device=device)],
                                          total)
            loss = loss + message_loss
        return {**terms, "loss": loss, "value_loss": value_loss, "message_loss": message_loss}

    def _central_loss(self, part: list[CentralSample], total: float) -> dict[str, Any]:
        """The central value head's clipped value loss on some of a minibatch of ``total``."""
        import torch

        values = self.trainer.team_of(CENTRAL).value(CENTRAL, torch.stack([s.state for s in part]))
        old_v = torch.tensor([s.old_value for s in part], device=values.device)
        ret = torch.tensor([s.ret for s in part], device=values.device)
        value_loss = clipped_value_loss(values, old_v, ret, self.options.clip_coef, total)
        return {"loss": value_loss, "value_loss": value_loss}
