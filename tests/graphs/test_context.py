"""The episode and protocol graphs read what an episode depends on (its env, decider, call
context) from their typed runtime context (LangGraph's ``context_schema``), not from
``config["configurable"]``."""

from __future__ import annotations

import asyncio

from marlang.graphs import build_protocol
from marlang.graphs.episode import EpisodeContext, build_episode_graph
from marlang.types import CallContext, Decision, Message, TextObservation


class OneStepEnv:
    def __init__(self):
        self.possible_agents = ["agent_0"]
        self.actions = []

    def reset(self, seed=None):
        return {"agent_0": TextObservation(text="start", mission="go", legal_actions=["wait", "go"])}, {}

    def step(self, actions):
        self.actions.append(actions)
        return {}, {"agent_0": 1.0}, {"agent_0": True}, {"agent_0": False}, {"agent_0": {"success": True}}


def test_an_episode_graph_reads_its_env_decider_and_call_context_from_its_typed_context():
    graph = build_episode_graph()
    assert graph.builder.context_schema is EpisodeContext
    seen = []

    async def decide(observations, ctx):
        seen.append((ctx.episode, ctx.step, ctx.seed))
        return [], {"agent_0": Decision("go")}

    env = OneStepEnv()
    context = EpisodeContext(env=env, decide=decide, ctx=CallContext(episode=5, seed=11), env_id="one-step")
    state = asyncio.run(graph.ainvoke({"episode": 5, "seed": 3, "steps": []}, context=context))
    assert seen == [(5, 0, 11)] and env.actions == [{"agent_0": "go"}]
    assert state["done"] and state["success"] and len(state["steps"]) == 1


class Conversant:
    def __init__(self, name, log):
        self.name, self.log = name, log

    async def speak(self, obs, transcript, ctx, round=0):
        self.log.append(("speak", self.name, ctx.episode, ctx.step))
        return Message(self.name, "hello", round)

    async def act(self, obs, transcript, ctx):
        self.log.append(("act", self.name, ctx.episode, ctx.step))
        return Decision("go")


def test_protocol_nodes_read_the_call_context_from_the_runtime_context():
    log = []
    graph = build_protocol("bidirectional", {n: Conversant(n, log) for n in ("agent_0", "agent_1")}, None)
    assert graph.builder.context_schema is CallContext
    obs = {n: TextObservation(text="here", mission="go", legal_actions=["go"]) for n in ("agent_0", "agent_1")}
    asyncio.run(graph.ainvoke({"observations": obs, "transcript": [], "decisions": {}, "turn": 0},
                              context=CallContext(episode=4, step=2)))
    assert sorted(log) == [("act", "agent_0", 4, 2), ("act", "agent_1", 4, 2),
                           ("speak", "agent_0", 4, 2), ("speak", "agent_1", 4, 2)]
    log.clear()  # invoked without one (a protocol inside a graph of the user's): the default context
    asyncio.run(graph.ainvoke({"observations": obs, "transcript": [], "decisions": {}, "turn": 0}))
    assert {entry[2:] for entry in log} == {(0, 0)}
