"""A task for the planner -> coder app (its inputs and rewards, as a user writes them) and the
graphs, data and rewards a config may wrongly name, for `GraphSpec`, `TaskSpec` and `play_task`.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import numpy as np
from langchain_core.messages import HumanMessage
from langgraph.graph import START, StateGraph

import marlang
from marlang.testing import ScriptedChatModel
from tests.usergraph import planner_coder_app

ANSWERS = {"add two numbers": "Code: Plan: add two numbers", "sort a list": "Code: Plan: sort a list"}


def problems() -> list[Any]:
    """Two inputs: a bare question, and a question with the answer the reward checks against."""
    return ["add two numbers", {"question": "sort a list", "expected": ANSWERS["sort a list"], "id": 7}]


def score(item: Any, output: Any, episode: Any) -> float:
    question = item if isinstance(item, str) else item["question"]
    return 1.0 if output == ANSWERS[question] else 0.0


async def async_score(item: Any, output: Any, episode: Any) -> float:
    await asyncio.sleep(0)
    return 0.5


def build_graph() -> Any:
    return planner_coder_app.build_graph()


# ------------------------------------------------------------------ what a config may name wrongly


def uncompiled() -> Any:
    return planner_coder_app.build_graph().builder  # the StateGraph, .compile() forgotten


def not_a_graph() -> Any:
    return {"planner": "a node"}


def broken_builder() -> Any:
    raise RuntimeError("no API key")


def empty_data() -> list[Any]:
    return []


def mapping_data() -> Any:
    return {"question": "add two numbers"}


def numbers_data() -> list[Any]:
    return ["add two numbers", 3]


def keyless_data() -> list[Any]:
    return [{"prompt": "add two numbers"}]


def one_argument_reward(output: Any) -> float:
    return 1.0


# ------------------------------------------------------------------ outputs that game a reward


class LyingAnswer:
    """A graph's output that claims to be every answer and the number 1."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 1.0

    def __str__(self) -> str:
        raise RuntimeError("no text here")


class LyingFloat(float):
    def __float__(self) -> float:
        return 1.0


class Answers(TypedDict, total=False):
    question: str
    answer: Any


def _answering(answer: Any) -> Any:
    def node(state: Answers) -> dict[str, Any]:
        marlang.chat_model("solver", ScriptedChatModel(replies=["ok"])).invoke([HumanMessage(state["question"])])
        return {"answer": answer}

    return StateGraph(Answers).add_node("solver", node).add_edge(START, "solver").compile()


def lying_graph() -> Any:
    return _answering(LyingAnswer())


def huge_graph() -> Any:
    return _answering("x" * 1_000_000)


def number_graph() -> Any:
    return _answering(LyingFloat(0.25))


def by_question_graph() -> Any:
    """Answers with a value chosen by the question, to reach each of the rewards' checks."""
    def node(state: Answers) -> dict[str, Any]:
        marlang.chat_model("solver", ScriptedChatModel(replies=["ok"])).invoke([HumanMessage(state["question"])])
        if state["question"] == "raise":
            raise ValueError("the graph broke")
        if state["question"] == "silent":
            return {}
        return {"answer": state["question"]}

    return StateGraph(Answers).add_node("solver", node).add_edge(START, "solver").compile()


def output_as_reward(item: Any, output: Any, episode: Any) -> Any:
    """A naive reward that trusts the graph to answer with its own score."""
    return output


def equality_reward(item: Any, output: Any, episode: Any) -> Any:
    return output == "the right answer"


def length_reward(item: Any, output: Any, episode: Any) -> float:
    return float(len(output))


def kinds_data() -> list[Any]:
    return ["0.5", "numpy", "nan", "inf", "text", "divide", "raise", "silent"]


def kinds_reward(item: Any, output: Any, episode: Any) -> Any:
    """Returns, by the answer, each kind of value a reward function may return."""
    return {"0.5": 0.5, "numpy": np.float32(0.25), "nan": float("nan"), "inf": np.float64("inf"),
            "text": "1.0"}.get(output) if output != "divide" else 1 / 0


SCORED: list[Any] = []
"""The items `recording_reward` was called with."""


def recording_reward(item: Any, output: Any, episode: Any) -> float:
    SCORED.append(item)
    return 1.0


IN_FLIGHT = {"now": 0, "most": 0}
"""Invocations of `counting_graph` running now, and the most seen at once."""


def counting_graph() -> Any:
    """Echoes its question after a pause, prefixed with its bound prompt, counting how many
    invocations run at once."""
    async def node(state: Answers) -> dict[str, Any]:
        IN_FLIGHT["now"] += 1
        IN_FLIGHT["most"] = max(IN_FLIGHT["most"], IN_FLIGHT["now"])
        await asyncio.sleep(0.02)
        llm = marlang.chat_model("echo", ScriptedChatModel(reply_fn=lambda messages: messages[-1].text))
        reply = await llm.ainvoke([HumanMessage(f"{marlang.prompt('tag', 'untagged')} {state['question']}")])
        IN_FLIGHT["now"] -= 1
        return {"answer": reply.text}

    return StateGraph(Answers).add_node("echo", node).add_edge(START, "echo").compile()


def counting_data() -> list[Any]:
    return [f"q{i}" for i in range(7)]


def suffix_reward(item: Any, output: Any, episode: Any) -> float:
    return float(output.endswith(f" {item}"))
