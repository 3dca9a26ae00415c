"""Sync calls of a local model from worker threads of a batching event loop (a LangGraph graph's
sync nodes under ``ainvoke``) join the loop's batches, answer as they would alone, and never hang
a loop's own thread or a closed loop's caller."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any, TypedDict

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph

from marlang.models import LocalChatModel, LocalLM, batching
from marlang.models.batching import batching_sync_calls
from marlang.testing import tiny_chat_model, tiny_local_lm
from marlang.types import StopFlag, Stopped

QUESTIONS = ["hello", "go forward", "What is the capital of France?", "turn left"]
SEEDS = [3, 5, 3, 11]


class State(TypedDict, total=False):
    question: str
    seed: int
    answer: str


def _graph(model: LocalChatModel) -> Any:
    def answer(state: State) -> dict[str, Any]:  # a sync node: LangGraph runs it in a worker thread
        return {"answer": model.invoke([HumanMessage(state["question"])], seed=state["seed"]).text}

    graph = StateGraph(State)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile()


def _patient_engine() -> LocalLM:
    # a wide window: the worker threads' calls land in one batch however slow the machine is
    return tiny_local_lm(batch_window_s=0.05, max_batch_wait_s=1.0)


async def _concurrently(model: LocalChatModel) -> list[str]:
    graph = _graph(model)
    with batching_sync_calls():
        states = await asyncio.gather(*(graph.ainvoke({"question": q, "seed": s})
                                        for q, s in zip(QUESTIONS, SEEDS, strict=True)))
    return [state["answer"] for state in states]


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "seeded-sampling"])
def test_sync_nodes_of_concurrent_invocations_share_batches_and_answer_as_alone(temperature):
    engine = _patient_engine()
    model = tiny_chat_model(engine, max_tokens=8, temperature=temperature)
    together = asyncio.run(_concurrently(model))
    assert engine.counters.requests_served == len(QUESTIONS)
    batches = engine.counters.generate_calls
    assert batches < len(QUESTIONS)
    # one at a time, with no loop: the plain sync path, each call its own batch
    alone = [model.invoke([HumanMessage(q)], seed=s).text for q, s in zip(QUESTIONS, SEEDS, strict=True)]
    assert engine.counters.generate_calls == batches + len(QUESTIONS)
    assert together == alone  # each seeded request keeps its own generator inside the batch


def test_sync_choices_of_worker_threads_are_scored_in_one_batch():
    engine = _patient_engine()
    model = tiny_chat_model(engine)
    choices = ["go forward", "turn left", "turn right"]

    def choose(question: str) -> str:
        return model.invoke([HumanMessage(question)], choices=choices).text

    async def main() -> list[str]:
        with batching_sync_calls():
            return list(await asyncio.gather(*(asyncio.to_thread(choose, q) for q in QUESTIONS)))

    together = asyncio.run(main())
    assert engine.counters.score_calls < len(QUESTIONS)
    assert together == [choose(q) for q in QUESTIONS]


def test_a_sync_call_with_no_running_loop_runs_alone_even_in_a_closed_loops_context():
    engine = tiny_local_lm()
    model = tiny_chat_model(engine, max_tokens=4)
    expected = model.invoke([HumanMessage("hello")]).text
    assert engine.counters.generate_calls == 1

    async def context_of_a_batching_loop() -> contextvars.Context:
        with batching_sync_calls():
            return contextvars.copy_context()

    context = asyncio.run(context_of_a_batching_loop())  # its loop is closed now
    assert context.run(model.invoke, [HumanMessage("hello")]).text == expected
    assert engine.counters.generate_calls == 2


def _bounded(fn: Any, timeout: float = 60.0) -> Any:
    """``fn()`` in a thread of its own, failing the test if it has not returned in ``timeout``
    seconds (a deadlock fails the test instead of hanging the suite)."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the call hung"
    return outcome[0]


def test_a_sync_call_on_the_loops_own_thread_runs_alone():
    engine = tiny_local_lm()
    model = tiny_chat_model(engine, max_tokens=4)

    async def main() -> str:
        loop, done = asyncio.get_running_loop(), asyncio.Event()
        replies: list[str] = []

        def callback() -> None:  # a sync callback of the loop, on its thread
            replies.append(model.invoke([HumanMessage("hello")]).text)
            done.set()

        with batching_sync_calls():
            loop.call_soon(callback)
            await done.wait()
        return replies[0]

    assert _bounded(lambda: asyncio.run(main())) == model.invoke([HumanMessage("hello")]).text


def test_a_loop_blocked_on_the_calling_thread_lets_the_call_run_alone(monkeypatch):
    monkeypatch.setattr(batching, "LOOP_PICKUP_S", 0.2)
    engine = tiny_local_lm()
    model = tiny_chat_model(engine, max_tokens=4)

    def invoke_in_a_thread_and_wait() -> str:
        # the loop's thread waits on a worker that carries the loop's context (a sync subgraph
        # invoked from an async node does this): the loop cannot take the worker's request
        replies: list[str] = []
        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run,
                                  args=(lambda: replies.append(model.invoke([HumanMessage("go")]).text),))
        worker.start()
        worker.join()
        return replies[0]

    async def main() -> str:
        with batching_sync_calls():
            return invoke_in_a_thread_and_wait()

    assert _bounded(lambda: asyncio.run(main())) == model.invoke([HumanMessage("go")]).text


def test_a_stopped_run_stops_a_sync_call_waiting_on_the_loop():
    engine = tiny_local_lm()
    model = tiny_chat_model(engine, max_tokens=4)
    flag = StopFlag()

    async def main() -> BaseException | str:
        with engine.watching(flag), batching_sync_calls():
            flag.set()
            try:
                return await asyncio.to_thread(lambda: model.invoke([HumanMessage("go")]).text)
            except Stopped as stopped:
                return stopped

    assert isinstance(_bounded(lambda: asyncio.run(main())), Stopped)
    assert engine.counters.generate_calls == 0
