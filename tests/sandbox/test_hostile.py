"""Every hostile program, run through `Sandbox.run_tests`, must be contained and reported clearly.

Run at every level this machine offers, the weakest ("rlimits", whose in-process guard and
seccomp filter must still stop these well-known attacks even though it is not a security
boundary) included. `test_outside_processes` runs a part of the suite again from processes
whose initial environment holds the secrets, as root and as an unprivileged user.
"""

from __future__ import annotations

import os

import pytest

from marlang.sandbox import Sandbox, SandboxLimits, detect_isolation
from tests.sandbox.hostile_programs import HOSTILE_PROGRAMS, SECRET_ENV

LIMITS = SandboxLimits(cpu_seconds=3.0, wall_seconds=3.0, test_timeout=1.0, memory_mb=256)
LEVELS_UNDER_TEST = list(detect_isolation().available)


@pytest.fixture(scope="module", params=LEVELS_UNDER_TEST)
def sandbox(request):
    # Secrets go into our environment before the workers start: they must still not leak.
    saved = {name: os.environ.get(name) for name in SECRET_ENV}
    os.environ.update(SECRET_ENV)
    try:
        with Sandbox(LIMITS, workers=2, isolation=request.param) as sb:
            yield sb
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.mark.parametrize("entry", HOSTILE_PROGRAMS, ids=lambda e: e.name)
def test_hostile_program_is_contained(sandbox, entry, tmp_path):
    context = entry.prepare(tmp_path)
    context["worker_pids"] = sandbox.worker_pids()
    context["process_limit"] = sandbox.isolation.details["process_limit"]
    try:
        result = sandbox.run_tests(entry.render(context), list(entry.tests), setup=entry.setup)
        entry.check(result, context)
        assert result.status != "crashed", result.to_dict()
        if result.status != "ok":
            assert result.message, "a non-ok result must say why"
    finally:
        entry.cleanup(context)
    # The parent is unharmed and the pool still works, with the same workers.
    assert sorted(sandbox.worker_pids()) == sorted(context["worker_pids"])
    after = sandbox.run_tests("def f():\n    return 41 + 1\n", ["assert f() == 42"])
    assert after.all_passed, after.to_dict()


def test_every_program_renders_without_leftover_placeholders(tmp_path):
    for entry in HOSTILE_PROGRAMS:
        context = entry.prepare(tmp_path)
        try:
            text = entry.render({**context, "worker_pids": [os.getpid()]})
            compile(text, entry.name, "exec")
            assert "{pid}" not in text and "{port}" not in text and "{canary" not in text
        finally:
            entry.cleanup(context)
