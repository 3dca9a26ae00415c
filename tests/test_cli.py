import subprocess
import sys
from pathlib import Path

from marlang.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_listing_commands(capsys):
    assert main(["envs"]) == 0
    assert "babyai/pickup" in capsys.readouterr().out
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    assert all(p in out for p in ["none", "bidirectional", "unidirectional", "alternating"])
    assert main(["models"]) == 0
    assert "local:smollm2" in capsys.readouterr().out


def test_invalid_config_exits_with_one_line_and_no_traceback(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("protocol: {name: shouting}\n")
    proc = subprocess.run([sys.executable, "-m", "marlang.cli", "run", str(cfg)], capture_output=True, text=True, check=False,
                          cwd=ROOT)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "protocol.name" in lines[0] and "valid choices: none, bidirectional" in lines[0]


def test_unknown_override_key(capsys):
    assert main(["run", str(ROOT / "configs/demo.yaml"), "--set", "run.episods=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown config key 'run.episods'" in err and "episodes" in err


def test_scripted_comparison_table_and_report(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", str(ROOT / "configs/babyai_scripted.yaml"), "--no-reference",
                 "--set", "run.episodes=2", "--out", str(out)])
    assert code == 0
    table = (out / "table.md").read_text()
    # One setting on four levels: one table with a row per level.
    assert table.startswith("## scripted (model: scripted)")
    for env_id in ["babyai/goto-obj", "babyai/pickup", "babyai/unlock-pickup", "babyai/put-next"]:
        assert f"| {env_id} " in table
    assert (out / "summary.json").is_file()
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "babyai/put-next" in capsys.readouterr().out


def test_run_and_resume_commands(tmp_path, capsys):
    out = tmp_path / "run"
    config = tmp_path / "one.yaml"  # a single run: the scripted config without its grid
    config.write_text("env: {id: babyai/goto-obj}\nagents: {kind: scripted}\nrun: {name: one}\n")
    args = ["run", str(config), "--set", "run.episodes=2", "--out", str(out)]
    assert main(args) == 0
    assert "run directory" in capsys.readouterr().out
    assert main(args) == 2  # refuses to overwrite
    assert "--resume" in capsys.readouterr().err
    assert main(["run", "--resume", str(out), "--set", "run.episodes=3"]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3


def test_run_of_a_grid_config_prints_one_row_per_overcooked_layout(tmp_path, capsys):
    out = tmp_path / "kitchens"
    args = ["run", str(ROOT / "configs/overcooked_scripted.yaml"), "--set", "run.episodes=2", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("| overcooked/")]
    assert len(rows) == 5
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        mean_return = float(cells[5].split(" ± ")[0])
        assert mean_return > 0, row
    assert main(args) == 0  # a rerun resumes: every run is finished, same table
    assert capsys.readouterr().out.count("| overcooked/") == 5
