"""One run of an experiment config: ``build`` makes its parts from the config (writing
nothing; ``graph_build`` those of a run of a user's own graph), ``experiment`` drives them
(`Experiment`, `run_experiment`: the event loop, Ctrl-C, the lock, the checkpointer), ``loop``
is the training graph and its node bodies, ``commit`` decides what an iteration keeps,
``record`` decides what the run directory holds (which `marlang.rundir.RunDirectory` writes),
and ``resume`` decides where a run starts.
"""

from __future__ import annotations

from marlang.lazy import lazy_getattr

_EXPORTS = {
    "marlang.run.experiment": ("Experiment", "run_experiment"),
    "marlang.rundir": ("RunResult",),
    "marlang.run.loop": ("RunLoop", "LoopOptions"),
    "marlang.run.record": ("RunRecord", "episode_metrics"),
    "marlang.run.resume": ("Resume",),
    "marlang.run.build": ("build_chat_model", "build_run", "RunParts"),
    "marlang.run.graph_build": ("build_graph_run",),
}

__getattr__ = lazy_getattr(__name__, _EXPORTS)

__all__ = ["Experiment", "LoopOptions", "Resume", "RunLoop", "RunParts", "RunRecord", "RunResult",
           "build_chat_model", "build_graph_run", "build_run", "episode_metrics", "run_experiment"]
