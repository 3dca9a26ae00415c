"""The app's builder: an outliner, an implementer and an inspector in a row; the outliner marks
its prompt by keyword, through marlang imported under another name."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

import marlang as ml

from . import nodes


class State(TypedDict, total=False):
    question: str
    plan: str
    code: str
    verdict: str


def plan(state: State) -> dict[str, Any]:
    system = ml.prompt(
        name="outliner",
        default="You plan. "
                "List the steps.",
    )
    reply = ml.chat_model(default=nodes.FALLBACK, role="outliner").invoke(
        [SystemMessage(system), HumanMessage(state["question"])])
    return {"plan": reply.text}


def build_graph() -> Any:
    from tests.usergraph.discovery_app.review import review  # a function-local import is followed too

    graph = StateGraph(State)
    graph.add_node("outliner", plan)
    graph.add_node("implementer", nodes.code)
    graph.add_node("inspector", review)
    graph.add_edge(START, "outliner")
    graph.add_edge("outliner", "implementer")
    graph.add_edge("implementer", "inspector")
    graph.add_edge("inspector", END)
    return graph.compile()
