"""Your own LangGraph graph under marlang: the marks a graph's code writes (`prompt`,
`chat_model`), read from its source before it runs (`app_marks`), the binding a run sets
around one invocation, and the recorder that attributes every chat-model call of an
invocation to its node (`run_graph`); what a config names for a graph and its task
(`GraphSpec`, `TaskSpec`), played over the task's inputs with its reward (`play_task`), and one
episode of a run of it as a `Trajectory` (`GraphPlayer`).
"""

from __future__ import annotations

from marlang.config.graph import GraphSpec, TaskSpec
from marlang.usergraph.binding import ROLE_METADATA_KEY, Binding, bind, current_binding
from marlang.usergraph.discovery import AppMarks, DeclaredMark, app_marks
from marlang.usergraph.episode import NO_MODEL_CALLED, GraphEpisode, arun_graph, run_graph
from marlang.usergraph.marks import Mark, chat_model, declared_marks, prompt
from marlang.usergraph.player import GraphPlayer, MarkedModel
from marlang.usergraph.recorder import NodeCall, NodeCallRecorder
from marlang.usergraph.task import aplay_task, play_task, reward_value, score_episode
from marlang.usergraph.trajectory import GRAPH_PROTOCOL, graph_trajectory

__all__ = [
    "GRAPH_PROTOCOL",
    "NO_MODEL_CALLED",
    "ROLE_METADATA_KEY",
    "AppMarks",
    "Binding",
    "DeclaredMark",
    "GraphEpisode",
    "GraphPlayer",
    "GraphSpec",
    "Mark",
    "MarkedModel",
    "NodeCall",
    "NodeCallRecorder",
    "TaskSpec",
    "aplay_task",
    "app_marks",
    "arun_graph",
    "bind",
    "chat_model",
    "current_binding",
    "declared_marks",
    "graph_trajectory",
    "play_task",
    "prompt",
    "reward_value",
    "run_graph",
    "score_episode",
]
