"""`marlang compare`, `marlang crossplay` and the cost of a run of a user's own LangGraph graph:
rows grouped by the graph with no scripted reference, seeds pooled, the swapped-seed check and a
cross-play that swap one marked prompt's trained text across runs, and the refusals in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from marlang.config import ConfigError, build_config
from marlang.evaluation.compare import expand_grid
from marlang.evaluation.crossplay import parse_players, plan_crossplay
from marlang.rundir import RunDirectory
from marlang.tables.cost import run_cost
from marlang.testing import ScriptedChatModel
from tests.fakes import role_of

APP = "tests.run.graph_app"
PLAYED = f"graph:{APP}:build_graph"


def base(**run: Any) -> dict[str, Any]:
    return {"graph": {"build": f"{APP}:build_graph", "input": "question", "output": "answer"},
            "task": {"data": f"{APP}:problems", "reward": f"{APP}:score"},
            "model": {"spec": "local:smollm2"},
            "run": {"episodes": 4, "parallel": 2, "progress": False, **run}}


def reply(messages: Any) -> str:
    """Every model of the run: a node answers GOOD only under a coding prompt that says NEW; the
    learner's critic credits each prompt and its optimizer rewrites it."""
    role = role_of(messages)
    if role == "critic":
        return '{"planning": "the plan was fine", "coding": "the code missed the task"}'
    if role == "optimizer":
        return "NEW coding: write code that solves the task."
    if role != "actor":
        return "Be more careful."
    return "GOOD code" if messages[0].text.startswith("NEW coding") else f"reply to {messages[-1].text}"


@pytest.fixture
def scripted(monkeypatch):
    """Every model a comparison or a cross-play builds is the scripted one."""
    import marlang.evaluation.compare as compare_module
    import marlang.run.build as build_module
    import marlang.run.graph_build as graph_build_module

    def build(model_config: Any) -> Any:
        return ScriptedChatModel(reply_fn=reply), None

    for module in (compare_module, build_module, graph_build_module):
        monkeypatch.setattr(module, "build_chat_model", build)


def test_a_grid_over_a_graphs_learners_is_grouped_by_the_graph_without_a_scripted_reference():
    settings = expand_grid(base(), [("learning.method", ["none", "langmarl"]), ("graph.recursion_limit", [9])])
    assert [(s.group, s.name) for s in settings] == [
        (PLAYED, "graph, static, graph.recursion_limit=9"), (PLAYED, "graph, langmarl, graph.recursion_limit=9")]


def test_a_grid_over_a_graphs_learners_keeps_a_key_of_none_of_them_and_names_it():
    # a graph's run that names no method plays and records: the grid's methods are none and
    # langmarl, so reflexion's memory_size belongs to neither and is refused, not dropped unsaid
    with pytest.raises(ConfigError, match="memory_size"):
        expand_grid({**base(), "learning": {"memory_size": 3}}, [("learning.method", ["none", "langmarl"])])


def test_compare_over_seeds_pools_a_graphs_runs_and_cross_plays_its_prompts_across_seeds(scripted, tmp_path, capsys):
    from marlang.cli import main

    config = tmp_path / "graph.yaml"
    config.write_text(yaml.safe_dump({**base(), "learning": {"method": "none", "rollouts": 2}}))
    out = tmp_path / "cmp"
    args = ["compare", str(config), "--seeds", "0,1", "--grid", "learning.method=none,langmarl",
            "--crossplay-episodes", "2", "--out", str(out)]
    assert main(args) == 0
    said = capsys.readouterr()
    assert "4 cells x 2 episodes = 8 episodes" in said.err and "held-out" not in said.err
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {PLAYED, "score_vs_cost"}
    rows = summary[PLAYED]
    assert set(rows) == {"graph, static (2 seeds)", "graph, langmarl (2 seeds)"}  # no scripted team's row
    assert all(row["episodes"] == 8 and set(row["seeds"]) == {"0", "1"} for row in rows.values())
    assert rows["graph, langmarl (2 seeds)"]["return"]["mean"] == 0.5  # the second iteration's prompt solves
    assert rows["graph, static (2 seeds)"]["return"]["mean"] == 0.0
    assert f"## {PLAYED} (model: local:smollm2)" in (out / "table.md").read_text()
    # the swapped-seed check: each seed's first prompt beside the other prompts of every seed
    check = out / "crossplay" / "graph--langmarl--2-seeds-"
    found = json.loads((check / "crossplay.json").read_text())
    assert found["slots"] == ["planning", "coding"] and found["graph"] == f"{APP}:build_graph"
    assert all(found["return"][i][j]["n"] == 2 for i in ("seed 0", "seed 1") for j in ("seed 0", "seed 1"))
    states = {seed: json.loads((out / f"graph--langmarl--run.seed-{seed}" / "learner_state.json").read_text())
              for seed in (0, 1)}
    cell = yaml.safe_load((check / "seed-0---seed-1" / "config.yaml").read_text())
    assert cell["graph"]["prompts"] == {"planning": states[0]["policies"]["planning"],
                                        "coding": states[1]["policies"]["coding"]}
    assert cell["learning"]["method"] == "none" and "inputs of the task per cell" in (check / "table.md").read_text()
    played = sorted(path.stat().st_mtime_ns for path in out.glob("**/episodes.jsonl"))
    assert len(played) == 8 and main(args) == 0  # a rerun resumes the runs and the check: nothing played again
    assert sorted(path.stat().st_mtime_ns for path in out.glob("**/episodes.jsonl")) == played


def _graph_run(path: Path, policies: dict[str, str] | None, method: str = "langmarl", build: str = "build_graph",
               adapters: bool = False, memories: dict[str, list[str]] | None = None) -> Path:
    """A run directory of the graph as a trained run leaves it: its config and learner state."""
    path.mkdir(parents=True)
    data = base()
    data["graph"]["build"] = f"{APP}:{build}"
    data["learning"] = {"method": method}
    (path / "config.yaml").write_text(build_config(data).to_yaml())
    if policies is not None:
        state: dict[str, Any] = {"policies": policies, "memories": memories or {}}
        if adapters:
            state["adapters"] = {"planner": {"hash": "h"}}
        (path / "learner_state.json").write_text(json.dumps(state))
    return path


def test_crossplay_plays_one_runs_first_prompt_beside_anothers_other_prompts(scripted, tmp_path):
    from marlang.cli import main

    a = _graph_run(tmp_path / "a", {"planning": "Plan like A.", "coding": "NEW coding: solve it."})
    b = _graph_run(tmp_path / "b", {"planning": "Plan like B.", "coding": "Write anything."})
    config = tmp_path / "graph.yaml"
    config.write_text(yaml.safe_dump(base()))
    out = tmp_path / "xp"
    args = ["crossplay", str(config), "--players", f"A={a}", f"B={b}", "base", "--episodes", "2", "--out", str(out)]
    assert main(args) == 0
    found = json.loads((out / "crossplay.json").read_text())
    means = {i: {j: found["return"][i][j]["mean"] for j in ("A", "B", "base")} for i in ("A", "B", "base")}
    # the coding prompt (the partners' slot) decides the reward: A's solves, B's and the default do not
    assert means == {i: {"A": 1.0, "B": 0.0, "base": 0.0} for i in ("A", "B", "base")}
    assert found["levels"] == 2 and found["gap"]["players"].keys() == {"A", "B", "base"}
    (episode, *_) = RunDirectory(out / "B---A").load_episode_dicts()
    read = {s["info"]["node"]: s["observations"][a]["text"].split("\n")[0]
            for s in episode["steps"] for a in s["observations"]}
    assert read == {"planner": "system: Plan like B.", "coder": "system: NEW coding: solve it."}
    (episode, *_) = RunDirectory(out / "base---B").load_episode_dicts()
    assert episode["steps"][0]["observations"]["planning"]["text"].startswith("system: Plan the steps.")
    assert (out / "table.md").read_text().startswith("## Cross-play")
    played = sorted(path.stat().st_mtime_ns for path in out.glob("*/episodes.jsonl"))
    assert main(args) == 0  # a rerun resumes every cell (nothing left to play) and rebuilds the same matrix
    assert json.loads((out / "crossplay.json").read_text())["return"] == found["return"]
    assert sorted(path.stat().st_mtime_ns for path in out.glob("*/episodes.jsonl")) == played


def test_a_reflexion_run_plays_its_lessons_after_the_text_its_prompt_starts_from(tmp_path):
    memory = _graph_run(tmp_path / "r", {}, method="reflexion", memories={"coding": ["Test first.", "Be brief."]})
    given = {**base(), "graph": {**base()["graph"], "prompts": {"coding": "Code it."}}}
    _, grid, _ = plan_crossplay(given, [f"R={memory}", "base"], 2, str(tmp_path / "xp"))
    cells = {value["name"]: value["graph.prompts"] for value in grid[0][1]}
    lessons = "Code it.\n\nLessons from your earlier episodes:\n- Test first.\n- Be brief."
    assert cells == {"R / R": {"coding": lessons}, "R / base": {}, "base / R": {"coding": lessons}, "base / base": {}}
    assert yaml.safe_load((tmp_path / "xp" / "crossplay.yaml").read_text())["players"][0]["what"] == "reflexion memory"


def test_a_graph_player_that_does_not_fit_is_refused_in_one_line(tmp_path):
    trained = _graph_run(tmp_path / "t", {"planning": "p", "coding": "c"})
    with pytest.raises(ConfigError, match="'scripted': a graph has no scripted team; give NAME=RUN_DIR, or base"):
        parse_players([f"X={trained}", "scripted"], PLAYED, 2)
    other = _graph_run(tmp_path / "o", {"planning": "p"}, build="problems_with_a_crash")
    with pytest.raises(ConfigError, match=f"trained on graph:{APP}:problems_with_a_crash; this cross-play plays "
                                          f"{PLAYED} \\(give players of that graph\\)"):
        parse_players([f"X={other}", "base"], PLAYED, 2)
    static = _graph_run(tmp_path / "s", None, method="none")
    with pytest.raises(ConfigError, match="a static run \\(learning.method none\\) commits no update"):
        parse_players([f"X={static}", "base"], PLAYED, 2)
    weights = _graph_run(tmp_path / "w", {}, adapters=True)
    with pytest.raises(ConfigError, match="its nodes' adapters \\(langmarl\\) are not cross-played; crossplay swaps "
                                          "a graph's marked prompts"):
        parse_players([f"X={weights}", "base"], PLAYED, 2)
    env_run = tmp_path / "env"
    env_run.mkdir()
    (env_run / "config.yaml").write_text(yaml.safe_dump({"env": {"id": "babyai/goto-obj", "n_agents": 2}}))
    with pytest.raises(ConfigError, match=f"trained on babyai/goto-obj; this cross-play plays {PLAYED} "):
        parse_players([f"X={env_run}", "base"], PLAYED, 2)
    with pytest.raises(ConfigError, match=f"trained on {PLAYED}; this cross-play plays babyai/goto-obj "
                                          "\\(give players of that env\\)"):
        parse_players([f"X={trained}", "base"], "babyai/goto-obj", 2)  # and a graph's run in an env's


ONE_PROMPT_APP = """
from typing import TypedDict

import marlang
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    question: str
    answer: str


def answer(state):
    return {"answer": marlang.prompt("solving", "Solve it.") + state["question"]}


def build_graph():
    graph = StateGraph(State)
    graph.add_node("solver", answer)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", END)
    return graph.compile()


def problems():
    return ["1 + 1"]


def score(item, output, episode):
    return 0.0
"""


def test_a_graph_with_one_marked_prompt_has_nothing_to_swap(tmp_path, monkeypatch):
    (tmp_path / "one_prompt_app.py").write_text(ONE_PROMPT_APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    one = {"graph": {"build": "one_prompt_app:build_graph", "input": "question", "output": "answer"},
           "task": {"data": "one_prompt_app:problems", "reward": "one_prompt_app:score"}}
    with pytest.raises(ConfigError, match="^crossplay swaps a graph's marked prompts, one beside the others; "
                                          "graph:one_prompt_app:build_graph marks 1 \\(solving\\): mark two or more"):
        plan_crossplay(one, ["base", "other=x"], 2, str(tmp_path / "xp"))
    assert not (tmp_path / "xp").exists()


def test_a_graph_runs_cost_counts_each_nodes_calls_under_its_marked_role_and_report_says_its_columns(
        scripted, tmp_path, capsys):
    from marlang.cli import main
    from marlang.run.experiment import Experiment

    result = Experiment(build_config({**base(), "learning": {"method": "langmarl", "rollouts": 2}}),
                        tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=reply)).run()
    cost = run_cost(result.run_dir)
    assert cost["by_role"]["planner"]["llm_calls"] == 4 and cost["by_role"]["coder"]["llm_calls"] == 4
    assert cost["by_role"]["critic"]["llm_calls"] == 4  # the learner's own, one per episode, beside the nodes'
    assert cost["llm_calls"] == sum(role["llm_calls"] for role in cost["by_role"].values())
    assert result.summary["cost"]["llm_calls"] == cost["llm_calls"]
    capsys.readouterr()
    assert main(["report", str(result.run_dir)]) == 0
    shown = capsys.readouterr().out
    assert f"## {PLAYED}" in shown and "| graph, langmarl " in shown and "4 (4 levels)" in shown
    assert "steps are its chat-model calls, levels the distinct inputs of its task" in shown
