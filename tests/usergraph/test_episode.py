"""`run_graph`: every chat-model call of an invocation attributed to its node (under `Send`
fan-out and in a subgraph too), and a graph that raises, loops past its recursion limit or calls
no model gives a failed episode instead of an exception."""

from __future__ import annotations

import asyncio
import json
import math
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

import marlang
from marlang.models import load_chat_model
from marlang.testing import ScriptedChatModel, tiny_chat_model, tiny_local_lm
from marlang.usergraph import NO_MODEL_CALLED, Binding, GraphEpisode, arun_graph, run_graph
from tests.usergraph import planner_coder_app as app


def test_the_calls_of_the_users_app_are_recorded_by_node_in_order():
    binding = Binding(prompts={"coder": "Coder: write it."}, versions={"coder": 3})
    episode = run_graph(app.build_graph(), {"question": "add two numbers"}, binding)
    assert not episode.failed and episode.output["answer"] == "Coder: Plan: add two numbers"
    planner, coder = episode.calls
    assert [(c.order, c.node, c.path, c.role) for c in episode.calls] == [
        (0, "planner", ("planner",), "planner"), (1, "coder", ("coder",), "coder"),
    ]
    assert [m.text for m in coder.messages] == ["Coder: write it.", "Plan: add two numbers"]
    assert coder.reply == "Coder: Plan: add two numbers"
    assert (coder.input_tokens, coder.output_tokens) == (7, 5)  # the scripted model counts words
    assert coder.prompt_versions == {"coder": 3} and planner.latency_s > 0 and coder.error is None


async def test_the_async_run_records_the_same_calls():
    episode = await arun_graph(app.build_graph(), {"question": "q"})
    assert [(c.node, c.role, c.reply) for c in episode.calls] == [("planner", "planner", "Plan: q"),
                                                                  ("coder", "coder", "Code: Plan: q")]
    assert episode.calls[0].prompt_versions == {}


def test_a_model_not_from_a_mark_has_no_role():
    model = ScriptedChatModel(replies=["ok"])

    def node(state: dict) -> dict:
        return {"answer": model.invoke([HumanMessage("hi")]).text}

    graph = StateGraph(dict).add_node("plain", node).add_edge(START, "plain").compile()
    (call,) = run_graph(graph, {"question": "q"}).calls
    assert (call.node, call.role, call.reply) == ("plain", None, "ok")


class FanOut(TypedDict, total=False):
    topics: list[str]
    notes: Annotated[list[str], operator.add]
    summary: str


def fan_out_graph() -> Any:
    def write(state: dict) -> dict:
        llm = marlang.chat_model("writer", ScriptedChatModel(reply_fn=lambda m: f"note on {m[-1].text}"))
        return {"notes": [llm.invoke([HumanMessage(state["topic"])]).text]}

    def summarize(state: FanOut) -> dict:
        llm = marlang.chat_model("summarizer", ScriptedChatModel(replies=["summary"]))
        return {"summary": llm.invoke([HumanMessage(" | ".join(sorted(state["notes"])))]).text}

    graph = StateGraph(FanOut)
    graph.add_node("write", write)
    graph.add_node("summarize", summarize)
    graph.add_conditional_edges(START, lambda s: [Send("write", {"topic": t}) for t in s["topics"]], ["write"])
    graph.add_edge("write", "summarize")
    graph.add_edge("summarize", END)
    return graph.compile()


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_send_fan_out_calls_are_attributed_to_their_node(run):
    inputs = {"topics": ["a", "b", "c"]}
    binding = Binding(prompts={"unused": "text"})
    graph = fan_out_graph()
    episode = run_graph(graph, inputs, binding) if run == "sync" else await arun_graph(graph, inputs, binding)
    assert not episode.failed and episode.output["summary"] == "summary"
    writes = [call for call in episode.calls if call.node == "write"]
    assert sorted(call.reply for call in writes) == ["note on a", "note on b", "note on c"]
    assert {call.role for call in writes} == {"writer"}  # the binding reached every branch
    assert [call.node for call in episode.calls][-1] == "summarize"
    assert episode.calls[-1].messages[0].text == "note on a | note on b | note on c"
    assert sorted(call.order for call in episode.calls) == [0, 1, 2, 3]


def test_a_subgraphs_calls_carry_the_path_of_nodes_down_to_them():
    def critique(state: dict) -> dict:
        llm = marlang.chat_model("critic", ScriptedChatModel(replies=["looks fine"]))
        return {"review": llm.invoke([HumanMessage(state["draft"])]).text}

    def draft(state: dict) -> dict:
        llm = marlang.chat_model("drafter", ScriptedChatModel(replies=["a draft"]))
        return {"draft": llm.invoke([HumanMessage("write")]).text}

    inner = StateGraph(dict).add_node("critic", critique).add_edge(START, "critic").compile()
    outer = StateGraph(dict).add_node("draft", draft).add_node("review", inner)
    outer = outer.add_edge(START, "draft").add_edge("draft", "review").compile()
    episode = run_graph(outer, {"question": "q"})
    assert [(c.node, c.path, c.role, c.reply) for c in episode.calls] == [
        ("draft", ("draft",), "drafter", "a draft"), ("critic", ("review", "critic"), "critic", "looks fine"),
    ]


def test_a_graph_that_raises_is_a_failed_episode_with_the_calls_before():
    def node(state: dict) -> dict:
        marlang.chat_model("solver", ScriptedChatModel(replies=["x"])).invoke([HumanMessage("q")])
        raise RuntimeError("the tool broke")

    graph = StateGraph(dict).add_node("solver", node).add_edge(START, "solver").compile()
    episode = run_graph(graph, {"question": "q"})
    assert episode.failed and episode.output is None
    assert episode.error == "RuntimeError: the tool broke"
    assert [call.node for call in episode.calls] == ["solver"]


def test_a_model_call_that_raises_is_recorded_with_its_error():
    def refuse(messages: list) -> str:
        raise ConnectionError("the server hung up")

    def node(state: dict) -> dict:
        return {"answer": marlang.chat_model("solver", ScriptedChatModel(reply_fn=refuse)).invoke("q").text}

    graph = StateGraph(dict).add_node("solver", node).add_edge(START, "solver").compile()
    episode = run_graph(graph, {"question": "q"})
    assert episode.error == "ConnectionError: the server hung up"
    (call,) = episode.calls
    assert (call.node, call.role, call.reply, call.error) == ("solver", "solver", "", episode.error)


async def test_a_graph_past_its_recursion_limit_is_a_failed_episode():
    def node(state: dict) -> dict:
        marlang.chat_model("looper", ScriptedChatModel(replies=["again"])).invoke([HumanMessage("q")])
        return {"turns": state.get("turns", 0) + 1}

    graph = StateGraph(dict).add_node("loop", node).add_edge(START, "loop").add_edge("loop", "loop").compile()
    episode = await arun_graph(graph, {"turns": 0}, recursion_limit=4)
    assert episode.failed and episode.error.startswith("GraphRecursionError: Recursion limit of 4 reached")
    assert len(episode.calls) == 4


def test_a_graph_that_calls_no_model_is_a_failed_episode_with_its_output():
    graph = StateGraph(dict).add_node("echo", lambda s: {"answer": s["question"]}).add_edge(START, "echo").compile()
    episode = run_graph(graph, {"question": "q"})
    assert episode.failed and episode.error == NO_MODEL_CALLED and episode.calls == []
    assert episode.output["answer"] == "q"


@pytest.mark.real_model
def test_the_embedded_model_plays_both_nodes_and_its_calls_are_recorded(smollm2_engine):
    model = load_chat_model("local:smollm2", engine=smollm2_engine, max_tokens=12, temperature=0.0)
    episode = run_graph(app.build_graph(), {"question": "Write a function that adds two numbers."},
                        Binding(models={"planner": model, "coder": model}))
    assert not episode.failed, episode.error
    planner, coder = episode.calls
    assert (planner.node, planner.role, coder.node, coder.role) == ("planner", "planner", "coder", "coder")
    assert planner.reply and coder.messages[-1].text == planner.reply == episode.output["plan"]
    assert coder.reply == episode.output["answer"]
    assert 0 < planner.output_tokens <= 12 and planner.input_tokens > 10


def test_an_episodes_record_is_json_with_each_call_by_node():
    binding = Binding(prompts={"coder": "Coder: write it."}, versions={"coder": 3})
    episode = run_graph(app.build_graph(), {"question": "add two numbers"}, binding)
    episode.input, episode.reward = "add two numbers", 0.5
    record = json.loads(json.dumps(episode.to_record(), allow_nan=False))
    assert {key: record[key] for key in ("input", "reward", "error")} == {
        "input": "add two numbers", "reward": 0.5, "error": None}
    assert record["output"] == {"question": "add two numbers", "plan": "Plan: add two numbers",
                                "answer": "Coder: Plan: add two numbers"}
    planner, coder = record["calls"]
    assert coder == {
        "order": 1, "node": "coder", "path": ["coder"], "role": "coder",
        "messages": [{"role": "system", "content": "Coder: write it."},
                     {"role": "user", "content": "Plan: add two numbers"}],
        "reply": "Coder: Plan: add two numbers", "input_tokens": 7, "output_tokens": 5,
        "latency_s": coder["latency_s"], "prompt_versions": {"coder": 3}, "error": None,
    }
    assert planner["node"] == "planner" and planner["latency_s"] > 0


class Unshowable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_record_holds_only_json_safe_text_of_what_the_graph_left():
    episode = GraphEpisode({"big": 10**30, "nan": math.nan, "text": "y" * 5000, "odd": Unshowable(), 3: [1, 2]},
                           error="ValueError: broke")
    episode.input = {"question": "q", "tests": ["assert f() == 1"]}
    record = episode.to_record()
    json.dumps(record, allow_nan=False)
    assert record["input"] == {"question": "q", "tests": "['assert f() == 1']"}
    assert record["output"]["big"] == str(10**30) and record["output"]["nan"] == "nan"
    assert record["output"]["text"] == "y" * 2000 + "...(3000 characters left out)"
    assert record["output"]["odd"] == "<Unshowable that cannot be shown>" and record["output"]["3"] == "[1, 2]"
    assert (record["reward"], record["error"], record["calls"]) == (None, "ValueError: broke", [])


async def test_the_sync_nodes_of_concurrent_runs_share_the_local_models_batches():
    engine = tiny_local_lm(batch_window_s=0.05, max_batch_wait_s=1.0)  # patient: a slow machine's threads still meet
    binding = Binding(model=tiny_chat_model(engine, max_tokens=4))
    questions = ["add two numbers", "sort a list", "reverse a string", "sum a list"]
    episodes = await asyncio.gather(*(arun_graph(app.build_graph(), {"question": q}, binding) for q in questions))
    assert all(not e.failed and len(e.calls) == 2 for e in episodes)
    assert engine.counters.requests_served == 2 * len(questions)
    assert engine.counters.generate_calls < 2 * len(questions)  # alone, each sync call is a batch of its own


async def test_the_sync_nodes_of_more_concurrent_runs_than_pythons_default_threads_run_at_once():
    """Python's default executor has CPUs + 4 threads (6 on two cores): 12 concurrent runs whose
    sync node waits for all twelve would wait forever; arun_graph widens the loop's executor."""
    import threading

    from langgraph.graph import END, START, StateGraph

    from marlang.usergraph.episode import NODE_THREADS

    runs = 12
    assert runs <= NODE_THREADS
    barrier = threading.Barrier(runs, timeout=20)

    def meet(state: dict) -> dict:
        barrier.wait()  # raises BrokenBarrierError if the twelve never run at once
        reply = ScriptedChatModel(reply_fn=lambda messages: "met").invoke([HumanMessage("hi")])
        return {"answer": reply.text}

    builder = StateGraph(dict)
    builder.add_node("meet", meet)
    builder.add_edge(START, "meet")
    builder.add_edge("meet", END)
    graph = builder.compile()
    episodes = await asyncio.gather(*(arun_graph(graph, {"question": str(i)}) for i in range(runs)))
    assert [e.error for e in episodes] == [None] * runs
