"""A user's app whose node marks its model with a role marlang's own calls are counted under."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph

import marlang
from marlang.testing import ScriptedChatModel


class State(TypedDict, total=False):
    question: str
    answer: str


def judge(state: State) -> dict[str, Any]:
    llm = marlang.chat_model("critic", ScriptedChatModel(reply_fn=lambda messages: "fine"))
    return {"answer": llm.invoke([HumanMessage(state["question"])]).text}


def build_graph() -> Any:
    graph = StateGraph(State)
    graph.add_node("judge", judge)
    graph.add_edge(START, "judge")
    graph.add_edge("judge", END)
    return graph.compile()
