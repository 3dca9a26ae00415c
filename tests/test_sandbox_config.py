"""The config's `sandbox:` section reaches the coding envs' sandbox, and a machine that cannot
confine generated code is refused in one line before anything is created."""

from __future__ import annotations

import json

import pytest

from marlang.config import ConfigError, build_config
from marlang.run import Experiment, run_experiment
from marlang.sandbox import isolation as isolation_module
from tests.fakes import FakeRuleChatModel

ANSWER = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"


def _config(env_id: str = "code/humaneval", **sandbox) -> object:
    return build_config({
        "env": {"id": env_id, "n_agents": 1, "max_steps": 1, "kwargs": {"task_ids": [0]}}
        if env_id.startswith("code/") else {"id": env_id},
        "model": {"cache": False},
        "learning": {"method": "none"},
        "run": {"episodes": 1, "progress": False},
        "sandbox": sandbox,
    })


def test_sandbox_settings_reach_the_coding_env(tmp_path):
    result = run_experiment(_config(isolation="rlimits", disk_mb=32), tmp_path / "run",
                            chat_model=FakeRuleChatModel(rule=lambda messages: ANSWER))
    assert result.summary["episodes"] == 1  # played and judged, at the level asked for
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sandbox"]["name"] == "rlimits"
    env = Experiment(_config(isolation="rlimits", disk_mb=32), tmp_path / "other",
                     chat_model=FakeRuleChatModel())._make_env()
    assert env.sandbox.limits.disk_mb == 32 and env.sandbox.isolation.name == "rlimits"


def test_sandbox_settings_on_an_env_that_runs_no_code_are_refused(tmp_path):
    experiment = Experiment(_config("babyai/goto-obj", disk_mb=32), tmp_path / "run",
                            chat_model=FakeRuleChatModel())
    with pytest.raises(ConfigError, match=r"^sandbox: disk_mb applies to the envs that run "):
        experiment.run()
    assert not (tmp_path / "run").exists()


def test_a_machine_that_cannot_confine_code_is_refused_before_anything_is_created(
        tmp_path, monkeypatch):
    from marlang.sandbox import LEVELS
    from marlang.sandbox.pool import close_shared_sandboxes

    report = {"landlock_abi": 0, "levels": {
        level: {"ok": level == "rlimits", "reason": "not on this test machine"} for level in LEVELS}}
    monkeypatch.setattr(isolation_module, "_probe_report", lambda: report)
    close_shared_sandboxes()
    try:
        with pytest.raises(ConfigError) as caught:
            run_experiment(_config(), tmp_path / "run", chat_model=FakeRuleChatModel())
    finally:
        close_shared_sandboxes()
    message = str(caught.value)
    assert "\n" not in message and "sandbox.isolation: rlimits" in message
    assert "namespaces: not on this test machine" in message
    assert not (tmp_path / "run").exists()
