"""A solver -> checker team on MATH problems, as a plain LangGraph app.

The solver works the problem out; the checker reviews the solution and states the final answer.
``marlang.prompt`` and ``marlang.chat_model`` mark what a marlang run may train; outside a run
they return their defaults, so ``python examples/math_team.py [--model SPEC]`` answers one problem.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

import marlang

MODEL = "local:smollm2"  # the embedded model: runs offline; e.g. "openai:gpt-4o-mini"
MAX_TOKENS = 256
# three problems in MATH-500's schema, the file marlang's tests load for math/ envs; None loads
# MATH-500 itself from the Hugging Face hub
DATA_FILES: str | None = str(
    Path(__file__).resolve().parent.parent / "tests" / "envs" / "tasks" / "data" / "fixtures" / "math500.jsonl"
)


class Problem(TypedDict):
    """One input of the task; the graph is given its problem (``input: problem`` in a config)."""

    task_id: str
    problem: str


class State(TypedDict, total=False):
    problem: str
    solution: str
    answer: str


def build_graph(model: str = MODEL, max_tokens: int = MAX_TOKENS) -> CompiledStateGraph:
    """The compiled graph; each node reads its marks when it runs (a mark called once at import
    would fix its value there, and a run could not change it)."""

    def ask(llm: BaseChatModel, system: str, user: str) -> str:
        return llm.invoke([SystemMessage(system), HumanMessage(user)], max_tokens=max_tokens).text

    def solve(state: State) -> dict[str, Any]:
        llm = marlang.chat_model("solver", default=model)
        system = marlang.prompt(
            "solver", "You solve competition math problems step by step and end with the answer in \\boxed{}."
        )
        return {"solution": ask(llm, system, state["problem"])}

    def check(state: State) -> dict[str, Any]:
        llm = marlang.chat_model("checker", default=model)
        system = marlang.prompt(
            "checker",
            "You check a math solution. Fix any mistake, then give the final answer in \\boxed{}.",
        )
        return {"answer": ask(llm, system, f"Problem:\n{state['problem']}\n\nSolution:\n{state['solution']}")}

    graph = StateGraph(State)
    graph.add_node("solver", solve)
    graph.add_node("checker", check)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", "checker")
    graph.add_edge("checker", END)
    return graph.compile()


@cache
def _math() -> dict[str, Any]:
    """The MATH problems by task id, with their reference answers, as marlang's math env reads them."""
    from marlang.envs.tasks.data import load_task

    return {problem.task_id: problem for problem in load_task("math", data_files=DATA_FILES)}


def problems() -> list[Problem]:
    """The graph's inputs, one per problem; the reference answers stay out of them."""
    return [Problem(task_id=p.task_id, problem=p.problem) for p in _math().values()]


def score(item: Mapping[str, Any], output: str, episode: object = None) -> float:
    """1.0 when the checker's answer (``output``, the state's ``answer``, reduced as the math env
    reduces a reply: its last ``\\boxed{}``, what follows "the answer is", else the reply itself)
    equals the reference by marlang's math answer check, else 0.0 (also for an output that is
    no text)."""
    from marlang.envs.tasks.data import math_answers_equal
    from marlang.envs.tasks.data.math_answers import team_answer

    if not isinstance(output, str):  # an object that only claims to be the answer scores nothing
        return 0.0
    reference = _math()[item["task_id"]].answer
    answer = team_answer(str.__str__(output))  # the text itself, whatever a subclass says of it
    return float(bool(answer) and math_answers_equal(answer, reference))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL, help=f"chat model spec (default {MODEL})")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="tokens per reply")
    args = parser.parse_args()
    item = problems()[0]
    state = build_graph(args.model, args.max_tokens).invoke({"problem": item["problem"]})
    print(state["answer"])
    print(f"correct: {score(item, state['answer']):.0f}")


if __name__ == "__main__":
    main()
