"""LCA's rankers: who says, from one agent's view, whether the state after a step is better
than the state before it. ``heuristic`` is the env's ``rank_states``; ``synthetic`` flips the
heuristic's answer with probability 1 - accuracy, independently per query; ``llm`` asks a chat
model (scoring "Yes"/"No" by log-probability where the backend can score, else generating an
answer and parsing it).

An answer is +1 (the state after is better for the agent), -1 (worse), 0 (a tie) or None (an
LLM reply that named neither).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

import numpy as np

from marlang.methods.neural.critics.records import StepRecord
from marlang.models.capabilities import scores_choices


@dataclass(frozen=True)
class RankQuery:
    """One agent-specific ranking question: a step from ``before`` to ``after`` in which the
    agent took ``action``; ``key`` names the question (seeds and cache keys derive from it)."""

    agent: str
    before: StepRecord
    after: StepRecord
    action: str
    key: str


def random_queries(env: Any, n_steps: int, *, seed: int = 0, texts: bool = False) -> list[RankQuery]:
    """One query per agent for each of ``n_steps`` steps of random joint actions in ``env``
    (reset with ``seed``, then ``seed + t + 1`` after an episode ends at step t): held-out pairs
    to measure a ranker against the heuristic. ``texts``: record ego texts (LLM rankers)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)

    def record() -> StepRecord:
        return StepRecord(env.rank_snapshot(), {a: env.ego_text(a) for a in env.possible_agents} if texts else {})

    queries: list[RankQuery] = []
    before = record()
    for t in range(n_steps):
        if not env.agents:
            env.reset(seed=seed + t + 1)
            before = record()
        actions = {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
        env.step(actions)
        after = record()
        queries.extend(RankQuery(agent, before, after, env.action_names(agent)[action], key=f"{t}:{agent}")
                       for agent, action in actions.items())
        before = after
    return queries


class Ranker(Protocol):
    name: str

    def rank(self, queries: Sequence[RankQuery], n: int) -> list[list[int | None]]:
        """``n`` answers for each query."""
        ...


class HeuristicRanker:
    """The env's reference heuristic, ``rank_states(agent, before, after)``."""

    name = "heuristic"

    def __init__(self, env: Any) -> None:
        self.env = env

    def answer(self, query: RankQuery) -> int:
        return int(self.env.rank_states(query.agent, query.before.snapshot, query.after.snapshot))

    def rank(self, queries: Sequence[RankQuery], n: int) -> list[list[int | None]]:
        return [[self.answer(q)] * n for q in queries]


class SyntheticRanker:
    """The heuristic with each query's answer flipped with probability ``1 - accuracy`` (a tie
    stays a tie), as in LCA's synthetic-accuracy experiments."""

    name = "synthetic"

    def __init__(self, env: Any, accuracy: float, seed: int) -> None:
        self.heuristic = HeuristicRanker(env)
        self.accuracy = accuracy
        self.rng = np.random.default_rng(seed)

    def rank(self, queries: Sequence[RankQuery], n: int) -> list[list[int | None]]:
        out: list[list[int | None]] = []
        for query in queries:
            truth = self.heuristic.answer(query)
            flips = self.rng.random(n) >= self.accuracy
            out.append([-truth if flip else truth for flip in flips])
        return out


_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str) -> int | None:
    """+1 for a final "yes", -1 for a final "no" (the last one the reply names), else None."""
    found = _YES_NO.findall(text)
    if not found:
        return None
    return 1 if found[-1].lower() == "yes" else -1


@dataclass
class LLMCallContext:
    """Where a ranker's calls happen, for accounting (``llm_calls.csv``) and seeds."""

    callbacks: list[Any] = field(default_factory=list)
    limiter: asyncio.Semaphore | None = None
    episode: Any = None
    step: Any = None
    iteration: int = 0


def critic_usage(usage: Any) -> tuple[int, int]:
    """Calls and tokens (input and output) of role ``critic`` so far in a ``UsageRecorder``."""
    if usage is None:
        return 0, 0
    totals = usage.totals_by_role().get("critic", {})
    return int(totals.get("calls", 0)), int(totals.get("input_tokens", 0) + totals.get("output_tokens", 0))


def usage_rates(calls: int, tokens: int, frames: int) -> dict[str, float]:
    """The ``iterations.csv`` columns of a batch of ``frames``: critic calls and tokens per
    1,000 frames."""
    return {"critic_calls_per_kframe": round(1000 * calls / frames, 3),
            "critic_tokens_per_kframe": round(1000 * tokens / frames, 3)}


@dataclass(eq=False)
class LLMRanker:
    """Asks ``model`` (role ``critic``) whether the agent's action helped the team. A model
    that can score choices answers by comparing log p("Yes") and log p("No") (always
    parseable); others generate a reply that is parsed for its last yes/no. With one query
    the answer is the most likely one; with more, each query samples at temperature 1 with
    its own seed, so the share of "Yes" estimates the model's confidence."""

    name = "llm"

    model: Any
    _: KW_ONLY
    preamble: str
    question: Any
    """The prompt template of the question (rendered with the step's texts and action)."""
    max_tokens: int = 64
    seed: int = 0
    max_concurrency: int = 8
    callbacks: list[Any] = field(default_factory=list)
    iteration: int = field(default=0, init=False)
    """The training iteration its calls are counted under (the critic sets it)."""
    scores: bool = field(init=False)
    """Whether the model answers by scoring "Yes"/"No" rather than by a generated reply."""

    def __post_init__(self) -> None:
        self.callbacks = list(self.callbacks)  # the caller's list is not the ranker's
        self.scores = scores_choices(self.model)

    def messages(self, query: RankQuery) -> list[Any]:
        from langchain_core.messages import HumanMessage, SystemMessage

        text = self.question.render(before=query.before.texts[query.agent], action=query.action,
                                    after=query.after.texts[query.agent])
        return [SystemMessage(self.preamble), HumanMessage(text)]

    def rank(self, queries: Sequence[RankQuery], n: int) -> list[list[int | None]]:
        from marlang.models.errors import ModelServerError

        try:
            return asyncio.run(self.arank(queries, n))
        except ModelServerError as err:
            raise type(err)(f"the LCA ranker's model (learning.critic_model): {err}",
                            url=err.url, attempts=err.attempts) from err

    async def arank(self, queries: Sequence[RankQuery], n: int) -> list[list[int | None]]:
        ctx = LLMCallContext(self.callbacks, asyncio.Semaphore(self.max_concurrency), iteration=self.iteration)
        answers = await asyncio.gather(*(self._ask(q, i, n, ctx) for q in queries for i in range(n)))
        return [list(answers[k * n:(k + 1) * n]) for k in range(len(queries))]

    async def _ask(self, query: RankQuery, index: int, n: int, ctx: LLMCallContext) -> int | None:
        from marlang.agents.calls import call_model, call_seed

        sampling: dict[str, Any] = {}
        if n > 1:
            sampling = {"temperature": 1.0, "seed": call_seed(self.seed, "lca", query.key, index)}
        messages = self.messages(query)
        if self.scores:
            reply = await call_model(self.model, messages, ctx, role="critic", agent=query.agent, max_tokens=1,
                                     choices=["Yes", "No"], choice_prefix="Answer: ", **sampling)
            return {"Yes": 1, "No": -1}.get(reply.strip())
        reply = await call_model(self.model, messages, ctx, role="critic", agent=query.agent,
                                 max_tokens=self.max_tokens, **sampling)
        return parse_yes_no(reply)
