"""What a neural run prints: no ANSI colour codes or library deprecation warnings, rounded
returns, a table without the LLM columns; Ctrl-C names the trained batches it keeps."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml
from benchmarl.experiment.callback import Callback

from marlang.cli import main
from marlang.tables.report import markdown_table, summarize_episodes

ROOT = Path(__file__).resolve().parents[3]
SHORT = {"method": "mappo", "frames": 400, "frames_per_batch": 200, "n_envs": 2, "hidden": [16],
         "evaluation_episodes": 2, "epochs": 1, "minibatch_size": 200}


def climbing_config(tmp_path: Path, **learning) -> Path:
    path = tmp_path / "neural.yaml"
    path.write_text(yaml.safe_dump({"env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
                                    "learning": {**SHORT, **learning}, "run": {"seed": 1}}))
    return path


def test_a_neural_run_prints_no_colour_codes_or_warnings_and_a_table_without_llm_columns(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "marlang.cli", "run", str(climbing_config(tmp_path)),
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout + proc.stderr
    assert "\x1b[" not in output
    assert "Warning" not in output
    returns = re.findall(r"mean return = (-?[\d.]+)", output)
    assert returns and all(len(r.partition(".")[2]) <= 3 for r in returns), returns
    header = next(line for line in proc.stdout.splitlines() if line.startswith("| setting"))
    assert "return" in header and "LLM calls" not in header and "tokens" not in header
    assert "success" not in header  # the climbing game has a payoff, no notion of success


def test_tables_leave_out_success_where_no_env_knows_it_and_llm_columns_where_no_llm_plays():
    rows = [{"episode": 0, "success": False, "steps": 25, "return": 1.5, "decisions": 50, "invalid_actions": 0,
             "invalid_rate": 0.0, "llm_calls": 0, "tokens_in": 0, "tokens_out": 0}]
    neural = {**summarize_episodes(rows), "agents": "neural", "success_defined": False}
    table = markdown_table({"mappo": neural})
    assert "success rate" not in table and "steps when solved" not in table and "LLM calls" not in table
    llm = {**summarize_episodes(rows), "model": "local:smollm2"}
    table = markdown_table({"mappo": {**neural, "success_defined": True}, "none, reflexion": llm})
    assert "success rate" in table and "LLM calls/ep" in table


class StopAfter(Callback):
    """Interrupts training after its first batch (as Ctrl-C would)."""

    def on_train_end(self, training_td, group):
        if self.experiment.n_iters_performed == 1:
            raise KeyboardInterrupt


def test_ctrl_c_of_a_neural_run_names_the_trained_batches_it_keeps(tmp_path, capsys, monkeypatch):
    from marlang.methods.neural import learner

    original = learner.BenchmarlTraining.__init__

    def with_stop(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.callbacks.append(StopAfter())

    monkeypatch.setattr(learner.BenchmarlTraining, "__init__", with_stop)
    out = tmp_path / "run"
    assert main(["run", str(climbing_config(tmp_path, checkpoint_batches=1)), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "trained batch(es) are kept" in err and "0 finished episode(s)" not in err
    assert f"marlang run --resume {out}" in err

    # the resume keeps the manifest's original start and command and appends its own
    import json

    first = json.loads((out / "manifest.json").read_text())
    monkeypatch.setattr(learner.BenchmarlTraining, "__init__", original)
    assert main(["run", str(climbing_config(tmp_path, checkpoint_batches=1)), "--resume", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["started"], manifest["command"]) == (first["started"], first["command"])
    assert len(manifest["resumes"]) == 1 and manifest["resumes"][0]["at"]

    # a finished neural run: the way to go on is a new directory, not run.episodes
    capsys.readouterr()
    assert main(["run", "--resume", str(out)]) == 0
    said = capsys.readouterr().out
    assert "nothing left to do" in said and "learning.frames" in said and "run.episodes" not in said
