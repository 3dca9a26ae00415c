"""GLAM-style PPO for teams of LLM agents (``learning.method: ppo``), one LoRA adapter per agent.

The policy of an agent is the softmax over its legal actions' scores (`ActionPolicy`: log p(action
| prompt) summed over the action's tokens, calibration offsets, temperature); its value head
reads the last prompt token's hidden state (or, with ``value: central``, one head reads every
agent's). Rollouts sample actions from the policy with the committed adapters; an update builds
per-agent GAE advantages from each agent's own rewards (``ppo_samples``), then runs epochs of
clipped-ratio minibatches, one agent's adapter at a time, the central head (if any) one more unit
(``template``), and writes the adapters, value heads and optimizer state under
``adapters/<iteration>/``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from marlang.methods.lora import (
    CENTRAL,
    INITIAL_STATE,
    AdapterLearner,
    AdapterOptions,
    ValueHeadOptions,
    clip_gradients,
    launched_rank,
    launched_world_size,
)
from marlang.methods.ppo.samples import CentralSample, DecisionSample, PPOSamples, build_samples, gae
from marlang.models.policy import ActionPolicy
from marlang.seeds import env_seeds
from marlang.types import Candidate, PolicyState, RolloutPlan, Trajectory

logger = logging.getLogger(__name__)

__all__ = ["INITIAL_STATE", "PPOLearner", "PPOOptions", "clip_gradients"]


class PPOOptions(AdapterOptions):
    """``learning.*`` keys of PPO (GLAM's values unless said otherwise)."""

    value_lr: float = Field(
        1e-4, gt=0, description="AdamW learning rate of the value heads. A head is trained from "
        "scratch on a wide hidden state, where Adam's per-weight steps move its output far more than "
        "a LoRA step moves a score: it keeps its own rate, whatever lr is.")
    epochs: int = Field(4, ge=1, description="Passes over an iteration's decisions.")
    minibatch_size: int = Field(16, ge=1, description="Decisions per gradient step.")
    clip_coef: float = Field(0.2, gt=0, description="PPO ratio clip (and value clip).")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.99, ge=0, le=1, description="GAE lambda.")
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus coefficient.")
    vf_coef: float = Field(0.5, ge=0, description="Value loss coefficient.")
    steps: int | None = Field(
        None, ge=1,
        description="Environment steps per update across the iteration's K rollouts: each "
        "episode is cut off (and bootstrapped) after steps / K steps; None: whole episodes.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the softmax policy.")
    value: Literal["agent", "central"] = Field(
        "agent", description="agent: a value head per agent; central: one head reads every agent's state.")
    train_messages: Literal[False, "reinforce"] = Field(
        False, description="reinforce: also train the message tokens with the step's advantage.")
    reward_hook: str | None = Field(
        None, description="'package.module:function' (trajectory, agent) -> per-step rewards of that "
        "agent, replacing the env's (shaped per-agent rewards); a hook that takes gamma= gets the "
        "learner's. Built in: 'marlang.envs.babyai.shaping:goal_progress' (BabyAI go-to).")
    seed: int = Field(0, description="Seeds the adapters' initial weights and the minibatch order; in a "
                      "config, run.seed unless given (so each run seed is its own stream).")

    @field_validator("reward_hook")
    @classmethod
    def _importable_hook(cls, v: str | None) -> str | None:
        if v is not None:
            _load_hook(v, 1.0)  # a one-line ValueError when it cannot be imported
        return v


class PPOLearner(AdapterLearner[PPOOptions, DecisionSample | CentralSample]):
    """GLAM/FAMA PPO on the learner seam (see the module docstring)."""

    name: ClassVar[str] = "ppo"
    options_model = PPOOptions
    options: PPOOptions
    state_name: ClassVar[str] = "ppo_state"
    scores_actions: ClassVar[bool] = True
    interleave_units: ClassVar[bool] = True
    mean_terms: ClassVar[tuple[str, ...]] = ("entropy", "approx_kl", "clip_fraction")

    def value_heads(self) -> ValueHeadOptions:
        return ValueHeadOptions(per_agent=True, central=self.options.value == "central")

    @classmethod
    def label(cls, options: PPOOptions) -> str:  # type: ignore[override]
        return "ppo (central value)" if getattr(options, "value", "agent") == "central" else "ppo"

    @classmethod
    def check_config(cls, config: Any) -> None:
        """One-line errors for settings PPO cannot train, before anything is created."""
        spec = config.model.spec
        if not spec.startswith(("local:", "hf:")):
            raise ValueError(
                f"learning.method 'ppo' trains local weights, and model.spec {spec!r} has none here; "
                "use local:smollm2 or hf:PATH")
        if config.agents.action_selection == "generate":
            raise ValueError(
                "learning.method 'ppo' needs agents.action_selection 'score' (or 'auto'): its policy is "
                "the softmax over the legal actions' scores")
        if launched_world_size() > 1 and config.learning.options.value == "central":
            raise ValueError("learning.value 'central' trains in one process; use learning.value 'agent' "
                             "under accelerate launch")
        if config.env.id.startswith(("code/", "math/", "qa/")):
            raise ValueError(
                f"learning.method 'ppo' needs legal-action lists, and env.id {config.env.id!r} answers in "
                "free text; use learning.method magrpo or grpo there")

    # rollouts --------------------------------------------------------------------------------
    def rollout_plan(self, iteration: int, first_episode: int, count: int, seed: int) -> RolloutPlan:
        options = self.options
        plan = super().rollout_plan(iteration, first_episode, count, seed)
        world, rank = launched_world_size(), launched_rank()
        seeds = plan.seeds if world == 1 else env_seeds(seed, "train", [e * world + rank for e in plan.episodes])
        max_steps = None if options.steps is None else max(1, -(-options.steps // count))
        # Under a launcher each process plays its own episodes (seeds apart), K per process.
        return RolloutPlan(plan.episodes, seeds, plan.groups, max_steps=max_steps)

    # the update ------------------------------------------------------------------------------
    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        await self.restore(state)                         # the committed adapters and optimizers
        samples = await self._samples(trajectories)       # decisions with GAE advantages (and the central head's)
        stats = await self.train(samples, state.iteration)  # epochs of clipped-ratio minibatches
        return await self.save_candidate(state.iteration, stats)

    async def _samples(self, trajectories: list[Trajectory]) -> PPOSamples:
        options = self.options
        hook = _load_hook(options.reward_hook, options.gamma) if options.reward_hook else None
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
        if options.value == "central":
            assert self.local is not None
            return PPOSamples(samples, await self.local.run(self._central_samples, samples, boots))
        return PPOSamples(samples)

    async def _bootstrap_value(self, traj: Trajectory, agent: str) -> float:
        """V of a truncated episode's final observation, from the agent's value head (the
        observation in the acting prompt, without the episode's step history)."""
        obs = traj.final_observations.get(agent)
        if obs is None or agent not in self.context.actors or len(obs.legal_actions) < 2:
            return 0.0
        local = self.local_of(agent)
        prompt = local.render(self.context.act_messages(agent, obs, "act_instruction_direct")) + "Action:"
        out = await local.run(local.score_actions, prompt, [" " + a for a in obs.legal_actions], agent)
        return float(out.value or 0.0)

    def _central_samples(self, samples: list[DecisionSample],
                         boots: dict[tuple[int, str], float]) -> list[CentralSample]:
        """With a central value, old values (and GAE) come from the central head over every
        agent's prompt state at the step: the decisions' values, advantages and returns are
        set from it, and the head's own samples (those states, one per decision) returned."""
        options = self.options
        hidden = self._prompt_states(samples)
        import torch

        assert self.team is not None
        with torch.no_grad():
            for s in samples:
                s.old_value = float(self.team.value(CENTRAL, hidden[(s.episode, s.t)]))
        by_timeline: dict[tuple[int, str], list[DecisionSample]] = {}
        for s in samples:
            by_timeline.setdefault((s.episode, s.agent), []).append(s)
        for (episode, agent), timeline in by_timeline.items():
            adv, ret = gae([s.reward for s in timeline], [s.old_value for s in timeline],
                           boots.get((episode, agent), 0.0), options.gamma, options.gae_lambda)
            for s, a, r in zip(timeline, adv, ret, strict=True):
                s.advantage, s.ret = a, r
        return [CentralSample(hidden[(s.episode, s.t)], s.old_value, s.ret) for s in samples]

    def _prompt_states(self, samples: list[DecisionSample]) -> dict[tuple[int, int], Any]:
        """Every step's concatenated per-agent prompt states (each under its own adapter, no
        gradient): what the central value head reads."""
        import torch

        assert self.team is not None and self.local is not None
        local = self.local
        steps: dict[tuple[int, int], dict[str, str]] = {}
        for s in samples:
            steps.setdefault((s.episode, s.t), {}).update(s.observations)
        keys = list(steps)
        out: dict[tuple[int, int], Any] = {}
        agents = list(self.team.agents)
        with local.exclusive(), torch.no_grad():
            rows = [(k, a, steps[k].get(a)) for k in keys for a in agents]
            for start in range(0, len(rows), 16):
                chunk = rows[start:start + 16]
                items = [(local.encode(p or " "), []) for _, _, p in chunk]
                scored = local.score_tokens(items, agents=[a for _, a, _ in chunk])
                for (k, a, p), h in zip(chunk, scored.prompt_hidden, strict=True):
                    out.setdefault(k, {})[a] = h if p is not None else torch.zeros_like(h)
        return {k: torch.stack([v[a] for a in agents]).float() for k, v in out.items()}

    def fit(self, samples: PPOSamples, iteration: int) -> dict[str, Any]:
        """Epochs of clipped PPO minibatches, one adapter at a time (the central value head one
        more unit, on its own samples), and the update's records."""
        decisions = samples.decisions
        by_unit: dict[str, list[DecisionSample | CentralSample]] = {
            **self.group_by_unit((s.agent, s) for s in decisions)}
        if samples.central:
            by_unit[CENTRAL] = list(samples.central)
        totals, steps, skipped = self.epochs(by_unit, iteration)
        records = []
        for agent in self.context.learning_agents:
            acc = totals.get(self.unit_of(agent), {})
            n = acc.get("steps", 0.0)
            records.append({"agent": agent, "decisions": sum(1 for s in decisions if s.agent == agent),
                            **{k: (acc[k] / n if n else None) for k in
                               ("loss", "policy_loss", "value_loss", "message_loss", "entropy", "approx_kl",
                                "clip_fraction", "grad_norm")}})
        counters: dict[str, Any] = {"decisions": len(decisions), "minibatches": steps,
                                    "skipped_minibatches": skipped}
        if decisions:
            counters["advantage_mean"] = sum(s.advantage for s in decisions) / len(decisions)
        return {"records": records, "counters": counters}

    def loss(self, unit: str, batch: list[Any], total: float) -> dict[str, Any]:
        """PPO's loss terms of some samples of a minibatch of ``total`` (sums / total, so the
        parts of a minibatch add up to its mean); entropy, KL and clip counts as sums. The
        central head's unit has its own loss (`central_loss`)."""
        if unit == CENTRAL:
            return self.central_loss(batch, total)
        import torch

        options = self.options
        team, local = self.team_of(unit), self.local_of(unit)
        items = [(local.encode(s.prompt), [local.encode(c) for c in s.candidates]) for s in batch]
        scored = local.score_tokens(items)  # under the adapter being trained
        policy = ActionPolicy(options.temperature)  # the policy the rollouts sampled from
        pairs = list(zip(scored.scores, batch, strict=True))
        new_logp = torch.stack([policy.log_probs(sc, s.offsets)[s.action_index] for sc, s in pairs])
        entropy = torch.stack([policy.entropy(sc, s.offsets) for sc, s in pairs])
        device = new_logp.device
        old_logp = torch.tensor([s.old_logprob for s in batch], dtype=torch.float32, device=device)
        adv = torch.tensor([s.advantage for s in batch], dtype=torch.float32, device=device)
        ratio = torch.exp(new_logp - old_logp)
        surrogate = torch.min(ratio * adv, ratio.clamp(1 - options.clip_coef, 1 + options.clip_coef) * adv)
        policy_loss = -surrogate.sum() / total
        loss = policy_loss - options.ent_coef * entropy.sum() / total
        value_loss = torch.zeros((), device=device)
        if options.value == "agent":
            values = team.value(unit, scored.prompt_hidden)
            old_v = torch.tensor([s.old_value for s in batch], dtype=torch.float32, device=values.device)
            ret = torch.tensor([s.ret for s in batch], dtype=torch.float32, device=values.device)
            clipped = old_v + (values - old_v).clamp(-options.clip_coef, options.clip_coef)
            value_loss = 0.5 * torch.max((values - ret) ** 2, (clipped - ret) ** 2).sum() / total
            loss = loss + options.vf_coef * value_loss
        message_loss = torch.zeros((), device=device)
        spoken = [(i, p, m) for i, s in enumerate(batch) for p, m in s.messages]
        if options.train_messages == "reinforce" and spoken:
            # REINFORCE on the message tokens: each message's log-likelihood under the
            # speaker's adapter, weighted by the advantage of the step it was sent at.
            message_items = [(local.encode(p), [local.encode(m)]) for _, p, m in spoken]
            message_logp = torch.stack([sc[0] for sc in local.score_tokens(message_items).scores])
            weights = adv[torch.tensor([i for i, _, _ in spoken], device=device)]
            message_loss = -(weights * message_logp).sum() / total
            loss = loss + message_loss
        with torch.no_grad():
            approx_kl = (old_logp - new_logp).sum()
            clip_fraction = ((ratio - 1).abs() > options.clip_coef).float().sum()
        return {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss,
                "message_loss": message_loss, "entropy": entropy.sum(), "approx_kl": approx_kl,
                "clip_fraction": clip_fraction}

    def central_loss(self, batch: list[CentralSample], total: float) -> dict[str, Any]:
        """The central value head's clipped value loss on some of a minibatch of ``total``
        (its mean over the minibatch, as a sum / total)."""
        import torch

        options = self.options
        x = torch.stack([s.state for s in batch])
        values = self.team_of(CENTRAL).value(CENTRAL, x)
        old_v = torch.tensor([s.old_value for s in batch], device=values.device)
        ret = torch.tensor([s.ret for s in batch], device=values.device)
        clipped = old_v + (values - old_v).clamp(-options.clip_coef, options.clip_coef)
        value_loss = 0.5 * torch.max((values - ret) ** 2, (clipped - ret) ** 2).sum() / total
        return {"loss": value_loss, "value_loss": value_loss}


def _load_hook(spec: str, gamma: float) -> Any:
    """The hook named by ``spec``; one that takes ``gamma`` gets the learner's (potential-based
    shaping is policy-invariant only with the discount the advantages use)."""
    import functools
    import inspect

    from marlang.methods.neural.reward_hook import load_reward_hook

    hook = load_reward_hook(spec)
    try:
        takes_gamma = "gamma" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        takes_gamma = False
    return functools.partial(hook, gamma=gamma) if takes_gamma else hook

