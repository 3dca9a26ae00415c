"""MAPPO on the climbing game through ``Experiment``: it learns past a uniform-random team, writes
the same run directory as LLM runs (comparable in one table), and a finished run never retrains."""

from __future__ import annotations

import json

import pytest

from marlang.cli import main
from marlang.config import ConfigError, build_config
from marlang.evaluation.compare import write_comparison
from marlang.run import Experiment
from marlang.tables.report import markdown_table

RANDOM_TEAM_RETURN = 25 * (-31 / 9)
"""A uniform-random team's expected return: 25 steps of the payoff matrix's mean."""

LEARNING = {
    "method": "mappo", "frames": 5000, "frames_per_batch": 1000, "n_envs": 4, "lr": 5e-3,
    "hidden": [32, 32], "epochs": 4, "minibatch_size": 250, "evaluation_episodes": 4,
}


def climbing_config(**learning):
    return build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
        "learning": {**LEARNING, **learning}, "run": {"seed": 0, "name": "climbing-mappo"},
    })


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("neural") / "mappo"
    result = Experiment(climbing_config(), out).run()
    return out, result


def test_mappo_learns_past_a_random_team(trained):
    _, result = trained
    summary = result.summary
    assert summary["return"]["mean"] >= RANDOM_TEAM_RETURN + 180  # greedy policy: 100 or more
    rows = summary["iterations"]
    # The sampling policy improves too (an untrained greedy policy can be lucky; this cannot).
    assert rows[-1]["return_mean"] >= rows[0]["return_mean"] + 50
    assert rows[-1]["return_mean"] > RANDOM_TEAM_RETURN + 100


def test_run_directory_matches_llm_runs(trained):
    out, result = trained
    for name in ("config.yaml", "manifest.json", "iterations.csv", "metrics.csv", "summary.json",
                 "learning_curve.png"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["device"] == "cpu" and manifest["learner"] == "mappo"
    assert {"benchmarl", "torchrl", "tensordict", "torch"} <= set(manifest["versions"])
    rows = result.summary["iterations"]
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["frames"] for r in rows] == [1000, 2000, 3000, 4000, 5000]
    assert all(r["episodes"] == 40 and float(r["return_low"]) < float(r["return_high"]) for r in rows)
    assert all(r["train_reward_mean"] == r["env_reward_mean"] for r in rows)  # no hook
    assert all(r["loss_objective"] is not None and r["loss_critic"] is not None for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 4 and summary["setting"] == "mappo" and summary["learner"] == "mappo"
    assert summary["frames"] == 5000 and summary["model"] == "mlp-32x32"
    metrics = (out / "metrics.csv").read_text().splitlines()
    assert len(metrics) == 1 + 4 and all(",eval," in line for line in metrics[1:])
    # BenchMARL's own outputs: its logs and its checkpoint at the end.
    assert list((out / "benchmarl").glob("*/checkpoints/checkpoint_5000.pt"))
    assert list((out / "benchmarl").rglob("scalars/*.csv"))
    # One table with LLM and scripted rows takes it as it is.
    table = markdown_table({summary["setting"]: summary})
    assert "| mappo " in table and "4 " in table
    comparison = write_comparison(out.parent)
    assert "mappo" in comparison.summaries["matrix/climbing"]


def test_finished_run_is_not_retrained(trained, capsys):
    out, result = trained
    before = (out / "iterations.csv").read_text()
    checkpoints = sorted((out / "benchmarl").rglob("*.pt"))
    again = Experiment(climbing_config(), out, resume=True).run()
    assert again.episodes_run == 0
    assert again.summary["return"] == result.summary["return"]
    assert (out / "iterations.csv").read_text() == before
    assert sorted((out / "benchmarl").rglob("*.pt")) == checkpoints
    with pytest.raises(ConfigError, match="already holds a run"):
        Experiment(climbing_config(), out).run()
    assert main(["report", str(out)]) == 0
    assert "| mappo " in capsys.readouterr().out
