"""Building a run of a user's graph: ``graph.prompts`` starts marked prompts from given texts
(what the run plays and a learner rewrites), and a name the app does not mark is one line."""

from __future__ import annotations

from typing import Any

import pytest

from marlang.config import ConfigError, build_config
from marlang.run.experiment import Experiment
from marlang.rundir import RunDirectory
from marlang.testing import ScriptedChatModel

APP = "tests.run.graph_app"


def config(prompts: dict[str, str]) -> Any:
    return build_config({
        "graph": {"build": f"{APP}:build_graph", "input": "question", "output": "answer", "prompts": prompts},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:score"},
        "run": {"episodes": 2, "parallel": 2, "progress": False},
    })


def test_a_run_plays_the_prompt_texts_the_config_gives_and_the_defaults_of_the_others(tmp_path):
    model = ScriptedChatModel(reply_fn=lambda messages: "GOOD" if messages[0].text == "Code it well." else "bad")
    result = Experiment(config({"coding": "Code it well."}), tmp_path / "run", chat_model=model).run()
    episodes = RunDirectory(result.run_dir).load_episode_dicts()
    systems = [(s["info"]["node"], s["observations"][a]["text"].split("\n")[0])
               for e in episodes for s in e["steps"] for a in s["observations"]]
    assert set(systems) == {("planner", "system: Plan the steps."), ("coder", "system: Code it well.")}
    assert all(e["return"] == 1.0 for e in episodes)


def test_a_prompt_name_the_app_does_not_mark_is_one_line_naming_the_marked_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"^graph.prompts: 'cdoing' is not a prompt tests.run.graph_app:build_graph "
                                          r"marks; its marked prompts: planning, coding$"):
        Experiment(config({"cdoing": "x"}), tmp_path / "run", chat_model=ScriptedChatModel()).run()
    assert not (tmp_path / "run").exists()
