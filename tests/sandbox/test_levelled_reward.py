"""The levelled reward pays nothing for structure or cooperation that was not really earned.

Every answer below runs through the joint coding env's own `step` (so through the sandbox and
the cooperation check: the code's data flow, then the runs with the helper's results passed on
and perturbed); each attack states the levels it is expected to get.
"""

from __future__ import annotations

import pytest

from marlang.envs.tasks.coding import CodeTaskEnv
from marlang.envs.tasks.data import CodeProblem
from marlang.envs.tasks.levelled import (
    LEVELLED_MAX,
    helper_result_used,
    is_trivial_function,
    levelled_reward,
    real_helpers,
)
from marlang.sandbox import Sandbox, SandboxLimits

ADD = CodeProblem(
    task_id="Toy/add",
    prompt='def add(a, b):\n    """Return the sum of a and b."""\n',
    entry_point="add",
    tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(5, -2) == 3",
           "assert add(10, 5) == 15"),
    canonical_solution='def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n',
)
REAL_HELPER = "def aux(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(wall_seconds=5.0, test_timeout=2.0), workers=2) as sb:
        yield sb


def levels(sandbox, helper: str, main: str) -> dict:
    env = CodeTaskEnv([ADD], env_id="toy/add", structure="joint", reward="levelled",
                      max_steps=1, sandbox=sandbox)
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({"agent_0": helper, "agent_1": main})
    levelled = infos["agent_0"]["levelled_reward"]
    assert rewards["agent_0"] == pytest.approx(levelled["total"])  # reward="levelled" pays it
    return levelled


def _parts(levelled: dict) -> tuple[float, float, float, float]:
    return (levelled["structure"], levelled["syntax"], levelled["tests"],
            levelled["cooperation"])


def test_real_cooperation_earns_every_level(sandbox):
    levelled = levels(sandbox, REAL_HELPER,
                      "def add(a, b):\n    total = aux(a, b)\n    return int(total)\n")
    assert _parts(levelled) == (1.0, 0.5, 1.0, 1.5) and levelled["total"] == LEVELLED_MAX
    assert levelled["earned"] and levelled["helper_result_used"]


def test_a_thin_wrapper_around_a_real_helper_earns_half_a_point(sandbox):
    levelled = levels(sandbox, REAL_HELPER, "def add(a, b):\n    return aux(a, b)\n")
    assert _parts(levelled) == (1.0, 0.5, 1.0, 0.5) and levelled["thin_wrapper"]


def test_nothing_is_paid_before_a_test_passes(sandbox):
    # Well-formed helper and main that load but pass no test: 0, not structure + syntax.
    levelled = levels(sandbox, REAL_HELPER,
                      "def add(a, b):\n    total = aux(a, -b)\n    return total\n")
    assert levelled["total"] == 0.0 and not levelled["earned"]
    assert levelled["loads"] and levelled["main_defined"] and levelled["helper_defined"]
    broken = levels(sandbox, REAL_HELPER, "def add(a, b):\n    return aux(a, b\n")
    assert broken["total"] == 0.0 and not broken["loads"]


def test_an_empty_helper_returning_a_constant_earns_no_structure_or_cooperation(sandbox):
    levelled = levels(sandbox, "def aux(a, b):\n    return 0\n",
                      "def add(a, b):\n    aux(a, b)\n    s = a + b\n    return s\n")
    assert _parts(levelled) == (0.6, 0.5, 1.0, 0.0) and not levelled["helper_defined"]


def test_calling_a_real_helper_without_using_it_earns_no_cooperation(sandbox):
    levelled = levels(sandbox, "def aux(a, b):\n    return a * b\n",
                      "def add(a, b):\n    unused = aux(a, b)\n    s = a + b\n    return s\n")
    assert levelled["helper_called"] and not levelled["helper_result_used"]
    assert _parts(levelled) == (1.0, 0.5, 1.0, 0.0)


def test_a_disguised_constant_helper_earns_no_cooperation(sandbox):
    helper = "def aux(a, b):\n    seven = 7\n    return seven\n"
    main = "def add(a, b):\n    k = aux(a, b)\n    s = a + b + k - 7\n    return s\n"
    levelled = levels(sandbox, helper, main)
    assert not levelled["helper_defined"]  # its value is not computed from its arguments
    assert not levelled["helper_result_used"] and _parts(levelled) == (0.6, 0.5, 1.0, 0.0)


def test_a_disguised_pass_through_helper_earns_no_cooperation(sandbox):
    helper = "def aux(x):\n    y = x\n    return y\n"
    main = "def add(a, b):\n    s = aux(a + b)\n    return s + 0\n"
    levelled = levels(sandbox, helper, main)
    assert not levelled["helper_defined"] and not levelled["helper_result_used"]
    assert levelled["cooperation"] == 0.0 and levelled["total"] == 2.1


# Ways a main that does all the work itself could tell the cooperation check's runs (the
# helpers wrapped) from the judged one, and fail there to look like it needs them.
DETECTORS = {
    "marker_names": "any(name.startswith('_marlang') for name in globals())",
    "new_globals": "set(globals()) - _KNOWN",
    "identity": "aux is not _ORIGINAL",
    "names": "(aux.__name__, aux.__qualname__, aux.__code__.co_name) != ('aux',) * 3",
    "wrapper_traces": "hasattr(aux, '__wrapped__') or aux.__globals__ is not globals() "
                      "or aux.__module__ != __name__ or aux.__doc__ != 'Sum.'",
}


def _detecting_main(detect: str) -> str:
    return ("_ORIGINAL = aux\n"
            "def add(a, b):\n"
            "    unused = aux(a, b)\n"
            f"    if {detect}:\n"
            "        return None\n"
            "    s = a + b\n"
            "    return s\n"
            "_KNOWN = set(globals()) | {'_KNOWN'}\n")


@pytest.mark.parametrize("detector", sorted(DETECTORS))
def test_a_main_that_detects_the_cooperation_check_earns_no_more(sandbox, detector):
    """No marker, name or identity tells the checking runs apart: a main that computes the
    answer itself and sabotages them when it sees one earns what the same main earns when it
    never looks (no cooperation, 2.5)."""
    helper = 'def aux(a, b):\n    """Sum."""\n    return a + b\n'
    honest = levels(sandbox, helper, _detecting_main("False"))
    assert honest["total"] == 2.5 and not honest["helper_result_used"]
    detecting = levels(sandbox, helper, _detecting_main(DETECTORS[detector]))
    assert detecting["tests"] == 1.0  # the judged run is not fooled into failing either
    assert detecting["total"] <= honest["total"] and not detecting["helper_result_used"]


# A main that computes the answer itself and tests the helper, to fail on purpose wherever
# the helper's work has been taken away (issue 36): a frozen helper answers two inputs alike,
# a pass-through returns its argument, a substitute is a different object, raises elsewhere
# or runs at another speed. Each probe is tried with each way of failing on what it sees.
PROBES = {
    "twice_alike": "aux(1, 2) == aux(3, 4)",
    "pass_through": "aux(a, b) is a or aux(7, 1) == 7",
    "against_own_answer": "aux(a, b) != a + b",
    "raises_elsewhere": "not _raises(aux, 'x', None)",
    "identity": "id(aux) != _ID",
    "code": "aux.__code__.co_code != _CODE",
    "timing": "_took(aux) > 1.0",
}
SABOTAGES = {
    "return": "    if {probe}:\n        return None\n",
    "assign": "    if {probe}:\n        s = None\n",
    "conditional": "    s = s if not ({probe}) else None\n",
    "filter": "    s = [v for v in [s] if not ({probe})][0]\n",
    "arithmetic": "    s = s * (not ({probe}))\n",
}
_PROBING_PRELUDE = ("import time\n"
                    "_ID, _CODE = id(aux), aux.__code__.co_code\n"
                    "def _raises(f, *args):\n"
                    "    try:\n        f(*args)\n    except Exception:\n        return True\n"
                    "    return False\n"
                    "def _took(f):\n"
                    "    start = time.perf_counter()\n    f(1, 2)\n"
                    "    return time.perf_counter() - start\n")


def _probing_main(probe: str, sabotage: str) -> str:
    return (_PROBING_PRELUDE + "def add(a, b):\n    s = a + b\n"
            + SABOTAGES[sabotage].format(probe=probe) + "    return s\n")


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_main_that_tests_the_helper_earns_no_more_than_one_that_never_looks(sandbox, probe):
    """A decision on the helper's behaviour carries no value into main's answer, so the code
    check pays nothing for it: whatever a main learns from the helper's behaviour and does
    with it, it earns what the same main earns without the probe (the helper is real, so
    1.0 + 0.5 + 1.0)."""
    honest = levels(sandbox, REAL_HELPER, _probing_main("False", "return"))
    assert honest["total"] == 2.5 and not honest["helper_result_used"]
    for sabotage in sorted(SABOTAGES):
        probing = levels(sandbox, REAL_HELPER, _probing_main(PROBES[probe], sabotage))
        assert probing["tests"] == 1.0, sabotage  # the probe sees the real helper: it passes
        assert probing["total"] <= honest["total"], sabotage
        assert not probing["helper_result_used"], sabotage


def test_a_main_that_replaces_the_helper_earns_no_cooperation(sandbox):
    """The static check follows the helper's name: a main that brings its own ``aux`` (a
    redefinition, a local, a parameter, through ``globals()``) is not calling the helper."""
    own = {
        "redefined": "def aux(a, b):\n    return a + b\ndef add(a, b):\n    s = aux(a, b)\n    return s * 1\n",
        "local": "def add(a, b):\n    aux = lambda x, y: x + y\n    s = aux(a, b)\n    return s * 1\n",
        "parameter": "def add(a, b, aux=lambda x, y: x + y):\n    s = aux(a, b)\n    return s * 1\n",
        "globals": "globals()['aux'] = lambda x, y: x + y\n"
                   "def add(a, b):\n    s = aux(a, b)\n    return s * 1\n",
    }
    helper = "def aux(a, b):\n    return a - b\n"  # wrong: only the main's own aux passes
    for how, main in own.items():
        levelled = levels(sandbox, helper, main)
        assert levelled["tests"] == 1.0 and levelled["helper_called"], how
        assert not levelled["helper_result_used"] and levelled["cooperation"] == 0.0, how
    rebinding_helper = helper + "aux = lambda a, b: a + b\n"
    levelled = levels(sandbox, rebinding_helper, "def add(a, b):\n    s = aux(a, b)\n    return s * 1\n")
    assert levelled["tests"] == 1.0 and levelled["cooperation"] == 0.0


def test_a_main_that_ignores_the_helper_earns_no_cooperation(sandbox):
    levelled = levels(sandbox, REAL_HELPER, "def add(a, b):\n    return b + a\n")
    assert _parts(levelled) == (1.0, 0.5, 1.0, 0.0) and not levelled["helper_called"]


# A main that computes the answer itself and still reads, in the code, as one that returns the
# helper's result, with a helper that never runs (`REAL_HELPER`, dead code) or is wrong
# (`WRONG_HELPER`, its result never reaches the answer). Each earned 4.0 with the cooperation
# points read from the code alone, against 2.5 for the same main without the trick.
WRONG_HELPER = "def aux(a, b):\n    return a - b\n"
NEVER_USED = {
    "if_false": "def add(a, b):\n    s = a + b\n    if False:\n        s = aux(a, b)\n    return s\n",
    "if_zero": "def add(a, b):\n    s = a + b\n    if 0:\n        s = aux(a, b)\n    return s\n",
    "after_return": "def add(a, b):\n    s = a + b\n    return s\n    return aux(a, b)\n",
    "short_circuit": "def add(a, b):\n    s = (True or aux(a, b)) and a + b\n    return s\n",
    "short_circuit_value": "def add(a, b):\n    s = (a + b) or aux(a, b)\n    return s\n",
    "except_not_taken": "def add(a, b):\n    try:\n        s = a + b\n    except Exception:\n"
                        "        s = aux(a, b)\n    return s\n",
    "other_list_element": "def add(a, b):\n    s = [a + b, aux(a, b)][0]\n    return s\n",
    "times_zero": "def add(a, b):\n    s = a + b + 0 * aux(a, b)\n    return s\n",
    "never_the_max": "def add(a, b):\n    s = max(a + b, aux(a, b) - 10 ** 9)\n    return s\n",
}


@pytest.mark.parametrize("how", sorted(NEVER_USED))
@pytest.mark.parametrize("helper", ["real", "wrong"])
def test_a_helper_call_the_answer_does_not_depend_on_earns_no_cooperation(sandbox, how, helper):
    """The bonus needs the helper to run on the hidden tests' inputs while main runs, and
    main's results to change when the helper's results are perturbed: dead code, a
    short-circuit, an unused list element or a result multiplied away earn nothing."""
    levelled = levels(sandbox, REAL_HELPER if helper == "real" else WRONG_HELPER, NEVER_USED[how])
    assert levelled["tests"] == 1.0 and levelled["helper_defined"]
    assert levelled["cooperation"] == 0.0 and not levelled["helper_result_used"]
    assert levelled["total"] == 2.5


# The helper (wrong) rebound to main's own function when the program loads, through each
# route to the module's namespace.
REBINDINGS = {
    "frame_globals": "import sys\nsys._getframe().f_globals['aux'] = lambda a, b: a + b\n",
    "module_object": "import sys\nsetattr(sys.modules[__name__], 'aux', lambda a, b: a + b)\n",
    "builtins": "import builtins, sys\nbuiltins.aux = lambda a, b: a + b\n"
                "sys._getframe().f_globals.pop('aux')\n",
    "dunder_builtins": "import sys\n__builtins__.aux = lambda a, b: a + b\n"
                       "sys._getframe().f_globals.pop('aux')\n",
    "code_swapped": "def _own(a, b):\n    return a + b\n"
                    "import sys\nsys._getframe().f_globals['aux'].__code__ = _own.__code__\n",
    "at_call_time": "import sys\n_g = sys._getframe().f_globals\n",
}


@pytest.mark.parametrize("how", sorted(REBINDINGS))
def test_a_main_that_rebinds_the_helper_at_run_time_earns_no_cooperation(sandbox, how):
    main = REBINDINGS[how] + "def add(a, b):\n"
    if how == "at_call_time":
        main += "    _g['aux'] = lambda x, y: x + y\n"
    main += "    s = aux(a, b)\n    return s * 1\n"
    levelled = levels(sandbox, WRONG_HELPER, main)
    assert levelled["tests"] == 1.0  # main's own function answers, not the helper
    assert levelled["cooperation"] == 0.0 and not levelled["helper_result_used"]


def test_a_helper_that_raises_and_is_caught_earns_no_cooperation(sandbox):
    main = ("def add(a, b):\n    try:\n        s = aux(a, b)\n    except Exception:\n"
            "        s = a + b\n    return s\n")
    raising = "def aux(a, b):\n    return (a + b) // 0\n"
    levelled = levels(sandbox, raising, main)
    assert levelled["tests"] == 1.0 and levelled["cooperation"] == 0.0
    # Raising on some of the hidden tests' inputs, and answering the others, earns nothing.
    sometimes = "def aux(a, b):\n    if a > 4:\n        raise ValueError(a)\n    return a + b\n"
    levelled = levels(sandbox, sometimes, main)
    assert levelled["tests"] == 1.0 and levelled["cooperation"] == 0.0


def test_a_helper_used_only_to_check_mains_own_answer_earns_no_cooperation(sandbox):
    """A perturbed helper makes such a main raise (or stall), never answer differently: its
    answer is its own, the helper only a guard."""
    helper = "def aux(a, b):\n    return a + b\n"
    checks = {
        "assert": "def add(a, b):\n    r = aux(a, b)\n    s = a + b\n    assert r == s\n    return s + r * 0\n",
        "raise": ("def add(a, b):\n    s = a + b\n    if aux(a, b) != s:\n        raise ValueError(s)\n"
                  "    return s\n"),
        "stall": "def add(a, b):\n    s = a + b\n    while aux(a, b) != s:\n        pass\n    return s\n",
    }
    for how, main in checks.items():
        levelled = levels(sandbox, helper, main)
        assert levelled["tests"] == 1.0, how
        assert not levelled["helper_works"] and levelled["cooperation"] == 0.0, how


def test_a_main_that_uses_the_helpers_result_keeps_the_bonus(sandbox):
    """What the runs require, real use meets: main's answer follows the helper's result."""
    uses = {
        "plus_one": ("def aux(a, b):\n    return a + b - 1\n",
                     "def add(a, b):\n    return aux(a, b) + 1\n"),
        "loop": ("def aux(v):\n    return int(v)\n",
                 ("def add(a, b):\n    total = 0\n    for v in (a, b):\n"
                  "        total += aux(v)\n    return total\n")),
        "container": ("def aux(a, b):\n    return sorted([a, b])\n",
                      "def add(a, b):\n    pair = aux(a, b)\n    return sum(pair)\n"),
        "recursive": (("def aux(a, b):\n    step = 1 if b > 0 else -1\n"
                       "    return a if b == 0 else aux(a + step, b - step)\n"),
                      "def add(a, b):\n    s = aux(a, b)\n    return int(s)\n"),
    }
    for how, (helper, main) in uses.items():
        levelled = levels(sandbox, helper, main)
        assert levelled["tests"] == 1.0, how
        assert levelled["helper_works"] and levelled["cooperation"] == 1.5, how
        assert levelled["total"] == LEVELLED_MAX, how


def test_hidden_tests_with_random_inputs_draw_the_same_ones_in_every_run(sandbox):
    """The judged and the control run must give main the same results; tests that draw their
    inputs with `random` (as HumanEval/53 does) draw the same ones in both."""
    drawn = CodeProblem(
        task_id="Toy/add_random", prompt=ADD.prompt, entry_point="add",
        test_setup="import random\n",
        tests=tuple("a, b = random.randint(0, 10 ** 6), random.randint(0, 10 ** 6)\n"
                    "assert add(a, b) == a + b" for _ in range(3)),
        canonical_solution=ADD.canonical_solution,
    )
    env = CodeTaskEnv([drawn], env_id="toy/add_random", structure="joint", reward="levelled",
                      max_steps=1, sandbox=sandbox)
    env.reset(seed=0)
    main = "def add(a, b):\n    total = aux(a, b)\n    return int(total)\n"
    _, _, _, _, infos = env.step({"agent_0": REAL_HELPER, "agent_1": main})
    levelled = infos["agent_0"]["levelled_reward"]
    assert levelled["tests"] == 1.0 and levelled["helper_works"]
    assert levelled["total"] == LEVELLED_MAX


def test_a_main_that_tells_the_wrapped_helper_apart_earns_no_cooperation(sandbox):
    """The control and the perturbed run wrap the helper alike: a main that sees the wrapper
    (it is not the object it saved when the program loaded) and answers otherwise there
    changes its results in both, so they no longer match the judged run's."""
    main = ("_SAVED = aux\n"
            "def add(a, b):\n    s = a + b + 0 * aux(a, b)\n"
            "    s = s if aux is _SAVED else [s, aux(a, b)]\n    return s\n")
    levelled = levels(sandbox, REAL_HELPER, main)
    assert levelled["tests"] == 1.0 and levelled["cooperation"] == 0.0


def test_trivial_functions_are_recognised():
    import ast

    def node(code):
        return ast.parse(code).body[0]

    for code in ("def f(x):\n    pass\n", "def f(x):\n    '''doc'''\n    return 3\n",
                 "def f(x):\n    return x\n", "def f(x, y):\n    return (x, [y, -1], {'k': None})\n",
                 "def f():\n    ...\n"):
        assert is_trivial_function(node(code)), code
    for code in ("def f(x):\n    return x + 1\n", "def f(x):\n    return len(x)\n",
                 "def f(x):\n    y = x\n    return y\n"):
        assert not is_trivial_function(node(code)), code
    assert real_helpers([("aux", "def aux(a):\n    return a\n"),
                         ("aux_1", "def aux_1(a):\n    return a * 2\n"),
                         ("aux_2", "def aux_2(a):\n    print(a)\n")]) == ["aux_1"]


def test_the_pure_function_keeps_everything_at_zero_until_earned():
    main = "def add(a, b):\n    total = aux(a, b)\n    return int(total)\n"
    none = levelled_reward([("aux", REAL_HELPER)], main, "add", loads=True, passed=0, total=4,
                           helper_works=True)
    assert none.total == 0.0 and not none.earned and none.helper_defined
    some = levelled_reward([("aux", REAL_HELPER)], main, "add", loads=True, passed=1, total=4,
                           helper_works=True)
    assert (some.structure, some.syntax, some.tests, some.cooperation) == (1.0, 0.5, 0.25, 1.5)
    assert some.total == 3.25 and some.helper_result_used
    # The same code without the runs' evidence that the helper works earns no cooperation.
    unproven = levelled_reward([("aux", REAL_HELPER)], main, "add", loads=True, passed=1,
                               total=4, helper_works=False)
    assert unproven.cooperation == 0.0 and not unproven.helper_result_used


def test_a_helper_result_counts_when_it_reaches_the_returned_value():
    def used(main, helper=REAL_HELPER):
        return levelled_reward([("aux", helper)], main, "add", loads=True, passed=4,
                               total=4, helper_works=True).helper_result_used

    for main in ("def add(a, b):\n    out = []\n    out.append(aux(a, b))\n    return out[0]\n",
                 "def add(a, b):\n    for v in [aux(a, b)]:\n        r = v\n    return r\n",
                 "def add(a, b):\n    return sum([x for x in [aux(a, b)]])\n",
                 "def add(a, b):\n    r = 0\n    r += aux(a, b)\n    return r\n",
                 "def add(a, b):\n    return (t := aux(a, b))\n"):
        assert used(main), main
    for main in ("def add(a, b):\n    if aux(a, b) > 0:\n        return a + b\n    return a + b\n",
                 "def add(a, b):\n    ok = aux(a, b) == a + b\n    return a + b\n",
                 "def add(a, b):\n    def inner():\n        return aux(a, b)\n    return a + b\n"):
        assert not used(main), main
    decorated = "import functools\n@functools.lru_cache\ndef aux(a, b):\n    return a + b\n"
    assert real_helpers([("aux", decorated)]) == []
    assert not used("def add(a, b):\n    return aux(a, b) * 1\n", decorated)


def test_code_that_reaches_frames_builtins_or_live_objects_earns_no_cooperation():
    """Frames, a trace function, the garbage collector and the builtins reach the names the
    code check follows and the objects of the helper runs: code that touches them is not paid
    (the runs would catch a rebinding too, `tests/sandbox/test_helper_probe.py`)."""
    body = "def add(a, b):\n    s = aux(a, b)\n    return s * 1\n"

    def used(prelude):
        return helper_result_used([("aux", REAL_HELPER)], prelude + body, "add")

    assert used("") and used("import sys, math\nsys.setrecursionlimit(5000)\n")
    assert used("if __name__ == '__main__':\n    print(add(1, 2))\n")
    assert used("def size(x):\n    return getattr(x, 'real', 0)\n")
    assert used("def size(x):\n    'Sizes of modules, by monitoring f_locals.'\n    return x\n")
    for prelude in ("import sys\n_f = sys._getframe()\n",
                    "from sys import _getframe\n",
                    "import sys\nsys.settrace(None)\n",
                    "import sys\nsys.setprofile(None)\n",
                    "import builtins\n",
                    "__builtins__.aux = None\n",
                    "import inspect\n",
                    "import gc\n",
                    "from gc import get_objects\n",
                    "import traceback\n",
                    "def _f(e):\n    return e.__traceback__.tb_frame\n",
                    "def _f(t):\n    return t.tb_frame.f_back\n",
                    "def _f(g):\n    return g.gi_frame.f_locals\n",
                    "def _f(x, n):\n    return getattr(x, n)\n",
                    "def _f(x):\n    return getattr(x, '_secret')\n",
                    "import operator\n_c = operator.attrgetter('__closure__')\n",
                    "from operator import attrgetter\n",
                    "_NAME = '__closure__'\n",
                    "_NAME = 'f_locals'\n",
                    "_read = getattr\n",
                    "_SHOW = '{0.__closure__[0].cell_contents}'\n",
                    "_SHOW = '{0.gi_frame.f_back}'\n"):
        assert not used(prelude), prelude
