"""The app's builder: a planner, a coder and a reviewer in a row; the planner marks its prompt
by keyword, through marlang imported under another name."""

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
        name="planner",
        default="You plan. "
                "List the steps.",
    )
    reply = ml.chat_model(default=nodes.FALLBACK, role="planner").invoke(
        [SystemMessage(system), HumanMessage(state["question"])])
    return {"plan": reply.text}


def build_graph() -> Any:
    from tests.usergraph.discovery_app.review import review  # a function-local import is followed too

    graph = StateGraph(State)
    graph.add_node("planner", plan)
    graph.add_node("coder", nodes.code)
    graph.add_node("reviewer", review)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "coder")
    graph.add_edge("coder", "reviewer")
    graph.add_edge("reviewer", END)
    return graph.compile()
