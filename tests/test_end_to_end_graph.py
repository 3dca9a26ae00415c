"""A user's own LangGraph graph trained end to end on the embedded SmolLM2-135M by each method
that trains a graph (tests/run/graph_app.py: a planner and a coder, each with a marked prompt
and a marked model), at the smallest sizes that still run every stage; and every example
config of examples/configs/ valid, its graph built and its marks found."""

from __future__ import annotations

from pathlib import Path

import pytest

from marlang.config import build_config, load_config
from marlang.run.experiment import Experiment
from marlang.rundir import RunDirectory
from marlang.usergraph import app_marks

ROOT = Path(__file__).resolve().parent.parent
APP = "tests.run.graph_app"
LEARNING = {
    "langmarl": {"iterations": 1, "rollouts": 1, "critic_max_tokens": 48, "update_max_tokens": 32},
    "grpo": {"iterations": 1, "rollouts": 1, "num_generations": 2, "max_new_tokens": 8, "eval_episodes": 0},
    "magrpo": {"iterations": 1, "rollouts": 1, "num_generations": 2, "max_new_tokens": 8, "eval_episodes": 0},
}


@pytest.mark.real_model
@pytest.mark.parametrize("method", list(LEARNING))
def test_each_method_trains_the_graph_on_the_embedded_model(tmp_path, method):
    cfg = build_config({
        "graph": {"build": f"{APP}:build_graph", "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:length_score"},
        "model": {"spec": "local:smollm2", "max_tokens": 8, "cache": False},
        "learning": {"method": method, **LEARNING[method]},
        "run": {"progress": False},
    })
    result = Experiment(cfg, tmp_path / "run").run()
    rd = RunDirectory(result.run_dir)
    episodes = rd.load_episode_dicts()
    assert episodes and all([s["info"]["node"] for s in e["steps"]] == ["planner", "coder"] for e in episodes)
    if method == "langmarl":
        assert {u["agent"] for u in rd.read_jsonl("updates.jsonl")} == {"planning", "coding"}
    else:
        trained = ["shared"] if method == "grpo" else ["planner", "coder"]
        assert all((rd.path / "adapters" / "0" / name / "adapter_config.json").exists() for name in trained)
        assert rd.read_iterations()[0]["completions"] == 4  # G=2 runs x 2 marked models


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_config_is_valid_and_names_a_graph_that_builds(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the configs name examples.* from the repository root, as their commands run
    config = load_config(path)
    assert config.plays_graph and config.learning.method in path.stem
    assert config.graph is not None and config.task is not None
    config.graph.build_graph()
    marks = app_marks(config.graph.build)
    trained = marks.models if config.learning.method in ("grpo", "magrpo") else marks.prompts
    assert len(trained) >= 2
