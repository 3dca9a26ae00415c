"""MBPP: rows of either published schema to CodeProblems whose prompt names the function.

The original sanitized schema (``task_id, prompt, code, test_imports, test_list``) gives
standalone asserts; the converted schema (``task_id, prompt, test, entry_point``, as in
OpenMLRL/MBPP) gives a ``check(candidate)`` split like HumanEval's.
"""

from __future__ import annotations

import ast
import builtins
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from marlang.envs.tasks.data.humaneval import (
    HUMANEVAL_COLUMNS,
    code_problem_from_humaneval_row,
    generic_helper_prompt,
)
from marlang.envs.tasks.data.problems import CodeProblem, RowTable, require_columns

logger = logging.getLogger(__name__)

ORIGINAL_COLUMNS = ("task_id", "test_list")
"""Required columns of the original MBPP schemas, plus ``prompt`` (sanitized) or ``text``."""


def _called_names(code: str) -> list[str]:
    """Names of the plain functions called in ``code``, in order of appearance."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    calls.sort(key=lambda call: (call.lineno, call.col_offset))
    return [call.func.id for call in calls if isinstance(call.func, ast.Name)]


def _call_arity(tests: Sequence[str], name: str) -> int | None:
    """How many arguments the first call of ``name`` in the tests passes (None if none)."""
    for test in tests:
        try:
            tree = ast.parse(test)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == name
            ):
                return len(node.args) + len(node.keywords)
    return None


def _top_level_functions(code: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _entry_point(code: str, tests: Sequence[str], *, where: str) -> str:
    """The function the tests call: the first called name the reference code defines."""
    called = [name for test in tests for name in _called_names(test)]
    defined = _top_level_functions(code)
    for name in called:
        if name in defined:
            return name
    for name in called:
        if not hasattr(builtins, name):
            return name
    raise ValueError(f"{where}: cannot tell which function the tests call: {list(tests)[:1]}")


def _signature(code: str, entry_point: str, tests: Sequence[str]) -> str:
    node = _top_level_functions(code).get(entry_point)
    if node is not None:
        return f"def {entry_point}({ast.unparse(node.args)}):"
    arity = _call_arity(tests, entry_point) or 0
    return f"def {entry_point}({', '.join(f'arg{i}' for i in range(1, arity + 1))}):"


def _problem_from_original_row(row: Mapping[str, Any], *, source: str, index: int) -> CodeProblem:
    raw_id = row["task_id"]
    task_id = str(raw_id) if "/" in str(raw_id) else f"MBPP/{raw_id}"
    where = f"{source}: row {index} ({task_id})"
    description = str(row.get("prompt") or row.get("text") or "").strip()
    tests = tuple(str(test).strip() for test in row["test_list"] or () if str(test).strip())
    if not tests:
        raise ValueError(f"{where}: 'test_list' is empty")
    code = str(row.get("code") or "")
    entry_point = _entry_point(code, tests, where=where)
    setup_parts = [str(line) for line in row.get("test_imports") or ()]
    if row.get("test_setup_code"):
        setup_parts.append(str(row["test_setup_code"]))
    prompt = (
        f"{description}\n\nWrite it as a Python function with this signature:\n\n"
        f"{_signature(code, entry_point, tests)}\n"
    )
    return CodeProblem(
        task_id=task_id,
        prompt=prompt,
        entry_point=entry_point,
        tests=tests,
        test_setup="\n".join(part for part in setup_parts if part.strip()),
        canonical_solution=code,
        helper_prompt=generic_helper_prompt(entry_point),
        source=source,
        metadata={
            "index": index,
            "check_split": True,
            "tests_call_entry_point": all(entry_point in _called_names(t) for t in tests),
        },
    )


def _problem_from_converted_row(row: Mapping[str, Any], *, source: str, index: int) -> CodeProblem:
    problem = code_problem_from_humaneval_row(row, source=source, index=index)
    stub = _top_level_functions(problem.prompt + "\n    pass\n").get(problem.entry_point)
    arity = _call_arity(problem.tests, problem.entry_point)
    # The converted prompts read `def name():` even when the tests pass arguments; say how
    # many, so a correct solution is possible from the prompt alone.
    if stub is not None and not stub.args.args and not stub.args.vararg and arity:
        note = f"\n\n# The tests call {problem.entry_point}() with {arity} argument(s).\n"
        return replace(problem, prompt=problem.prompt.rstrip("\n") + note)
    return problem


def mbpp_problems_from_rows(table: RowTable) -> list[CodeProblem]:
    """Convert MBPP rows in the original (sanitized or full) or the converted schema."""
    rows, columns, source = table.rows, table.columns, table.source
    if all(name in columns for name in HUMANEVAL_COLUMNS):
        convert = _problem_from_converted_row
    elif "test_list" in columns:
        require_columns(columns, ORIGINAL_COLUMNS, source=source, schema="MBPP")
        if "prompt" not in columns and "text" not in columns:
            raise ValueError(
                f"{source}: MBPP rows need a 'prompt' (sanitized) or 'text' (full) column; "
                f"columns found: {sorted(columns)}"
            )
        convert = _problem_from_original_row
    else:
        raise ValueError(
            f"{source}: rows match neither MBPP schema: the original needs "
            f"{list(ORIGINAL_COLUMNS)} plus 'prompt' or 'text', the converted one "
            f"{list(HUMANEVAL_COLUMNS)}; columns found: {sorted(columns)}"
        )
    problems = [convert(row, source=source, index=index) for index, row in rows]
    unsolvable = [p.task_id for p in problems if not p.metadata["tests_call_entry_point"]]
    if unsolvable:
        logger.warning(
            "%s: %d MBPP problem(s) have tests that do not call their entry point "
            "(metadata['tests_call_entry_point'] is False): %s",
            source,
            len(unsolvable),
            ", ".join(unsolvable[:5]),
        )
    return problems
