"""The helper runs of joint coding's cooperation check: what a `HelperProbe` run records, how
it catches a helper rebound through any route, and what the program cannot forge or tell apart.
"""

from __future__ import annotations

import pytest

from marlang.sandbox import HelperProbe, Sandbox, SandboxLimits
from marlang.sandbox.helper_probe import HelperWatch, Substitute

HELPER = "def aux(a, b):\n    return a + b\n"
TESTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(10, 5) == 15"]
LINES = {"aux": (1, 2)}  # the helper's lines in `_program(...)`


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(wall_seconds=5.0, test_timeout=2.0), workers=2) as sb:
        yield sb


def _program(main: str, helper: str = HELPER) -> str:
    return helper + "\n\n\n" + main


def _three(sandbox, main: str, tests=TESTS, helper: str = HELPER):
    """The judged run (nothing wrapped), the control run and the perturbed run."""
    program = _program(main, helper)
    return sandbox.run_many([(program, tests, "", HelperProbe("add")),
                             (program, tests, "", HelperProbe("add", LINES)),
                             (program, tests, "", HelperProbe("add", LINES, perturb=True))])


def test_a_main_that_uses_the_helper_follows_its_perturbed_results(sandbox):
    judged, control, perturbed = _three(sandbox, "def add(a, b):\n    return aux(a, b) * 1\n")
    assert judged.passed == control.passed == 3 and perturbed.passed == 0
    assert "helpers" not in judged.probe  # the judged run wraps nothing
    assert control.probe["helpers"] == {"calls": 3, "raised": 0, "intact": True}
    assert control.probe["outputs"] == judged.probe["outputs"]
    assert perturbed.probe["outputs"] != control.probe["outputs"]


def test_only_calls_made_while_the_entry_point_runs_are_counted(sandbox):
    main = "def add(a, b):\n    return a + b\n"
    tests = [*TESTS, "assert aux(1, 2) == 3"]  # a test that calls the helper itself
    judged, control, perturbed = _three(sandbox, main, tests)
    assert control.probe["helpers"]["calls"] == 0
    assert perturbed.probe["outputs"] == control.probe["outputs"] == judged.probe["outputs"]


def test_a_helper_that_raises_is_counted(sandbox):
    main = ("def add(a, b):\n    try:\n        return aux(a, b) * 1\n    except ValueError:\n"
            "        return a + b\n")
    helper = "def aux(a, b):\n    if a > 4:\n        raise ValueError(a)\n    return a + b\n"
    _, control, _ = _three(sandbox, main, helper=helper)
    assert control.probe["helpers"] == {"calls": 2, "raised": 1, "intact": True}


# Every route by which a team's code can swap the function its helper agent wrote.
REBOUND = {
    "frame_globals": "import sys\nsys._getframe().f_globals['aux'] = lambda a, b: a + b\n",
    "globals": "globals()['aux'] = lambda a, b: a + b\n",
    "module_object": "import sys\nsys.modules[__name__].aux = lambda a, b: a + b\n",
    "builtins": "import builtins\nbuiltins.aux = lambda a, b: a + b\ndel globals()['aux']\n",
    "dunder_builtins": "__builtins__.aux = lambda a, b: a + b\ndel globals()['aux']\n",
    "code": "def _own(a, b):\n    return a + b\naux.__code__ = _own.__code__\n",
    "same_name": "def aux(a, b):\n    return a + b\n",
    "at_call_time": "def _own(a, b):\n    return a + b\n",
}


@pytest.mark.parametrize("how", sorted(REBOUND))
def test_a_helper_rebound_by_any_route_is_not_intact(sandbox, how):
    body = "    s = aux(a, b)\n    return s * 1\n"
    if how == "at_call_time":
        body = "    globals()['aux'] = _own\n" + body
    _, control, perturbed = _three(sandbox, REBOUND[how] + "def add(a, b):\n" + body)
    assert control.status == "ok", control.message
    assert control.probe["helpers"]["intact"] is False
    assert perturbed.probe["helpers"]["intact"] is False


def test_a_forged_count_is_refused(sandbox):
    """The program can write to its reply pipe, but not the nonce of a request that does not
    exist yet: its forged count is refused, and the run reports none."""
    # Request 1 looks `add` up, 2 calls it, 3 would ask for the count.
    forged = ('{"id": 2, "value": 3}\\n{"id": 3, "nonce": "x", "calls": 9, "raised": 0, '
              '"intact": true}\\n')
    main = ("import os\n_sent = []\n"
            "def add(a, b):\n"
            "    if not _sent:\n"
            f"        _sent.append(os.write(4, b'{forged}'))\n"
            "    return a + b\n")
    _, control, _ = _three(sandbox, main, tests=["assert add(1, 2) == 3"])
    assert control.status == "ok"
    assert control.probe["helpers"] is None


def test_the_control_and_perturbed_runs_look_alike_to_the_program(sandbox):
    """No name, marker or identity differs between the two wrapped runs: what a main sees of
    the helper without calling it (its names, the module's globals, its identity against
    what was saved at load, the identity of one result against another) is the same."""
    main = ("_SAVED = aux\n"
            "def add(a, b):\n"
            "    seen = (sorted(globals()), aux is _SAVED, aux.__name__, aux.__qualname__,\n"
            "            aux.__module__, aux.__doc__, callable(aux), type(aux).__name__,\n"
            "            aux(a, b) is aux(a, b), aux(1000, 1) is aux(1000, 1))\n"
            "    return repr(seen)\n")
    judged, control, perturbed = _three(sandbox, main, tests=["x = add(1, 2)"])
    assert control.probe["outputs"] == perturbed.probe["outputs"]
    assert control.probe["outputs"] != judged.probe["outputs"]  # the wrapper is not `_SAVED`


def test_substitutes_differ_keep_their_type_and_the_results_identities():
    namespace: dict = {}
    exec(compile(HELPER, "<program>", "exec"), namespace)  # noqa: S102 - our own helper
    watch = HelperWatch(namespace, {"entry": "add", "perturb": True, "names": {"aux": [1, 2]}})
    assert watch.intact and namespace["aux"](1, 2) == 10
    for value in (0, -1, 7, 2 ** 80, 0.0, -0.5, 1e300, float("nan"), float("inf"), 1j, -0.5j, "",
                  "ab", b"", b"ab", True, False, [], [1, [2]], (), (1, "a"), {}, {1: 2}, set(),
                  {1, 2}, frozenset({3})):
        new = watch.substitute(value)
        assert type(new) is type(value) and new != value, value
        if type(value) in (int, float, str):  # repeated, it never comes back
            again = watch.substitute(watch.substitute(new))
            assert again != value and watch.substitute(again) != value, value
    assert isinstance(watch.substitute(None), Substitute)
    assert isinstance(watch.substitute(object()), Substitute)
    shared = [1, 2]
    assert watch.substitute(shared) is watch.substitute(shared)
    assert watch.substitute(1000 + len(shared)) is not watch.substitute(1000 + len(shared))
    wrong_lines = {}
    exec(compile(HELPER, "<program>", "exec"), wrong_lines)  # noqa: S102
    elsewhere = HelperWatch(wrong_lines, {"entry": "add", "names": {"aux": [5, 9]}})
    assert not elsewhere.intact and not elsewhere.helpers
