"""marlang/envs/tasks/coding.py: `judge_code` gives the verdict `code/humaneval`'s own step gives
a sequential team's final answer, under the same limits, so a reward outside the env (an app's
`score`) and the env cannot disagree."""

from __future__ import annotations

import pytest

from marlang.envs import make
from marlang.envs.tasks.coding import judge_code
from marlang.sandbox import Sandbox, SandboxLimits, detect_isolation

LIMITS = SandboxLimits(cpu_seconds=5.0, wall_seconds=5.0, test_timeout=3.0)
PROBLEMS = ("HumanEval/0", "HumanEval/32")  # HumanEval/32's `check` stays whole


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS, workers=2, isolation=detect_isolation().available[0]) as pool:
        yield pool


@pytest.fixture(scope="module")
def env(sandbox):
    env = make("code/humaneval", n_agents=1, max_steps=1, sandbox=sandbox)
    yield env
    env.close()


def _answers(problem) -> dict[str, str]:
    entry = problem.entry_point
    return {
        "canonical": f"```python\n{problem.canonical_solution}\n```",
        "body only": problem.canonical_solution[len(problem.prompt):],
        "wrong": f"def {entry}(*args):\n    return None\n",
        "syntax error": f"def {entry}(:\n    return None\n",
        "blank": "",
    }


def test_judge_code_agrees_with_the_envs_step(env, sandbox):
    for task_id in PROBLEMS:
        env.reset(options={"problem": task_id})
        problem = env.current_problem
        for what, answer in _answers(problem).items():
            env.reset(options={"problem": task_id})
            _, _, _, _, infos = env.step({"agent_0": answer})
            info = infos["agent_0"]
            check = judge_code(problem, answer, sandbox=sandbox)
            got = (check.passed, check.total, round(check.pass_rate, 6), check.status, check.solved)
            assert got == (info["passed"], info["total"], info["pass_rate"], info["status"], info["solved"]), (
                task_id, what,
            )
        assert judge_code(problem, _answers(problem)["canonical"], sandbox=sandbox).pass_rate == 1.0


def test_judge_code_places_a_syntax_error_in_the_answer_and_runs_nothing_for_a_blank_one(env, sandbox):
    env.reset(options={"problem": "HumanEval/0"})
    problem = env.current_problem
    broken = judge_code(problem, "```python\ndef has_close_elements(:\n    pass\n```", sandbox=sandbox)
    assert not broken.facts.compiles and "line 1" in (broken.facts.syntax_error or "")
    assert (broken.passed, broken.pass_rate) == (0, 0.0)
    blank = judge_code(problem, "  \n", sandbox=sandbox)
    assert (blank.answered, blank.status, blank.passed, blank.total) == (False, "no_answer", 0, len(problem.tests))
