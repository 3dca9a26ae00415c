"""IPPO, QMIX and VDN end to end through ``marlang run`` on the climbing game, an interrupted
run continuing from BenchMARL's checkpoint, and the shipped neural configs validating."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from benchmarl.experiment.callback import Callback

from marlang.cli import main
from marlang.config import build_config
from marlang.evaluation.compare import expand_grid
from marlang.run import run_experiment as train

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
SHORT = {"frames": 400, "frames_per_batch": 200, "n_envs": 2, "hidden": [16], "evaluation_episodes": 2}
OWN_KEYS = {"ippo": {"epochs": 2, "minibatch_size": 100}, "qmix": {"optimizer_steps": 10},
            "vdn": {"optimizer_steps": 10}}


@pytest.mark.parametrize("method", ["ippo", "qmix", "vdn"])
def test_method_runs_end_to_end_from_the_cli(method, tmp_path, capsys):
    config = {"env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
              "learning": {"method": method, **SHORT, **OWN_KEYS[method]}, "run": {"seed": 1}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 0
    assert f"| {method} " in capsys.readouterr().out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["learner"] == method and summary["episodes"] == 2 and summary["frames"] == 400
    assert [r["frames"] for r in summary["iterations"]] == [200, 400]
    loss = "loss_objective" if method == "ippo" else "loss"  # what each method's loss reports
    assert all(isinstance(r[loss], float) for r in summary["iterations"])
    # Greedy 25-step episodes of the climbing game: some joint payoff, 25 times.
    assert summary["return"]["mean"] / 25 in {11, -30, 0, 7, 6, 5}


class StopAfter(Callback):
    """Interrupts training while iteration ``iteration`` updates (as Ctrl-C would)."""

    def __init__(self, iteration: int) -> None:
        super().__init__()
        self.iteration = iteration

    def on_train_end(self, training_td, group):
        if self.experiment.n_iters_performed == self.iteration:
            raise KeyboardInterrupt


def test_interrupted_run_continues_from_the_checkpoint(tmp_path):
    config = build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
        "learning": {"method": "mappo", **SHORT, "frames": 600, "checkpoint_batches": 1, "epochs": 1,
                     "minibatch_size": 200},
    })
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(config, out, callbacks=[StopAfter(2)])
    assert json.loads((out / "neural_state.json").read_text())["status"] == "training"
    assert not (out / "summary.json").exists()
    result = train(config, out, resume=True)
    assert result.episodes_run == 2
    assert [r["frames"] for r in result.summary["iterations"]] == [200, 400, 600]
    # One BenchMARL experiment folder, restored, holding the checkpoint of every batch.
    (folder,) = (out / "benchmarl").iterdir()
    assert {p.name for p in (folder / "checkpoints").iterdir()} >= {"checkpoint_400.pt", "checkpoint_600.pt"}
    # Stopped after training but before its evaluation, the loop's checkpoint lost with it:
    # the run starts its loop afresh, and the learner's update picks up from its own state
    # (restores the final checkpoint and only evaluates, with the same greedy policy).
    (out / "neural_state.json").write_text(json.dumps({"status": "trained"}))
    (out / "summary.json").unlink()
    (out / "checkpoints.sqlite").unlink()
    iterations = (out / "iterations.csv").read_text()
    again = train(config, out, resume=True)
    assert again.summary["return"] == result.summary["return"] and again.episodes_run == 2
    assert (out / "iterations.csv").read_text() == iterations


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("neural_*.yaml")))
def test_shipped_neural_configs_validate(name):
    data = yaml.safe_load((CONFIGS / name).read_text())
    base = build_config(data)
    assert base.agents.kind == "neural"
    settings = expand_grid(data, [(k, list(v)) for k, v in base.grid.items()], reference=False)
    methods = {s.config.learning.method for s in settings}
    assert methods == {"mappo", "ippo", "qmix", "vdn"}
    assert len({s.config.run.seed for s in settings}) >= 3


class _RunsOnLoad:
    """Unpickled, it runs ``command`` (what a planted checkpoint would do)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        import os

        return os.system, (self.command,)


def test_a_planted_checkpoint_is_refused_not_unpickled_by_a_resume_or_a_neural_slot(tmp_path, monkeypatch):
    import torch

    from marlang.config import ConfigError
    from marlang.methods.neural.slot_policy import NeuralPolicy

    config = build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
        "learning": {"method": "mappo", **SHORT, "checkpoint_batches": 1, "epochs": 1, "minibatch_size": 200},
    })
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(config, out, callbacks=[StopAfter(1)])
    (checkpoint,) = (out / "benchmarl").glob("*/checkpoints/checkpoint_*.pt")
    marker = tmp_path / "ran"
    torch.save(_RunsOnLoad(f"touch {marker}"), checkpoint)
    # BenchMARL's own restore leaves weights_only to torch, which this variable turns off
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(ConfigError, match=rf"refused to load {checkpoint}: .* could run code"):
        train(config, out, resume=True)
    with pytest.raises(ConfigError, match=rf"could not restore {checkpoint}: refused to load"):
        NeuralPolicy.load(str(checkpoint), config, "team.agent_0.checkpoint")
    assert not marker.exists()
