"""The episode state machine: observe -> protocol + step -> ... -> finish.

One compiled graph serves every episode of a run; the environment, the decision maker
and the call context of an episode are its runtime context (LangGraph's typed
``context_schema``: an `EpisodeContext`), read in a node as ``runtime.context``.
"""

from __future__ import annotations

import asyncio
import inspect
import operator
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from marlang.agents.llm_agent import LLMAgent
from marlang.graphs.protocols import run_protocol
from marlang.types import CallContext, Decision, Message, Step, TextObservation, Trajectory

MAX_EPISODE_STEPS = 100_000
"""A safety bound on an episode's length when neither the plan nor the caller sets one
(every env ends its episodes by its own limit long before)."""

DecideFn = Callable[[dict[str, TextObservation], CallContext], Awaitable[tuple[list[Message], dict[str, Decision]]]]
"""Turns a joint observation into (transcript, decisions): a protocol graph or a scripted team."""


class EpisodeState(TypedDict, total=False):
    episode: int
    seed: int
    t: int
    observations: dict[str, TextObservation]
    steps: Annotated[list[Step], operator.add]
    done: bool
    success: bool


@dataclass(frozen=True)
class EpisodeContext:
    """What one episode's graph run depends on (its runtime context)."""

    env: Any
    """The episode's env (PettingZoo ``ParallelEnv`` API, `TextObservation` values)."""
    decide: DecideFn
    ctx: CallContext
    """The episode's call context; each step's adds its step."""
    team: Any = None
    """The slots no LLM plays (the env's scripted team or a `SlotTeam`), reset with the env."""
    env_id: str = "?"
    protocol: str = "?"
    max_steps: int | None = None
    """The plan's step cap (None: the env's own limit)."""


EpisodeGraph = CompiledStateGraph[EpisodeState, EpisodeContext, EpisodeState, EpisodeState]
"""The compiled episode loop (`build_episode_graph`)."""


def protocol_decider(protocol_graph: Any) -> DecideFn:
    async def decide(observations: dict[str, TextObservation],
                     ctx: CallContext) -> tuple[list[Message], dict[str, Decision]]:
        return await run_protocol(protocol_graph, observations, ctx)

    return decide


def scripted_decider(team: Any) -> DecideFn:
    """Wraps an env's scripted team (``reset()``, ``act(observations) -> {agent: action}``)."""

    async def decide(observations: dict[str, TextObservation],
                     ctx: CallContext) -> tuple[list[Message], dict[str, Decision]]:
        actions = team.act(observations)
        return [], {a: Decision(action=act, raw="(scripted)") for a, act in actions.items()}

    return decide


class SlotTeam:
    """The slots no LLM plays, acting together in one env: the env's scripted agent for the
    ``scripted`` slots and trained neural policies for the ``neural`` ones (slot -> a policy
    with ``actions(env) -> {agent: action}``, one call per policy and step). ``kinds``: each
    slot's player.

    The env's scripted team decides for the whole team and each scripted slot takes its own
    action, as in a whole scripted team; where that team is driven by one agent and the others
    only make way (``env.scripted_team(driver=...)``, BabyAI), each scripted slot gets a team
    it drives, so every scripted slot plays toward the mission."""

    def __init__(self, env: Any, scripted: Collection[str], neural: Mapping[str, Any] | None = None) -> None:
        self.env = env
        self.neural = dict(neural or {})
        self.kinds = {**{a: "scripted" for a in scripted}, **{a: "neural" for a in self.neural}}
        self.players: dict[str, Any] = {}
        """Scripted slot -> the scripted team whose action for it the slot takes."""
        if scripted and "driver" in inspect.signature(env.scripted_team).parameters:
            self.players = {slot: env.scripted_team(driver=slot) for slot in scripted}
        elif scripted:
            team = env.scripted_team()
            self.players = dict.fromkeys(scripted, team)

    def reset(self) -> None:
        for team in {id(t): t for t in self.players.values()}.values():
            team.reset()

    def act(self, observations: Mapping[str, TextObservation]) -> dict[str, Any]:
        actions: dict[int, dict[str, Any]] = {}
        out = {}
        for agent, kind in self.kinds.items():
            if agent not in observations:
                continue
            player = self.players[agent] if kind == "scripted" else self.neural[agent]
            if id(player) not in actions:
                actions[id(player)] = (player.act(observations) if kind == "scripted"
                                       else player.actions(self.env))
            out[agent] = actions[id(player)][agent]
        return out


def mixed_decider(protocol: DecideFn, team: SlotTeam) -> DecideFn:
    """A team of LLM slots and others: the protocol graph runs over the LLM slots (the others
    say nothing), and ``team`` acts for the slots it plays (``team.kinds``)."""

    async def decide(observations: dict[str, TextObservation],
                     ctx: CallContext) -> tuple[list[Message], dict[str, Decision]]:
        joint = team.act(observations)
        talking = {a: o for a, o in observations.items() if a not in team.kinds}
        transcript, decisions = await protocol(talking, ctx) if talking else ([], {})
        decisions = dict(decisions)
        for agent in observations:
            if agent in team.kinds:
                decisions[agent] = Decision(action=joint[agent], raw=f"({team.kinds[agent]})")
        return transcript, decisions

    return decide


def build_episode_graph(agents: Mapping[str, LLMAgent] | None = None) -> EpisodeGraph:
    """Compile the episode loop. ``agents`` (LLM agents) drop the episode's short-term
    memory at the end; learning happens after episodes, on the learner seam."""

    async def observe(state: EpisodeState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
        run = runtime.context
        # In a worker thread: a reset or step may block (loading a task's data, running
        # generated code in the sandbox) and must not stall the other episodes' model calls.
        observations, _ = await asyncio.to_thread(run.env.reset, seed=state["seed"])
        if run.team is not None:
            run.team.reset()
        return {"observations": observations, "t": 0, "done": False, "success": False}

    async def decide_and_step(state: EpisodeState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
        run = runtime.context
        env, ctx, decide = run.env, run.ctx.for_step(state["t"]), run.decide
        observations = state["observations"]
        transcript, decisions = await decide(observations, ctx)
        actions = {a: d.action for a, d in decisions.items()}
        next_obs, rewards, terminations, truncations, infos = await asyncio.to_thread(env.step, actions)
        success = any(bool(i.get("success")) for i in infos.values())
        terminated = any(terminations.values())
        truncated = any(truncations.values())
        step = Step(
            t=state["t"],
            observations=observations,
            messages=transcript,
            decisions=decisions,
            rewards={a: float(r) for a, r in rewards.items()},
            terminated=terminated,
            truncated=truncated,
            info={"success": success},
            infos={a: dict(i) for a, i in infos.items()},
            terminations={a: bool(v) for a, v in terminations.items()},
            truncations={a: bool(v) for a, v in truncations.items()},
        )
        limit = run.max_steps
        if limit is not None and state["t"] + 1 >= limit and not (terminated or truncated) and next_obs:
            # The plan's step cap (fixed-length rollouts): the episode is cut off here, its
            # final observation kept for bootstrapping.
            truncated = step.truncated = True
            step.truncations = {a: True for a in next_obs}
        done = terminated or truncated or not next_obs
        return {
            "steps": [step],
            "observations": next_obs,
            "t": state["t"] + 1,
            "done": done,
            "success": success or state.get("success", False),
        }

    async def finish(state: EpisodeState) -> dict[str, Any]:
        for agent in (agents or {}).values():
            agent.memory.end_episode(state["episode"])
        return {}

    g = StateGraph(EpisodeState, context_schema=EpisodeContext)
    g.add_node("observe", observe)
    g.add_node("act", decide_and_step)
    g.add_node("finish", finish)
    g.add_edge(START, "observe")
    g.add_edge("observe", "act")
    g.add_conditional_edges("act", lambda s: "finish" if s["done"] else "act", ["act", "finish"])
    g.add_edge("finish", END)
    return g.compile(name="episode", checkpointer=False)


def _trajectory(state: EpisodeState, run: EpisodeContext) -> Trajectory:
    return Trajectory(
        episode=state["episode"],
        seed=state["seed"],
        env_id=run.env_id,
        protocol=run.protocol,
        agents=list(getattr(run.env, "possible_agents", [])),
        steps=list(state.get("steps", [])),
        success=bool(state.get("success")),
        final_observations=dict(state.get("observations") or {}),
    )


async def run_episode(
    graph: Any,
    *,
    env: Any,
    episode: int,
    seed: int,
    decide: DecideFn,
    ctx: CallContext,
    max_steps: int | None = None,
    env_id: str = "?",
    protocol: str = "?",
    team: Any = None,
) -> Trajectory:
    """Play one episode to the end and return its trajectory. ``max_steps`` cuts the episode
    off after that many steps (``truncated``) where the env has not ended it before; None
    leaves the length to the env's own limit."""
    run = EpisodeContext(env=env, decide=decide, ctx=ctx, team=team, env_id=env_id, protocol=protocol,
                         max_steps=max_steps)
    config = {"recursion_limit": (max_steps or MAX_EPISODE_STEPS) + 10}
    state = await graph.ainvoke({"episode": episode, "seed": seed, "steps": []}, config=config, context=run)
    return _trajectory(state, run)
