"""LangGraph state machines: conversation protocols and the episode loop."""

from marlang.graphs.episode import (
    build_episode_graph,
    protocol_decider,
    run_episode,
    scripted_decider,
)
from marlang.graphs.protocols import (
    ProtocolState,
    build_protocol,
    list_protocols,
    register_protocol,
    run_protocol,
)

__all__ = [
    "ProtocolState",
    "build_episode_graph",
    "build_protocol",
    "list_protocols",
    "protocol_decider",
    "register_protocol",
    "run_episode",
    "run_protocol",
    "scripted_decider",
]
