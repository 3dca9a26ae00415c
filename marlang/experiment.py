"""Where `Experiment` and `run_experiment` were first imported from; they live in
`marlang.run` now (``from marlang.run import Experiment``)."""

from marlang.run.build import build_chat_model, chat_model_name
from marlang.run.experiment import Experiment, InFlightCalls, run_experiment
from marlang.run.record import episode_metrics
from marlang.rundir import RunResult

__all__ = ["Experiment", "InFlightCalls", "RunResult", "build_chat_model", "chat_model_name",
           "episode_metrics", "run_experiment"]
