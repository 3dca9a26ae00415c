"""The cooperative task envs by id (``code/humaneval``, ``code/mbpp``, ``code/coophumaneval``,
``math/math``, ``qa/hotpotqa``): factories that build them over a dataset loaded once per
process. The registry imports this module; the task envs never import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pettingzoo import ParallelEnv

from marlang.envs.tasks.problems import load_problems


def select_tasks(problems: Sequence[Any], task_ids: Sequence[str | int] | None) -> tuple[Any, ...]:
    """The problems ``task_ids`` names, in that order: a task id (``"HumanEval/42"``) or an
    index into the loaded split; None: all of them. An unknown id is a one-line error."""
    if task_ids is None:
        return tuple(problems)
    if isinstance(task_ids, str | int):
        task_ids = [task_ids]
    by_id = {str(p.task_id): p for p in problems}
    out = []
    for key in task_ids:
        if isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(problems):
                raise ValueError(f"task_ids: index {key} is outside the {len(problems)} loaded problems")
            out.append(problems[key])
        elif str(key) in by_id:
            out.append(by_id[str(key)])
        else:
            first = ", ".join(list(by_id)[:3])
            raise ValueError(f"task_ids: no problem {key!r} in the loaded split (task ids look like {first}, ...; "
                             "or give an index)")
    if not out:
        raise ValueError("task_ids is empty: name at least one problem (or leave it out for all)")
    return tuple(out)


def problem_loader(
    task: str, task_ids: Sequence[str | int] | None, **source: Any
) -> Callable[[], tuple[Any, ...]]:
    """The problems an env poses, for it to load when it is built: ``task``'s split from
    ``source`` (``load_problems``'s options; loaded once per process), then ``task_ids``'s."""
    return lambda: select_tasks(load_problems(task, **source), task_ids)


@dataclass(frozen=True)
class CodeTaskFactory:
    """Builds a ``CodeTaskEnv`` over one coding dataset (problems loaded once per process)."""

    env_id: str
    task: str

    def __call__(
        self,
        n_agents: int = 2,
        *,
        max_steps: int | None = None,
        structure: str = "sequential",
        feedback: str = "level_feedback",
        memory: str = "full",
        sandbox_slice: int | str | None = 1,
        expert_model: Any = None,
        reward: str = "tests",
        split: str | None = None,
        dataset: str | None = None,
        dataset_config: str | None = None,
        data_files: Any = None,
        limit: int | None = None,
        task_ids: Sequence[str | int] | None = None,
        sandbox_workers: int | None = None,
        timeout: float = 10.0,
        test_timeout: float = 3.0,
        isolation: str = "auto",
        disk_mb: int = 64,
        sandbox: Any = None,
        render_mode: str | None = None,
    ) -> ParallelEnv:
        from marlang.envs.tasks.coding import CodeTaskEnv

        problems = problem_loader(
            self.task, task_ids, split=split, dataset=dataset, dataset_config=dataset_config,
            data_files=data_files, limit=limit,
        )
        return CodeTaskEnv(
            problems, n_agents=n_agents, max_steps=max_steps, structure=structure,
            feedback=feedback, memory=memory, sandbox_slice=sandbox_slice,
            expert_model=expert_model, reward=reward, sandbox_workers=sandbox_workers,
            timeout=timeout, test_timeout=test_timeout, isolation=isolation, disk_mb=disk_mb,
            sandbox=sandbox, render_mode=render_mode, env_id=self.env_id,
        )


@dataclass(frozen=True)
class ReasoningTaskFactory:
    """Builds a ``MathTaskEnv`` (``task="math"``) or ``QATaskEnv`` (``task="hotpotqa"``)."""

    env_id: str
    task: str

    def __call__(
        self,
        n_agents: int = 2,
        *,
        max_steps: int | None = None,
        structure: str = "sequential",
        feedback: str = "level_feedback",
        memory: str = "full",
        expert_model: Any = None,
        split: str | None = None,
        dataset: str | None = None,
        dataset_config: str | None = None,
        data_files: Any = None,
        limit: int | None = None,
        task_ids: Sequence[str | int] | None = None,
        render_mode: str | None = None,
    ) -> ParallelEnv:
        from marlang.envs.tasks.reasoning import MathTaskEnv, QATaskEnv

        env_class = MathTaskEnv if self.task == "math" else QATaskEnv
        problems = problem_loader(
            self.task, task_ids, split=split, dataset=dataset, dataset_config=dataset_config,
            data_files=data_files, limit=limit,
        )
        return env_class(
            problems, n_agents=n_agents, max_steps=max_steps, structure=structure,
            feedback=feedback, memory=memory, expert_model=expert_model,
            render_mode=render_mode, env_id=self.env_id,
        )


TASK_ENVS: tuple[tuple[str, CodeTaskFactory | ReasoningTaskFactory, str], ...] = (
    (
        "code/humaneval",
        CodeTaskFactory("code/humaneval", "humaneval"),
        (
            "HumanEval: a team writes Python functions run against hidden tests (164, offline); "
            "2 turns"
        ),
    ),
    (
        "code/mbpp",
        CodeTaskFactory("code/mbpp", "mbpp"),
        "MBPP (sanitized): a team writes Python functions run against hidden tests; 2 turns",
    ),
    (
        "code/coophumaneval",
        CodeTaskFactory("code/coophumaneval", "coophumaneval"),
        "CoopHumanEval: HumanEval-style problems made for helper + main cooperation; 2 turns",
    ),
    (
        "math/math",
        ReasoningTaskFactory("math/math", "math"),
        "MATH: a team solves competition math problems, final answer in \\boxed{}; 1 turn",
    ),
    (
        "qa/hotpotqa",
        ReasoningTaskFactory("qa/hotpotqa", "hotpotqa"),
        "HotPotQA (distractor): multi-hop questions over Wikipedia paragraphs, F1 reward; 1 turn",
    ),
)
"""The cooperative task envs: id, factory, one-line description."""
