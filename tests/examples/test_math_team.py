"""examples/math_team.py: the solver -> checker graph plays its bound models and prompts, builds
its default model where unbound, is the plain app plus its marks, its reward is the math env's
answer check, and it answers a problem standalone on the embedded model."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from marlang.config.graph import GraphSpec, TaskSpec
from marlang.envs import make
from marlang.testing import ScriptedChatModel
from marlang.usergraph import Binding, run_graph
from marlang.usergraph.task import play_task
from tests.examples.example_apps import EXAMPLES, load_example, load_unmarked

app = load_example("math_team")
ITEM = app.problems()[0]  # C(5, 2): 10
INPUT = {"problem": ITEM["problem"]}  # what a config's `graph.input: problem` gives the graph


def team(messages: Sequence[BaseMessage]) -> str:
    """Both roles, scripted: the solver slips, the checker corrects it."""
    if messages[0].text.startswith("You solve"):
        return "5 * 4 = 20, so \\boxed{20}"
    return "20 counts ordered pairs; halved: \\boxed{10}" if "\\boxed{20}" in messages[-1].text else "\\boxed{0}"


def test_the_graph_plays_its_bound_models_and_prompts_node_by_node():
    models = {role: ScriptedChatModel(reply_fn=team) for role in ("solver", "checker")}
    binding = Binding(prompts={"checker": "You check: \\boxed{} it."}, models=models)
    episode = run_graph(app.build_graph(), INPUT, binding)
    assert not episode.failed, episode.error
    assert [(call.node, call.role) for call in episode.calls] == [("solver", "solver"), ("checker", "checker")]
    assert episode.calls[1].messages[0].text == "You check: \\boxed{} it."
    assert set(episode.output) == {"problem", "solution", "answer"}  # no reference answer
    assert app.score(ITEM, episode.output["answer"], episode) == 1.0
    assert app.score(ITEM, episode.output["solution"]) == 0.0


def test_unbound_every_node_plays_the_default_model_built_once(monkeypatch):
    built: list[str] = []

    def load_chat_model(spec: str) -> ScriptedChatModel:
        built.append(spec)
        return ScriptedChatModel(reply_fn=team)

    monkeypatch.setattr("marlang.models.factory.load_chat_model", load_chat_model)
    monkeypatch.setattr("marlang.usergraph.marks._built", {})
    output = app.build_graph().invoke(INPUT)
    assert built == ["local:smollm2"]  # built once, played by every node
    assert app.score(ITEM, output["answer"]) == 1.0


def test_the_app_is_the_plain_graph_plus_its_marks():
    """The file with its marks taken out, on the scripted team, gives what the file gives with
    every mark bound to its default."""
    plain, prompts, roles = load_unmarked("math_team", lambda spec: ScriptedChatModel(reply_fn=team))
    assert set(prompts) == set(roles) == {"solver", "checker"}
    unmarked = plain.build_graph().invoke(INPUT)
    models = {role: ScriptedChatModel(reply_fn=team) for role in roles}
    marked = run_graph(app.build_graph(), INPUT, Binding(prompts=prompts, models=models))
    assert marked.output == unmarked
    assert "\\boxed{10}" in unmarked["answer"]


def test_a_task_spec_plays_and_scores_the_app():
    """The names a config gives (graph.build, input, output; task.data, reward) play the app."""
    graph = GraphSpec(build="math_team:build_graph", input="problem", output="answer")
    task = TaskSpec(data="math_team:problems", reward="math_team:score")
    models = {role: ScriptedChatModel(reply_fn=team) for role in ("solver", "checker")}
    episodes = play_task(graph, task, binding=Binding(models=models))
    assert [episode.error for episode in episodes] == [None] * 3
    assert [episode.reward for episode in episodes] == [1.0, 0.0, 0.0]  # only C(5, 2) is 10


def test_marlang_is_imported_only_by_the_reward_and_the_data():
    tree = ast.parse((EXAMPLES / "math_team.py").read_text())
    importers = {
        function.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("marlang")
    }
    assert importers == {"score", "_math"}


def test_the_score_is_the_math_envs_answer_check():
    env = make("math/math", n_agents=1, max_steps=1, data_files=app.DATA_FILES)
    replies = ["\\boxed{10}", "The answer is 10.", "\\boxed{\\frac{20}{2}}", "\\boxed{10.0}", "\\boxed{11}",
               "The answer is 11.", "\\boxed{<answer>}", "", "10", " 10\n", "11"]
    for item in app.problems():
        for reply in replies:
            env.reset(options={"problem": item["task_id"]})
            _, _, _, _, infos = env.step({"agent_0": reply})
            assert app.score(item, reply) == float(infos["agent_0"]["correct"]), (item, reply)
    env.close()


def test_an_output_that_only_claims_to_be_the_answer_scores_nothing():
    class Agrees(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

        def __str__(self) -> str:
            return "\\boxed{10}"

        def strip(self, chars: str | None = None) -> str:
            return "10"

    item = app.problems()[0]  # its answer is 10
    assert app.score(item, Agrees("anything")) == 0.0
    assert app.score(item, Agrees("\\boxed{10}")) == 1.0  # a subclass scores what its text says
    assert app.score(item, 10) == 0.0  # type: ignore[arg-type]


@pytest.mark.real_model
def test_the_app_answers_a_problem_standalone_on_the_embedded_model():
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "math_team.py"), "--max-tokens", "24"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict in ("correct: 0", "correct: 1"), done.stdout
