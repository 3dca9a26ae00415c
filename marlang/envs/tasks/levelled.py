"""The levelled reward of a code answer: what its code does (functions, returns, calls) and how
it uses the helpers it was given, scored in levels from parsing up to passing the tests.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

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
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str):
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
    """The helper names whose code defines them with a return value and some real work."""
    names = []
    for name, code in helpers:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        node = _top_level_functions(tree).get(name)
        if node is not None and _returns_value(node) and not is_trivial_function(node):
            names.append(name)
    return names


@dataclass(frozen=True)
class LevelledReward:
    """The levelled reward of a helper + main program (max ``LEVELLED_MAX`` = 4.0).

    Nothing is paid until something real is earned: the combined program loads and at least
    one hidden test passes (``earned``); until then every level is 0. Then:

    - structure: +0.4 x the share of helpers that are real (defined with a return value and
      more than an empty body or a ``return`` of a constant or an argument unchanged), +0.6 if
      the main answer defines the entry point with a return value; without the entry point
      the levels stop here.
    - syntax: +0.5 (the combined program compiles and loads).
    - tests: + the share of hidden tests passed (0..1).
    - cooperation (only with a real helper the main function calls, and only when the tests
      show its work matters, ``helpers_needed``): +0.5, then +1.0 if the main function is not
      a thin wrapper around it, and -0.5 if it throws a helper's result away.
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
    helpers_needed: bool = False
    """The passing tests depend on the helpers' work (see ``CodeTaskEnv``'s check)."""
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
    helpers_needed: bool = False,
) -> LevelledReward:
    """Score one joint answer. ``helpers`` are (helper function name, that agent's code);
    ``loads`` says whether the combined program compiled and loaded in the sandbox;
    ``helpers_needed`` whether the passing tests fail once the helpers' work is taken away
    (the env runs that check)."""
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
    needed = bool(usage.called) and helpers_needed
    if needed:
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
        helpers_needed=needed,
        thin_wrapper=usage.thin_wrapper,
        ignored_helper_call=usage.ignored_calls > 0,
        **flags,
    )

