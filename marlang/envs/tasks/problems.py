"""The problems of the task envs, loaded once per process: an env is built once per parallel
episode slot, and loading a dataset each time would be slow.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_CACHE_LOCK = threading.Lock()
_PROBLEMS: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _files_key(data_files: Any) -> Any:
    """A hashable key for ``data_files`` that changes when a local file changes."""
    if data_files is None:
        return None
    paths = [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
    key: list[tuple[str, int | None, int | None]] = []
    for path in paths:
        path = os.fspath(path)
        try:
            stat = os.stat(path)
            key.append((path, stat.st_mtime_ns, stat.st_size))
        except OSError:
            key.append((path, None, None))
    return tuple(key)


def load_problems(
    task: str,
    *,
    split: str | None = None,
    dataset: str | None = None,
    dataset_config: str | None = None,
    data_files: Any = None,
    limit: int | None = None,
) -> tuple[Any, ...]:
    """``marlang.envs.tasks.data.load_task`` with a per-process cache: an env is built once per parallel
    episode slot, and loading a dataset each time would be slow."""
    key = (task, split, dataset, dataset_config, _files_key(data_files), limit)
    with _CACHE_LOCK:
        if key in _PROBLEMS:
            return _PROBLEMS[key]
        from marlang.envs.tasks.data import load_task

        if isinstance(data_files, os.PathLike):
            data_files = os.fspath(data_files)
        elif data_files is not None and not isinstance(data_files, str):
            data_files = [os.fspath(p) for p in data_files]
        problems = tuple(
            load_task(
                task,
                split,
                dataset=dataset,
                config=dataset_config,
                data_files=data_files,
                limit=limit,
            )
        )
        _PROBLEMS[key] = problems
        return problems

