"""UsageRecorder: one row per call with role/agent/episode, tokens, latency, cache hits."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path
from typing import TypedDict

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage
from langgraph.graph import START, StateGraph

from marlang.agents.calls import invoke_model
from marlang.models import LocalLM, SQLiteResponseCache, UsageRecorder
from marlang.models.accounting import AGENT_KEY, CSV_FIELDS, ROLE_KEY
from marlang.testing import TINY_MODEL_ID, ScriptedChatModel, tiny_chat_model
from marlang.types import CallContext


def config(rec: UsageRecorder, role: str, agent: str, episode: int) -> dict:
    return {
        "callbacks": [rec],
        "metadata": {
            "marlang_role": role,
            "marlang_agent": agent,
            "marlang_episode": episode,
            "marlang_step": 2,
        },
    }


async def test_rows_carry_metadata_tokens_and_model(tiny_engine: LocalLM) -> None:
    rec = UsageRecorder()
    model = tiny_chat_model(tiny_engine, max_tokens=4)
    replies = await asyncio.gather(
        model.ainvoke([HumanMessage("go")], config=config(rec, "actor", "agent_0", 3)),
        model.ainvoke([HumanMessage("hello")], config=config(rec, "speaker", "agent_1", 3)),
    )
    rows = sorted(rec.rows, key=lambda r: r.agent)
    assert [(r.role, r.agent, r.episode, r.step) for r in rows] == [
        ("actor", "agent_0", 3, 2),
        ("speaker", "agent_1", 3, 2),
    ]
    for row, reply in zip(rows, replies, strict=True):
        assert row.model == TINY_MODEL_ID
        assert row.input_tokens == reply.usage_metadata["input_tokens"] > 0
        assert row.output_tokens == 4
        assert row.latency_s > 0 and not row.cached and row.error == ""


def test_cache_hits_are_recorded_as_cached(tmp_path: Path, tiny_engine: LocalLM) -> None:
    rec = UsageRecorder()
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    model = tiny_chat_model(tiny_engine, max_tokens=4, cache=cache)
    for _ in range(2):
        model.invoke([HumanMessage("go")], config=config(rec, "actor", "agent_0", 0))
    served, hit = rec.rows
    assert not served.cached and hit.cached
    assert hit.output_tokens == served.output_tokens  # the response still reports its size
    assert hit.latency_s < served.latency_s
    totals = rec.totals_by_role()["actor"]
    assert totals["calls"] == 2 and totals["cached"] == 1
    # Tokens count every answered call, so a replay reports the same token use.
    assert totals["input_tokens"] == 2 * served.input_tokens
    assert totals["output_tokens"] == 2 * served.output_tokens
    assert totals["latency_s"] == pytest.approx(served.latency_s)


def test_totals_by_role_and_episode() -> None:
    rec = UsageRecorder()
    model = ScriptedChatModel(replies=["go forward now"])  # 3 output "tokens"
    for episode, role in [(0, "actor"), (0, "speaker"), (1, "actor"), (1, "actor")]:
        model.invoke([HumanMessage("one two")], config=config(rec, role, "agent_0", episode))
    model.invoke([HumanMessage("no metadata")], config={"callbacks": [rec]})
    by_role = rec.totals_by_role()
    assert by_role["actor"]["calls"] == 3 and by_role["actor"]["output_tokens"] == 9
    assert by_role["speaker"]["input_tokens"] == 2
    assert by_role["unknown"]["calls"] == 1
    by_episode = rec.totals_by_episode()
    assert by_episode[0]["calls"] == 2 and by_episode[1]["calls"] == 2
    assert by_episode[None]["calls"] == 1
    assert rec.totals()["calls"] == 5


def test_errors_are_recorded() -> None:
    def fail(_messages: object) -> str:
        raise RuntimeError("backend exploded")

    rec = UsageRecorder()
    model = ScriptedChatModel(reply_fn=fail)
    with pytest.raises(RuntimeError):
        model.invoke([HumanMessage("x")], config=config(rec, "critic", "", 0))
    (row,) = rec.rows
    assert row.error == "RuntimeError: backend exploded"
    assert rec.totals_by_role()["critic"]["errors"] == 1


def test_append_csv_writes_each_row_once(tmp_path: Path) -> None:
    rec = UsageRecorder()
    model = ScriptedChatModel(replies=["ok"])
    path = tmp_path / "llm_calls.csv"
    model.invoke([HumanMessage("a")], config=config(rec, "actor", "agent_0", 0))
    model.invoke([HumanMessage("b")], config=config(rec, "actor", "agent_1", 0))
    assert rec.append_csv(path) == 2
    assert rec.append_csv(path) == 0
    model.invoke([HumanMessage("c")], config=config(rec, "reflector", "agent_0", 1))
    assert rec.append_csv(path) == 1
    # A new recorder (e.g. a resumed run) appends to the existing file without a header.
    other = UsageRecorder()
    model.invoke([HumanMessage("d")], config=config(other, "actor", "agent_0", 2))
    other.append_csv(path)
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert path.read_text().count("input_tokens") == 1
    assert [r["agent"] for r in rows] == ["agent_0", "agent_1", "agent_0", "agent_0"]
    assert [r["episode"] for r in rows] == ["0", "0", "1", "2"]
    assert list(rows[0]) == list(CSV_FIELDS)


def test_recorder_is_safe_under_concurrent_calls() -> None:
    rec = UsageRecorder()
    model = ScriptedChatModel(replies=["a b"])
    inputs = [[HumanMessage(f"q{i}")] for i in range(40)]
    model.batch(inputs, config=config(rec, "actor", "agent_0", 0), max_concurrency=8)

    async def run_async() -> None:
        await model.abatch(inputs, config=config(rec, "actor", "agent_0", 1))

    asyncio.run(run_async())
    assert len(rec.rows) == 80
    assert rec.totals_by_episode()[0]["output_tokens"] == 80


class Planned(TypedDict, total=False):
    question: str
    plan: str


def test_a_call_of_a_users_graph_is_the_agent_of_its_node() -> None:
    rec = UsageRecorder()
    model = FakeListChatModel(responses=["a plan"])

    def planner(state: Planned) -> Planned:
        return {"plan": model.invoke([HumanMessage(state["question"])]).text}

    graph = StateGraph(Planned).add_node("planner", planner).add_edge(START, "planner").compile()
    graph.invoke({"question": "add two numbers"}, {"callbacks": [rec]})
    (row,) = rec.rows
    assert (row.role, row.agent) == ("unknown", "planner")


class FakeMetadataSpy(BaseCallbackHandler):
    """Keeps the callback metadata of every chat-model call it sees."""

    def __init__(self) -> None:
        self.metadata: list[dict] = []

    def on_chat_model_start(self, serialized: dict, messages: list, *, metadata: dict | None = None,
                            **kwargs: object) -> None:
        self.metadata.append(dict(metadata or {}))


async def test_a_marlang_call_in_a_graph_node_keeps_the_agent_it_names_even_none() -> None:
    rec, spy = UsageRecorder(), FakeMetadataSpy()
    model = ScriptedChatModel(replies=["ok"])

    async def critic(state: Planned) -> Planned:
        # tagged as invoke_model tags a learner's and an actor's calls, under the graph's callbacks
        for role, agent in [("critic", ""), ("actor", "agent_0")]:
            await model.ainvoke([HumanMessage("q")], config={"metadata": {ROLE_KEY: role, AGENT_KEY: agent}})
        await invoke_model(model, [HumanMessage("q")], CallContext(callbacks=[rec]), role="critic", max_tokens=4)
        return {"plan": "credited"}

    graph = StateGraph(Planned).add_node("critic", critic).add_edge(START, "critic").compile()
    await graph.ainvoke({"question": "q"}, {"callbacks": [rec, spy]})
    assert [m.get("langgraph_node") for m in spy.metadata] == ["critic", "critic"]  # the node was there to take
    assert [(row.role, row.agent) for row in rec.rows] == [("critic", ""), ("actor", "agent_0"), ("critic", "")]
