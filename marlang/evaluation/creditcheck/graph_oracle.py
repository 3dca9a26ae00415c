"""The credit oracle on runs of a user's own LangGraph graph: each recorded episode is replayed
with its recorded replies up to the first call of a node that read marked prompt i, every call
from there on sampled afresh, and prompt i's credit is the recorded reward less the mean reward
of those forks (a leave-one-out baseline over ``samples`` draws).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import ConfigDict

from marlang.evaluation.creditcheck.oracle import ReplayMismatch
from marlang.types import CallContext, PolicyState, Trajectory
from marlang.usergraph.player import GraphPlayer
from marlang.usergraph.recorder import NodeCall
from marlang.usergraph.trajectory import messages_text

GRAPH_RESTORE = ("replay of the recorded replies up to the forked node's first call (the episode's input and "
                 "prompt texts bound again, each earlier call answered with the recorded reply to the same "
                 "messages); every call from the fork on sampled afresh from the model at the temperature")
GRAPH_FORMULAS = {
    "V(fork_i)": "mean reward over --samples forks at prompt i: the calls before the first call of a node that "
                 "read i replayed, that call and every later one sampled (seeded per sample and call, the same "
                 "seeds for every prompt's fork, so differences are paired); a fork whose graph fails scores 0",
    "D_i": "recorded reward - V(fork_i): prompt i's oracle credit of the episode (a leave-one-out baseline "
           "over the samples)",
}


def messages_key(messages: Sequence[BaseMessage]) -> str:
    """A call's messages as the record keeps them (``role: content`` lines, the step's observation)."""
    return messages_text(NodeCall(order=0, node=None, path=(), role=None, messages=list(messages),
                                  prompt_versions={}))


def fork_point(traj: Trajectory, agent: str) -> int:
    """The index of the first recorded call credited to ``agent`` (a call of a node that read it)."""
    return next(k for k, step in enumerate(traj.steps) if agent in step.decisions)


def call_seed(seed: int, episode: int, sample: int, call: int) -> int:
    """The sampling seed of a fork's ``call``-th call: the same for every prompt's fork of a sample."""
    return (((seed * 1_000_003 + episode) * 1_009 + sample) * 1_013 + call) % 2**31


class ForkState:
    """One fork's replay: the recorded calls (messages, reply) and the fork point (the first call
    sampled), which recorded calls a replayed one has claimed, how many calls began and were
    sampled, and the first call that matched nothing. (A plain class: the fork's models share it
    by reference, as pydantic copies them.)"""

    def __init__(self, recorded: list[tuple[str, str]], fork_at: int, seed: int, episode: int, sample: int,
                 temperature: float) -> None:
        self.recorded, self.fork_at = recorded, fork_at
        self.seed, self.episode, self.sample, self.temperature = seed, episode, sample, temperature
        self.begun = self.sampled = 0
        self.claimed = [False] * len(recorded)
        self.mismatch: str | None = None
        self._lock = threading.Lock()

    def _claim(self, key: str, start: int, stop: int) -> int | None:
        for j in range(start, stop):
            if not self.claimed[j] and self.recorded[j][0] == key:
                self.claimed[j] = True
                return j
        return None

    def next_call(self, key: str) -> tuple[int, str | None]:
        """The call's seed index and its recorded reply where it replays a call before the fork
        (None: sample it). A call is matched by its messages, not by when it begins, as parallel
        branches (``Send``) begin in any order: one the record holds before the fork replays; one
        it holds from the fork on (the fork's own call, or a parallel one) is sampled, as is any
        call once every call before the fork has replayed. A call that matches nothing while calls
        before the fork are still to come is a mismatch (raised, and kept for the oracle to refuse
        the run)."""
        with self._lock:
            k = self.begun
            self.begun += 1
            j = self._claim(key, 0, self.fork_at)
            if j is not None:
                return j, self.recorded[j][1]
            later = self._claim(key, self.fork_at, len(self.recorded))
            if later is not None or all(self.claimed[:self.fork_at]):
                self.sampled += 1
                # seeded by its recorded place where it has one, so a parallel branch's seed is not a race
                return (later if later is not None else k), None
            self.mismatch = self.mismatch or (
                f"episode {self.episode}: replaying its recorded replies, call {k} asked for messages the record "
                f"holds at no call before the fork ({key[:160]!r}); the graph is not deterministic given its "
                "model's replies (it reads something the record does not hold), so it cannot be forked")
            raise ReplayMismatch(self.mismatch)


class ForkChatModel(BaseChatModel):
    """The chat model every role plays in a fork: the recorded reply to a replayed call, else a
    sample of ``model`` at the fork's temperature with the call's seed."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: BaseChatModel
    fork: ForkState

    @property
    def _llm_type(self) -> str:
        return "marlang-credit-fork"

    def _sampling(self, k: int) -> dict[str, Any]:
        f = self.fork
        return {"temperature": f.temperature, "seed": call_seed(f.seed, f.episode, f.sample, k)}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        k, reply = self.fork.next_call(messages_key(messages))
        if reply is not None:
            return _replied(reply)
        # the model's own method: its public one would report the call to the graph's callbacks twice
        return self.model._generate(messages, stop=stop, **{**kwargs, **self._sampling(k)})

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        k, reply = self.fork.next_call(messages_key(messages))
        if reply is not None:
            return _replied(reply)
        return await self.model._agenerate(messages, stop=stop, **{**kwargs, **self._sampling(k)})


def _replied(reply: str) -> ChatResult:
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration

    return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


@dataclass
class GraphCost:
    """What the graph oracle played: whole graph runs, calls sampled, calls answered from the record."""

    graph_runs: int = 0
    model_calls: int = 0
    replayed_calls: int = 0
    failed_forks: int = 0


@dataclass
class EpisodeCredit:
    """The oracle on one episode: the recorded reward, V(fork_i) and D_i per prompt."""

    episode: int
    reward: float
    values: dict[str, float]
    credit: dict[str, float]


def recorded_calls(traj: Trajectory) -> list[tuple[str, str]]:
    """The recorded calls as (messages, reply), in the order they began."""
    out = []
    for step in traj.steps:
        observation = next(iter(step.observations.values()))
        decision = next(iter(step.decisions.values()))
        out.append((observation.text, decision.raw if decision.raw is not None else decision.action))
    return out


async def episode_credit(player: GraphPlayer, traj: Trajectory, model: BaseChatModel, *, samples: int, seed: int,
                         temperature: float, limiter: asyncio.Semaphore, cost: GraphCost,
                         done: Callable[[], None] = lambda: None) -> EpisodeCredit:
    """The oracle's credit of each prompt ``traj`` read (its agents): ``samples`` forks at each,
    played concurrently under ``limiter``; a `ReplayMismatch` where the replay leaves the record."""
    texts = traj.metrics.get("prompt_texts") or {}
    policy = PolicyState(policies={name: str(text) for name, text in texts.items()})

    async def fork(agent: str, sample: int) -> float:
        upto = fork_point(traj, agent)
        state = ForkState(recorded_calls(traj), upto, seed, traj.episode, sample, temperature)
        bound = replace(player, model=ForkChatModel(model=model, fork=state), models={})
        async with limiter:
            played = await bound.play(traj.episode, traj.seed, policy, CallContext(seed=seed))
        if state.mismatch is not None:
            raise ReplayMismatch(state.mismatch)
        cost.graph_runs += 1
        cost.model_calls += state.sampled
        cost.replayed_calls += state.begun - state.sampled
        reward = played.metrics.get("reward")
        if reward is None:
            cost.failed_forks += 1
        done()
        return float(reward) if reward is not None else 0.0

    agents = list(traj.agents)
    rewards = await asyncio.gather(*(fork(a, s) for a in agents for s in range(samples)))
    values = {a: sum(rewards[i * samples:(i + 1) * samples]) / samples for i, a in enumerate(agents)}
    recorded = float(traj.metrics.get("reward") or 0.0)
    return EpisodeCredit(traj.episode, recorded, values, {a: recorded - v for a, v in values.items()})
