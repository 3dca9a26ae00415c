"""`marlang run` on a user's own LangGraph graph (``graph:`` and ``task:``): every node call
recorded as an episode's step, the reward on the episode, failures counted and the run going on,
LangMARL rewriting each marked prompt from its own credit, a crash resumed without replaying
what finished, and one-line refusals that create nothing."""

from __future__ import annotations

import asyncio
import csv
from typing import Any

import pytest

from marlang.config import ConfigError, build_config
from marlang.run.experiment import Experiment
from marlang.rundir import RunDirectory
from marlang.tables.report import table_rows
from marlang.testing import ScriptedChatModel
from tests.fakes import role_of

APP = "tests.run.graph_app"


def config(learning: dict[str, Any] | None = None, data: str = "problems", **sections: Any) -> Any:
    return build_config({
        "graph": {"build": f"{APP}:build_graph", "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:{data}", "reward": f"{APP}:score"},
        "learning": learning or {"method": "none"},
        "run": {"episodes": 4, "parallel": 2, "progress": False},
        **sections,
    })


def actor(messages: Any) -> str:
    """The run's model in every node: answers GOOD only under a rewritten coder prompt."""
    system = messages[0].text
    return "GOOD code" if system.startswith("NEW coding") else f"reply to {messages[-1].text}"




def learner_rule(messages: Any) -> str:
    role = role_of(messages)
    if role == "critic":
        return '{"planning": "the plan was fine", "coding": "the code missed the task"}'
    if role == "optimizer":
        agent = "coding" if "coding" in messages[-1].text[:400] else "planning"
        return f"NEW {agent}: write code that solves the task."
    return "Be more careful."


def test_a_graph_run_records_each_node_call_with_the_reward(tmp_path):
    result = Experiment(config(), tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=actor)).run()
    rd = RunDirectory(result.run_dir)
    episodes = rd.load_episode_dicts()
    assert len(episodes) == 4
    for episode in episodes:
        assert episode["env_id"] == f"graph:{APP}:build_graph" and episode["agents"] == ["planning", "coding"]
        nodes = [step["info"]["node"] for step in episode["steps"]]
        assert nodes == ["planner", "coder"]
        first = episode["steps"][0]["observations"]["planning"]
        assert first["text"].startswith("system: Plan the steps.\nuser: task ")  # the prompt's default text
        assert episode["steps"][1]["decisions"]["coding"]["action"].startswith("reply to reply to task ")
        assert episode["return"] == 0.0 and episode["metrics"]["failed"] is False
    with open(rd.path / "llm_calls.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["episode"], r["agent"], r["role"]) for r in rows) == sorted(
        (str(e), node, node) for e in range(4) for node in ("planner", "coder"))
    assert result.summary["env_id"] == f"graph:{APP}:build_graph"
    assert (rd.path / "manifest.json").exists() and "graph:" in rd.read_json("manifest.json")["env_id"]


def test_a_failing_input_is_a_failed_episode_counted_in_the_table_and_the_run_goes_on(tmp_path):
    cfg = config(data="problems_with_a_crash", run={"episodes": 8, "parallel": 4, "progress": False})
    result = Experiment(cfg, tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=actor)).run()
    episodes = RunDirectory(result.run_dir).load_episode_dicts()
    failed = [e for e in episodes if e["metrics"]["failed"]]
    assert len(episodes) == 8 and failed and len(failed) < 8
    for episode in failed:
        assert episode["metrics"]["error"] == "RuntimeError: the coder's tool crashed"
        assert [s["info"]["node"] for s in episode["steps"]] == ["planner"]  # the calls before the crash
    assert result.summary["failed_episodes"] == len(failed)
    assert f"{len(failed)} failed" in table_rows({"graph": result.summary})[0][1]


def test_langmarl_rewrites_each_marked_prompt_from_its_own_credit_and_plays_it(tmp_path):
    cfg = config({"method": "langmarl", "iterations": 2, "rollouts": 2})
    learner = ScriptedChatModel(reply_fn=learner_rule)
    result = Experiment(cfg, tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=actor),
                        learner_model=learner).run()
    rd = RunDirectory(result.run_dir)
    updates = [u for u in rd.read_jsonl("updates.jsonl") if u["iteration"] == 0]
    credits = {u["agent"]: [t["credit"] for t in u["trajectories"]] for u in updates}
    assert credits == {"planning": ["the plan was fine"] * 2, "coding": ["the code missed the task"] * 2}
    state = rd.read_json("learner_state.json")
    assert state["policies"]["coding"].startswith("NEW coding")
    later = [e for e in rd.load_episode_dicts() if e["iteration"] == 1]
    assert later and all(e["policy_versions"]["coding"] == 1 for e in later)
    assert all(e["return"] == 1.0 for e in later)  # the rewritten prompt is what the node read
    assert result.summary["policies"]["coding"]["initial"] == "Write the code."


class Crash(RuntimeError):
    pass


def test_a_crash_mid_update_resumes_without_playing_or_asking_again(tmp_path):
    cfg = config({"method": "langmarl", "iterations": 1, "rollouts": 2})

    class Crashing(ScriptedChatModel):
        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            if role_of(messages) == "gradient":
                await asyncio.sleep(0)
                raise Crash("the learner's server went away")
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    actors = ScriptedChatModel(reply_fn=actor)
    with pytest.raises(Crash):
        Experiment(cfg, tmp_path / "run", chat_model=actors, learner_model=Crashing(reply_fn=learner_rule)).run()
    played = len(RunDirectory(tmp_path / "run").load_episode_dicts())
    assert played == 2
    asked: list[Any] = []

    def recording(messages: Any) -> str:
        asked.append(messages)
        return learner_rule(messages)

    again_actors, learner = ScriptedChatModel(reply_fn=actor), ScriptedChatModel(reply_fn=recording)
    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=again_actors, learner_model=learner).run()
    assert again_actors.calls == 0  # no episode played again
    assert not any(role_of(m) == "critic" for m in asked)  # no finished critic call asked again
    assert any(role_of(m) == "gradient" for m in asked)
    assert len(RunDirectory(result.run_dir).load_episode_dicts()) == 2
    assert RunDirectory(result.run_dir).read_json("learner_state.json")["iteration"] == 1


def test_a_graph_config_with_a_section_of_marlangs_own_teams_is_one_line():
    with pytest.raises(ConfigError, match="env: a run of a graph plays graph.build over task.data"):
        config(env={"id": "babyai/goto-obj"})


def test_a_method_that_cannot_train_a_graph_is_one_line_with_the_valid_ones():
    with pytest.raises(ConfigError, match="learning.method 'ppo' does not train a graph; valid choices for a "
                                          "graph: none, reflexion, langmarl, grpo, magrpo"):
        config({"method": "ppo"})


def test_a_graph_without_a_task_is_one_line():
    with pytest.raises(ConfigError, match="graph: give task:"):
        build_config({"graph": {"build": f"{APP}:build_graph", "input": "question", "output": "answer"}})


def test_training_a_graph_that_marks_no_prompt_is_one_line_and_creates_nothing(tmp_path):
    cfg = build_config({
        "graph": {"build": "tests.run.unmarked_app:build_graph", "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:score"},
        "learning": {"method": "langmarl"}, "run": {"progress": False},
    })
    with pytest.raises(ConfigError, match=r"marks none; mark each prompt to train with marlang.prompt"):
        Experiment(cfg, tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=actor)).run()
    assert not (tmp_path / "run").exists()


def test_a_graph_with_no_marks_is_played_and_recorded_by_node(tmp_path):
    cfg = build_config({
        "graph": {"build": "tests.run.unmarked_app:build_graph", "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:score"}, "run": {"episodes": 2, "progress": False},
    })
    result = Experiment(cfg, tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=actor)).run()
    episodes = RunDirectory(result.run_dir).load_episode_dicts()
    assert [[(s["info"]["node"], s["decisions"]["answer"]["action"]) for s in e["steps"]] for e in episodes] == [
        [("answer", "an answer")]] * 2  # the app's own model: it marks none for the run to bind
    assert all(e["agents"] == [] and not e["metrics"]["failed"] for e in episodes)


def test_reflexion_keeps_a_memory_per_marked_prompt_that_its_nodes_read_next(tmp_path):
    reflector = ScriptedChatModel(reply_fn=lambda m: f"LESSON for {m[0].text[:13]}")
    result = Experiment(config({"method": "reflexion", "iterations": 2, "rollouts": 2}), tmp_path / "run",
                        chat_model=ScriptedChatModel(reply_fn=actor), learner_model=reflector).run()
    rd = RunDirectory(result.run_dir)
    state = rd.read_json("learner_state.json")
    assert state["memories"]["planning"][0] == "LESSON for Plan the step"  # written from the prompt's own text
    assert state["memories"]["coding"][0] == "LESSON for Write the cod"
    later = [e for e in rd.load_episode_dicts() if e["iteration"] == 1]
    planner_text = later[0]["steps"][0]["observations"]["planning"]["text"]
    assert "Lessons from your earlier episodes:\n- LESSON for Plan the step" in planner_text
    assert "LESSON for Write" not in planner_text  # each node reads its own prompt's lessons


def test_a_marked_model_role_that_marlangs_own_calls_use_is_one_line_and_creates_nothing(tmp_path):
    cfg = build_config({
        "graph": {"build": "tests.run.clash_app:build_graph", "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:score"}, "run": {"progress": False},
    })
    with pytest.raises(ConfigError, match=r"marks a chat model with the role 'critic', which marlang's own calls"):
        Experiment(cfg, tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=actor)).run()
    assert not (tmp_path / "run").exists()
