"""A run's folder on disk: `RunDirectory` (``directory``) writes and reads every file of a run,
``files`` holds the atomic and append-only writes, ``untrusted`` reads a run's files as untrusted
input, ``tensors`` reads saved tensors as data, never as a pickle.
"""

from __future__ import annotations

from marlang.rundir.directory import (
    EPISODE_KEYS,
    EVAL_EPISODE_BASE,
    METRIC_FIELDS,
    TEST_EPISODE_BASE,
    CallRows,
    RunDirectory,
    RunDirectoryBusy,
    RunResult,
    package_versions,
)
from marlang.rundir.files import (
    append_csv,
    append_lines,
    appending,
    atomic_write,
    atomic_write_text,
    csv_lines,
    dumps_json,
    json_safe,
    save_figure,
)

__all__ = [
    "EPISODE_KEYS", "EVAL_EPISODE_BASE", "METRIC_FIELDS", "TEST_EPISODE_BASE", "CallRows", "RunDirectory",
    "RunDirectoryBusy", "RunResult", "append_csv", "append_lines", "appending", "atomic_write",
    "atomic_write_text", "csv_lines", "dumps_json", "json_safe", "package_versions", "save_figure",
]
