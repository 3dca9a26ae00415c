"""`GraphSpec` and `TaskSpec`: what a config names is checked in one line naming the fix, under
the trust rules of every config-named import path, before anything is played."""

from __future__ import annotations

import sys

import pytest

from marlang.config.sections import ConfigError
from marlang.registry import trusting_imports, untrusted_config
from marlang.usergraph import GraphSpec, TaskSpec
from tests.usergraph import task_app

APP = "tests.usergraph.task_app"


def graph(build: str = "build_graph", **keys: object) -> GraphSpec:
    return GraphSpec.from_mapping({"build": f"{APP}:{build}", "input": "question", "output": "answer", **keys})


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_graph_spec_builds_the_compiled_graph_with_its_keys():
    spec = graph(recursion_limit=5)
    assert spec.recursion_limit == 5 and graph().recursion_limit == 25
    compiled = spec.build_graph()
    assert compiled.invoke({"question": "q"})["answer"] == "Code: Plan: q"


@pytest.mark.parametrize(("mapping", "expected"), [
    ({"build": f"{APP}:build_graph", "input": "question", "output": "answer", "outptu": "x"},
     ("unknown config key 'graph.outptu' (did you mean 'output'?); valid keys here: build, input, output, "
     "recursion_limit, prompts")),
    ({"build": f"{APP}:build_graph", "input": "question"}, "graph.output is missing; give graph.output"),
    ({"build": f"{APP}:build_graph", "input": "question", "output": "answer", "recursion_limit": True},
     "invalid value for 'graph.recursion_limit': true is a boolean, not a number; give a number"),
    ({"build": "task_app.build_graph", "input": "question", "output": "answer"},
     "graph.build 'task_app.build_graph' must look like 'package.module:function'"),
])
def test_a_wrong_graph_section_is_one_line_naming_the_key(mapping, expected):
    with pytest.raises(ConfigError) as error:
        GraphSpec.from_mapping(mapping)
    assert one_line(error) == expected


@pytest.mark.parametrize(("build", "expected"), [
    ("tests.usergraph.no_such_app:build_graph",
     ("cannot load entry point 'tests.usergraph.no_such_app:build_graph' (ModuleNotFoundError: No module named "
     "'tests.usergraph.no_such_app')")),
    (f"{APP}:no_such_builder", "cannot load entry point"),
    ("textwrap:dedent", "is function textwrap.dedent: a function of Python's standard library"),
    (f"{APP}:ANSWERS", "is dict builtins.dict: not a Python function"),
])
def test_a_builder_path_that_is_no_builder_function_is_refused_at_validation(build, expected):
    with pytest.raises(ConfigError) as error:
        GraphSpec.from_mapping({"build": build, "input": "question", "output": "answer"})
    assert one_line(error).startswith("graph.build ") and expected in str(error.value)


@pytest.mark.parametrize(("build", "expected"), [
    ("uncompiled", "returned a StateGraph that is not compiled; call .compile() on it and return the compiled graph"),
    ("not_a_graph", "returned dict builtins.dict, not a compiled LangGraph graph; return graph.compile()"),
    ("broken_builder", "raised RuntimeError: no API key"),
])
def test_a_builder_that_gives_no_compiled_graph_is_one_line(build, expected):
    with pytest.raises(ConfigError) as error:
        graph(build).build_graph()
    assert one_line(error) == f"graph.build '{APP}:{build}' {expected}"


def test_a_state_key_the_graph_lacks_is_named_with_the_keys_it_has():
    with pytest.raises(ConfigError) as error:
        graph(input="questoin").build_graph()
    assert one_line(error) == ("graph.input 'questoin' is not a key of the graph's input state (did you mean "
                               "'question'?); its input keys: question, plan, answer")
    with pytest.raises(ConfigError) as error:
        graph(output="code").build_graph()
    assert one_line(error) == "graph.output 'code' is not a key of the graph's output state; its output keys: " \
                              "question, plan, answer"


def task(data: str = "problems", reward: str = "score") -> TaskSpec:
    return TaskSpec.from_mapping({"data": f"{APP}:{data}", "reward": f"{APP}:{reward}"})


def test_a_task_spec_loads_its_items_and_reward():
    spec = task()
    assert spec.load_items("question") == task_app.problems()
    assert spec.reward_function() is task_app.score


@pytest.mark.parametrize(("data", "expected"), [
    ("empty_data", ("returned an empty list; return a non-empty list of inputs (each a str, or a mapping holding "
                   "'question')")),
    ("mapping_data", "returned dict builtins.dict; return a non-empty list of inputs"),
    ("numbers_data", ": item 1 is int builtins.int; give a str or a mapping holding 'question'"),
    ("keyless_data", ": item 0 has no key 'question' (graph.input); its keys: 'prompt'"),
])
def test_data_that_is_not_a_non_empty_list_of_inputs_is_one_line(data, expected):
    with pytest.raises(ConfigError) as error:
        task(data).load_items("question")
    assert one_line(error).startswith(f"task.data '{APP}:{data}'") and expected in str(error.value)


def test_a_reward_that_takes_no_item_output_and_episode_is_refused():
    with pytest.raises(ConfigError) as error:
        task(reward="one_argument_reward")
    assert one_line(error) == (f"task.reward '{APP}:one_argument_reward' is "
                               f"function {APP}.one_argument_reward: a function of 1 positional parameters, not 3; "
                               "name a function taking 3 arguments defined in that module")


def test_a_config_read_from_a_directory_imports_nothing_it_names():
    module = "tests.usergraph.never_imported_app"
    with untrusted_config("RUN/config.yaml") as refused, pytest.raises(ConfigError) as error:
        GraphSpec.from_mapping({"build": f"{module}:build", "input": "question", "output": "answer"})
    assert one_line(error).startswith(f"graph.build '{module}:build' is an import path in RUN/config.yaml")
    assert "--trust-imports" in str(error.value)
    assert refused == [f"{module}:build"] and module not in sys.modules
    with untrusted_config("RUN/config.yaml"), trusting_imports():
        assert task().data == f"{APP}:problems"
