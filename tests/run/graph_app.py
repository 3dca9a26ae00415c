"""A user's two-node LangGraph app for the run tests: a planner and a coder, each with a marked
prompt and a marked model; an input containing "boom" makes the coder raise (a failed episode),
and the reward checks the coder's answer against the input's expected text."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

import marlang
from marlang.testing import ScriptedChatModel

DEFAULT = ScriptedChatModel(reply_fn=lambda messages: "the app's own model")


class State(TypedDict, total=False):
    question: str
    plan: str
    answer: str


def plan(state: State) -> dict[str, Any]:
    system = marlang.prompt("planning", "Plan the steps.")
    reply = marlang.chat_model("planner", DEFAULT).invoke([SystemMessage(system), HumanMessage(state["question"])])
    return {"plan": reply.text}


def code(state: State) -> dict[str, Any]:
    if "boom" in state["question"]:
        raise RuntimeError("the coder's tool crashed")
    system = marlang.prompt("coding", "Write the code.")
    reply = marlang.chat_model("coder", DEFAULT).invoke([SystemMessage(system), HumanMessage(state["plan"])])
    return {"answer": reply.text}


def build_graph() -> Any:
    graph = StateGraph(State)
    graph.add_node("planner", plan)
    graph.add_node("coder", code)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "coder")
    graph.add_edge("coder", END)
    return graph.compile()


def problems() -> list[dict[str, Any]]:
    return [{"task_id": f"p{i}", "question": f"task {i}"} for i in range(4)]


def problems_with_a_crash() -> list[dict[str, Any]]:
    return [{"task_id": "ok", "question": "task ok"}, {"task_id": "boom", "question": "boom"}]


def score(item: Any, output: Any, episode: Any) -> float:
    return 1.0 if isinstance(output, str) and "GOOD" in output else 0.0


def length_score(item: Any, output: Any, episode: Any) -> float:
    """A reward a random model's answers spread over: the answer's length, up to 40 characters."""
    return min(len(output), 40) / 40 if isinstance(output, str) else 0.0
