"""One run of an experiment config: ``build`` makes its parts, ``loop`` is the training graph
and its node bodies, ``record`` writes the run directory, ``resume`` decides where a run
starts, and ``experiment`` drives them (`Experiment`, `run_experiment`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Experiment": "marlang.run.experiment",
    "run_experiment": "marlang.run.experiment",
    "RunResult": "marlang.rundir",
    "RunLoop": "marlang.run.loop",
    "LoopOptions": "marlang.run.loop",
    "RunRecord": "marlang.run.record",
    "episode_metrics": "marlang.run.record",
    "Resume": "marlang.run.resume",
    "build_chat_model": "marlang.run.build",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Experiment", "LoopOptions", "Resume", "RunLoop", "RunRecord", "RunResult",
           "build_chat_model", "episode_metrics", "run_experiment"]
