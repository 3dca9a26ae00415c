"""Where the training graph's node bodies (`RunRuntime`) and `episode_metrics` were first
imported from; they live in `marlang.run.loop` (`RunLoop`) and `marlang.run.record` now."""

from __future__ import annotations

import warnings
from typing import Any

from marlang.run.loop import EVAL_BASELINE_OFFSET, RunLoop
from marlang.run.record import episode_metrics

__all__ = ["EVAL_BASELINE_OFFSET", "episode_metrics"]  # and RunRuntime, with a warning


def __getattr__(name: str) -> Any:
    if name == "RunRuntime":
        warnings.warn("marlang.runtime.RunRuntime is marlang.run.loop.RunLoop", DeprecationWarning,
                      stacklevel=2)
        return RunLoop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
