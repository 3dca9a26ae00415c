"""A plain LangGraph app, written as a user writes one: a planner plans, a coder writes the code.

Its two marks (the prompts and the models of both nodes) are its only tie to marlang; outside a
marlang run they return their defaults, so ``python planner_coder_app.py`` answers as before.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

import marlang
from marlang.testing import ScriptedChatModel


def echo(messages: list[BaseMessage]) -> str:
    """A stand-in for a real model (any LangChain chat model fits): says what it was asked."""
    return f"{messages[0].text.split(':')[0]}: {messages[-1].text}"


DEFAULT_MODEL = ScriptedChatModel(reply_fn=echo)  # e.g. init_chat_model("openai:gpt-4o-mini")


class State(TypedDict, total=False):
    question: str
    plan: str
    answer: str


def plan(state: State) -> dict[str, Any]:
    llm = marlang.chat_model("planner", DEFAULT_MODEL)
    system = marlang.prompt("planner", "Plan: list the steps that solve the task.")
    reply = llm.invoke([SystemMessage(system), HumanMessage(state["question"])])
    return {"plan": reply.text}


def code(state: State) -> dict[str, Any]:
    llm = marlang.chat_model("coder", DEFAULT_MODEL)
    system = marlang.prompt("coder", "Code: write the Python function that follows the plan.")
    reply = llm.invoke([SystemMessage(system), HumanMessage(state["plan"])])
    return {"answer": reply.text}


def build_graph() -> Any:
    graph = StateGraph(State)
    graph.add_node("planner", plan)
    graph.add_node("coder", code)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "coder")
    graph.add_edge("coder", END)
    return graph.compile()


if __name__ == "__main__":
    print(build_graph().invoke({"question": "add two numbers"})["answer"])
