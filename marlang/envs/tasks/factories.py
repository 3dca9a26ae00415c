"""The cooperative task envs by id (``code/humaneval``, ``code/mbpp``, ``code/coophumaneval``,
``math/math``, ``qa/hotpotqa``): factories that build them over a dataset loaded once per
process. The registry imports this module; the task envs never import it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

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


def env_parameters(env_class: type) -> list[inspect.Parameter]:
    """The keyword parameters of ``env_class``'s constructor, those it passes on to its base
    classes through ``**kwargs`` included (the bases' first)."""
    chain: list[list[inspect.Parameter]] = []
    for cls in env_class.__mro__:
        if "__init__" not in vars(cls):
            continue
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        chain.append([p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD])
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            break
    return [p for parameters in reversed(chain) for p in parameters]


SOURCE_PARAMETERS: tuple[inspect.Parameter, ...] = tuple(
    p for p in inspect.signature(load_problems).parameters.values() if p.kind is p.KEYWORD_ONLY
)
"""The dataset options of a task factory: ``load_problems``'s (``split``, ``dataset``, ...)."""


@dataclass(frozen=True)
class TaskFactory:
    """Builds a task env (``env_class``) over one dataset (problems loaded once per process).

    Its signature is ``n_agents``, the env's own parameters (but ``problems`` and ``env_id``,
    which the factory sets, and ``unused``), then the dataset's (``SOURCE_PARAMETERS``,
    ``task_ids``): the registry checks a config's keys against it."""

    env_id: str
    task: str
    unused: ClassVar[tuple[str, ...]] = ()
    """Env parameters that do not apply to this kind of task (not accepted)."""

    def env_class(self) -> type:
        """The env class to build (imported on first use)."""
        raise NotImplementedError

    @property
    def __signature__(self) -> inspect.Signature:
        n_agents, task_ids, _ = inspect.signature(self.__call__).parameters.values()
        fixed = ("problems", "n_agents", "env_id", *self.unused)
        env = [p for p in env_parameters(self.env_class()) if p.name not in fixed]
        return inspect.Signature(
            [n_agents, *env, *SOURCE_PARAMETERS, task_ids], return_annotation="ParallelEnv"
        )

    def __call__(
        self, n_agents: int = 2, *, task_ids: Sequence[str | int] | None = None, **options: Any
    ) -> ParallelEnv:
        for name in options:
            if name in self.unused or name in ("problems", "env_id"):
                raise TypeError(f"{self.env_id} factory got an unexpected keyword argument {name!r}")
        source = {p.name: options.pop(p.name) for p in SOURCE_PARAMETERS if p.name in options}
        problems = problem_loader(self.task, task_ids, **source)
        return self.env_class()(problems, n_agents=n_agents, env_id=self.env_id, **options)


@dataclass(frozen=True)
class CodeTaskFactory(TaskFactory):
    """Builds a ``CodeTaskEnv`` over one coding dataset."""

    def env_class(self) -> type:
        from marlang.envs.tasks.coding import CodeTaskEnv

        return CodeTaskEnv


@dataclass(frozen=True)
class ReasoningTaskFactory(TaskFactory):
    """Builds a ``MathTaskEnv`` (``task="math"``) or ``QATaskEnv`` (``task="hotpotqa"``)."""

    unused: ClassVar[tuple[str, ...]] = ("sandbox_slice",)

    def env_class(self) -> type:
        from marlang.envs.tasks.reasoning import MathTaskEnv, QATaskEnv

        return MathTaskEnv if self.task == "math" else QATaskEnv


TASK_ENVS: tuple[tuple[str, TaskFactory, str], ...] = (
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
