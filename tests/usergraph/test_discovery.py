"""Discovery of an app's marks from its source: names, defaults and places of the example apps
and of a packaged test app, the marks it cannot know before they run, the conflict error, and
that nothing of the app is imported or run."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from marlang.testing import ScriptedChatModel
from marlang.usergraph import Binding, declared_marks, run_graph
from marlang.usergraph.discovery import AppMarks, DeclaredMark, app_marks
from tests.examples.example_apps import EXAMPLES, load_example, load_unmarked
from tests.usergraph import planner_coder_app

TESTS = Path(__file__).resolve().parents[1]
APP = TESTS / "usergraph" / "discovery_app"


def line_of(path: Path, text: str) -> str:
    """``path:line`` of the one line of ``path`` holding ``text``."""
    lines = [number for number, line in enumerate(path.read_text().splitlines(), start=1) if text in line]
    assert len(lines) == 1, (text, lines)
    return f"{path}:{lines[0]}"


def write(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(source))


def test_the_planner_coder_app_is_read_alone_from_its_package():
    path = Path(planner_coder_app.__file__)
    marks = app_marks("tests.usergraph.planner_coder_app:build_graph")
    assert marks.prompt_defaults() == {
        "planner": "Plan: list the steps that solve the task.",
        "coder": "Code: write the Python function that follows the plan.",
    }
    assert marks.prompts["coder"] == DeclaredMark(
        "prompt", "coder", "Code: write the Python function that follows the plan.",
        line_of(path, 'marlang.prompt("coder"'))
    assert list(marks.models) == ["planner", "coder"]
    assert marks.models["planner"] == DeclaredMark(
        "chat_model", "planner", None, line_of(path, 'marlang.chat_model("planner"'))
    # the package's other modules (the tests beside it mark prompts of their own) are not the app
    assert marks.files == (str(TESTS / "__init__.py"), str(TESTS / "usergraph" / "__init__.py"), str(path))
    assert marks.dynamic == ()


@pytest.mark.parametrize("stem", ["humaneval_team", "math_team"])
def test_an_example_script_gives_the_marks_its_unmarked_copy_takes_out(stem):
    load_example(stem)
    _, prompts, roles = load_unmarked(stem, lambda spec: ScriptedChatModel(replies=["x"]))
    marks = app_marks(f"{stem}:build_graph")
    assert marks.prompt_defaults() == prompts
    assert list(marks.prompts) == list(prompts)
    assert list(marks.models) == roles
    assert marks.files == (str(EXAMPLES / f"{stem}.py"),)
    assert all(mark.place.startswith(f"{EXAMPLES / stem}.py:") for mark in marks.prompts.values())


def test_a_packaged_app_is_read_through_its_imports_aliases_and_keywords():
    marks = app_marks("tests.usergraph.discovery_app.graph:build_graph")
    assert marks.prompt_defaults() == {
        "outliner": "You plan. List the steps.",  # adjacent literals, by keyword
        "implementer": "Write the code.",
        "signature": "# written by the implementer\n",
    }
    assert marks.prompts["outliner"].place == line_of(APP / "graph.py", "ml.prompt(")
    # the same name and default at a second place is one mark, at the first place found
    assert marks.prompts["implementer"].place == line_of(APP / "nodes.py", 'P("implementer"')
    defaults = {role: mark.default for role, mark in marks.models.items()}
    assert defaults == {"outliner": None, "implementer": "local:smollm2"}
    assert marks.models["outliner"].place == line_of(APP / "graph.py", "ml.chat_model(")
    assert marks.dynamic == (
        line_of(APP / "nodes.py", 'P(f"tool_'),
        line_of(APP / "review.py", "ug.chat_model(ROLE"),
        line_of(APP / "review.py", 'prompt("inspector", RUBRIC)'),
    )
    # reached by a relative import, a function-local import and a package's __init__; never unused.py
    assert [Path(file).name for file in marks.files] == [
        "__init__.py", "__init__.py", "__init__.py", "graph.py", "nodes.py", "review.py"]


def test_discovered_places_are_where_the_running_marks_report_themselves():
    marks = app_marks("tests.usergraph.discovery_app.graph:build_graph")
    from tests.usergraph.discovery_app.graph import build_graph

    model = ScriptedChatModel(reply_fn=lambda messages: "ok")
    episode = run_graph(build_graph(), {"question": "sum a list"}, Binding(models={"implementer": model}))
    assert episode.error is None
    ran = {(mark.kind, mark.name, mark.place): mark.default for mark in declared_marks()}
    for mark in [*marks.prompts.values(), *marks.models.values()]:
        assert (mark.kind, mark.name, mark.place) in ran
        if mark.kind == "prompt":
            assert ran[mark.kind, mark.name, mark.place] == mark.default
    assert set(marks.dynamic) <= {place for _, _, place in ran}


def test_nothing_of_the_app_is_imported_and_a_file_that_does_not_parse_is_skipped(tmp_path, monkeypatch):
    write(tmp_path, {
        "disc_untouched/__init__.py": "raise RuntimeError('imported')\n",
        "disc_untouched/app.py": """
            import marlang
            from disc_untouched import broken
            from disc_untouched.nodes import act

            def build_graph():
                return marlang.prompt("actor", "Act.")
        """,
        "disc_untouched/nodes.py": """
            from marlang import chat_model as cm

            def act(*args):
                return cm(role="actor", default="openai:gpt-4o-mini"), cm(*args)
        """,
        "disc_untouched/broken.py": "def (:\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    marks = app_marks("disc_untouched.app:build_graph")
    assert not [name for name in sys.modules if name.startswith("disc_untouched")]
    assert marks.prompt_defaults() == {"actor": "Act."}
    assert marks.models["actor"].default == "openai:gpt-4o-mini"
    assert marks.dynamic == (f"{tmp_path / 'disc_untouched' / 'nodes.py'}:5",)  # cm(*args)
    assert [Path(file).name for file in marks.files] == ["__init__.py", "app.py", "nodes.py"]


def test_a_script_is_read_with_the_modules_it_imports_beside_it(tmp_path, monkeypatch):
    write(tmp_path, {
        "disc_script.py": """
            import disc_script_nodes
            from marlang.usergraph import prompt

            def build_graph():
                return prompt("judge", "Judge."), disc_script_nodes
        """,
        "disc_script_nodes.py": "import marlang as m\nTEXT = m.prompt('writer', 'Write.')\n",
        "disc_script_other.py": "import marlang\nTEXT = marlang.prompt('other', 'Other.')\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    marks = app_marks("disc_script:build_graph")
    assert marks.prompt_defaults() == {"judge": "Judge.", "writer": "Write."}
    assert marks.files == (str(tmp_path / "disc_script.py"), str(tmp_path / "disc_script_nodes.py"))


def test_a_prompt_marked_twice_with_different_defaults_is_refused_as_the_running_marks_refuse_it(
        tmp_path, monkeypatch):
    write(tmp_path, {
        "disc_conflict/__init__.py": "",
        "disc_conflict/a.py": """
            import marlang
            from disc_conflict.b import second

            def build_graph():
                return marlang.prompt("planner", "Plan briefly."), second()
        """,
        "disc_conflict/b.py": """
            from marlang import prompt

            def second():
                return prompt("planner", "Plan in detail.")
        """,
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as found:
        app_marks("disc_conflict.a:build_graph")
    app = tmp_path / "disc_conflict"
    places = f"'Plan briefly.' at {app / 'a.py'}:6 and 'Plan in detail.' at {app / 'b.py'}:5"
    assert places in str(found.value)
    assert "give both the same default or give one of them another name" in str(found.value)
    from disc_conflict.a import build_graph

    try:
        with pytest.raises(ValueError) as ran:
            build_graph()
    finally:
        for name in [name for name in sys.modules if name.startswith("disc_conflict")]:
            del sys.modules[name]
    assert str(found.value) == str(ran.value)


@pytest.mark.parametrize(("entry_point", "says"), [
    ("disc_nowhere", "must look like 'package.module:function'"),
    ("disc_nowhere:build", "has no Python source"),
    ("tests.usergraph.no_such_module:build", "has no Python source"),
])
def test_a_builder_without_a_source_is_refused_in_one_line(entry_point, says):
    with pytest.raises(ValueError, match=says):
        app_marks(entry_point)


def test_an_app_without_marks_has_nothing_to_train(tmp_path, monkeypatch):
    write(tmp_path, {"disc_plain.py": "def build_graph():\n    return None\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    marks = app_marks("disc_plain:build_graph")
    assert marks == AppMarks(prompts={}, models={}, files=(str(tmp_path / "disc_plain.py"),))
