"""Your own LangGraph graph under marlang: the marks a graph's code writes (`prompt`,
`chat_model`), the binding a run sets around one invocation, and the recorder that attributes
every chat-model call of an invocation to its node (`run_graph`).
"""

from __future__ import annotations

from marlang.usergraph.binding import ROLE_METADATA_KEY, Binding, bind, current_binding
from marlang.usergraph.episode import NO_MODEL_CALLED, GraphEpisode, arun_graph, run_graph
from marlang.usergraph.marks import Mark, chat_model, declared_marks, prompt
from marlang.usergraph.recorder import NodeCall, NodeCallRecorder

__all__ = [
    "NO_MODEL_CALLED",
    "ROLE_METADATA_KEY",
    "Binding",
    "GraphEpisode",
    "Mark",
    "NodeCall",
    "NodeCallRecorder",
    "arun_graph",
    "bind",
    "chat_model",
    "current_binding",
    "declared_marks",
    "prompt",
    "run_graph",
]
