"""A played graph as a marlang `Trajectory`, the form every learner, table and view reads: one
step per chat-model call in the order the calls began, each under the marked prompts its node read
(the policies a learner rewrites), or under its node where it read none; the reward on the last step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marlang.types import Decision, Step, TextObservation, Trajectory
from marlang.usergraph.episode import GraphEpisode, recorded_value
from marlang.usergraph.recorder import NodeCall

GRAPH_PROTOCOL = "graph"
"""The protocol a graph's episodes name: the graph is its own protocol."""

OUTSIDE_NODES = "graph"
"""The key of a call made outside any node (a model called from a builder or a callback)."""

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def call_agents(call: NodeCall, reads: Mapping[str, Sequence[str | None]]) -> list[str]:
    """Whom a call is credited to: the marked prompts read in its node, else its node."""
    prompts = [name for name, nodes in reads.items() if call.node in nodes]
    return prompts or [call.node or OUTSIDE_NODES]


def messages_text(call: NodeCall) -> str:
    """A call's messages as ``role: content`` lines."""
    return "\n".join(f"{_ROLES.get(m.type, m.type)}: {m.text}" for m in call.messages)


def graph_trajectory(episode: GraphEpisode, *, episode_id: int, seed: int, agents: Sequence[str], played: str,
                     level: str, mission: str, success_at: float) -> Trajectory:
    """``episode`` as a `Trajectory` of the prompts ``agents``: each call a step (observation: its
    messages; decision: its reply, valid unless the call raised), the reward (0 for a failed
    episode) on the last step for every agent, success when it reaches ``success_at``; the input,
    output, reward and error in ``metrics``. ``level`` names the input (``task_id`` in each
    observation's data, as the tables count levels)."""
    reads = episode.prompt_reads
    steps: list[Step] = []
    for call in episode.calls:
        keys = call_agents(call, reads)
        data = {"task_id": level, "node": call.node, "path": list(call.path), "role": call.role}
        observation = TextObservation(text=messages_text(call), mission=mission, legal_actions=[], data=data)
        decision = Decision(action=call.reply, raw=call.reply, valid=call.error is None)
        info: dict[str, Any] = {"node": call.node, "path": list(call.path), "role": call.role,
                                "latency_s": call.latency_s, "input_tokens": call.input_tokens,
                                "output_tokens": call.output_tokens, "prompt_versions": dict(call.prompt_versions),
                                "error": call.error}
        steps.append(Step(t=call.order, observations=dict.fromkeys(keys, observation), messages=[],
                          decisions=dict.fromkeys(keys, decision), rewards={}, info=info))
    reward = episode.reward if episode.reward is not None else 0.0
    if steps:
        last = steps[-1]
        last.rewards = dict.fromkeys(agents or last.decisions, reward)
        last.terminated = True
    metrics = {"reward": episode.reward, "error": episode.error, "input": recorded_value(episode.input),
               "output": recorded_value(episode.output),
               "prompt_reads": {name: list(nodes) for name, nodes in reads.items()}}
    return Trajectory(episode=episode_id, seed=seed, env_id=played, protocol=GRAPH_PROTOCOL, agents=list(agents),
                      steps=steps, success=episode.reward is not None and episode.reward >= success_at,
                      metrics=metrics)
