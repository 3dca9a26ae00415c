"""Every hostile program of the sandbox suite, submitted as an agent's answer through the coding
env's own ``step``: the step returns a clear judged result, the sandbox report in ``infos``
passes the program's containment check, and the parent and the env keep working."""

from __future__ import annotations

import os

import pytest

from marlang.envs.tasks.coding import CodeTaskEnv
from marlang.envs.tasks.data import CodeProblem
from marlang.sandbox import STATUSES, SandboxResult
from tests.sandbox.hostile_programs import HOSTILE_PROGRAMS

ADD = CodeProblem(
    task_id="Toy/add",
    prompt="Write a function add(a, b) that returns a + b.",
    entry_point="add",
    tests=("assert add(2, 3) == 5",),
    canonical_solution="def add(a, b):\n    return a + b\n",
)


def hostile_problem(entry) -> CodeProblem:
    """A task whose hidden tests are the hostile program's own (they call its attack); the
    prompt is prose, so nothing is put before the agent's code."""
    return CodeProblem(
        task_id=f"Hostile/{entry.name}",
        prompt="Write the function the tests call.",
        entry_point="attack",
        tests=tuple(entry.tests),
    )


@pytest.mark.parametrize("entry", HOSTILE_PROGRAMS, ids=lambda e: e.name)
def test_hostile_answer_through_step_is_contained(entry, tmp_path):
    env = CodeTaskEnv(
        [hostile_problem(entry), ADD], n_agents=1, max_steps=2, timeout=3.0, test_timeout=1.0,
        env_id="toy/hostile",
    )
    env.reset(options={"problem": 0})
    context = entry.prepare(tmp_path)
    context["worker_pids"] = env.sandbox.worker_pids()
    try:
        observations, rewards, terminations, truncations, infos = env.step(
            {"agent_0": entry.render(context)}
        )
        info = infos["agent_0"]
        result = SandboxResult.from_dict(info["report"])
        entry.check(result, context)
    finally:
        entry.cleanup(context)
    # A clear judged result: a known status, a reason when not ok, no success, feedback.
    assert info["evaluated"] and info["status"] in STATUSES and info["status"] != "crashed"
    if info["status"] != "ok":
        assert result.message
    assert info["passed"] == result.passed and info["total"] == len(entry.tests)
    assert rewards["agent_0"] == pytest.approx(info["pass_rate"])
    # Some attacks are refused without an error (a write lands in the run's own /tmp, the
    # environment read is scrubbed): their tests pass, and the task counts as solved.
    assert info["success"] == result.all_passed == all(terminations.values())
    assert not any(truncations.values())
    if not info["success"]:
        assert "Checks of the team's answer" in observations["agent_0"].text
    # The parent is unharmed, the pool kept its workers, and the env still solves a task.
    os.kill(os.getpid(), 0)
    assert sorted(env.sandbox.worker_pids()) == sorted(context["worker_pids"])
    env.reset(options={"problem": "Toy/add"})
    _, _, _, _, infos = env.step({"agent_0": ADD.canonical_solution})
    assert infos["agent_0"]["success"]
    env.close()
