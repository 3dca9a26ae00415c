"""The levelled reward of a code answer: what its code does (functions, returns, calls) and how
it uses the helpers it was given, scored in levels from parsing up to passing the tests; the
cooperation points need both the code's data flow and runs in which the helpers' results change.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from marlang.envs.tasks.dataflow import bindings, reaches_namespaces, returns_from

DIAGNOSTIC_CHARS = 300
"""Longest error message or value shown for one test in feedback."""

LEVELLED_MAX = 4.0
"""Highest levelled reward: structure 1.0 + syntax 0.5 + tests 1.0 + cooperation 1.5."""


@dataclass(frozen=True)
class CodeFacts:
    """What parsing (never running) a Python answer shows."""

    compiles: bool
    syntax_error: str | None = None
    """'line 3: invalid syntax' when it does not compile."""
    functions: frozenset[str] = frozenset()
    """Names of the top-level functions it defines."""
    returning: frozenset[str] = frozenset()
    """Top-level functions with a ``return <value>`` (or ``yield``) in their body."""


def analyze_code(code: str) -> CodeFacts:
    """Parse ``code`` (a program or a fragment of one) without running it."""
    try:
        tree = ast.parse(code)
        compile(tree, "<answer>", "exec")
    except SyntaxError as error:
        where = f"line {error.lineno}: " if error.lineno else ""
        return CodeFacts(False, f"{where}{error.msg}")
    except (ValueError, RecursionError, MemoryError) as error:
        return CodeFacts(False, f"{type(error).__name__}: {error}"[:DIAGNOSTIC_CHARS])
    functions = _top_level_functions(tree)
    returning = {name for name, node in functions.items() if _returns_value(node)}
    return CodeFacts(True, None, frozenset(functions), frozenset(returning))


def _top_level_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _returns_value(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Return) and n.value is not None)
        or isinstance(n, (ast.Yield, ast.YieldFrom))
        for n in ast.walk(node)
    )


def _body_without_docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(node.body)
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    return body


def _called_names(node: ast.AST) -> set[str]:
    return {
        n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


@dataclass(frozen=True)
class HelperUsage:
    """How the main function uses the helpers written by teammates (joint coding)."""

    called: tuple[str, ...] = ()
    """Helper names the main function calls."""
    thin_wrapper: bool = False
    """The main function only returns a helper's result (``return aux(x)`` or
    ``r = aux(x); return r``): the helper did all the work."""
    ignored_calls: int = 0
    """Helper calls whose result is thrown away (a bare ``aux(x)`` statement)."""


def helper_usage(main_code: str, entry_point: str, helper_names: Sequence[str]) -> HelperUsage:
    """Which of ``helper_names`` the function ``entry_point`` in ``main_code`` calls, and how."""
    try:
        tree = ast.parse(main_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return HelperUsage()
    main = _top_level_functions(tree).get(entry_point)
    if main is None:
        return HelperUsage()
    helpers = set(helper_names)
    called = tuple(sorted(_called_names(main) & helpers))
    if not called:
        return HelperUsage()
    ignored = sum(
        1
        for n in ast.walk(main)
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id in helpers
    )
    return HelperUsage(called, _is_thin_wrapper(main, helpers), ignored)


def _is_thin_wrapper(main: ast.FunctionDef | ast.AsyncFunctionDef, helpers: set[str]) -> bool:
    def helper_call(value: ast.AST | None) -> bool:
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in helpers
        )

    body = _body_without_docstring(main)
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return helper_call(body[0].value)
    if len(body) == 2 and isinstance(body[0], ast.Assign) and isinstance(body[1], ast.Return):
        targets = body[0].targets
        returned = body[1].value
        return (
            helper_call(body[0].value)
            and len(targets) == 1
            and isinstance(targets[0], ast.Name)
            and isinstance(returned, ast.Name)
            and returned.id == targets[0].id
        )
    return False


def _inert(node: ast.AST | None) -> bool:
    """A value computed by nothing: a constant, a bare name, or a literal of such."""
    if node is None or isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_inert(element) for element in node.elts)
    if isinstance(node, ast.Dict):
        return all(_inert(k) and _inert(v) for k, v in zip(node.keys, node.values, strict=True))
    return False


def is_trivial_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function that does no work: an empty body, or only ``return`` of a constant, of one
    of its arguments unchanged, or of a literal built from those."""
    body = [
        stmt
        for stmt in _body_without_docstring(node)
        if not isinstance(stmt, ast.Pass)
        and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
    ]
    if not body:
        return True
    return len(body) == 1 and isinstance(body[0], ast.Return) and _inert(body[0].value)


def real_helpers(helpers: Sequence[tuple[str, str]]) -> list[str]:
    """The helper names whose code defines them, undecorated, returning a value computed from
    their arguments: not an empty body, a constant, or an argument passed through unchanged
    (``y = x; return y`` included)."""
    names = []
    for name, code in helpers:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        node = _top_level_functions(tree).get(name)
        if (node is not None and not node.decorator_list and _returns_value(node)
                and not is_trivial_function(node) and not _passes_argument_through(node)
                and returns_from(node, _nothing, _parameters(node))):
            names.append(name)
    return names


def _nothing(_: ast.expr) -> bool:
    return False


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}


def _passes_argument_through(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every value it returns is a constant, a parameter, or a name only ever assigned one."""
    assigned: dict[str, list[ast.expr]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            assigned.setdefault(n.targets[0].id, []).append(n.value)
    counts = bindings(node)
    aliases = _parameters(node)
    while True:
        more = {name for name, values in assigned.items()
                if name not in aliases and len(values) == counts[name]
                and all(isinstance(v, ast.Name) and v.id in aliases for v in values)}
        if not more:
            break
        aliases |= more
    returned = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
    return bool(returned) and all(
        isinstance(v, ast.Constant) or (isinstance(v, ast.Name) and v.id in aliases) for v in returned
    )


def helper_result_used(helpers: Sequence[tuple[str, str]], main_code: str, entry_point: str) -> bool:
    """Whether the value ``entry_point`` returns is computed from the result of a call to a
    real helper (see ``real_helpers``), read from the code and never run.

    Only values count (assignments, arithmetic, calls, containers, loops over a result), not
    decisions (``if``/``while`` tests, comparisons, ``not``, filters): a decision on a helper's
    result is how a main that does the work itself would test the helper, so it earns nothing.
    The helper must be the function its agent defined: a name bound more than once in the team's
    code (a redefinition, a parameter or local of that name) or code that reaches into
    namespaces (``globals()``, ``exec``, ``f.__code__``, ``sys.modules``) earns nothing."""
    real = set(real_helpers(helpers))
    try:
        trees = [ast.parse(code) for _, code in helpers] + [ast.parse(main_code)]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    main = _top_level_functions(trees[-1]).get(entry_point)
    if main is None or not real or any(reaches_namespaces(tree) for tree in trees):
        return False
    counts = sum((bindings(tree) for tree in trees), Counter())
    usable = {name for name in real if counts[name] == 1}

    def helper_call(node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in usable

    return bool(usable) and returns_from(main, helper_call)


def claims_cooperation(helpers: Sequence[tuple[str, str]], main_code: str, entry_point: str,
                       *, loads: bool, passed: int) -> bool:
    """Whether the code, read and never run, is in line for the cooperation points: the
    program loaded, a hidden test passed, the main answer defines the entry point with a
    return, calls a real helper, and returns a value computed from its result. Only then are
    the helper runs (`helper_does_work`) worth making."""
    real = real_helpers(helpers)
    return (loads and passed > 0 and bool(real)
            and entry_point in analyze_code(main_code).returning
            and bool(helper_usage(main_code, entry_point, real).called)
            and helper_result_used(helpers, main_code, entry_point))


def helper_does_work(judged: Any, control: Any, perturbed: Any) -> bool:
    """Whether the helpers did work the main's answer depends on, from three runs of one
    program on the hidden tests (``SandboxResult``s of runs with a
    ``marlang.sandbox.HelperProbe``): the judged run (nothing wrapped), a control run (the
    helpers wrapped, their results passed on unchanged) and a perturbed run (wrapped, a
    different value of the same type passed on).

    True when, in the control run, a helper was called while the entry point ran and no such
    call raised, every helper is still the function its agent wrote (not rebound, its code
    and defaults unchanged), and the entry point's results are the judged run's (wrapping
    changes nothing, and they do not vary by chance); and the perturbed run returns a different
    value from the control's on at least one test (a perturbed run that only raises, times out
    or dies shows a main that checks its helper, not one that uses its answer). Every run must
    have run every test."""
    if judged.status != "ok" or control.status != "ok" or not judged.probe or not control.probe:
        return False
    seen = control.probe.get("helpers") or {}
    if not (seen.get("calls", 0) > 0 and seen.get("raised") == 0 and seen.get("intact") is True):
        return False
    if control.probe.get("outputs") != judged.probe.get("outputs"):
        return False
    if perturbed.status != "ok" or not perturbed.probe:
        return False
    changed = perturbed.probe
    if (changed.get("helpers") or {}).get("intact") is not True:
        return False
    before, after = control.probe.get("values"), changed.get("values")
    if not isinstance(before, list) or not isinstance(after, list) or len(before) != len(after):
        return False
    return any(b is not None and a is not None and b != a for b, a in zip(before, after, strict=True))


@dataclass(frozen=True)
class LevelledReward:
    """The levelled reward of a helper + main program (max ``LEVELLED_MAX`` = 4.0).

    Nothing is paid until something real is earned: the combined program loads and at least
    one hidden test passes (``earned``); until then every level is 0. Then:

    - structure: +0.4 x the share of helpers that are real (see ``real_helpers``: returning a
      value computed from their arguments, not a constant or an argument unchanged), +0.6 if
      the main answer defines the entry point with a return value; without the entry point
      the levels stop here.
    - syntax: +0.5 (the combined program compiles and loads).
    - tests: + the share of hidden tests passed (0..1).
    - cooperation (only when the value the main function returns is computed from a real
      helper's result, read from the code (``helper_result_used``), and the helper does work
      the answer depends on when the hidden tests run (``helper_does_work``)): +0.5, then
      +1.0 if the main function is not a thin wrapper around it, and -0.5 if it throws a
      helper's result away.

    The code alone is not enough: a call in dead code, a result folded in where it changes
    nothing, a helper rebound at run time or one that raises and is caught all read as use.
    The runs are not enough alone either: a decision on the helper's result (``if aux(x) !=
    mine: fail``) makes the answer depend on it, so decisions still earn nothing. The runs
    never take the helper's work away (a main that knows the answer could tell): they pass
    its result on, once unchanged and once changed, and the answer must follow the change.
    """

    structure: float = 0.0
    syntax: float = 0.0
    tests: float = 0.0
    cooperation: float = 0.0
    helper_defined: bool = False
    """A real helper is defined (see above)."""
    main_defined: bool = False
    loads: bool = False
    earned: bool = False
    """The program loaded and at least one hidden test passed."""
    helper_called: bool = False
    helper_result_used: bool = False
    """The main function's returned value is computed from a real helper's result (read from
    the code) and the helper does work that value depends on (``helper_works``)."""
    helper_works: bool = False
    """In the runs on the hidden tests, a helper ran without raising while the main ran, and
    the main's results changed when the helper's results did (``helper_does_work``)."""
    thin_wrapper: bool = False
    ignored_helper_call: bool = False

    @property
    def total(self) -> float:
        return round(self.structure + self.syntax + self.tests + self.cooperation, 6)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total, "max": LEVELLED_MAX}


def levelled_reward(
    helpers: Sequence[tuple[str, str]],
    main_code: str,
    entry_point: str,
    *,
    loads: bool,
    passed: int,
    total: int,
    helper_works: bool,
) -> LevelledReward:
    """Score one joint answer. ``helpers`` are (helper function name, that agent's code);
    ``loads`` says whether the combined program compiled and loaded in the sandbox, and
    ``passed`` of ``total`` hidden tests passed there; ``helper_works`` is what the helper
    runs showed (``helper_does_work``; False when they were not made)."""
    real = real_helpers(helpers)
    helper_defined = bool(real)
    main_defined = entry_point in analyze_code(main_code).returning
    earned = loads and passed > 0
    flags = {"helper_defined": helper_defined, "main_defined": main_defined, "loads": loads,
             "earned": earned}
    if not earned:
        return LevelledReward(**flags)
    structure = 0.4 * (len(real) / len(helpers)) if helpers else 0.0
    if not main_defined:
        return LevelledReward(structure=round(structure, 6), **flags)
    structure += 0.6
    cooperation = 0.0
    usage = helper_usage(main_code, entry_point, real) if real else HelperUsage()
    used = (bool(usage.called) and helper_result_used(helpers, main_code, entry_point)
            and helper_works)
    if used:
        cooperation += 0.5
        if not usage.thin_wrapper:
            cooperation += 1.0
        if usage.ignored_calls:
            cooperation -= 0.5
    return LevelledReward(
        structure=round(structure, 6),
        syntax=0.5,
        tests=round(passed / total if total else 0.0, 6),
        cooperation=cooperation,
        helper_called=bool(usage.called),
        helper_result_used=used,
        helper_works=helper_works,
        thin_wrapper=usage.thin_wrapper,
        ignored_helper_call=usage.ignored_calls > 0,
        **flags,
    )

