"""Task data for cooperative coding and reasoning (HumanEval, MBPP, CoopHumanEval, MATH,
HotPotQA) as plain records, with the checkers that score answers to them. HumanEval needs no
network; the others come from the Hugging Face hub (cached) or local ``data_files``.
"""

from marlang.envs.tasks.data.check_splitting import split_check_into_tests
from marlang.envs.tasks.data.hotpotqa import normalize_qa_answer, qa_exact_match, qa_f1
from marlang.envs.tasks.data.humaneval import HELPER_FUNCTION_NAME
from marlang.envs.tasks.data.loading import (
    TaskDataUnavailable,
    list_tasks,
    load_task,
    parse_split,
)
from marlang.envs.tasks.data.math_answers import (
    extract_boxed,
    math_answers_equal,
    normalize_math_answer,
)
from marlang.envs.tasks.data.problems import CodeProblem, MathProblem, Problem, QAProblem

__all__ = [
    "HELPER_FUNCTION_NAME",
    "CodeProblem",
    "MathProblem",
    "Problem",
    "QAProblem",
    "TaskDataUnavailable",
    "extract_boxed",
    "list_tasks",
    "load_task",
    "math_answers_equal",
    "normalize_math_answer",
    "normalize_qa_answer",
    "parse_split",
    "qa_exact_match",
    "qa_f1",
    "split_check_into_tests",
]
