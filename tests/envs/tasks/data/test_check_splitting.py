"""split_check_into_tests: one test per assert of check(candidate), or one check call."""

from __future__ import annotations

import pytest

from marlang.envs.tasks.data import split_check_into_tests

SIMPLE = '''
import math

METADATA = {"author": "marlang"}


def _close(a, b):
    return math.isclose(a, b)


def check(candidate):
    """Checks the candidate."""
    assert candidate(1) == 2
    assert _close(candidate(0.5), 1.5), "candidate stays in this message"
    assert True, "a debugging marker, not a test"
    assert candidate("candidate") == "candidate!"
    assert all(candidate(x) > x for x in [1, 2])
    assert (lambda f: f(3))(candidate) == 4


check(inc)
'''


def _execute(setup: str, program: str, test: str, **names) -> None:
    """Runs setup, program and one test in one namespace (only this file's own code)."""
    namespace: dict = dict(names)
    for code in (setup, program, test):
        exec(code, namespace)  # noqa: S102 - trusted test code, no sandbox needed


def test_each_assert_becomes_a_test_with_candidate_renamed():
    setup, tests = split_check_into_tests(SIMPLE, "inc")
    assert tests == (
        "assert inc(1) == 2",
        "assert _close(inc(0.5), 1.5), 'candidate stays in this message'",
        "assert inc('candidate') == 'candidate!'",
        "assert all((inc(x) > x for x in [1, 2]))",
        "assert (lambda f: f(3))(inc) == 4",
    )
    # Imports, METADATA and helpers stay, verbatim; the check and its call do not.
    assert setup == (
        'import math\n\nMETADATA = {"author": "marlang"}\n\n'
        "def _close(a, b):\n    return math.isclose(a, b)"
    )


def test_split_tests_run_against_a_program():
    setup, tests = split_check_into_tests(SIMPLE, "inc")
    program = "def inc(x):\n    return x + 1 if not isinstance(x, str) else x + '!'\n"
    for test in tests:
        _execute(setup, program, test)


def test_the_parameter_name_of_check_is_what_gets_renamed():
    _, tests = split_check_into_tests("def check(f):\n    assert f(2) == 4\n", "square")
    assert tests == ("assert square(2) == 4",)


@pytest.mark.parametrize(
    "body",
    [
        "    for x in range(3):\n        assert candidate(x) == x + 1\n",
        "    expected = 2\n    assert candidate(1) == expected\n",
        "    helper(candidate)\n",
        "    if True:\n        assert candidate(1) == 2\n",
        "    assert True\n",
    ],
)
def test_checks_with_other_statements_stay_whole(body):
    code = "import random\n\n\ndef check(candidate):\n" + body
    setup, tests = split_check_into_tests(code, "inc")
    assert tests == ("check(inc)",)
    assert setup.startswith("import random")
    assert "def check(candidate):" in setup
    _execute(setup, "def inc(x):\n    return x + 1\n", tests[0], helper=lambda f: None)


def test_imports_inside_check_move_to_the_setup():
    code = "def check(candidate):\n    from math import sqrt\n    assert candidate(4) == sqrt(4)\n"
    setup, tests = split_check_into_tests(code, "root")
    assert setup == "from math import sqrt"
    assert tests == ("assert root(4) == sqrt(4)",)


def test_checks_with_unusual_signatures_stay_whole():
    setup, tests = split_check_into_tests(
        "def check(candidate, strict=True):\n    assert candidate(1)\n", "f"
    )
    assert tests == ("check(f)",) and "strict=True" in setup


@pytest.mark.parametrize(
    ("code", "entry_point", "message"),
    [
        ("assert f(1) == 1\n", "f", "no top-level `def check"),
        ("def check(candidate):\n    assert candidate(\n", "f", "does not parse"),
        ("def check(candidate):\n    assert candidate(1)\n", "not a name", "identifier"),
    ],
)
def test_bad_input_is_refused(code, entry_point, message):
    with pytest.raises(ValueError, match=message):
        split_check_into_tests(code, entry_point)
