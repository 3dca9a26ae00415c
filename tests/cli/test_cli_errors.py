"""The command's answers to bad input and odd states: one line naming what to fix, nothing
created, nothing silently ignored."""

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from marlang.cli import main

ROOT = Path(__file__).resolve().parents[2]

ONE_RUN = ("env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\nagents: {kind: scripted}\n"
           "run: {name: one, episodes: 1, progress: false}\n")


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    from marlang import __version__

    assert capsys.readouterr().out.strip() == f"marlang {__version__}"


def test_an_unknown_embedded_model_is_one_line_and_creates_nothing(tmp_path, capsys):
    config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm"))
    out = tmp_path / "run"
    assert main(["run", str(config), "--set", "model.spec=local:nope", "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "model.spec" in line and "local:nope" in line and "local:smollm2" in line
    assert not out.exists()
    # A grid config (demo.yaml) loads the model before its comparison directory is made.
    assert main(["run", str(ROOT / "configs/demo.yaml"), "--set", "model.spec=local:nope", "--out", str(out)]) == 2
    assert "local:smollm2" in one_line(capsys.readouterr().err)
    assert not out.exists()


def test_a_litellm_model_without_its_key_names_the_variable_once(tmp_path):
    import importlib.util
    import os

    if importlib.util.find_spec("langchain_litellm") is None:
        pytest.skip("langchain-litellm is not installed")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "LITELLM_LOCAL_MODEL_COST_MAP")}
    config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm"))
    out = tmp_path / "run"
    # A fresh process: LiteLLM's import-time network warnings would show there.
    proc = subprocess.run([sys.executable, "-m", "marlang.cli", "run", str(config), "--set",
                           "model.spec=litellm:anthropic/claude-3-5-haiku-latest", "--set", "model.cache=false",
                           "--out", str(out)], capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    assert proc.returncode == 3
    line = one_line(proc.stderr)
    assert line.count("ANTHROPIC_API_KEY") == 1
    assert not out.exists()


def test_a_refused_api_key_is_one_line_and_leaves_no_run_directory(tmp_path, capsys):
    from marlang.testing import FakeOpenAIServer

    out = tmp_path / "run"
    with FakeOpenAIServer(fail_first=100, fail_status=401) as server:
        config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm")
                       + f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, "
                         "max_retries: 0}\n")
        assert main(["run", str(config), "--out", str(out)]) == 3
    line = one_line(capsys.readouterr().err)
    assert "API key" in line and "OPENAI_API_KEY" in line
    assert not out.exists()  # a fixed command starts afresh


def test_a_refused_api_key_names_the_variable_the_config_reads_it_from(tmp_path, capsys):
    from marlang.testing import FakeOpenAIServer

    with FakeOpenAIServer(fail_first=100, fail_status=401) as server:
        config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm")
                       + f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, "
                         "max_retries: 0, api_key_env: MY_SERVER_KEY}\n")
        assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 3
    line = one_line(capsys.readouterr().err)
    assert "MY_SERVER_KEY" in line and "OPENAI_API_KEY" not in line


def test_a_server_that_breaks_mid_run_stops_it_in_one_line_and_the_run_resumes(tmp_path, capsys):
    # A cut reply in the first episode (two agents' acting calls, then a reflection each) is
    # retried and counted; once that episode is on disk (the reflections) the server answers 503
    # until it is mended.
    from marlang.testing import FakeOpenAIServer

    broken = True
    out = tmp_path / "run"

    def first_episode_written() -> bool:
        episodes = out / "episodes.jsonl"
        return episodes.is_file() and bool(episodes.read_text().strip())

    server = FakeOpenAIServer(reply="Action: go forward",
                              faults=lambda n: "cut" if n == 2 else 503 if broken and first_episode_written() else None)
    with server:
        config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm").replace(
            "episodes: 1", "episodes: 3") + f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', "
                                            "cache: false, max_retries: 1}\n")
        assert main(["run", str(config), "--out", str(out)]) == 3
        line = one_line(capsys.readouterr().err)
        assert server.base_url in line and "HTTP 503" in line and "failed 2 attempt(s)" in line
        assert "server's log" in line and "model.max_retries" in line
        assert f"1 finished episode(s) are kept in {out}; continue with: marlang run --resume {out}" in line
        assert len((out / "episodes.jsonl").read_text().splitlines()) == 1
        broken = False
        assert main(["run", "--resume", str(out)]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3
    with open(out / "llm_calls.csv", newline="") as fh:
        calls = list(csv.DictReader(fh))
    # the reflections that failed (each retried once) are recorded, then asked again on resume
    failed = [(c["role"], c["retries"]) for c in calls if c["error"]]
    assert failed and set(failed) == {("reflector", "1")} and all("HTTP 503" in c["error"] for c in calls if c["error"])
    assert [(c["role"], c["retries"]) for c in calls if c["retries"] != "0" and not c["error"]] == [("actor", "1")]
    assert len([c for c in calls if c["role"] == "reflector" and not c["error"]]) == 6


def test_malformed_yaml_names_line_and_column_for_run_and_compare(tmp_path, capsys):
    bad = write(tmp_path / "bad.yaml", "env:\n  id: [babyai/pickup\nrun: {episodes: 1}\n")
    for command in ("run", "compare"):
        assert main([command, str(bad)]) == 2
        line = one_line(capsys.readouterr().err)
        assert f"{bad}:3:4: not valid YAML" in line


def test_a_directory_given_as_the_config_says_so(capsys):
    assert main(["run", str(ROOT / "configs")]) == 2
    line = one_line(capsys.readouterr().err)
    assert "is a directory, not a config file" in line and "demo.yaml" in line
    assert "not found" not in line


def test_resume_refuses_another_config_naming_the_first_differing_key(tmp_path, capsys):
    config = write(tmp_path / "one.yaml", ONE_RUN)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out)]) == 0
    capsys.readouterr()
    other = write(tmp_path / "other.yaml", ONE_RUN.replace("babyai/goto-obj", "babyai/pickup"))
    assert main(["run", str(other), "--resume", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "'env.id'" in line and "babyai/pickup" in line and str(other) in line
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 1
    # The run's own config (with a longer run) is fine, and is the one used.
    longer = write(tmp_path / "longer.yaml", ONE_RUN.replace("episodes: 1", "episodes: 2"))
    assert main(["run", str(longer), "--resume", str(out)]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2


def test_resuming_a_finished_run_says_there_is_nothing_left_to_do(tmp_path, capsys):
    config = write(tmp_path / "one.yaml", ONE_RUN)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out)]) == 0
    assert "nothing left to do" not in capsys.readouterr().out
    assert main(["run", "--resume", str(out)]) == 0
    assert "nothing left to do" in capsys.readouterr().out
    assert main(["run", "--resume", str(out), "--set", "run.episodes=2"]) == 0
    assert "nothing left to do" not in capsys.readouterr().out


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory):
    """A LangMARL run paused for review (its update waits in review.json)."""
    from marlang.testing import FakeOpenAIServer

    root = tmp_path_factory.mktemp("paused")
    out = root / "run"
    with FakeOpenAIServer(reply='{"agent_0": "kept the door open", "agent_1": "wandered"}') as server:
        config = write(root / "lm.yaml",
                       "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
                       f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}\n"
                       "learning: {method: langmarl, rollouts: 1, iterations: 1, review: true}\n"
                       "run: {progress: false}\n")
        assert main(["run", str(config), "--out", str(out)]) == 0
    return out


@pytest.fixture
def paused(paused_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(paused_run, copy)
    return copy


def still_pending(run_dir: Path) -> bool:
    return json.loads((run_dir / "review.json").read_text())["decided"] is False


@pytest.mark.parametrize("flags, expected", [
    (["--accept", "--reject"], "--accept and --reject"),
    (["--edit", "agent_0=/missing/policy.txt"], "/missing/policy.txt"),
    (["--edit", "agent_9=/tmp/x.txt"], "agent_0, agent_1"),
])
def test_review_refuses_bad_flags_in_one_line_and_changes_nothing(paused, capsys, flags, expected):
    capsys.readouterr()
    assert main(["review", str(paused), *flags]) == 2
    assert expected in one_line(capsys.readouterr().err)
    assert still_pending(paused)


def test_review_with_standard_input_closed_is_one_line(paused, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    capsys.readouterr()
    assert main(["review", str(paused)]) == 2
    assert "standard input closed" in one_line(capsys.readouterr().err)
    assert still_pending(paused)


def test_review_end_of_input_in_a_real_process(paused):
    proc = subprocess.run([sys.executable, "-m", "marlang.cli", "review", str(paused)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 2
    assert "EOFError" not in proc.stderr and "Traceback" not in proc.stderr
    assert "standard input closed" in proc.stderr


def test_unset_removes_a_key_from_the_command_line(tmp_path, capsys):
    config = write(tmp_path / "c.yaml", ONE_RUN + "learning: {method: reflexion, memory_size: 3}\n")
    out = tmp_path / "run"
    assert main(["run", str(config), "--set", "learning.method=none", "--out", str(out)]) == 2
    assert "learning.memory_size" in one_line(capsys.readouterr().err)
    assert main(["run", str(config), "--set", "learning.method=none", "--unset", "learning.memory_size",
                 "--out", str(out)]) == 0
    assert "memory_size" not in (out / "config.yaml").read_text()
    capsys.readouterr()
    assert main(["run", str(config), "--unset", "learning.memory_sise", "--out", str(tmp_path / "x")]) == 2
    line = one_line(capsys.readouterr().err)
    assert "learning.memory_sise" in line and "did you mean 'memory_size'" in line


def test_progress_bars_end_at_100_percent_and_leave_a_line_per_setting(tmp_path, capsys):
    config = write(tmp_path / "grid.yaml", "env: {id: babyai/goto-obj, n_agents: 2}\nagents: {kind: scripted}\n"
                   "run: {name: bars, episodes: 3, parallel: 2}\ngrid: {env.max_steps: [4, 5]}\n")
    assert main(["run", str(config), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    finals = [line.rsplit("\r", 1)[-1] for line in err.split("\n") if "bars [" in line]
    assert len(finals) == 2, err
    for setting, line in zip(["4 steps", "5 steps"], finals):
        assert setting in line and "100%" in line and "3/3" in line


def test_a_second_run_into_a_directory_in_use_says_who_holds_it(tmp_path, capsys):
    import os

    from tests.test_rundir import hold_lock

    config = write(tmp_path / "one.yaml", ONE_RUN)
    out = tmp_path / "run"
    fd = hold_lock(out, pid=31337, command="marlang run one.yaml --out run")
    try:
        assert main(["run", str(config), "--out", str(out)]) == 2
        line = one_line(capsys.readouterr().err)
        assert "in use by process 31337" in line and "marlang run one.yaml --out run" in line
    finally:
        os.close(fd)
    assert not (out / "config.yaml").exists()
    assert main(["run", str(config), "--out", str(out)]) == 0  # free once the holder is gone


def test_two_processes_on_one_run_directory_never_interleave(tmp_path):
    # The first holds the directory for its whole run (it plays once `go` exists); the second,
    # started while it runs, is refused.
    config = write(tmp_path / "four.yaml", ONE_RUN.replace("episodes: 1", "episodes: 4"))
    out, go = tmp_path / "run", tmp_path / "go"
    script = ("import sys, time, pathlib\nimport marlang.run.loop as r\nplay = r.RunLoop.play\n"
              "async def held(*a, **k):\n"
              f"    while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
              "    return await play(*a, **k)\n"
              "r.RunLoop.play = held\nfrom marlang.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    first = subprocess.Popen([sys.executable, "-c", script, "run", str(config), "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        import time

        deadline = time.time() + 120
        while not (out / "config.yaml").is_file() and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "-m", "marlang.cli", "run", str(config), "--out", str(out)],
                                capture_output=True, text=True, check=False, cwd=ROOT)
    finally:
        go.touch()
    assert first.wait(timeout=300) == 0
    assert second.returncode == 2
    assert f"in use by process {first.pid}" in one_line(second.stderr)
    episodes = [json.loads(line)["episode"] for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert episodes == [0, 1, 2, 3]


def test_ctrl_c_before_the_first_episode_keeps_the_directory_and_says_so(tmp_path, capsys, monkeypatch):
    import asyncio
    import signal

    import marlang.run.loop

    async def interrupted(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(30)

    monkeypatch.setattr(marlang.run.loop, "run_episode", interrupted)
    config = write(tmp_path / "one.yaml", ONE_RUN)
    out = tmp_path / "run"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(["run", str(config), "--out", str(out)]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    line = capsys.readouterr().err.strip().splitlines()[-1]  # after the line Ctrl-C prints at once
    assert "before any episode finished" in line and f"marlang run --resume {out}" in line
    assert (out / "config.yaml").is_file()
    monkeypatch.undo()
    assert main(["run", "--resume", str(out)]) == 0


def test_report_of_a_run_with_no_finished_episode_is_one_line_and_writes_nothing(tmp_path, capsys):
    from marlang.rundir import RunDirectory

    config = write(tmp_path / "one.yaml", ONE_RUN)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out)]) == 0
    for name in ("episodes.jsonl", "summary.json", "metrics.csv"):
        (out / name).unlink()
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "no episode has finished" in line and f"marlang run --resume {out}" in line
    assert not (out / "summary.json").exists()
    assert RunDirectory(out).exists()


def test_report_over_runs_of_different_envs_and_settings_labels_each(tmp_path, capsys):
    out = tmp_path / "cmp"
    one = write(tmp_path / "one.yaml", ONE_RUN)
    assert main(["run", str(one), "--out", str(out / "a")]) == 0
    assert main(["run", str(one), "--set", "env.id=babyai/pickup", "--set", "env.max_steps=3",
                 "--out", str(out / "b")]) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "scripted, 2 steps" in printed and "scripted, 3 steps" in printed
    assert "## scripted, 2 steps (model: scripted)" not in printed  # no run titles the other's row
    assert "## babyai/goto-obj" in printed and "## babyai/pickup" in printed


def test_more_agents_than_the_room_holds_is_one_line_and_creates_nothing(tmp_path, capsys):
    config = write(tmp_path / "crowd.yaml", ONE_RUN.replace("n_agents: 2", "n_agents: 40"))
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "n_agents=40 does not fit" in line and line.startswith("marlang: error: env:")
    assert not out.exists()


def test_out_naming_a_file_is_one_line_and_touches_nothing(tmp_path, capsys):
    config = write(tmp_path / "one.yaml", ONE_RUN)
    target = write(tmp_path / "notes.txt", "mine\n")
    assert main(["run", str(config), "--out", str(target)]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(target) in line and "is a file" in line
    assert target.read_text() == "mine\n"
    assert main(["compare", str(config), "--grid", "env.max_steps=2,3", "--out", str(target)]) == 2
    assert "is a file" in one_line(capsys.readouterr().err)


def test_the_protocol_shorthand_works_at_the_top_of_a_config_file(tmp_path, capsys):
    from marlang.config import load_config

    config = write(tmp_path / "alt.yaml", ONE_RUN.replace("kind: scripted", "kind: llm") + "protocol: alternating-2\n")
    loaded = load_config(config)
    assert (loaded.protocol.name, loaded.protocol.rounds) == ("alternating", 2)
    assert load_config(config, ["protocol=none"]).protocol.name == "none"
    assert load_config(config, ["protocol.rounds=3"]).protocol.rounds == 3


class KeyEchoingServer:
    """A server that refuses every key and repeats it in the refusal (some do)."""

    def __new__(cls, echoed: str):
        from marlang.testing import FakeOpenAIServer

        class Echoing(FakeOpenAIServer):
            def _respond(self, body):
                self.requests.append(body)
                return 401, {"error": {"message": f"Incorrect API key provided: {echoed}",
                                       "type": "invalid_request_error"}}

        return Echoing()


@pytest.mark.parametrize("where", ["OPENAI_API_KEY", "a variable of another name", "the base_url"])
def test_a_refusal_that_repeats_the_key_prints_it_redacted(tmp_path, capsys, monkeypatch, where):
    secret = "sk-live-0123456789abcdef"
    key_env = "OPENAI_API_KEY" if where == "OPENAI_API_KEY" else "MY_LLM"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if where != "the base_url":
        monkeypatch.setenv(key_env, secret)
    with KeyEchoingServer(secret) as server:
        url = (server.base_url.replace("http://", f"http://bob:{secret}@") if where == "the base_url"
               else server.base_url)
        config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm")
                       + f"model: {{spec: 'openai:fake', base_url: '{url}', api_key_env: {key_env}, cache: false, "
                         "max_retries: 0}\n")
        assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 3
    line = one_line(capsys.readouterr().err)
    assert "refused the API key" in line and "Incorrect API key provided: ***" in line
    assert secret not in line


def test_logged_messages_go_through_the_same_redaction(monkeypatch):
    import logging

    from marlang.cli.outcomes import _redact_record

    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789abcdef")
    record = logging.LogRecord("marlang.models", logging.WARNING, __file__, 1, "retrying %s with key %s",
                               ("https://bob:pw-0123456@host/v1", "sk-live-0123456789abcdef"), None)
    assert _redact_record(record) and record.getMessage() == "retrying https://bob:***@host/v1 with key ***"


@pytest.mark.parametrize("command", ["compare", "crossplay"])
def test_an_interrupted_comparison_or_cross_play_says_the_command_that_continues_it(tmp_path, capsys, monkeypatch,
                                                                                      command):
    import shlex

    import marlang.evaluation.compare

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(marlang.evaluation.compare, "run_comparison", interrupted)
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "one.yaml", ONE_RUN.replace("kind: scripted", "kind: llm"))
    given = (["--grid", "env.max_steps=1,2"] if command == "compare"
             else ["--players", "scripted", "base", "--episodes", "2"])
    assert main([command, str(config), *given, "--set", "run.name=x y"]) == 130
    line = one_line(capsys.readouterr().err)
    out = "runs/x y-compare" if command == "compare" else "runs/x y-crossplay"
    again = shlex.join(["marlang", command, str(config), *given, "--set", "run.name=x y", "--out", out])
    assert line.startswith("marlang: interrupted") and line.endswith(f"continue with: {again}")


@pytest.mark.parametrize(("served", "says"), [(["qwen"], "model name is likely wrong: the server serves qwen"),
                                              (None, "HTTP 413")])
def test_a_refused_call_ends_the_run_in_one_line_before_any_episode(tmp_path, capsys, served, says):
    from marlang.testing import FakeOpenAIServer

    out = tmp_path / "run"
    with FakeOpenAIServer(served_models=served, faults=lambda n: None if served else 413) as server:
        config = write(tmp_path / "c.yaml", ONE_RUN.replace("kind: scripted", "kind: llm")
                       + f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false}}\n")
        assert main(["run", str(config), "--out", str(out)]) == 3
    line = one_line(capsys.readouterr().err)
    assert says in line and server.base_url in line and "'fake'" in line
    assert len(server.requests) <= 2  # each agent's first call refused, none retried
    assert not out.exists()
