"""PPO's training samples from played trajectories: one per real decision of an agent (a
choice among two or more legal actions), with the agent's own rewards, GAE advantages and
returns (GLAM: per-agent values; FAMA: one policy per agent).

An agent's timeline is the steps where it had a choice; rewards it got on steps without one
(waiting for a teammate's turn) count towards its previous decision. A truncated episode
bootstraps from the value of its final observation; a terminated one from zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from marlang.models.policy import ActionPolicy
from marlang.types import Decision, Trajectory


@dataclass
class DecisionSample:
    """One decision as PPO trains on it."""

    agent: str
    episode: int
    t: int
    prompt: str
    """The exact scored text (see `Decision.prompt`)."""
    candidates: list[str]
    """``choice_lead + action`` for every legal action, in the observation's order."""
    action_index: int
    old_logprob: float
    """log pi_old(a | s) at sampling time."""
    old_value: float
    offsets: list[float] = field(default_factory=list)
    """Added to the candidates' scores before the softmax (see `Decision.offsets`); empty: none."""
    reward: float = 0.0
    advantage: float = 0.0
    ret: float = 0.0
    """The value target: advantage + old value."""
    observations: dict[str, str] = field(default_factory=dict)
    """Every agent's scored prompt at this step (the centralised value reads them)."""
    messages: list[tuple[str, str]] = field(default_factory=list)
    """(prompt, text) of each message the agent sent before acting at this step
    (``train_messages: reinforce`` trains their tokens with the step's advantage)."""


@dataclass
class CentralSample:
    """One decision as the central value head (``value: central``) trains on it."""

    state: Any
    """Every agent's prompt state at the decision's step (a tensor ``[n_agents, hidden]``,
    agents in team order, each read under its own adapter before the update's epochs)."""
    old_value: float
    """The central head's value of ``state`` before the update."""
    ret: float
    """The value target (the decision's GAE return)."""


@dataclass
class PPOSamples:
    """What PPO's update trains on: the decisions (one unit per adapter) and, with a
    central value head, that head's own samples (its unit)."""

    decisions: list[DecisionSample]
    central: list[CentralSample] = field(default_factory=list)
    """With ``value: central``: one per decision, in the same order; empty otherwise."""


def decision_samples(traj: Trajectory, agent: str) -> list[DecisionSample]:
    """The agent's decisions in one episode, in order, rewards folded onto decisions."""
    samples: list[DecisionSample] = []
    for step in traj.steps:
        reward = float(step.rewards.get(agent, 0.0))
        decision: Decision | None = step.decisions.get(agent)
        obs = step.observations.get(agent)
        chose = (
            decision is not None and obs is not None and len(obs.legal_actions) > 1
            and decision.prompt is not None and decision.logprob is not None
        )
        if not chose:
            if samples:
                samples[-1].reward += reward
            continue
        assert decision is not None and obs is not None and decision.prompt is not None
        samples.append(DecisionSample(
            agent=agent, episode=traj.episode, t=step.t, prompt=decision.prompt,
            candidates=list(ActionPolicy.candidates(obs.legal_actions, decision.choice_lead)),
            action_index=obs.legal_actions.index(decision.action),
            old_logprob=float(decision.logprob or 0.0),
            old_value=float(decision.value or 0.0),
            offsets=list(decision.offsets or []),
            reward=reward,
            observations={a: d.prompt for a, d in step.decisions.items() if d.prompt is not None},
            messages=[(m.prompt, m.content) for m in step.messages
                      if m.sender == agent and m.prompt and m.content and m.content != "(no message)"],
        ))
    return samples


def gae(rewards: Sequence[float], values: Sequence[float], last_value: float, gamma: float,
        gae_lambda: float) -> tuple[list[float], list[float]]:
    """Generalised advantage estimates and returns of one timeline.

    ``last_value`` is V of the state after the last decision (0 when the episode ended
    there, the final observation's value when it was cut off)."""
    advantages = [0.0] * len(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(values) else last_value
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * gae_lambda * running
        advantages[t] = running
    return advantages, [a + v for a, v in zip(advantages, values, strict=True)]


def build_samples(trajectories: Sequence[Trajectory], agents: Sequence[str], *, gamma: float,
                  gae_lambda: float, bootstrap: Callable[[Trajectory, str], float] | None = None,
                  rewards: Callable[[Trajectory, str], list[float]] | None = None) -> list[DecisionSample]:
    """Every agent's samples of every trajectory, with advantages and returns.

    ``bootstrap(traj, agent)`` gives V of a truncated episode's final observation (default 0).
    ``rewards(traj, agent)``, where given, replaces the env's per-step rewards of the agent
    (shaped per-agent rewards: the reward-hook idea of the neural learners, one value per
    step)."""
    out: list[DecisionSample] = []
    for traj in trajectories:
        truncated = bool(traj.steps) and traj.steps[-1].truncated and not traj.steps[-1].terminated
        for agent in agents:
            if rewards is not None:
                traj = _with_rewards(traj, agent, rewards(traj, agent))
            samples = decision_samples(traj, agent)
            if not samples:
                continue
            last = bootstrap(traj, agent) if (truncated and bootstrap is not None) else 0.0
            adv, ret = gae([s.reward for s in samples], [s.old_value for s in samples], last, gamma, gae_lambda)
            for s, a, r in zip(samples, adv, ret, strict=True):
                s.advantage, s.ret = a, r
            out.extend(samples)
    return out


def _with_rewards(traj: Trajectory, agent: str, shaped: list[float]) -> Trajectory:
    if len(shaped) != len(traj.steps):
        raise ValueError(f"shaped rewards for {agent} in episode {traj.episode}: {len(shaped)} values "
                         f"for {len(traj.steps)} steps")
    copy = Trajectory.from_dict(traj.to_dict())
    for step, r in zip(copy.steps, shaped, strict=True):
        step.rewards[agent] = float(r)
    return copy



def with_central_values(samples: Sequence[DecisionSample], states: dict[tuple[int, int], Any],
                        values: dict[tuple[int, int], float], bootstrap: dict[tuple[int, str], float], *,
                        gamma: float, gae_lambda: float) -> list[CentralSample]:
    """With a central value head: each decision's old value is the head's value of its step's
    ``states`` (``values``, keyed by ``(episode, t)``), its advantage and return GAE over them
    (``bootstrap``: V after a cut-off timeline, keyed by ``(episode, agent)``); the head's own
    samples are returned, one per decision."""
    for s in samples:
        s.old_value = values[(s.episode, s.t)]
    by_timeline: dict[tuple[int, str], list[DecisionSample]] = {}
    for s in samples:
        by_timeline.setdefault((s.episode, s.agent), []).append(s)
    for (episode, agent), timeline in by_timeline.items():
        adv, ret = gae([s.reward for s in timeline], [s.old_value for s in timeline],
                       bootstrap.get((episode, agent), 0.0), gamma, gae_lambda)
        for s, a, r in zip(timeline, adv, ret, strict=True):
            s.advantage, s.ret = a, r
    return [CentralSample(states[(s.episode, s.t)], s.old_value, s.ret) for s in samples]
