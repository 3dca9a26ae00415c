"""Turns a HumanEval-style ``check(candidate)`` function into individual assert tests.

One test per assert lets a reward count the fraction of tests passed and lets feedback name
the first failing case; checks that loop or keep state stay whole, as one ``check`` call.
"""

from __future__ import annotations

import ast
import logging

logger = logging.getLogger(__name__)


class _RenameName(ast.NodeTransformer):
    """Renames every use of one name (the check's parameter) to another (the entry point)."""

    def __init__(self, old: str, new: str) -> None:
        self.old = old
        self.new = new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node)
        return node


def _is_docstring_or_pass(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_constant_assert(stmt: ast.Assert) -> bool:
    # `assert True, "..."` lines are debugging markers in HumanEval; as tests they would
    # pass for any program and inflate the fraction of tests passed.
    return isinstance(stmt.test, ast.Constant)


def _is_check_call(stmt: ast.stmt) -> bool:
    """A top-level ``check(...)`` call: the runner calls check itself, so it is dropped."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "check"
    )


def _source_of(test_code: str, stmts: list[ast.stmt]) -> str:
    """The original text of top-level statements (keeps comments and layout inside them)."""
    parts = []
    for stmt in stmts:
        segment = ast.get_source_segment(test_code, stmt, padded=True)
        parts.append(segment if segment is not None else ast.unparse(stmt))
    return "\n\n".join(part.strip("\n") for part in parts)


def split_check_into_tests(test_code: str, entry_point: str) -> tuple[str, tuple[str, ...]]:
    """Split test code holding ``def check(candidate)`` into (setup, tests).

    Top-level statements other than ``check`` (imports, METADATA, helpers) become the setup.
    When ``check``'s body is only asserts (imports inside it are moved to the setup), each
    assert becomes one test with the parameter renamed to ``entry_point``; otherwise the
    setup also defines ``check`` and the single test is ``check(<entry_point>)``.
    """
    if not entry_point.isidentifier():
        raise ValueError(f"entry_point must be a Python identifier, got {entry_point!r}")
    try:
        module = ast.parse(test_code)
    except SyntaxError as exc:
        raise ValueError(f"test code does not parse: {exc}") from exc
    checks = [
        stmt
        for stmt in module.body
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "check"
    ]
    if not checks:
        raise ValueError("test code has no top-level `def check(candidate): ...`")
    check = checks[-1]
    setup_stmts = [s for s in module.body if s is not check and not _is_check_call(s)]
    whole = (_source_of(test_code, [*setup_stmts, check]), (f"check({entry_point})",))

    params = check.args.args
    if (
        isinstance(check, ast.AsyncFunctionDef)
        or len(params) != 1
        or check.args.vararg
        or check.args.kwonlyargs
        or check.args.posonlyargs
        or check.decorator_list
    ):
        return whole
    param = params[0].arg
    body = [s for s in check.body if not _is_docstring_or_pass(s)]
    imports = [s for s in body if isinstance(s, ast.Import | ast.ImportFrom)]
    asserts = [s for s in body if isinstance(s, ast.Assert)]
    if len(imports) + len(asserts) != len(body):
        return whole
    tests = tuple(
        ast.unparse(_RenameName(param, entry_point).visit(stmt))
        for stmt in asserts
        if not _is_constant_assert(stmt)
    )
    if not tests:
        return whole
    setup = _source_of(test_code, setup_stmts)
    if imports:
        setup = "\n".join([setup, *(ast.unparse(stmt) for stmt in imports)]).strip("\n")
    return setup, tests
