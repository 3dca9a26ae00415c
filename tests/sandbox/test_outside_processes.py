"""Part of the hostile suite again, from a separate process whose *initial* environment holds
the secrets (what `/proc/<pid>/environ` shows; `os.environ.update` never reaches it), run once
as this user and once as an unprivileged one ("nobody", through `setpriv`) where the machine
allows: a program must neither read the secrets nor forge its way into the judge's pipes.

The `rlimits` level confines no reads (it runs only when named): a program there can read
its parent's environment, so the secret check runs at the confining levels only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from marlang.sandbox import SandboxResult
from tests.sandbox.hostile_programs import HOSTILE_BY_NAME, SECRET_ENV

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

SCRIPT = """
import json, os, sys
sys.path.insert(0, {repo!r})
from marlang.sandbox import Sandbox, SandboxLimits, detect_isolation
from tests.sandbox.hostile_programs import HOSTILE_BY_NAME

limits = SandboxLimits(cpu_seconds=3.0, wall_seconds=3.0, test_timeout=1.0, memory_mb=256)
context = {{"pid": os.getpid(), "worker_pids": []}}
report = {{"uid": os.getuid(), "levels": {{}}}}
for level in detect_isolation().available:
    with Sandbox(limits, workers=1, isolation=level) as sandbox:
        runs = {{}}
        for name in ("read_secrets", "forge_events_into_the_judges_pipes"):
            entry = HOSTILE_BY_NAME[name]
            runs[name] = sandbox.run_tests(entry.render(context), list(entry.tests)).to_dict()
        report["levels"][level] = runs
print(json.dumps(report))
"""


def _unprivileged_python() -> str | None:
    """An interpreter the unprivileged user can run and start again (the sandbox's workers
    are started from `sys.executable`); this one may live in root's home."""
    check = (f"import subprocess, sys; sys.path.insert(0, {str(REPO)!r}); "
             "import marlang.sandbox; assert sys.version_info >= (3, 11); "
             "subprocess.run([sys.executable, '-c', 'pass'], check=True); print(sys.executable)")
    for candidate in ("/usr/bin/python3", os.path.realpath(sys.executable)):
        probe = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", candidate,
             "-c", check], capture_output=True, text=True, cwd="/", timeout=60, check=False)
        if probe.returncode == 0:
            return probe.stdout.strip().splitlines()[-1]
    return None


def _users() -> list:
    users = [pytest.param(None, id="this-user")]
    reason = None
    if os.geteuid() != 0:
        reason = "only root can start a process as another user"
    elif shutil.which("setpriv") is None:
        reason = "setpriv (util-linux) is not installed"
    users.append(pytest.param(NOBODY, id="nobody", marks=pytest.mark.skipif(
        reason is not None, reason=reason or "")))
    return users


@pytest.mark.parametrize("uid", _users())
def test_secrets_in_the_initial_environment_stay_out_of_reach(uid):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", **SECRET_ENV}
    command = [sys.executable, "-c", SCRIPT.format(repo=str(REPO))]
    if uid is not None:
        python = _unprivileged_python()
        if python is None:
            pytest.skip("no Python interpreter here can run marlang as an unprivileged user "
                        "(the repository or the interpreter is not readable to it)")
        command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python,
                   "-c", SCRIPT.format(repo=str(REPO))]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd="/",
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == (os.getuid() if uid is None else uid)
    assert report["levels"], "no isolation level works for this user"
    for level, runs in report["levels"].items():
        HOSTILE_BY_NAME["forge_events_into_the_judges_pipes"].check(
            SandboxResult.from_dict(runs["forge_events_into_the_judges_pipes"]), {})
        secrets = SandboxResult.from_dict(runs["read_secrets"])
        assert secrets.status == "ok", (level, secrets.to_dict())
        if level != "rlimits":
            text = json.dumps(runs["read_secrets"])
            for name, value in SECRET_ENV.items():
                assert value not in text, f"{level}: the program read {name}"
    assert HOSTILE_BY_NAME["read_secrets"].tests  # the suite's own entry, not a copy
