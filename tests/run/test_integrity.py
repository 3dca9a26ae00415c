"""Every file a run directory reads is untrusted: damaged files, an edited config, links, a
full or read-only disk each give ``run --resume``, ``report`` and ``view`` one line naming the
file (never a traceback), and no finished episode is lost."""

import errno
import hashlib
import json
import os
import re
import signal
from pathlib import Path

import pytest

from marlang.cli import main
from marlang.rundir import RunDirectory
from tests.cli.test_cli_errors import ONE_RUN, one_line, write

RUN = ONE_RUN.replace("episodes: 1", "episodes: 2")
DEEP = b"[" * 200_000 + b"]" * 200_000 + b"\n"
NOISE = bytes(range(256)) * 3


@pytest.fixture
def run(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(write(tmp_path / "one.yaml", RUN)), "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def episodes(out: Path) -> list[int]:
    return [e["episode"] for e in RunDirectory(out).load_episode_dicts()]


COMMANDS = {
    "resume": lambda out: ["run", "--resume", str(out), "--set", "run.episodes=3"],
    "report": lambda out: ["report", str(out)],
    "view": lambda out: ["view", str(out), "--out", str(out.parent / "view.html")],
}

DAMAGE = {
    # file: (how it is damaged, the commands it refuses; the others read on)
    "manifest.json": (lambda b: b[: len(b) // 2], {"resume", "report", "view"}),
    "learner_state.json": (lambda b: NOISE, {"resume", "report"}),
    "iterations.csv": (lambda b: b + NOISE + b"\n", {"resume", "report", "view"}),
    "checkpoints.sqlite": (lambda b: NOISE * 10, {"resume"}),
    "episodes.jsonl": (lambda b: b + DEEP, set()),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_file_is_one_line_naming_it_and_loses_no_episode(run, capsys, name, command):
    damage, refused = DAMAGE[name]
    path = run / name
    path.write_bytes(damage(path.read_bytes()))
    code = main(COMMANDS[command](run))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if command in refused:
        assert code == 2
        line = one_line(err)
        assert f"{path} is damaged" in line and ("move it aside" in line or "restore it" in line)
        assert episodes(run) == [0, 1]
    else:
        assert code == 0, err
        assert episodes(run) == ([0, 1, 2] if command == "resume" else [0, 1])


def test_a_deeply_nested_episode_line_is_set_aside_and_played_again(run, capsys):
    lines = (run / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    (run / "episodes.jsonl").write_bytes(lines[0] + DEEP + lines[1])
    assert main(COMMANDS["resume"](run)) == 0
    assert episodes(run) == [0, 1, 2]
    assert (run / "episodes.damaged").read_bytes().startswith(b"[[[")


def test_a_damaged_learner_state_moved_aside_is_written_again_from_the_checkpoint(run, capsys):
    state = json.loads((run / "learner_state.json").read_text())
    (run / "learner_state.json").write_bytes(NOISE)
    assert main(COMMANDS["resume"](run)) == 2
    (run / "learner_state.json").rename(run / "learner_state.json.damaged")
    assert main(COMMANDS["resume"](run)) == 0
    assert episodes(run) == [0, 1, 2]
    assert json.loads((run / "learner_state.json").read_text())["iteration"] == state["iteration"] + 1


def test_random_bytes_in_llm_calls_are_refused_naming_the_file(tmp_path):
    from marlang.rundir.untrusted import DamagedRunFile

    rd = RunDirectory(tmp_path)
    rd.llm_calls_file.write_bytes(b"role,episode\nactor,0\n" + NOISE + b"\n")
    with pytest.raises(DamagedRunFile, match=r"llm_calls.csv is damaged \(byte \d+ is not UTF-8.*move it aside"):
        rd.rebuild_llm_calls({0}, ())
    rd.llm_calls_file.write_bytes(b"role,episode\nactor,0\nactor,0,extra,cells\n")
    with pytest.raises(DamagedRunFile, match="line 3 has more cells than the header"):
        rd.read_llm_calls()
    rd.llm_calls_file.write_bytes(b"role,episode\nactor,0\nactor,1")  # a torn last row is no damage
    rd.rebuild_llm_calls({0}, ())
    assert rd.read_llm_calls() == [{"role": "actor", "episode": "0"}]


def test_an_edited_config_refuses_to_resume_naming_it(run, capsys):
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("max_steps: 2", "max_steps: 3"))
    assert main(COMMANDS["resume"](run)) == 2
    line = one_line(capsys.readouterr().err)
    assert f"{config} was edited" in line and "--out NEW_DIR" in line
    assert episodes(run) == [0, 1]


@pytest.mark.parametrize("how", ["hash deleted", "manifest moved aside"])
def test_a_run_without_its_config_hash_is_refused_until_the_config_is_vouched_for(run, capsys, how):
    """Deleting the hash (or the manifest, as the advice for a damaged one says) must not let an
    edited config.yaml resume into a run that mixes two configs."""
    config, manifest_file = run / "config.yaml", run / "manifest.json"
    config.write_text(config.read_text().replace("max_steps: 2", "max_steps: 3"))
    manifest = json.loads(manifest_file.read_text())
    del manifest["config_sha256"]
    if how == "hash deleted":
        manifest_file.write_text(json.dumps(manifest))
    else:
        manifest_file.rename(run / "manifest.json.damaged")
    assert main(COMMANDS["resume"](run)) == 2
    line = one_line(capsys.readouterr().err)
    assert str(manifest_file) in line and "config_sha256" in line and "--out NEW_DIR" in line
    assert episodes(run) == [0, 1]
    # The line gives the hash of config.yaml as it is: recording it vouches for the file.
    vouched = re.search(r'"config_sha256": "([0-9a-f]{64})"', line).group(1)
    manifest_file.write_text(json.dumps({**(manifest if how == "hash deleted" else {}), "config_sha256": vouched}))
    assert main(["run", "--resume", str(run), "--set", "run.episodes=3"]) == 0
    assert episodes(run) == [0, 1, 2]
    recorded = json.loads(manifest_file.read_text())["config_sha256"]  # the resume's config, recorded again
    assert recorded == hashlib.sha256(config.read_bytes()).hexdigest() != vouched


@pytest.mark.parametrize("field, value", [
    ("resumes", "x"), ("resumes", 5), ("resumes", [1]), ("started", ["a"]), ("command", 7),
    ("config_sha256", 5), ("setting", {"a": 1}), ("model_id", 3), ("agents", []), ("frames", "many"),
    ("frames", True), ("team", "x"), ("adapters", ["a"]), ("adapters", {"agent_0": 1}), ("device", 0),
    ("critic", "x"), ("versions", 1), ("env_id", False), ("learner", 1.5), ("reward_hook", [])])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_manifest_field_of_the_wrong_kind_is_one_line_naming_it(run, capsys, field, value, command):
    manifest_file = run / "manifest.json"
    manifest_file.write_text(json.dumps({**json.loads(manifest_file.read_text()), field: value}))
    (run / "summary.json").unlink()  # report and view read the manifest again
    code = main(COMMANDS[command](run))
    err = capsys.readouterr().err
    assert code == 2, err
    line = one_line(err)
    assert f"{manifest_file} is damaged" in line and repr(field) in line
    assert episodes(run) == [0, 1]


def test_a_resume_with_more_episodes_records_the_new_config(run, capsys):
    assert main(COMMANDS["resume"](run)) == 0
    assert main(["run", "--resume", str(run), "--set", "run.episodes=4"]) == 0
    assert episodes(run) == [0, 1, 2, 3]


@pytest.mark.parametrize("name", [".lock", "episodes.jsonl"])
def test_a_link_in_the_run_directory_is_refused_and_its_target_untouched(run, capsys, tmp_path, name):
    target = write(tmp_path / "precious.txt", "keep me\n")
    if (run / name).exists():
        (run / name).rename(tmp_path / "kept")
    (run / name).symlink_to(target)
    assert main(COMMANDS["resume"](run)) == 2
    line = one_line(capsys.readouterr().err)
    assert str(run / name) in line and "symbolic link" in line
    assert target.read_text() == "keep me\n"


def _refuse_writes_under(monkeypatch, folder: Path, code: int) -> None:
    """Writes under ``folder`` fail with ``code``, as on a read-only or full disk (the tests
    run as root, whom file modes do not stop)."""
    real_open, real_write = os.open, os.write

    def fake_open(path, flags, *args, **kwargs):
        if str(path).startswith(str(folder)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    def fake_write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            raise OSError(code, os.strerror(code))
        return real_write(fd, data)

    monkeypatch.setattr(os, "open" if code == errno.EACCES else "write", fake_open if code == errno.EACCES
                        else fake_write)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_read_only_run_directory_is_one_line(run, capsys, monkeypatch, command):
    (run / "summary.json").unlink()  # report and view would otherwise write nothing there
    _refuse_writes_under(monkeypatch, run, errno.EACCES)
    if command == "view":
        code = main(["view", str(run)])
    else:
        code = main(COMMANDS[command](run))
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    first = err.strip().splitlines()[0]
    assert f"cannot write {run}" in first and "permission denied" in first
    monkeypatch.undo()
    assert episodes(run) == [0, 1]


def test_a_full_disk_keeps_every_finished_episode_and_the_run_resumes(run, capsys, monkeypatch):
    _refuse_writes_under(monkeypatch, run, errno.ENOSPC)
    assert main(COMMANDS["resume"](run)) == 3
    lines = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(lines)
    assert len(lines) == 1  # one line: what failed, and what is kept
    assert lines[0].startswith(f"marlang: cannot write {run}") and "the disk is full" in lines[0]
    assert "2 finished episode(s) are kept" in lines[0]
    monkeypatch.undo()  # space freed
    assert main(COMMANDS["resume"](run)) == 0
    assert episodes(run) == [0, 1, 2]


def test_report_and_view_of_a_comparison_with_a_damaged_run_summary_name_it(tmp_path, capsys):
    out = tmp_path / "cmp"
    grid = write(tmp_path / "grid.yaml", RUN + "grid: {env.max_steps: [1, 2]}\n")
    assert main(["compare", str(grid), "--out", str(out), "--no-reference"]) == 0
    capsys.readouterr()
    summary = next(out.glob("*/summary.json"))
    summary.write_bytes(b"{" * 200_000)
    for command in (["report", str(out)], ["view", str(out)]):
        assert main(command) == 2
        line = one_line(capsys.readouterr().err)
        assert f"{summary} is damaged" in line and "marlang report" in line


@pytest.fixture
def deadline():
    """A command that blocks (a read of a FIFO waits for a writer that never comes) fails the
    test after a few seconds instead of hanging it."""
    def stop(signum, frame):
        raise TimeoutError("the command blocked")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _plant(path: Path, kind: str) -> None:
    """A FIFO or a directory where a run's file goes."""
    if path.exists():
        path.rename(path.with_name(path.name + ".kept"))
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


NOT_REGULAR = {
    # file: the commands that read (or write) it, each refusing it in one line
    "episodes.jsonl": {"resume", "report", "view"},
    "manifest.json": {"resume", "report", "view"},
    "iterations.csv": {"resume", "report", "view"},
    "learner_state.json": {"resume", "report"},
    "llm_calls.csv": {"resume", "report"},
    ".lock": {"resume"},
    "episodes.damaged": {"resume"},
}


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("name", list(NOT_REGULAR))
def test_a_fifo_or_directory_in_place_of_a_run_file_is_one_line_and_never_blocks(run, capsys, deadline, name,
                                                                                  command, kind):
    (run / "summary.json").unlink()  # report and view rebuild it from the files
    if name == "episodes.damaged":  # a damaged record, which a resume sets aside into it
        with (run / "episodes.jsonl").open("ab") as fh:
            fh.write(b"{not json\n")
    _plant(run / name, kind)
    code = main(COMMANDS[command](run))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if command in NOT_REGULAR[name]:
        assert code == 2, err
        line = one_line(err)
        assert f"{run / name} is damaged" in line and "not a regular file" in line
    else:
        assert code == 0, err


def test_a_fifo_config_in_a_comparisons_run_stops_its_rerun_in_one_line(tmp_path, capsys, deadline):
    out = tmp_path / "cmp"
    grid = write(tmp_path / "grid.yaml", RUN + "grid: {env.max_steps: [1, 2]}\n")
    command = ["compare", str(grid), "--out", str(out), "--no-reference", "--no-crossplay"]
    assert main(command) == 0
    capsys.readouterr()
    config = next(out.glob("*/config.yaml"))
    config.unlink()
    os.mkfifo(config)
    assert main(command) == 2
    line = one_line(capsys.readouterr().err)
    assert f"{config} is damaged" in line and "FIFO" in line
