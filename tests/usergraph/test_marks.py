"""The marks: defaults outside a run (the user's app runs as before), bound values inside one,
each concurrent invocation in its own binding, discovery, and the conflict error."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

import marlang
from marlang.models import ResilientChatModel
from marlang.testing import ScriptedChatModel
from marlang.usergraph import ROLE_METADATA_KEY, Binding, bind, current_binding, declared_marks
from tests.usergraph import planner_coder_app as app

APP = Path(app.__file__)


def test_the_app_runs_standalone_with_its_marks():
    done = subprocess.run([sys.executable, str(APP)], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "Code: Plan: add two numbers"


def test_outside_a_run_the_marks_return_their_defaults():
    default = "You plan."
    model = ScriptedChatModel(replies=["x"])
    assert current_binding() is None
    assert marlang.prompt("outside", default) is default
    assert marlang.chat_model("outside", model) is model
    state = app.build_graph().invoke({"question": "sort a list"})
    assert state == {"question": "sort a list", "plan": "Plan: sort a list", "answer": "Code: Plan: sort a list"}


def test_a_spec_default_is_built_by_the_model_factory(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = marlang.chat_model("remote", "openai:gpt-4o-mini")
    assert isinstance(model, ResilientChatModel)


def test_a_spec_default_is_built_once_however_often_its_node_runs(monkeypatch):
    from marlang.models import factory

    built: list[str] = []

    def load(spec: str, **kwargs: object) -> ScriptedChatModel:
        built.append(spec)
        return ScriptedChatModel(replies=["ok"])

    monkeypatch.setattr(factory, "load_chat_model", load)
    monkeypatch.setattr("marlang.usergraph.marks._built", {})
    first = marlang.chat_model("once", "local:once-only")
    assert all(marlang.chat_model("once", "local:once-only") is first for _ in range(3))
    assert built == ["local:once-only"]


def test_inside_a_binding_the_marks_return_the_bound_values():
    bound = ScriptedChatModel(replies=["bound"])
    with bind(Binding(prompts={"planner": "Bound: plan."}, models={"planner": bound})):
        assert marlang.prompt("planner", "Plan: list the steps that solve the task.") == "Bound: plan."
        assert marlang.prompt("unbound", "its default") == "its default"
        model = marlang.chat_model("planner", app.DEFAULT_MODEL)
        # a copy carrying its role: the recorder's attribution, the bound model's answers
        assert model.metadata[ROLE_METADATA_KEY] == "planner"
        assert ROLE_METADATA_KEY not in (bound.metadata or {})
        assert model.invoke([HumanMessage("hi")]).text == "bound"
        assert marlang.chat_model("coder", app.DEFAULT_MODEL).invoke([HumanMessage("hi")]).text == "hi: hi"
    assert current_binding() is None


def test_a_role_plays_one_model_throughout_a_binding():
    with bind(Binding(models={"solver": ScriptedChatModel(replies=["first", "second"])})):
        replies = [marlang.chat_model("solver", app.DEFAULT_MODEL).invoke([HumanMessage("q")]).text for _ in range(2)]
        assert marlang.chat_model("other", app.DEFAULT_MODEL) is marlang.chat_model("other", app.DEFAULT_MODEL)
    assert replies == ["first", "second"]  # the scripted model's script goes on from call to call


async def test_concurrent_invocations_each_see_their_own_binding():
    graph = app.build_graph()

    async def invoke(word: str) -> dict:
        binding = Binding(prompts={"coder": f"{word}: code it."}, models={"planner": ScriptedChatModel(replies=[word])})
        with bind(binding):
            await asyncio.sleep(0.01)  # the other invocation binds in between
            return await graph.ainvoke({"question": "q"})

    red, blue = await asyncio.gather(invoke("red"), invoke("blue"))
    assert (red["plan"], red["answer"]) == ("red", "red: red")
    assert (blue["plan"], blue["answer"]) == ("blue", "blue: blue")


def test_threads_started_from_a_copied_context_see_its_binding():
    def read() -> str:
        return marlang.prompt("threaded", "default")

    with bind(Binding(prompts={"threaded": "bound"})):
        context = copy_context()
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(context.run, read).result() == "bound"
        assert pool.submit(read).result() == "default"


def test_a_graph_modules_marks_are_declared_once_its_nodes_ran():
    app.build_graph().invoke({"question": "q"})
    marks = declared_marks(app.__name__)
    assert {(mark.kind, mark.name) for mark in marks} == {
        ("chat_model", "planner"), ("prompt", "planner"), ("chat_model", "coder"), ("prompt", "coder"),
    }
    planner = next(mark for mark in marks if (mark.kind, mark.name) == ("prompt", "planner"))
    assert planner.default == "Plan: list the steps that solve the task." and planner.place.startswith(str(APP))
    assert ("chat_model", "ScriptedChatModel") in {(mark.kind, mark.default) for mark in marks}
    assert all(mark.module == app.__name__ for mark in marks)


def test_a_prompt_marked_twice_with_different_defaults_names_both_and_the_fix():
    first = "You answer in one short sentence, and you never repeat the question back."
    for _ in range(2):  # the same place again, and then another place with the same default
        marlang.prompt("twice", first)
    marlang.prompt("twice", first)
    with pytest.raises(ValueError) as raised:
        marlang.prompt("twice", "You answer at length.")
    message = str(raised.value)
    assert "\n" not in message
    assert first not in message and f"'{first[:50]}" in message  # truncated
    assert "'You answer at length.'" in message
    assert message.count(f"{__file__}:") == 2
    assert message.endswith("give both the same default or give one of them another name")


def test_two_apps_in_one_process_name_their_prompts_on_their_own(tmp_path, monkeypatch):
    # the test's own app and another top-level module both mark one name, each with its default
    marlang.prompt("planner_of_two_apps", "Plan as the first app does.")
    (tmp_path / "another_app.py").write_text(
        'import marlang\n\ntext = marlang.prompt("planner_of_two_apps", "Plan as the second app does.")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    other = importlib.import_module("another_app")
    assert other.text == "Plan as the second app does."
    with pytest.raises(ValueError, match="marked twice"):  # within one app the defaults must agree
        marlang.prompt("planner_of_two_apps", "Plan otherwise.")
