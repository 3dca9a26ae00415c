"""LangMARL's update as its own LangGraph subgraph: critic -> gradient -> aggregate -> optimize.

Every stage's independent calls are ``Send`` tasks of one superstep, so they run
concurrently and a checkpointed run that dies mid-stage keeps every finished call.
``collect_*`` nodes join a stage and fan out the next one. The nodes read trajectories
by episode id through the loader the graph is built over (the run's, or given ones) and
write only plain JSON into the subgraph's own state, which lives for one update and never
reaches the shared training state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, Protocol, Required, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from marlang.agents.calls import call_model_json, call_seed
from marlang.learners.base import UpdateOutput, UpdateState
from marlang.methods.langmarl.parsing import TEAM, clean_policy, malformed_policy, parse_credits
from marlang.models.structured import credit_schema
from marlang.types import CallContext, Candidate, PolicyState, PolicyStateRecord, Trajectory

logger = logging.getLogger(__name__)


def _ctx(learner: Any, iteration: int, episode: int = -1) -> CallContext:
    base = learner.context.call
    return CallContext(episode=episode, step=-1, seed=base.seed, callbacks=base.callbacks,
                       limiter=base.limiter, iteration=iteration)


async def _ask(learner: Any, messages: list, *, role: str, agent: str, iteration: int, episode: int,
               max_tokens: int, extra: int = 0, prefill: str = "", schema: dict[str, Any] | None = None) -> str:
    """One learner call. ``prefill`` starts the reply on models that can continue one (local
    models): a small model asked for JSON answers far more often when the reply already
    opens the object; the returned text includes the prefill. ``schema``: the reply's JSON
    schema, sent as the request's ``response_format`` where ``model.structured`` says so."""
    await learner.context.before_calls()
    model = learner.context.model
    seed = None
    if float(getattr(model, "temperature", 0) or 0) > 0:
        seed = call_seed(learner.context.call.seed, iteration, episode, agent, role, extra)
    return await call_model_json(model, messages, _ctx(learner, iteration, episode),
                                 structured=learner.structured_replies(), schema=schema, name=role, role=role,
                                 agent=agent, max_tokens=max_tokens, seed=seed, prefill=prefill)


def _merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Dict channel that merges the concurrent writes of one stage's tasks."""
    return {**(left or {}), **(right or {})}


class LangMARLState(UpdateState, total=False):
    """The update's stage outputs, keyed by episode / agent."""

    credits: Annotated[dict[str, Any], _merge]
    gradients: Annotated[dict[str, Any], _merge]
    aggregated: Annotated[dict[str, Any], _merge]
    optimized: Annotated[dict[str, Any], _merge]


class CriticTask(TypedDict):
    """One critic call: an episode, and the policy it was played with."""

    episode: int
    policy: PolicyStateRecord


class GradientTask(TypedDict):
    """One gradient call: an agent's credit (its feedback text) in one episode."""

    agent: str
    episode: int
    policy: PolicyStateRecord
    credit: str


class AgentTask(TypedDict, total=False):
    """One aggregate call (the agent's ``gradients``) or optimize call (its aggregated
    ``gradient``)."""

    agent: Required[str]
    policy: Required[PolicyStateRecord]
    gradients: list[str]
    gradient: str


class _AgentNode(Protocol):
    """An aggregate or optimize node, as `update_call` builds it."""

    def __call__(self, state: AgentTask) -> Awaitable[dict[str, Any]]: ...


def build_langmarl_update(learner: Any, trajectory: Callable[[int], Trajectory] | None = None) -> Any:
    """The compiled update subgraph: reads ``policy`` and ``episodes``, writes ``candidate``;
    its nodes load each episode with ``trajectory`` (None: the run's episodes,
    ``learner.context.trajectory``)."""
    load = trajectory or learner.context.trajectory
    if load is None:
        raise ValueError("LangMARL's update reads its episodes by id: give it their loader (a run's "
                         "LearnerContext.trajectory, or the trajectories themselves through run_update)")
    builder = StateGraph(LangMARLState, output_schema=UpdateOutput)
    _add_nodes(builder, learner, load)
    return builder.compile(name="update:langmarl")


def _add_nodes(builder: StateGraph[LangMARLState, None, LangMARLState, UpdateOutput], learner: Any,
               trajectory: Callable[[int], Trajectory]) -> None:
    source, target = START, END
    options = learner.options
    agents: list[str] = list(learner.context.agents)

    # A fanned-out node's parameter is named `state`, as LangGraph's node protocols name it: a
    # Send's payload (the *Task records) is that node's state.
    def update_call(build_messages: Any, role: str, given: Literal["gradients", "gradient"],
                    answer: str) -> _AgentNode:
        """A node that asks the ``role`` model once for one agent: its messages from the task's
        policy and its ``given`` texts; the reply goes under ``answer``, keyed by the agent."""

        async def node(state: AgentTask) -> dict[str, Any]:
            policy = PolicyState.from_dict(state["policy"])
            messages = build_messages(policy, state["agent"], state[given])
            text = await _ask(learner, messages, role=role, agent=state["agent"], iteration=policy.iteration,
                              episode=-1, max_tokens=options.update_max_tokens)
            return {answer: {state["agent"]: text}}

        return node

    # critic: one call per trajectory ---------------------------------------------------------
    def fan_out_critics(state: LangMARLState) -> list[Send]:
        return [Send("critic", CriticTask(episode=e, policy=state["policy"])) for e in state["episodes"]]

    async def critic(state: CriticTask) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        episode = state["episode"]
        return {"credits": {str(episode): await episode_credit(learner, policy, trajectory(episode))}}

    # gradient: one call per (agent, trajectory), with that agent's own credit only -------------
    def credit_for(state: LangMARLState, episode: int, agent: str) -> dict[str, Any] | None:
        """``agent``'s credit in ``episode``; None where it did not play there."""
        entry = state["credits"][str(episode)]
        if agent not in entry.get("agents", [agent]):
            return None
        return entry["credit"][TEAM] if options.credit == "global" else entry["credit"].get(agent)

    async def join(state: LangMARLState) -> dict[str, Any]:
        """Waits for every task of a stage; the next stage fans out from here."""
        return {}

    def fan_out_gradients(state: LangMARLState) -> list[Send] | str:
        sends = [
            Send("gradient", GradientTask(agent=a, episode=e, policy=state["policy"], credit=credit["feedback"]))
            for a in agents for e in state["episodes"]
            # frozen: credited, not updated
            if learner.context.learns(a) and (credit := credit_for(state, e, a)) is not None and not credit["failed"]
        ]
        return sends or "collect_gradients"

    async def gradient(state: GradientTask) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        agent, episode = state["agent"], state["episode"]
        messages = learner.gradient_messages(policy, agent, trajectory(episode), state["credit"])
        text = await _ask(learner, messages, role="gradient", agent=agent, iteration=policy.iteration,
                          episode=episode, max_tokens=options.update_max_tokens)
        return {"gradients": {f"{agent}|{episode}": text}}

    # aggregate: one call per agent with two or more gradients ----------------------------------
    def gradients_of(state: LangMARLState, agent: str) -> list[str]:
        grads = state.get("gradients") or {}
        return [grads[f"{agent}|{e}"] for e in state["episodes"] if grads.get(f"{agent}|{e}", "").strip()]

    async def collect_gradients(state: LangMARLState) -> dict[str, Any]:
        single = {a: gradients_of(state, a)[0] for a in agents if len(gradients_of(state, a)) == 1}
        return {"aggregated": single} if single else {}

    def fan_out_aggregates(state: LangMARLState) -> list[Send] | str:
        sends = [Send("aggregate", AgentTask(agent=a, policy=state["policy"], gradients=gradients_of(state, a)))
                 for a in agents if len(gradients_of(state, a)) >= 2]
        return sends or "collect_aggregates"

    aggregate = update_call(learner.aggregate_messages, "aggregator", "gradients", "aggregated")

    # optimize: one call per agent that has an update direction ---------------------------------
    def fan_out_optimizers(state: LangMARLState) -> list[Send] | str:
        aggregated = state.get("aggregated") or {}
        sends = [Send("optimize", AgentTask(agent=a, policy=state["policy"], gradient=aggregated[a]))
                 for a in agents if (aggregated.get(a) or "").strip()]
        return sends or "propose"

    optimize = update_call(learner.optimize_messages, "optimizer", "gradient", "optimized")

    async def propose(state: LangMARLState) -> dict[str, Any]:
        return {"candidate": build_candidate(learner, state).to_dict()}

    builder.add_node("critic", critic)
    builder.add_node("collect_credits", join)
    builder.add_node("gradient", gradient)
    builder.add_node("collect_gradients", collect_gradients)
    builder.add_node("aggregate", aggregate)
    builder.add_node("collect_aggregates", join)
    builder.add_node("optimize", optimize)
    builder.add_node("propose", propose)
    builder.add_conditional_edges(source, fan_out_critics, ["critic"])
    builder.add_edge("critic", "collect_credits")
    builder.add_conditional_edges("collect_credits", fan_out_gradients, ["gradient", "collect_gradients"])
    builder.add_edge("gradient", "collect_gradients")
    builder.add_conditional_edges("collect_gradients", fan_out_aggregates, ["aggregate", "collect_aggregates"])
    builder.add_edge("aggregate", "collect_aggregates")
    builder.add_conditional_edges("collect_aggregates", fan_out_optimizers, ["optimize", "propose"])
    builder.add_edge("optimize", "propose")
    builder.add_edge("propose", target)


async def episode_credit(learner: Any, policy: PolicyState, traj: Trajectory,
                         opening: Any = None) -> dict[str, Any]:
    """The critic's credit of one episode: ``{"credit": {agent: {"feedback", "score", "failed"}},
    "retried": [...], "replies": [...], "agents": [...]}`` (``credit: global``: one ``TEAM``
    entry; ``agents``: those that played the episode, the only ones credited). An agent the
    reply misses is asked for once more. ``opening(agents)`` starts the reply on models that can
    continue one (default: ``json_opening``, the first agent's critique)."""
    options = learner.options
    agents = played_agents(learner, traj)
    if not agents:  # a graph's episode whose nodes read no marked prompt: nobody to credit
        return {"credit": {}, "retried": [], "replies": [], "agents": []}
    opening = opening or json_opening
    messages = learner.critic_messages(policy, traj)
    kw = {"iteration": policy.iteration, "episode": traj.episode, "max_tokens": options.critic_max_tokens}
    prefill = "" if options.credit == "global" else opening(agents)
    schema = None if options.credit == "global" else credit_schema(agents)
    reply = await _ask(learner, messages, role="critic", agent="", prefill=prefill, schema=schema, **kw)
    if options.credit == "global":
        credit = {TEAM: {"feedback": reply.strip(), "score": None, "failed": not reply.strip()}}
        return {"credit": credit, "retried": [], "replies": [reply], "agents": agents}
    found = parse_credits(reply, agents)
    missing = [a for a in agents if a not in found]
    replies = [reply]
    if missing:  # ask once more, for the missing agents only
        retry = learner.critic_retry_messages(messages, reply, missing)
        reply2 = await _ask(learner, retry, role="critic", agent="", extra=1, prefill=opening(missing),
                            schema=credit_schema(missing), **kw)
        replies.append(reply2)
        for a, c in parse_credits(reply2, missing).items():
            found.setdefault(a, c)
    credit = {}
    for a in agents:
        if a in found:
            credit[a] = {**found[a], "failed": False}
        else:
            credit[a] = {"feedback": "", "score": None, "failed": True}
            logger.warning("critic gave no credit for %s in episode %d (counted as a credit failure)", a, traj.episode)
    return {"credit": credit, "retried": missing, "replies": replies, "agents": agents}


def played_agents(learner: Any, traj: Trajectory) -> list[str]:
    """The agents a critic credits in ``traj``: the learner's agents that played it (every one,
    in an env's episode; in a graph's, the marked prompts its nodes read)."""
    return [a for a in learner.context.agents if a in traj.agents]


def json_opening(agents: list[str]) -> str:
    """The first key of the JSON object a critic is asked for: ``{"agent_0": "``."""
    return '{"' + agents[0] + '": "'


def build_candidate(learner: Any, state: LangMARLState) -> Candidate:
    """The proposed policies and one ``updates.jsonl`` row per agent."""
    options = learner.options
    policy = PolicyState.from_dict(state["policy"])
    credits = state.get("credits") or {}
    grads = state.get("gradients") or {}
    aggregated = state.get("aggregated") or {}
    optimized = state.get("optimized") or {}
    candidate = Candidate(counters={"credit_failures": 0, "critic_retries": 0, "malformed_policies": 0})
    for e in state["episodes"]:
        entry = credits.get(str(e), {})
        candidate.counters["critic_retries"] += 1 if entry.get("retried") else 0
    for a in learner.context.agents:
        rows = []
        failures = 0
        for e in state["episodes"]:
            played = credits.get(str(e), {}).get("agents")
            if played is not None and a not in played:
                continue  # the agent did not play this episode: nothing to credit
            entry = credits.get(str(e), {}).get("credit", {})
            c = entry.get(TEAM if options.credit == "global" else a, {"feedback": "", "score": None, "failed": True})
            failures += 1 if c.get("failed") else 0
            rows.append({"episode": e, "credit": c.get("feedback", ""), "score": c.get("score"),
                         "credit_failed": bool(c.get("failed")), "gradient": grads.get(f"{a}|{e}")})
        candidate.counters["credit_failures"] += failures if options.credit == "agent" else 0
        new_text = clean_policy(optimized[a]) if a in optimized else ""
        old = policy.policies.get(a, "")
        malformed = malformed_policy(new_text) if a in optimized else None
        if malformed:
            # Counted and shown in updates.jsonl; the agent keeps its policy.
            candidate.counters["malformed_policies"] += 1
            logger.warning("optimizer reply for %s is no policy (%s); keeping its policy", a, malformed)
            new_text = ""
        if new_text:
            candidate.policies[a] = new_text
        candidate.records.append({
            "agent": a,
            "trajectories": rows,
            "aggregated_gradient": aggregated.get(a),
            "old_policy": old,
            "new_policy": new_text or old,
            "rewritten": bool(new_text),
            "malformed": malformed,
            "optimizer_reply": optimized.get(a) if malformed else None,
            "credit_failures": failures if options.credit == "agent" else 0,
        })
    return candidate


async def run_update(learner: Any, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
    """Run the update subgraph alone on given trajectories (no run directory, no checkpoint):
    a graph built over them."""
    by_id = {t.episode: t for t in trajectories}
    graph = build_langmarl_update(learner, trajectory=by_id.__getitem__)
    out = await graph.ainvoke({"policy": state.to_dict(), "episodes": sorted(by_id)})
    return Candidate.from_dict(out["candidate"])
