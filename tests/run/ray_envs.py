"""Envs by import path for the Ray executor's tests: a room whose worker dies (once, or on every
attempt), a room whose building raises an error, and a room that takes a minute to build, each
a 5x5 GoTo room otherwise."""

from __future__ import annotations

import os
import time
from pathlib import Path


def crashing_room(n_agents: int = 2, marker: str | None = None, always: bool = False, **kwargs):
    """Kills its own process the first time it is built (``marker`` does not exist yet), or
    every time with ``always``."""
    import marlang

    if marker is not None and (always or not Path(marker).exists()):
        Path(marker).write_text(str(os.getpid()))
        os._exit(1)
    return marlang.make_env("babyai/goto-obj", n_agents=n_agents, **kwargs)


def failing_room(n_agents: int = 2, **kwargs):
    """Raises an error when it is built, as a run's own code might."""
    raise ValueError("this room cannot be built")


def slow_room(n_agents: int = 2, started: str | None = None, **kwargs):
    """Says it started (``started``: a file), then takes a minute to build."""
    import marlang

    if started is not None:
        Path(started).write_text(str(os.getpid()))
    time.sleep(60)
    return marlang.make_env("babyai/goto-obj", n_agents=n_agents, **kwargs)
