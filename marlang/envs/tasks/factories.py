"""How the cooperative task ids (``code/humaneval``, ``code/mbpp``, ``code/coophumaneval``,
``math/math``, ``qa/hotpotqa``; their specs: ``marlang.envs.builtin``) build their envs over a
dataset loaded once per process. The task envs never import this module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from pettingzoo import ParallelEnv

from marlang.envs.tasks.problems import load_problems
from marlang.registry import load_entry_point


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


def make_task_env(
    n_agents: int = 2, *, task: str, env_class: str, env_id: str, **options: Any
) -> ParallelEnv:
    """The entry point of a task id: ``env_class`` (an import path, imported on first use) over
    ``task``'s problems. ``options`` are the env's own, the dataset's (``load_problems``'s:
    ``split``, ``dataset``, ...) and ``task_ids`` (``select_tasks``); the registry checks
    their names against those."""
    task_ids = options.pop("task_ids", None)
    source = {name: options.pop(name) for name in _SOURCE_OPTIONS if name in options}
    problems = problem_loader(task, task_ids, **source)
    return load_entry_point(env_class)(problems, n_agents=n_agents, env_id=env_id, **options)


_SOURCE_OPTIONS: tuple[str, ...] = tuple(
    p.name for p in inspect.signature(load_problems).parameters.values() if p.kind is p.KEYWORD_ONLY
)
"""The dataset options of a task env: ``load_problems``'s (``split``, ``dataset``, ...)."""
