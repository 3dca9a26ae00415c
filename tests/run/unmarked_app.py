"""A user's one-node LangGraph app with no marks: marlang records and scores it, and has nothing
to train."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph

from marlang.testing import ScriptedChatModel

MODEL = ScriptedChatModel(reply_fn=lambda messages: "an answer")


class State(TypedDict, total=False):
    question: str
    answer: str


def answer(state: State) -> dict[str, Any]:
    return {"answer": MODEL.invoke([HumanMessage(state["question"])]).text}


def build_graph() -> Any:
    graph = StateGraph(State)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile()
