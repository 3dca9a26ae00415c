"""An output folder (``--out``) that cannot take what a command writes is refused in one line
before anything is written: a link to nothing, a run directory (even one that lost its
config.yaml) given to a comparison or a cross-play."""

import json

import pytest

from marlang.cli import main
from marlang.config import ConfigError
from marlang.evaluation.crossplay import CROSSPLAY_FILE, plan_crossplay
from tests.cli.test_cli_errors import ONE_RUN, one_line, write
from tests.evaluation.test_crossplay import _base

COMMANDS = {
    "run": lambda config, out: ["run", str(config), "--out", str(out)],
    "run of a grid": lambda config, out: ["run", str(config), "--set", "run.seeds=[0,1]", "--out", str(out)],
    "compare": lambda config, out: ["compare", str(config), "--grid", "env.max_steps=1,2", "--no-reference",
                                    "--out", str(out)],
    "crossplay": lambda config, out: ["crossplay", str(config), "--players", "scripted", "base", "--out", str(out)],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_out_on_a_link_to_nothing_is_one_line_and_creates_nothing(tmp_path, capsys, command):
    config = write(tmp_path / "one.yaml", ONE_RUN)
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "nowhere")
    assert main(COMMANDS[command](config, out)) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--out {out} is a symbolic link" in line and "does not exist" in line
    assert not (tmp_path / "nowhere").exists() and out.is_symlink()


@pytest.fixture
def run(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(write(tmp_path / "one.yaml", ONE_RUN)), "--out", str(out)]) == 0
    capsys.readouterr()
    return out


@pytest.mark.parametrize("lost", [None, "config.yaml"])
def test_a_comparison_into_a_run_directory_is_refused_even_without_its_config(run, tmp_path, capsys, lost):
    if lost:
        (run / lost).unlink()
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    config = write(tmp_path / "grid.yaml", ONE_RUN)
    assert main(COMMANDS["compare"](config, run)) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--out {run} holds a run" in line
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert json.loads((run / "summary.json").read_text())["episodes"] == 1


@pytest.mark.parametrize("lost", [None, "config.yaml"])
def test_a_refused_crossplay_folder_gets_no_crossplay_file(run, capsys, lost):
    if lost:
        (run / lost).unlink()
    with pytest.raises(ConfigError, match="holds a run"):
        plan_crossplay(_base(), ["scripted", "base"], 1, str(run))
    assert not (run / CROSSPLAY_FILE).exists()


@pytest.mark.parametrize("name", [".", "..", "...", ""])
def test_a_setting_named_like_the_folder_itself_or_its_parent_gets_a_folder_of_its_own(name):
    from marlang.evaluation.compare import folder_name

    assert folder_name(name) not in ("", ".", "..") and "/" not in folder_name(name)


def test_a_long_setting_name_is_cut_to_a_folder_name_the_file_system_takes(tmp_path):
    from marlang.evaluation.compare import folder_name

    names = ["x" * 1000 + "a", "x" * 1000 + "b", "é" * 300]
    folders = [folder_name(n) for n in names]
    assert len(set(folders)) == 3  # still apart
    for folder in folders:
        assert len(folder.encode()) <= 200
        (tmp_path / folder).mkdir()
    assert folder_name("plain-name_1.5") == "plain-name_1.5"
