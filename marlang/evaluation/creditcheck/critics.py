"""marlang's credit critics, run on recorded episodes so that the oracle can grade them on the same
data: LangMARL's critic (a credit per agent and episode), LLM-MCA and LLM-TACA (a credit per agent
and step), LCA's ranker (per agent and step: does the state after the step look better for the
agent) and the difference critic (computed with the oracle, from the env).

Each critic here is the training one, called the way training calls it (its prompts, parsing
and normalisation), on the graded steps of recorded episodes. A reply that gives no number for
an agent is counted as malformed and that agent's credit left out, never a crash.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marlang.types import Trajectory

CRITICS: dict[str, str] = {
    "langmarl": "LangMARL's critic: each agent's score of the episode (the critique's JSON 'score')",
    "llm_mca": "LLM-MCA: a centralised critic splits each step's team reward between the agents",
    "llm_taca": "LLM-TACA: LLM-MCA that also assigns each agent a task",
    "lca": "LCA's LLM ranker: share of 'yes, the state after is better for this agent' (as +1/-1)",
    "difference": "difference rewards from the env: one step, the no-op (else every action) as baseline",
}
"""The critics credit-check can run, with what their number is (named as ``learning.critic``
names them; ``llm-mca`` is accepted for ``llm_mca``)."""


def parse_critics(text: str) -> list[str]:
    """``--critics a,b``: the names given, each once, in order, in their one spelling
    (``llm-mca`` -> ``llm_mca``; checked with the other options: ``credit_check`` refuses an
    unknown or missing one)."""
    from marlang.methods.neural.critics.options import critic_name

    return list(dict.fromkeys(critic_name(n) for n in text.split(",") if n.strip()))


@dataclass
class GradedStep:
    """What the critics read of one graded step of a recorded episode."""

    episode: int
    t: int
    actions: dict[str, str]
    team_reward: float
    state: str
    """The team's state in words then (``env.state_text()``, else the agents' views)."""
    texts: dict[str, str]
    """Each agent's view before the step."""
    after: dict[str, str]
    """Each agent's view after the step."""


@dataclass
class CriticCredits:
    """One critic's credits: per (episode, t), or per (episode, -1) for a per-episode critic."""

    name: str
    unit: str
    credits: dict[tuple[int, int], dict[str, float]] = field(default_factory=dict)
    malformed: int = 0
    """Agent credits a reply should have given and did not (no number for that agent)."""
    asked: int = 0
    """Agent credits asked for."""
    seconds: float = 0.0
    usage: Any = None
    notes: dict[str, Any] = field(default_factory=dict)

    def cost(self) -> dict[str, Any]:
        totals = self.usage.totals_by_role().get("critic", {}) if self.usage is not None else {}
        return {"calls": int(totals.get("calls", 0)),
                "tokens": int(totals.get("input_tokens", 0) + totals.get("output_tokens", 0)),
                "seconds": round(self.seconds, 2)}


@dataclass
class CriticInputs:
    """What every LLM critic is built from: the run's env (an instance, reset by the critics
    that read it), model, prompts and seed, and the recorded episodes with their graded steps."""

    env: Any
    model: Any
    prompts: Any
    seed: int
    agents: list[str]
    episodes: list[Trajectory]
    steps: list[GradedStep]
    structured: str = "auto"
    policies: dict[str, str] = field(default_factory=dict)
    max_concurrency: int = 4


def run_critic(name: str, inputs: CriticInputs) -> CriticCredits:
    """Credits of the LLM critic ``name`` on ``inputs`` (``difference`` is computed with the oracle)."""
    from marlang.models import UsageRecorder

    usage = UsageRecorder()
    start = time.perf_counter()
    if name == "langmarl":
        out = _langmarl(inputs, usage)
    elif name in ("llm_mca", "llm_taca"):
        out = _llm_mca(inputs, usage, task_size=2 if name == "llm_taca" else 0)
    elif name == "lca":
        out = _lca(inputs, usage)
    else:
        raise ValueError(f"critic {name!r} is not an LLM critic; valid: langmarl, llm_mca, llm_taca, lca")
    out.name, out.usage, out.seconds = name, usage, time.perf_counter() - start
    return out


# LangMARL -------------------------------------------------------------------------------------------
def score_opening(agents: Sequence[str]) -> str:
    """The reply's start for a model that continues one: the credit schema's object, score first,
    so that a small model writes the number the grading reads."""
    return '{"' + agents[0] + '": {"score": '


def reply_scores(replies: Sequence[str], agents: list[str]) -> dict[str, float]:
    """Each agent's numeric score in the LangMARL critic's replies (``{agent: {"score": x, ...}}``
    or ``{agent: x}``; the first reply that gives one wins), read with the learner's own parsing."""
    from marlang.methods.langmarl.parsing import json_objects, match_agent

    out: dict[str, float] = {}
    for reply in replies:
        for obj in json_objects(reply or ""):
            for key, value in obj.items() if isinstance(obj, dict) else ():
                agent = match_agent(str(key), agents)
                score = value.get("score") if isinstance(value, dict) else value
                if agent and agent not in out and isinstance(score, (int, float)) and not isinstance(score, bool):
                    out[agent] = float(score)
    return out


def _langmarl(inputs: CriticInputs, usage: Any) -> CriticCredits:
    from marlang.learners.context import LearnerContext
    from marlang.methods.langmarl.graph import episode_credit
    from marlang.methods.langmarl.learner import LangMARLLearner, LangMARLOptions
    from marlang.types import CallContext, PolicyState

    out = CriticCredits("langmarl", "episode")
    context = LearnerContext(agents=inputs.agents, model=inputs.model, prompts=inputs.prompts, env=inputs.env,
                             call=CallContext(seed=inputs.seed, callbacks=[usage]), structured=inputs.structured)
    learner = LangMARLLearner(LangMARLOptions(), context)
    policy = PolicyState(policies=dict(inputs.policies))
    graded = sorted({s.episode for s in inputs.steps})
    by_id = {t.episode: t for t in inputs.episodes}

    async def all_credits() -> list[dict[str, Any]]:
        context.call.limiter = asyncio.Semaphore(inputs.max_concurrency)
        return list(await asyncio.gather(*(episode_credit(learner, policy, by_id[e], score_opening)
                                           for e in graded)))

    for episode, found in zip(graded, asyncio.run(all_credits()), strict=True):
        played = found["agents"]  # every agent of an env's episode; the prompts a graph's episode read
        out.asked += len(played)
        scores = reply_scores(found["replies"], played)
        out.malformed += len(played) - len(scores)
        if played and len(scores) == len(played):
            out.credits[(episode, -1)] = {a: float(v) for a, v in scores.items()}
        out.notes.setdefault("replies", {})[str(episode)] = found["replies"]
    return out


# LLM-MCA / LLM-TACA ---------------------------------------------------------------------------------
class RecordedEnv:
    """What the LLM-MCA critic reads of an env, from a live one where it has it (action names,
    ego view) and else from the record: for envs outside the numeric family (Overcooked, BabyAI)."""

    def __init__(self, env: Any, episode: Trajectory) -> None:
        self.env, self.episode = env, episode
        self.possible_agents = list(episode.agents)
        self.env_id = episode.env_id
        self.world_description = getattr(env, "world_description", "a shared environment")
        first = episode.steps[0].observations
        self.mission = next(iter(first.values())).mission
        self._names: dict[str, list[str]] = {}
        for step in episode.steps:
            for a, o in step.observations.items():
                self._names.setdefault(a, [])
                self._names[a] += [n for n in o.legal_actions if n not in self._names[a]]

    def action_names(self, agent: str) -> list[str]:
        if callable(getattr(self.env, "action_names", None)):
            return list(self.env.action_names(agent))
        return self._names.get(agent, [])

    def ego_text(self, agent: str) -> str:
        return self.episode.steps[0].observations[agent].text

    def reset(self, seed: int | None = None) -> None:
        """Nothing to start: the critic reads the record."""


def _credit_options(critic: str) -> Any:
    from marlang.methods.neural.critics.options import CreditOptions

    return CreditOptions(critic=critic)


def _llm_mca(inputs: CriticInputs, usage: Any, task_size: int) -> CriticCredits:
    import torch

    from marlang.methods.neural.critics.llm_mca import LLMCreditCritic, step_line
    from marlang.methods.neural.critics.mca_parsing import parse_step_credits
    from marlang.models.structured import StructuredReplies

    name = "llm_taca" if task_size else "llm_mca"
    out = CriticCredits(name, "step")
    view = RecordedEnv(inputs.env, inputs.episodes[0])
    critic = LLMCreditCritic(view, inputs.model, inputs.prompts, ".", options=_credit_options(name), seed=inputs.seed,
                             capacity=1, usage=usage, structured=StructuredReplies(inputs.structured, inputs.model),
                             max_concurrency=inputs.max_concurrency, task_size=task_size)
    lines = [step_line(s.state, s.actions, s.team_reward) for s in inputs.steps]
    chunks = critic.chunks(lines, [s.episode for s in inputs.steps])
    team = torch.tensor([s.team_reward for s in inputs.steps], dtype=torch.float32)
    replies = critic.ask(chunks, 0)
    out.notes["replies"] = replies
    for chunk, reply in zip(chunks, replies, strict=True):
        found = parse_step_credits(reply or "", chunk.labels, inputs.agents)
        for label, p in zip(chunk.labels, chunk.positions, strict=True):
            raw = found.get(label, {}).get("credits", {})
            out.asked += len(inputs.agents)
            out.malformed += sum(a not in raw for a in inputs.agents)
            if all(a in raw for a in inputs.agents):
                s = inputs.steps[p]
                out.credits[(s.episode, s.t)] = critic.credits_of(raw, s.team_reward, team)
    return out


# LCA ------------------------------------------------------------------------------------------------
def recorded_key_steps(episode: Trajectory) -> list[str]:
    """LCA's key steps from a recorded episode: the steps with a non-zero team reward, in order."""
    lines: list[str] = []
    for step in episode.steps:
        r = sum(step.rewards.values()) / max(len(step.rewards), 1)
        if abs(r) > 1e-9:
            acts = ", ".join(f"{a} did '{d.action}'" for a, d in step.decisions.items())
            lines.append(f"{len(lines) + 1}. step {step.t + 1}: {acts} (team reward {r:+g})")
    return lines or ["(no step of the episode earned a team reward)"]


def _lca_preamble(inputs: CriticInputs) -> tuple[str, Any]:
    from marlang.methods.neural.critics.lca import default_groups, ranker_prompts

    env = inputs.env
    if all(callable(getattr(env, m, None)) for m in ("ego_text", "scripted_team", "numeric_observation_space")):
        env.reset(seed=inputs.seed)
        preamble, question, _ = ranker_prompts(inputs.prompts, env, env, default_groups(env), seed=inputs.seed)
        return preamble, question
    episode = inputs.episodes[0]
    mission = next(iter(episode.steps[0].observations.values())).mission
    preamble = inputs.prompts.get("lca_preamble").render(
        world=getattr(env, "world_description", "a shared environment"), mission=mission,
        key_steps="\n".join(recorded_key_steps(episode)))
    return preamble, inputs.prompts.get("lca_rank_behaviour")


def _lca(inputs: CriticInputs, usage: Any, queries: int = 1) -> CriticCredits:
    from marlang.methods.neural.critics.rankers import LLMRanker, RankQuery
    from marlang.methods.neural.critics.records import StepRecord

    out = CriticCredits("lca", "step")
    preamble, question = _lca_preamble(inputs)
    ranker = LLMRanker(inputs.model, preamble=preamble, question=question, seed=inputs.seed,
                       max_concurrency=inputs.max_concurrency, callbacks=[usage])
    asked = [RankQuery(a, StepRecord(None, s.texts), StepRecord(None, s.after), s.actions[a],
                       key=f"{s.episode}:{s.t}:{a}") for s in inputs.steps for a in inputs.agents]
    answers = ranker.rank(asked, queries)
    for k, s in enumerate(inputs.steps):
        credit: dict[str, float] = {}
        for i, a in enumerate(inputs.agents):
            parsed = [x for x in answers[k * len(inputs.agents) + i] if x is not None]
            out.asked += 1
            if parsed:
                credit[a] = sum(parsed) / len(parsed)
            else:
                out.malformed += 1
        if len(credit) == len(inputs.agents):
            out.credits[(s.episode, s.t)] = credit
    out.notes["preamble"] = preamble
    return out


def episode_totals(per_step: Mapping[tuple[int, int], Mapping[str, float]]) -> dict[tuple[int, int], dict[str, float]]:
    """Per-step credits summed per episode (keyed (episode, -1)): the oracle's episode credit."""
    out: dict[tuple[int, int], dict[str, float]] = {}
    for (episode, _), credit in per_step.items():
        total = out.setdefault((episode, -1), dict.fromkeys(credit, 0.0))
        for a, c in credit.items():
            total[a] += c
    return out
