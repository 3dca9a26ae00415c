"""CoopHumanEval: HumanEval-style problems written for two cooperating coding agents.

Rows carry HumanEval's columns (``canonical_solution`` optional); an optional helper column
(``helper_prompt``, ``aux_prompt`` or ``helper``) gives the helper agent's own instruction.
"""

from __future__ import annotations

from marlang.envs.tasks.data.humaneval import HUMANEVAL_COLUMNS, code_problem_from_humaneval_row
from marlang.envs.tasks.data.problems import CodeProblem, RowTable, require_columns

HELPER_COLUMNS = ("helper_prompt", "aux_prompt", "helper")
"""Optional columns read, in this order, as the helper agent's instruction."""


def coophumaneval_problems_from_rows(table: RowTable) -> list[CodeProblem]:
    """Convert CoopHumanEval rows; columns beyond the known ones go to ``metadata``."""
    rows, columns, source = table.rows, table.columns, table.source
    require_columns(columns, HUMANEVAL_COLUMNS, source=source, schema="CoopHumanEval")
    known = {*HUMANEVAL_COLUMNS, "canonical_solution", *HELPER_COLUMNS}
    extra_columns = [name for name in columns if name not in known]
    problems = []
    for index, row in rows:
        helper = next((str(row[c]) for c in HELPER_COLUMNS if row.get(c)), "")
        problems.append(
            code_problem_from_humaneval_row(
                row,
                source=source,
                index=index,
                helper_prompt=helper,
                extra_metadata={name: row.get(name) for name in extra_columns},
            )
        )
    return problems
