"""How many CPU threads torch gives the local engine (``run.threads``), in one rule.

On a CPU, torch's intra-op threads spin while they wait; more threads than free cores makes
a generation several times slower, not faster (on 2 busy cores, one 31-token reply took
11.7 s with 2 threads and 1.9 s with 1).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

MAX_AUTO_THREADS = 8
"""The most threads ``auto`` picks: a CPU-sized model's matrices gain little past this."""


def usable_cpus() -> int:
    """The cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def torch_threads(
    setting: int | Literal["auto"] = "auto",
    *,
    cpus: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The torch thread count ``run.threads`` asks for.

    An int is taken as it is. ``auto``: ``OMP_NUM_THREADS`` when the environment sets it to
    a positive int (the user has said how many); else half the usable cores, at least 1 and
    at most :data:`MAX_AUTO_THREADS`. Half, because the rest of a run needs cores at the same
    time: the episodes' graphs, tokenization and response parsing, sandbox workers judging
    generated code, and the learner (the parallel episodes themselves share one engine, whose
    batched forward passes are what the threads speed up).
    """
    if setting != "auto":
        return max(1, int(setting))
    env = os.environ if environ is None else environ
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp)
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, min(cpus // 2, MAX_AUTO_THREADS))


def apply_torch_threads(setting: int | Literal["auto"], model_spec: str) -> int | None:
    """Give torch :func:`torch_threads` threads when ``model_spec`` runs on this machine
    (``local:``/``hf:``); returns the count, or None for a remote model (torch untouched)."""
    if not model_spec.startswith(("local:", "hf:")):
        return None
    import torch

    n = torch_threads(setting)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
