"""A planner -> coder -> tester team writing HumanEval functions, as a plain LangGraph app.

The tester accepts the code or sends it back to the coder once. ``marlang.prompt`` and
``marlang.chat_model`` mark what a marlang run may train; outside a run they return their
defaults, so ``python examples/humaneval_team.py [--model SPEC]`` answers one problem as is.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from functools import cache
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

import marlang

MODEL = "local:smollm2"  # the embedded model: runs offline; e.g. "openai:gpt-4o-mini"
MAX_TOKENS = 256
MAX_ATTEMPTS = 2  # the coder's first try and one revision


class Problem(TypedDict):
    """One input of the task; the graph is given its prompt (``input: prompt`` in a config)."""

    task_id: str
    prompt: str
    entry_point: str


class State(TypedDict, total=False):
    prompt: str
    plan: str
    code: str
    review: str
    attempts: int


def build_graph(model: str = MODEL, max_tokens: int = MAX_TOKENS) -> CompiledStateGraph:
    """The compiled graph; each node reads its marks when it runs (a mark called once at import
    would fix its value there, and a run could not change it)."""

    def ask(llm: BaseChatModel, system: str, user: str) -> str:
        return llm.invoke([SystemMessage(system), HumanMessage(user)], max_tokens=max_tokens).text

    def plan(state: State) -> dict[str, Any]:
        llm = marlang.chat_model("planner", default=model)
        system = marlang.prompt("planner", "You plan Python functions. List the steps that solve the task, briefly.")
        return {"plan": ask(llm, system, state["prompt"]), "attempts": 0}

    def write_code(state: State) -> dict[str, Any]:
        llm = marlang.chat_model("coder", default=model)
        system = marlang.prompt(
            "coder",
            "You write Python. Reply with the complete function in one ```python block, imports included.",
        )
        task = f"{state['prompt']}\n\nPlan:\n{state['plan']}"
        if state.get("review"):
            task += f"\n\nYour previous code:\n{state['code']}\n\nReview:\n{state['review']}"
        return {"code": ask(llm, system, task), "attempts": state["attempts"] + 1}

    def review(state: State) -> dict[str, Any]:
        llm = marlang.chat_model("tester", default=model)
        system = marlang.prompt(
            "tester",
            "You test Python code against the examples in its docstring. Answer ACCEPT if it is right, "
            "else REVISE and what to fix.",
        )
        task = f"Task:\n{state['prompt']}\n\nCode:\n{state['code']}"
        return {"review": ask(llm, system, task)}

    def accepted(state: State) -> str:
        revise = state["review"].strip().upper().startswith("REVISE")
        return "coder" if revise and state["attempts"] < MAX_ATTEMPTS else END

    graph = StateGraph(State)
    graph.add_node("planner", plan)
    graph.add_node("coder", write_code)
    graph.add_node("tester", review)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "coder")
    graph.add_edge("coder", "tester")
    graph.add_conditional_edges("tester", accepted, ["coder", END])
    return graph.compile()


@cache
def _humaneval() -> dict[str, Any]:
    """HumanEval's problems by task id, with their hidden tests, as marlang's code env reads them."""
    from marlang.envs.tasks.data import load_task

    return {problem.task_id: problem for problem in load_task("humaneval")}


def problems() -> list[Problem]:
    """The graph's inputs, one per HumanEval problem; the hidden tests stay out of them."""
    return [
        Problem(task_id=p.task_id, prompt=p.prompt, entry_point=p.entry_point) for p in _humaneval().values()
    ]


CPU_PROBLEMS = ("HumanEval/12", "HumanEval/28", "HumanEval/42", "HumanEval/57", "HumanEval/60", "HumanEval/75",
                "HumanEval/80", "HumanEval/126")
"""Eight problems on which a small model earns some reward when it samples (a group whose answers
all score 0 has nothing to learn from): what the weight-space configs train on, on a CPU."""


def cpu_problems() -> list[Problem]:
    """The `CPU_PROBLEMS` among the graph's inputs."""
    return [p for p in problems() if p["task_id"] in CPU_PROBLEMS]


def score(item: Mapping[str, Any], output: str, episode: object = None) -> float:
    """The share of the problem's hidden tests the final code (``output``, the state's ``code``)
    passes, judged as marlang's ``code/humaneval`` env judges an answer."""
    from marlang.envs.tasks.coding import judge_code

    return judge_code(_humaneval()[item["task_id"]], output).pass_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL, help=f"chat model spec (default {MODEL})")
    parser.add_argument("--problem", default="HumanEval/0", help="task id (default HumanEval/0)")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="tokens per reply")
    args = parser.parse_args()
    item = next((p for p in problems() if p["task_id"] == args.problem), None)
    if item is None:
        parser.error(f"no problem {args.problem!r}: HumanEval's task ids run from HumanEval/0 to HumanEval/163")
    state = build_graph(args.model, args.max_tokens).invoke({"prompt": item["prompt"]})
    print(state["code"])
    print(f"tester: {state['review']}")
    print(f"hidden tests passed: {score(item, state['code']):.0%}")


if __name__ == "__main__":
    main()
