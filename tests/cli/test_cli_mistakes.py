"""Configs made by mistake and output folders that hold something else: each refused in one
line naming the file or key, creating and overwriting nothing."""

from pathlib import Path

import pytest

from marlang.cli import main
from marlang.config import ConfigError, build_config, parse_value
from tests.cli.test_cli_errors import ONE_RUN, one_line, write

MISTAKES = {
    "empty": ("", "the config is empty"),
    "comments only": ("# nothing yet\n", "the config is empty"),
    "a key twice": (ONE_RUN + "run: {episodes: 3}\n", "key 'run' is given twice"),
    "a nested key twice": (ONE_RUN.replace("episodes: 1,", "episodes: 1, episodes: 4,"),
                           "key 'episodes' is given twice"),
    "a boolean count": (ONE_RUN.replace("episodes: 1", "episodes: true"), "'run.episodes': true is a boolean"),
    "nested 5,000 deep": (ONE_RUN + "grid: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "not text": ("\udcff\udcfe binary", "not a text file"),
}


@pytest.mark.parametrize("command", ["run", "compare"])
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_config_made_by_mistake_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch, command, mistake):
    text, expected = MISTAKES[mistake]
    config = tmp_path / "c.yaml"
    config.write_bytes(text.encode(errors="surrogateescape"))
    monkeypatch.chdir(tmp_path)  # where the default --out (runs/...) would go
    assert main([command, str(config), "--out", str(tmp_path / "out")]) == 2
    line = one_line(capsys.readouterr().err)
    assert expected in line
    if "run.episodes" not in expected:
        assert str(config) in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_a_key_twice_names_both_lines_and_a_merged_key_may_be_overridden(tmp_path):
    from marlang.config import load_config

    twice = write(tmp_path / "twice.yaml", "run:\n  episodes: 2\n  episodes: 3\n")
    with pytest.raises(ConfigError, match=r"twice.yaml:3:3: .*'episodes' is given twice .*first on line 2"):
        load_config(twice)
    # A key a merge brings in is no key given twice: the mapping's own value wins, as in YAML.
    merged = write(tmp_path / "merged.yaml", "run:\n  <<: {episodes: 2, name: merged}\n  episodes: 3\n")
    run = load_config(merged).run
    assert (run.episodes, run.name) == (3, "merged")


@pytest.mark.parametrize("key", ["run.episodes", "run.parallel", "run.seed", "env.max_steps", "model.temperature",
                                 "model.max_tokens", "learning.memory_size", "run.threads", "agents.history"])
def test_booleans_are_not_counts(key):
    section, name = key.split(".")
    with pytest.raises(ConfigError, match=rf"'{key}': true is a boolean, not a number"):
        build_config({section: {name: True}})
    build_config({section: {name: 2}})  # a number is fine


def test_booleans_are_not_counts_in_a_learners_own_sections():
    data = {"agents": {"kind": "llm"}, "learning": {"method": "ppo", "lora": {"r": True}}}
    with pytest.raises(ConfigError, match=r"'learning.lora.r': true is a boolean"):
        build_config(data)


def test_a_set_value_with_a_key_twice_stays_text():
    assert parse_value("{a: 1, a: 2}") == "{a: 1, a: 2}"
    assert parse_value("{a: 1, b: 2}") == {"a": 1, "b": 2}


GRID = ONE_RUN + "grid: {env.max_steps: [1, 2]}\n"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("how", ["run", "compare"])
def test_a_grid_into_a_run_directory_is_refused_and_overwrites_nothing(tmp_path, capsys, how):
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path / "one.yaml", ONE_RUN)), "--out", str(out)]) == 0
    before = _files(out)
    capsys.readouterr()
    assert main([how, str(write(tmp_path / "grid.yaml", GRID)), "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--out {out} holds a run (config.yaml)" in line
    assert _files(out) == before


def test_another_comparison_or_a_run_into_a_comparison_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    grid = write(tmp_path / "grid.yaml", GRID)
    assert main(["compare", str(grid), "--out", str(out), "--no-reference"]) == 0
    before = _files(out)
    capsys.readouterr()
    other = write(tmp_path / "other.yaml", GRID.replace("babyai/goto-obj", "babyai/pickup"))
    assert main(["compare", str(other), "--out", str(out), "--no-reference"]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--out {out} holds another comparison" in line and "'env.id'" in line and "comparison.yaml" in line
    assert main(["run", str(write(tmp_path / "one.yaml", ONE_RUN)), "--out", str(out)]) == 2
    assert "holds a comparison (comparison.yaml)" in one_line(capsys.readouterr().err)
    assert _files(out) == before
    # The same comparison resumes in its own folder, longer, or with a grid of more values.
    assert main(["compare", str(grid), "--out", str(out), "--no-reference", "--set", "run.episodes=2"]) == 0
    assert main(["compare", str(grid), "--out", str(out), "--no-reference", "--grid", "env.max_steps=3"]) == 0
    assert {p.parent.name for p in out.glob("*/config.yaml")} == {
        "scripted--env.max_steps-1", "scripted--env.max_steps-2", "scripted--env.max_steps-3"}


def test_an_interrupted_comparison_knows_its_folder(tmp_path, monkeypatch):
    from marlang.evaluation.compare import run_comparison
    from marlang.run import executors

    def interrupted(self, jobs, out_dir, notify=None):
        raise RuntimeError("killed before its first run finished")

    monkeypatch.setattr(executors.LocalExecutor, "run", interrupted)
    base = build_config({"env": {"id": "babyai/goto-obj"}, "agents": {"kind": "scripted"}}).model_dump(mode="json")
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        run_comparison(base, [("env.max_steps", [1])], out, reference=False)
    other = {**base, "env": {**base["env"], "id": "babyai/pickup"}}
    with pytest.raises(ConfigError, match="holds another comparison"):
        run_comparison(other, [("env.max_steps", [1])], out, reference=False)
