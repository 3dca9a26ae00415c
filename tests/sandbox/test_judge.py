"""The verdict comes from outside the program: plain data across the boundary, tests judged there.

Covers the plain-data codec, what programs may return and tests may do with it, the dataset
canonical solutions (every one passes every test) and the issue's four-line exploit (it passes
none).
"""

from __future__ import annotations

import collections
import json
import math

import pytest

from marlang.envs.tasks.data import load_task
from marlang.envs.tasks.data.humaneval import (
    code_problem_from_humaneval_row,
    read_packaged_humaneval,
)
from marlang.sandbox import Sandbox, SandboxLimits
from marlang.sandbox.plain_data import (
    MAX_DEPTH,
    PlainDataError,
    decode,
    encode,
    type_name,
)

FAST = SandboxLimits(cpu_seconds=5.0, wall_seconds=20.0, test_timeout=3.0, memory_mb=256)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(FAST, workers=2) as sb:
        yield sb


def _refuse(value):
    raise PlainDataError(f"not plain: {type(value).__name__}")


def _no_refs(tag, body):
    raise AssertionError("no references expected")


def _round_trip(value):
    return decode(json.loads(json.dumps(encode(value, _refuse))), _no_refs)


# --------------------------------------------------------------------------- the codec

@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2 ** 200, -(3 ** 300), 1.5, -0.0, float("inf"), "",
    "héllo \udcff", b"\x00\xff", [1, [2, [3]]], (1,), (), {"a": (1, 2), 3: [None]},
    {1, 2, 3}, frozenset({"x"}), {(1, 2): frozenset({b"k"})}, [[], {}, set()],
])
def test_plain_values_cross_unchanged_with_their_exact_types(value):
    back = _round_trip(value)
    assert back == value and type(back) is type(value)
    if isinstance(value, float) and value == 0.0:
        assert math.copysign(1.0, back) == -1.0


def test_nan_crosses_as_nan():
    assert math.isnan(_round_trip(float("nan")))


def test_standard_dict_subclasses_cross_as_plain_dicts():
    for value in (collections.Counter("aab"), collections.OrderedDict(a=1),
                  collections.defaultdict(int, {"x": 2})):
        back = _round_trip(value)
        assert type(back) is dict and back == dict(value)


def test_anything_else_goes_to_the_other_hook_even_subclasses():
    class Int(int):
        pass

    seen = []
    encode([Int(3), 1.0, range(2), object], lambda v: seen.append(v) or {"h": [0, "x"]})
    assert [type(v) for v in seen] == [Int, range, type]
    assert type_name(Int(3)) == "Int (a subclass of int)" and type_name(range(2)) == "range"


def test_too_deep_or_self_referencing_values_are_refused():
    box: list = []
    box.append(box)
    with pytest.raises(PlainDataError, match="nested more than"):
        encode(box, _refuse)
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(PlainDataError):
        encode(deep, _refuse)


@pytest.mark.parametrize("bad", [
    {"t": [1], "s": [2]}, {"x": 1}, {"b": 5}, {"b": "zz"}, {"d": [[1]]}, {"s": [[1]]},
    {"i": "g"}, {"t": "abc"},
])
def test_malformed_data_is_refused(bad):
    with pytest.raises(PlainDataError):
        decode(bad, _no_refs)


# --------------------------------------------------------------------------- judging

def test_program_values_functions_and_modules_reach_the_tests(sandbox):
    program = ("import math as m\nimport collections\nLIMIT = (3, 'x')\n"
               "def freq(xs):\n    return collections.Counter(xs)\n"
               "def apply(f, x):\n    return f(x)\n"
               "def double(x):\n    return 2 * x\n")
    res = sandbox.run_tests(program, [
        "assert LIMIT == (3, 'x') and type(LIMIT) is tuple",
        "assert freq([1, 1, 2]) == {1: 2, 2: 1}",
        "assert m.sqrt(16) == 4.0",
        "assert apply(double, 21) == 42",
        "assert (lambda f: f(3))(double) == 6",
        "assert all(double(x) > x for x in [1, 2])",
        "assert undefined_name == 1",
    ])
    assert [t.passed for t in res.tests] == [True] * 6 + [False], res.to_dict()
    assert res.tests[-1].error_type == "NameError"


def test_objects_can_be_handed_back_to_the_program_but_not_judged(sandbox):
    program = ("class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
               "def longest(pairs, n):\n    return sum(1 for p in pairs[:n] if p.a < p.b)\n"
               "def make(a):\n    return Pair(a, a + 1)\n")
    res = sandbox.run_tests(program, [
        "assert longest([Pair(5, 24), Pair(15, 25), Pair(27, 40)], 3) == 3",
        "p = make(1)\nassert longest([p], 1) == 1",
        "assert make(1) == Pair(1, 2)",
        "assert make(1).a == 1",
        "make(1)",
    ])
    assert [t.passed for t in res.tests] == [True, True, False, False, False], res.to_dict()
    assert {t.error_type for t in res.tests[2:]} == {"NotPlainData"}
    assert "Pair" in res.tests[2].message and "not plain data" in res.tests[2].message


def test_exceptions_a_test_expects_still_work(sandbox):
    program = ("class Bad(ValueError):\n    pass\n"
               "def positive(x):\n    if x < 0:\n        raise ValueError('negative')\n"
               "    return x\n"
               "def custom():\n    raise Bad('mine')\n")
    res = sandbox.run_tests(program, [
        ("try:\n    positive(-1)\nexcept ValueError as e:\n    assert 'negative' in str(e)\n"
        "else:\n    raise AssertionError('no error')"),
        "assert positive(-1) == 1",
        "assert custom() == 1",
    ])
    assert [t.passed for t in res.tests] == [True, False, False], res.to_dict()
    assert res.tests[1].error_type == "ValueError" and "program line 5" in res.tests[1].message
    assert res.tests[2].error_type == "Bad"


def test_tests_print_into_the_captured_output(sandbox):
    res = sandbox.run_tests("def f():\n    print('from program')\n    return 1\n",
                            ["print('from test', f())"])
    assert res.all_passed and "from program" in res.stdout and "from test 1" in res.stdout


def test_a_call_that_times_out_leaves_the_next_tests_running(sandbox):
    program = "import time\ndef slow():\n    time.sleep(30)\ndef fast():\n    return 1\n"
    limits = SandboxLimits(wall_seconds=8.0, test_timeout=0.5, cpu_seconds=5.0)
    with Sandbox(limits, workers=1) as sb:
        res = sb.run_tests(program, ["slow()", "assert fast() == 1", "slow()",
                                     "assert fast() == 1"])
    assert res.status == "ok", res.to_dict()
    assert [t.timed_out for t in res.tests] == [True, False, True, False]
    assert res.tests[1].passed and res.tests[3].passed


# --------------------------------------------------------------------------- datasets

def _humaneval():
    rows = read_packaged_humaneval()
    return rows, [code_problem_from_humaneval_row(r, source="humaneval", index=i)
                  for i, r in enumerate(rows)]


def test_every_humaneval_canonical_solution_passes_every_test(sandbox):
    rows, problems = _humaneval()
    split = sandbox.run_many([(p.canonical_solution, list(p.tests), p.test_setup)
                              for p in problems])
    whole = sandbox.run_many([(r["prompt"] + r["canonical_solution"],
                               [r["test"] + f"\ncheck({r['entry_point']})"], "") for r in rows])
    assert sum(len(p.tests) for p in problems) == 1106
    assert [p.task_id for p, r in zip(problems, split, strict=True) if not r.all_passed] == []
    assert [p.task_id for p, r in zip(problems, whole, strict=True) if not r.all_passed] == []


def test_the_issues_always_equal_answer_passes_no_humaneval_test(sandbox):
    _, problems = _humaneval()
    exploit = ("    return _Anything()\n\n\nclass _Anything:\n"
               "    def __eq__(self, other):\n        return True\n"
               "    def __ne__(self, other):\n        return False\n"
               "    def __hash__(self):\n        return 0\n")
    results = sandbox.run_many([(p.prompt + exploit, list(p.tests), p.test_setup)
                                for p in problems[:20]])
    assert sum(r.total for r in results) == 82
    assert all(r.status == "ok" and len(r.tests) == r.total for r in results)  # all ran
    assert sum(r.passed for r in results) == 0 and not any(r.all_passed for r in results)


def test_humaneval_prompt_helpers_come_from_the_dataset_not_the_program(sandbox):
    _, problems = _humaneval()
    for index, helper, answer in ((38, "encode_cyclic", "decode_cyclic"),
                                  (50, "encode_shift", "decode_shift")):
        problem = problems[index]
        assert f"def {helper}" in problem.test_setup
        cheat = (f"def {helper}(s: str):\n    return s\n\n\n"
                 f"def {answer}(s: str):\n    return s\n")
        result = sandbox.run_tests(cheat, list(problem.tests), problem.test_setup)
        assert result.status == "ok" and result.passed == 0, result.to_dict()
        honest = sandbox.run_tests(problem.canonical_solution, list(problem.tests),
                                   problem.test_setup)
        assert honest.all_passed


def test_mbpp_and_coophumaneval_fixtures_pass_with_their_canonical_code(sandbox, request):
    fixtures = request.path.parent.parent / "envs" / "tasks" / "data" / "fixtures"
    problems = [
        *load_task("mbpp", data_files=str(fixtures / "mbpp_sanitized.jsonl")),
        *load_task("coophumaneval", data_files=str(fixtures / "coophumaneval.jsonl")),
        *load_task("humaneval", data_files=str(fixtures / "humaneval.jsonl")),
    ]
    solvable = [p for p in problems if p.canonical_solution]
    assert len(solvable) >= 6
    results = sandbox.run_many([(p.canonical_solution, list(p.tests), p.test_setup)
                                for p in solvable])
    assert [p.task_id for p, r in zip(solvable, results, strict=True) if not r.all_passed] == []
