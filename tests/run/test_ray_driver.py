"""The Ray executor as the terminal sees it: an address where no cluster answers is one line
within seconds, and a grid on a Ray instance the executor starts (of its own, even where
`ray start` left a cluster's address) prints what a local grid prints. Apart from
test_executors.py, whose module-wide Ray instance the executor would use as it is."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from marlang.cli import main

REPO = Path(__file__).resolve().parents[2]
ROOM = {"env": {"id": "babyai/goto-obj", "n_agents": 2}, "agents": {"kind": "scripted"},
        "run": {"name": "grid", "episodes": 2}}


def _config(tmp_path: Path, data: dict) -> str:
    import yaml

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _args(tmp_path: Path) -> list[str]:
    return ["compare", _config(tmp_path, ROOM), "--grid", "env.max_steps=3,4", "--no-reference",
            "--executor", "ray", "--out", str(tmp_path / "cmp")]


def test_an_address_where_nothing_listens_is_one_line_within_seconds(tmp_path, capsys, monkeypatch):
    import ray

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # Ray would retry this address for many minutes: it is not asked at all.
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init was called"))
    started = time.monotonic()
    assert main([*_args(tmp_path), "--address", f"127.0.0.1:{port}"]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"127.0.0.1:{port}" in err
    assert f"ray start --head --port={port}" in err and "6379" in err
    assert not (tmp_path / "cmp").exists()


def test_an_address_that_is_not_a_ray_cluster_fails_within_the_bound(tmp_path):
    # A port that accepts connections and says nothing, so the check that something listens
    # passes (Ray itself turns 127.0.0.1 into this machine's address, where nothing listens:
    # either way its join does not finish). The join is bounded to 3 s here (20 s in use), in a
    # process of its own: the join that Ray cannot cancel stays in it until it exits.
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    accepted: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                accepted.append(silent.accept()[0])
        except OSError:  # closed at the end of the test
            pass

    threading.Thread(target=accept, daemon=True).start()
    script = ("import sys, marlang.run.executors as e; e.RAY_CONNECT_TIMEOUT_S = 3.0; "
              "from marlang.cli import main; sys.exit(main(sys.argv[1:]))")
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", script, *_args(tmp_path), "--address", f"127.0.0.1:{port}"],
                              check=False, capture_output=True, text=True, timeout=120, cwd=REPO,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)})
    finally:
        silent.close()
        for conn in accepted:
            conn.close()
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - started < 60
    errors = [line for line in done.stderr.splitlines() if line.startswith("marlang: error:")]
    assert len(errors) == 1 and f"127.0.0.1:{port} did not answer within 3 s" in errors[0]
    assert accepted  # the check connected
    assert "SIGTERM" not in done.stderr and not (tmp_path / "cmp").exists()


@pytest.fixture
def ray_tmpdir(monkeypatch, ray_lock):
    """A Ray temp folder of this test's own (short: Ray's socket paths live under it) where
    `ray start` seems to have run a cluster that is gone: its address file names a closed port."""
    base = Path(tempfile.mkdtemp(prefix="mr", dir="/tmp"))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (base / "ray").mkdir()
    (base / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{port}")
    monkeypatch.setenv("RAY_TMPDIR", str(base))
    with ray_lock:
        yield base
    shutil.rmtree(base, ignore_errors=True)


def test_a_grid_on_ray_prints_no_worker_lines_and_a_failed_run_in_one_line(tmp_path, capfd, monkeypatch,
                                                                           ray_tmpdir):
    # With neither --address nor RAY_ADDRESS the executor starts a Ray of its own, not joining
    # the (here, long gone) cluster that `ray start` left on the machine.
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the workers import these tests' envs
    config = _config(tmp_path, ROOM)  # progress bars on, as by default
    grid = ["--grid", "env.id=babyai/goto-obj,tests.run.ray_envs:failing_room"]
    assert main(["compare", config, *grid, "--no-reference", "--executor", "ray",
                 "--out", str(tmp_path / "cmp")]) == 4
    out, err = capfd.readouterr()
    assert "(_ray_task" not in out + err and "pid=" not in out + err
    assert "babyai/goto-obj" in out  # the table
    failed = [line for line in err.splitlines() if "run(s) failed" in line]
    assert len(failed) == 1 and "this room cannot be built" in failed[0]
    assert (tmp_path / "cmp" / "table.md").is_file()
